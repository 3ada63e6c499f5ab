package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"msgx/internal/clock"
	"msgx/internal/need"
)

// Config bounds the HTTP server (MSGX_HTTP_ADDR).
type Config struct {
	// ReadToken is the bearer token every endpoint except /healthz, /readyz
	// and POST /cminmsgs/send (which has MSGX_HTTP_TOKEN) requires, when
	// set, as "Authorization: Bearer <token>" or the session cookie of the
	// login form (/login). Empty (the default): no token. msgx status sends
	// it; a browser logs in with it at /login.
	ReadToken string `env:"MSGX_HTTP_READ_TOKEN"`
	// LoginTTL is how long a browser session of the login form (a cookie)
	// lasts before the token must be typed again; changing the read token
	// ends every session.
	LoginTTL time.Duration `env:"MSGX_HTTP_LOGIN_TTL" envDefault:"12h"`
	// ReadTimeout bounds reading one whole request, headers and body; a
	// client that has not sent it by then is cut off and counted.
	ReadTimeout time.Duration `env:"MSGX_HTTP_READ_TIMEOUT" envDefault:"10s"`
	// WriteTimeout bounds handling a request and writing its response,
	// counted from the end of its headers; a client that does not take the
	// response by then is cut off.
	WriteTimeout time.Duration `env:"MSGX_HTTP_WRITE_TIMEOUT" envDefault:"60s"`
	// MaxConcurrent is the most requests served at once; more requests are
	// answered 503 at once (/healthz is never refused).
	MaxConcurrent int `env:"MSGX_HTTP_MAX_CONCURRENT" envDefault:"64"`
	// BindTimeout is how long start-up retries binding MSGX_HTTP_ADDR while
	// the address is in use (a previous instance still closing it).
	BindTimeout time.Duration `env:"MSGX_HTTP_BIND_TIMEOUT" envDefault:"30s"`
	// Pprof serves Go's profiler at /debug/pprof/ (net/http/pprof) behind
	// the read token, which it requires: a profile shows the process's
	// internals (docs/operations.md).
	Pprof bool `env:"MSGX_PPROF" envDefault:"false"`
	// TLSCert is a PEM file of the listener's certificate, intermediates
	// after it: with MSGX_HTTP_TLS_KEY (both or neither) the listener is
	// HTTPS, TLS 1.2 at least. Both files are read again when they change
	// on disk, so a renewed certificate is served without a restart
	// (within 10 s). Empty (the default): plain HTTP.
	TLSCert string `env:"MSGX_HTTP_TLS_CERT"`
	// TLSKey is the PEM file of MSGX_HTTP_TLS_CERT's private key. Empty
	// (the default): plain HTTP.
	TLSKey string `env:"MSGX_HTTP_TLS_KEY"`
	// TLSClientCA is a PEM file of CA certificates: POST /cminmsgs/send
	// then requires a client certificate signed by one of them (the
	// AODB's; 403 without); the other endpoints accept a connection
	// without one. A
	// presented certificate that does not verify fails the handshake.
	// Empty (the default): no client certificate is asked for.
	TLSClientCA string `env:"MSGX_HTTP_TLS_CLIENT_CA"`
	// BehindTLSProxy says a reverse proxy in front of a plain-HTTP
	// listener terminates TLS: only then are its X-Forwarded-Proto (the
	// cookie's Secure, HSTS) and X-Forwarded-For (the client address the
	// login throttle counts) believed. With MSGX_ENV=production a token on
	// a plain listener that is not loopback needs this or TLS.
	BehindTLSProxy bool `env:"MSGX_HTTP_BEHIND_TLS_PROXY" envDefault:"false"`
	// ThrottleFailures is how many wrong credentials (read token at
	// /login, bearer tokens) a client address may present per
	// MSGX_HTTP_THROTTLE_PERIOD; its next attempts in the period get 429 with
	// Retry-After.
	ThrottleFailures int `env:"MSGX_HTTP_THROTTLE_FAILURES" envDefault:"5"`
	// ThrottlePeriod is that period, counted from the address's first
	// wrong credential.
	ThrottlePeriod time.Duration `env:"MSGX_HTTP_THROTTLE_PERIOD" envDefault:"1m"`
}

// TLS reports whether the listener itself speaks HTTPS.
func (c Config) TLS() bool { return c.TLSCert != "" }

