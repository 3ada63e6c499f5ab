package testenv

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP forwarder between the code under test and a real service.
// Down cuts every connection and refuses new ones, the way a network outage
// or a stopped server looks to a client; Up restores it on the same address.
// Tests use it to take MariaDB, PostgreSQL or Kafka away without disturbing
// the shared services other test packages use.
type Proxy struct {
	t      testing.TB // nil for a proxy of a fixture that outlives tests
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy to target ("host:port") on a free local port.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	p.t = t
	t.Cleanup(p.Down)
	return p
}

// StartProxy is NewProxy for a fixture that outlives a single test (a
// Kafka node started in TestMain): the caller calls Down when done.
func StartProxy(target string) (*Proxy, error) {
	p := &Proxy{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	return p, nil
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.addr }

// Down closes the listener and every open connection.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Up listens again on the same address.
func (p *Proxy) Up() {
	if p.t != nil {
		p.t.Helper()
	}
	if err := p.TryUp(); err != nil {
		if p.t == nil {
			panic(err)
		}
		p.t.Fatal(err)
	}
}

// TryUp is Up returning its failure; up already, it does nothing.
func (p *Proxy) TryUp() error {
	p.mu.Lock()
	up := p.ln != nil
	p.mu.Unlock()
	if up {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("proxy up on %s: %w", p.addr, err)
	}
	p.serve(ln)
	return nil
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client) || !p.track(server) {
		client.Close()
		server.Close()
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go cp(server, client)
	go cp(client, server)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}
