package web

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"msgx/internal/clock"
)

// certCheck is how often, at most, a handshake re-reads the certificate,
// key and client CA files: a renewed certificate is served at most this
// long after it was written.
const certCheck = 10 * time.Second

// certs serves the listener's TLS configuration from MSGX_HTTP_TLS_CERT,
// MSGX_HTTP_TLS_KEY and MSGX_HTTP_TLS_CLIENT_CA, re-read when they change
// on disk, so a renewed certificate needs no restart:
//
//  1. Each handshake asks for the configuration (GetConfigForClient).
//  2. When certCheck has passed on the clock since the last look, the three
//     files are read again and compared with the bytes in use: no stat of
//     modification times, so a rename over the file, a symlink swapped by
//     an orchestrator and a rewrite within the same second all count.
//  3. Changed files are parsed; the new configuration serves this
//     handshake and the next ones. Files that do not load — a renewal
//     caught half-way, the certificate written but not its key yet — leave
//     the previous configuration in place, logged once per content, and are
//     tried again at the next look.
//
// A deployment without handshakes reads nothing.
type certs struct {
	certFile, keyFile, caFile string
	clock                     clock.Clock
	log                       *slog.Logger

	mu      sync.Mutex
	checked time.Time   // the last look at the files
	files   [3][]byte   // the contents in use: cert, key, client CA
	failed  [3][]byte   // the last contents that did not load (logged)
	conf    *tls.Config // built from files
	leaf    *x509.Certificate
}

// loadCerts reads the files for the first time; an error names the
// variable.
func loadCerts(cfg Config, c clock.Clock, log *slog.Logger) (*certs, error) {
	cs := &certs{certFile: cfg.TLSCert, keyFile: cfg.TLSKey, caFile: cfg.TLSClientCA, clock: c, log: log}
	files, err := cs.read()
	if err != nil {
		return nil, err
	}
	conf, leaf, err := cs.build(files)
	if err != nil {
		return nil, err
	}
	cs.files, cs.conf, cs.leaf, cs.checked = files, conf, leaf, c.Now()
	if now := c.Now(); !now.Before(leaf.NotAfter) {
		// Not refused: the gateway's ingest and processing do not depend
		// on the HTTP surface; every client will refuse the handshake.
		log.Error("MSGX_HTTP_TLS_CERT has expired; renew it (it is read again without a restart)",
			"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return cs, nil
}

// read returns the files' contents (the client CA's empty when unset).
func (cs *certs) read() ([3][]byte, error) {
	var out [3][]byte
	for i, f := range []struct{ name, path string }{
		{"MSGX_HTTP_TLS_CERT", cs.certFile}, {"MSGX_HTTP_TLS_KEY", cs.keyFile}, {"MSGX_HTTP_TLS_CLIENT_CA", cs.caFile},
	} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return out, fmt.Errorf("%s: %w", f.name, err)
		}
		out[i] = b
	}
	return out, nil
}

// build parses the files into the listener's configuration: TLS 1.2 at
// least, HTTP/1.1 only (the server's per-connection bounds — the read
// timeout, the slow-client count, MSGX_HTTP_MAX_CONCURRENT — are
// connection-per-request), and with a client CA a client certificate
// verified against it whenever one is presented. Which endpoints require
// one is the handler chain's business (guard.go): /cminmsgs/send does, the
// browser-facing endpoints do not.
func (cs *certs) build(files [3][]byte) (*tls.Config, *x509.Certificate, error) {
	pair, err := tls.X509KeyPair(files[0], files[1])
	if err != nil {
		return nil, nil, fmt.Errorf("MSGX_HTTP_TLS_CERT=%s, MSGX_HTTP_TLS_KEY=%s: %w", cs.certFile, cs.keyFile, err)
	}
	conf := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		NextProtos:   []string{"http/1.1"},
	}
	if cs.caFile != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(files[2]) {
			return nil, nil, fmt.Errorf("MSGX_HTTP_TLS_CLIENT_CA=%s: no PEM certificate in it", cs.caFile)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return conf, pair.Leaf, nil
}

// serverConfig is the listener's configuration, whose every handshake asks
// cs for the current one.
func (cs *certs) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		NextProtos:         []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return cs.current(), nil },
	}
}

// current returns the configuration to serve, after a look at the files
// when certCheck has passed.
func (cs *certs) current() *tls.Config {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	now := cs.clock.Now()
	if now.Sub(cs.checked) < certCheck {
		return cs.conf
	}
	cs.checked = now
	files, err := cs.read()
	if err == nil && same(files, cs.files) {
		return cs.conf
	}
	var conf *tls.Config
	var leaf *x509.Certificate
	if err == nil {
		conf, leaf, err = cs.build(files)
	}
	if err != nil {
		if !same(files, cs.failed) {
			cs.failed = files
			cs.log.Error("TLS files changed but do not load; still serving the previous certificate, trying again every "+certCheck.String(),
				"err", err, "serving_not_after", cs.leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		return cs.conf
	}
	cs.files, cs.conf, cs.leaf, cs.failed = files, conf, leaf, [3][]byte{}
	cs.log.Info("TLS certificate reloaded", "subject", leaf.Subject.String(),
		"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	return conf
}

// notAfter is when the certificate being served expires.
func (cs *certs) notAfter() time.Time {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.leaf.NotAfter
}

// same reports whether a and b hold the same contents.
func same(a, b [3][]byte) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