// Validate checks the values; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if c.ReadTimeout <= 0 {
		errs = append(errs, errors.New("MSGX_HTTP_READ_TIMEOUT: must be positive"))
	}
	if c.WriteTimeout <= 0 {
		errs = append(errs, errors.New("MSGX_HTTP_WRITE_TIMEOUT: must be positive"))
	}
	if c.LoginTTL < time.Minute {
		errs = append(errs, errors.New("MSGX_HTTP_LOGIN_TTL: must be at least 1m"))
	}
	if c.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("MSGX_HTTP_MAX_CONCURRENT=%d: must be at least 1", c.MaxConcurrent))
	}
	if c.Pprof && c.ReadToken == "" {
		errs = append(errs, errors.New("MSGX_PPROF=true needs MSGX_HTTP_READ_TOKEN: the profiler is served behind the read token"))
	}
	if c.BindTimeout < 0 {
		errs = append(errs, errors.New("MSGX_HTTP_BIND_TIMEOUT: must not be negative"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("MSGX_HTTP_TLS_CERT and MSGX_HTTP_TLS_KEY: set both (HTTPS) or neither"))
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		errs = append(errs, errors.New("MSGX_HTTP_TLS_CLIENT_CA needs MSGX_HTTP_TLS_CERT and MSGX_HTTP_TLS_KEY: client certificates are checked on msgx's own TLS listener"))
	}
	if c.ThrottleFailures < 1 {
		errs = append(errs, fmt.Errorf("MSGX_HTTP_THROTTLE_FAILURES=%d: must be at least 1", c.ThrottleFailures))
	}
	if c.ThrottlePeriod < time.Second {
		errs = append(errs, errors.New("MSGX_HTTP_THROTTLE_PERIOD: must be at least 1s"))
	}
	return errors.Join(errs...)
}

// minProductionToken is the shortest token production accepts, in bytes.
const minProductionToken = 16

// ProductionErrors refuses, for MSGX_ENV=production, tokens that would
// cross the network in clear — a plain-HTTP listener on addr (MSGX_HTTP_ADDR)
// that is not loopback, with no TLS proxy in front — and tokens too short
// to resist guessing. sendToken is MSGX_HTTP_TOKEN. Each refusal is one
// line naming the variables; no token is printed.
func (c Config) ProductionErrors(addr, sendToken string) []error {
	var errs []error
	var set []string
	for _, t := range []struct{ name, value string }{{"MSGX_HTTP_TOKEN", sendToken}, {"MSGX_HTTP_READ_TOKEN", c.ReadToken}} {
		if t.value == "" {
			continue
		}
		set = append(set, t.name)
		if len(t.value) < minProductionToken {
			errs = append(errs, fmt.Errorf("MSGX_ENV=production: %s is %d bytes, shorter than %d; use a random one (openssl rand -hex 32)",
				t.name, len(t.value), minProductionToken))
		}
	}
	if len(set) > 0 && !c.TLS() && !c.BehindTLSProxy && !loopback(addr) {
		errs = append(errs, fmt.Errorf("MSGX_ENV=production: %s would cross the network in clear on the plain-HTTP MSGX_HTTP_ADDR=%s; "+
			"set MSGX_HTTP_TLS_CERT and MSGX_HTTP_TLS_KEY, or MSGX_HTTP_BEHIND_TLS_PROXY=true when a proxy in front terminates TLS",
			strings.Join(set, " and "), addr))
	}
	return errs
}

// loopback reports whether host:port addr listens on the loopback
// interface only. A host name other than localhost is not assumed to be.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// Deps are the server's collaborators.
type Deps struct {
	// Addr is where it listens (MSGX_HTTP_ADDR, host:port).
	Addr string
	// Handler serves the routes.
	Handler http.Handler
	// ShutdownTimeout bounds draining the requests in flight when Run's
	// context ends (MSGX_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
	Clock           clock.Clock
	Log             *slog.Logger
}

// Stats are the server's running figures for metrics.
type Stats struct {
	// SlowClients are connections cut off because their request was not
	// sent within MSGX_HTTP_READ_TIMEOUT.
	SlowClients int64
	// Busy are requests refused with 503 because MSGX_HTTP_MAX_CONCURRENT
	// requests were being served.
	Busy int64
	// Unauthorized are requests to a read endpoint refused for a missing
	// or wrong MSGX_HTTP_READ_TOKEN (401, or a browser sent to the login
	// form), and logins with a wrong token.
	Unauthorized int64
	// WrongCredentials are wrong tokens presented: logins with a wrong
	// read token and wrong bearer tokens on any endpoint (what the
	// throttle counts).
	WrongCredentials int64
	// Throttled are requests answered 429 because their client address
	// presented MSGX_HTTP_THROTTLE_FAILURES wrong credentials within
	// MSGX_HTTP_THROTTLE_PERIOD; ThrottledClients the addresses refused
	// now.
	Throttled        int64
	ThrottledClients int
	// NoClientCert are requests to /cminmsgs/send refused (403) for want
	// of a client certificate (MSGX_HTTP_TLS_CLIENT_CA).
	NoClientCert int64
	// TLSNotAfter is when the certificate being served expires (zero
	// without TLS).
	TLSNotAfter time.Time
}

// bindRetry is the pause between attempts to bind a busy address.
const bindRetry = 250 * time.Millisecond

// idleTimeout closes keep-alive connections that stay idle this long.
const idleTimeout = 2 * time.Minute

// Server is the HTTP server; Run serves until its context ends.
type Server struct {
	cfg Config
	d   Deps
	log *slog.Logger

	slow, busy, unauthorized, noClientCert atomic.Int64
	throttle                               *throttle
	certs                                  *certs // nil: plain HTTP

	mu     sync.Mutex
	opened map[net.Conn]time.Time // connections that have not sent a whole header yet
	addr   string
}

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error {
	return need.Check("web", need.Has(d.Handler != nil, "handler"), need.Clock(d.Clock), need.Log(d.Log))
}

// New returns a server for cfg; Run starts it.
func New(cfg Config, d Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, d: d, log: d.Log.With("component", "http"), opened: map[net.Conn]time.Time{}}
	s.throttle = newThrottle(cfg.ThrottleFailures, cfg.ThrottlePeriod, throttleClients, d.Clock, s.log)
	if cfg.TLS() {
		cs, err := loadCerts(cfg, d.Clock, s.log)
		if err != nil {
			return nil, err
		}
		s.certs = cs
	}
	return s, nil
}

// Stats returns a snapshot of the running figures.
func (s *Server) Stats() Stats {
	st := Stats{SlowClients: s.slow.Load(), Busy: s.busy.Load(), Unauthorized: s.unauthorized.Load(), NoClientCert: s.noClientCert.Load()}
	st.WrongCredentials, st.Throttled, st.ThrottledClients = s.throttle.counts()
	if s.certs != nil {
		st.TLSNotAfter = s.certs.notAfter()
	}
	return st
}

// Addr is the address the server listens on once Run has bound it ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Run binds the address (retrying while it is in use, up to
// MSGX_HTTP_BIND_TIMEOUT) and serves until ctx ends, then drains the
// requests in flight for at most the shutdown timeout.
func (s *Server) Run(ctx context.Context) error {
	ln, err := s.listen(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	s.mu.Lock()
	s.addr = ln.Addr().String()
	s.mu.Unlock()
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         s.connState,
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if s.certs != nil {
		srv.TLSConfig = s.certs.serverConfig()
		// HTTP/1.1 only (see certs.build); an empty map keeps net/http
		// from configuring HTTP/2 on its own.
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	s.log.Info("http listening", "addr", ln.Addr().String(), "tls", s.certs != nil, "client_ca", s.cfg.TLSClientCA != "")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.d.ShutdownTimeout)
	defer cancel()
	return srv.Shutdown(sctx)
}

// listen binds Addr. "Address already in use" right after a restart means
// the previous instance's listener is still closing (a kill -9 whose process
// has not been reaped yet, a graceful stop still draining): it is retried
// every bindRetry until BindTimeout has passed. Any other error is final.
func (s *Server) listen(ctx context.Context) (net.Listener, error) {
	deadline := s.d.Clock.Now().Add(s.cfg.BindTimeout)
	waited := false
	for {
		ln, err := net.Listen("tcp", s.d.Addr)
		if err == nil {
			if waited {
				s.log.Info("http address free again; bound", "addr", s.d.Addr)
			}
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || !s.d.Clock.Now().Before(deadline) {
			return nil, fmt.Errorf("MSGX_HTTP_ADDR=%s: %w", s.d.Addr, err)
		}
		if !waited {
			s.log.Warn("http address in use (a previous instance still closing it?); retrying", "addr", s.d.Addr,
				"for", s.cfg.BindTimeout.String())
			waited = true
		}
		if err := clock.Sleep(ctx, s.d.Clock, bindRetry); err != nil {
			return nil, err
		}
	}
}

// connKey carries a request's connection in its context, so the handler
// chain can tell the server the request reached it.
type connKey struct{}

// connState counts connections closed before they sent a whole request
// header within the read timeout: the server cut them off. A connection is
// watched from its first byte (or from its opening, if it never sends one)
// until its request reaches the handler chain (reached); one closed while
// idle between requests was not cut off.
func (s *Server) connState(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch state {
	case http.StateNew:
		s.opened[c] = s.d.Clock.Now()
	case http.StateActive:
		if _, ok := s.opened[c]; !ok {
			s.opened[c] = s.d.Clock.Now()
		}
	case http.StateIdle:
		delete(s.opened, c)
	case http.StateClosed, http.StateHijacked:
		if at, ok := s.opened[c]; ok {
			delete(s.opened, c)
			if state == http.StateClosed && s.d.Clock.Now().Sub(at) >= s.cfg.ReadTimeout {
				s.slow.Add(1)
				s.log.Debug("slow client cut off: no complete request header within MSGX_HTTP_READ_TIMEOUT",
					"remote", c.RemoteAddr().String(), "timeout", s.cfg.ReadTimeout.String())
			}
		}
	}
}

// reached records that the request on c got past its headers.
func (s *Server) reached(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		s.mu.Lock()
		delete(s.opened, c)
		s.mu.Unlock()
	}
}
