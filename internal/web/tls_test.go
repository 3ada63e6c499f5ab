package web

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"msgx/internal/clock"
	"msgx/internal/testenv"
)

// run serves s (Run) until the test ends and returns its address.
func run(t *testing.T, s *Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	for i := 0; s.Addr() == ""; i++ {
		select {
		case err := <-done:
			t.Fatalf("server stopped: %v", err)
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s.Addr()
}

// tlsConfig is cfg serving srv's certificate.
func tlsConfig(cfg Config, srv testenv.Issued) Config {
	cfg.TLSCert, cfg.TLSKey = srv.CertFile, srv.KeyFile
	return cfg
}

// httpsClient trusts ca and presents certs, one new connection per request.
func httpsClient(ca *testenv.CA, certs ...tls.Certificate) *http.Client {
	return &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: certs}, DisableKeepAlives: true, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func do(t *testing.T, c *http.Client, method, url, auth string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("<MSG/>"))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// The listener speaks TLS (1.2 at least) with the configured certificate:
// Go's client and curl, trusting the test CA, reach every kind of route;
// the read token still guards the read endpoints; HSTS comes with every
// answer. Plain HTTP to the TLS port gets no route, nor does TLS 1.1.
func TestTLSListenerServesEveryRoute(t *testing.T) {
	ca := testenv.NewCA(t, "msgx test CA")
	leaf := ca.Server("msgx")
	cfg := tlsConfig(testConfig(), leaf)
	cfg.ReadToken = "r3ad-t0ken-0f-16b"
	s := newServer(t, cfg, routes(), clock.Real{})
	addr := run(t, s)
	base := "https://" + addr
	c := httpsClient(ca)
	paths := []string{"/", "/flights/15", "/flights?day=2026-11-30", "/refdata/AIRL", "/status", "/metrics", "/later", "/healthz", "/readyz"}
	for _, p := range paths {
		resp, body := do(t, c, "GET", base+p, "Bearer "+cfg.ReadToken)
		if resp.StatusCode != 200 || body != "ok" {
			t.Errorf("GET %s over TLS: %d %q", p, resp.StatusCode, body)
		}
		if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 || resp.ProtoMajor != 1 {
			t.Errorf("GET %s: TLS %+v, HTTP/%d", p, resp.TLS, resp.ProtoMajor)
		}
		if got := resp.Header.Get("Strict-Transport-Security"); got != hsts {
			t.Errorf("GET %s over TLS: HSTS %q", p, got)
		}
		if code, body := testenv.Curl(t, "--cacert", ca.File, "-H", "Authorization: Bearer "+cfg.ReadToken, base+p); code != 200 || body != "ok" {
			t.Errorf("curl %s: %d %q", p, code, body)
		}
	}
	if resp, _ := do(t, c, "POST", base+"/cminmsgs/send", ""); resp.StatusCode != 200 {
		t.Errorf("POST /cminmsgs/send over TLS: %d", resp.StatusCode)
	}
	if code, _ := testenv.Curl(t, "--cacert", ca.File, "--data-binary", "<MSG/>", base+"/cminmsgs/send"); code != 200 {
		t.Errorf("curl POST /cminmsgs/send: %d", code)
	}
	if resp, _ := do(t, c, "GET", base+"/status", ""); resp.StatusCode != 401 {
		t.Errorf("GET /status over TLS without the token: %d, want 401", resp.StatusCode)
	}
	// curl without the CA refuses the certificate: it is the test CA's.
	if _, _, err := testenv.TryCurl(base + "/healthz"); err == nil {
		t.Error("curl trusted the test certificate without --cacert")
	}

	// Plain HTTP to the TLS port: Go's 400 "HTTP request to an HTTPS
	// server", never a route.
	for _, p := range []string{"/healthz", "/status"} {
		resp, err := http.Get("http://" + addr + p)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), "HTTPS server") {
				t.Errorf("plain HTTP GET %s on the TLS port: %d %q", p, resp.StatusCode, b)
			}
		}
		if code, body, _ := testenv.TryCurl("http://" + addr + p); code == 200 || strings.Contains(body, "ok") {
			t.Errorf("curl plain HTTP %s on the TLS port: %d %q", p, code, body)
		}
	}
	// TLS 1.1 is refused.
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("a TLS 1.1 client was served")
	}
	if code, _, err := testenv.TryCurl("--cacert", ca.File, "--tlsv1.1", "--tls-max", "1.1", base+"/healthz"); err == nil {
		t.Errorf("curl with TLS 1.1 was served: %d", code)
	}
	if st := s.Stats(); !st.TLSNotAfter.Equal(leaf.Cert.NotAfter) {
		t.Errorf("TLSNotAfter %v, want %v", st.TLSNotAfter, leaf.Cert.NotAfter)
	}
}

// served is the serial number of the certificate a new handshake gets.
func served(t *testing.T, ca *testenv.CA, addr string) *big.Int {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// syncBuffer is a log destination the test reads while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines are the logged lines containing sub.
func (s *syncBuffer) lines(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			n++
		}
	}
	return n
}

// replace writes the contents of from over path the way a renewal tool
// does: a new file renamed over the old one.
func replace(t *testing.T, path, from string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// A renewed certificate written over the files is served without a
// restart, at the first handshake once certCheck has passed on the clock
// (files are not read at every handshake). A renewal caught half-way — the
// new certificate with the old key — keeps the previous certificate in
// service, logged once however many handshakes see it, until the key
// follows.
func TestRenewedCertificateServedWithoutRestart(t *testing.T) {
	ca := testenv.NewCA(t, "msgx test CA")
	first, second, third := ca.Server("msgx"), ca.Server("msgx"), ca.Server("msgx")
	dir := t.TempDir()
	certFile, keyFile := dir+"/tls.crt", dir+"/tls.key"
	replace(t, certFile, first.CertFile)
	replace(t, keyFile, first.KeyFile)
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	logs := &syncBuffer{}
	cfg := testConfig()
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	s, err := New(cfg, Deps{Addr: "127.0.0.1:0", Handler: routes(), ShutdownTimeout: 5 * time.Second, Clock: fake,
		Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	addr := run(t, s)
	if got := served(t, ca, addr); got.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("serving serial %v, want the first certificate's %v", got, first.Cert.SerialNumber)
	}

	replace(t, certFile, second.CertFile)
	replace(t, keyFile, second.KeyFile)
	fake.Advance(certCheck - time.Second)
	if got := served(t, ca, addr); got.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("renewed files read before certCheck passed: serial %v", got)
	}
	fake.Advance(time.Second)
	if got := served(t, ca, addr); got.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("after certCheck: serial %v, want the renewed certificate's %v", got, second.Cert.SerialNumber)
	}
	if n := logs.lines("TLS certificate reloaded"); n != 1 {
		t.Errorf("%d reload lines, want 1", n)
	}
	if st := s.Stats(); !st.TLSNotAfter.Equal(second.Cert.NotAfter) {
		t.Errorf("TLSNotAfter %v, want the renewed certificate's %v", st.TLSNotAfter, second.Cert.NotAfter)
	}
	// Go's HTTP client over the renewed certificate.
	if resp, body := do(t, httpsClient(ca), "GET", "https://"+addr+"/healthz", ""); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("GET /healthz after the renewal: %d %q", resp.StatusCode, body)
	}

	// Half-way: the third certificate, the second's key.
	replace(t, certFile, third.CertFile)
	for i := 0; i < 3; i++ {
		fake.Advance(certCheck)
		if got := served(t, ca, addr); got.Cmp(second.Cert.SerialNumber) != 0 {
			t.Fatalf("half-way renewal: serial %v, want the second certificate still", got)
		}
	}
	if n := logs.lines("do not load"); n != 1 {
		t.Errorf("the half-way renewal logged %d times, want once", n)
	}
	replace(t, keyFile, third.KeyFile)
	fake.Advance(certCheck)
	if got := served(t, ca, addr); got.Cmp(third.Cert.SerialNumber) != 0 {
		t.Fatalf("once the key followed: serial %v, want the third certificate's %v", got, third.Cert.SerialNumber)
	}
}

// With MSGX_HTTP_TLS_CLIENT_CA, /cminmsgs/send needs a client certificate
// the CA signed (403 without, counted); a certificate of another CA fails
// the handshake; the read endpoints and the page stay open to a browser
// without one.
func TestClientCertificateRequiredForSend(t *testing.T) {
	ca := testenv.NewCA(t, "msgx test CA")
	aodbCA, otherCA := testenv.NewCA(t, "AODB client CA"), testenv.NewCA(t, "someone else's CA")
	aodb, stranger := aodbCA.Client("aodb"), otherCA.Client("aodb")
	cfg := tlsConfig(testConfig(), ca.Server("msgx"))
	cfg.TLSClientCA = aodbCA.File
	s := newServer(t, cfg, routes(), clock.Real{})
	base := "https://" + run(t, s)

	resp, body := do(t, httpsClient(ca), "POST", base+"/cminmsgs/send", "")
	if resp.StatusCode != 403 || !strings.Contains(body, "client certificate required") {
		t.Errorf("send without a client certificate: %d %q", resp.StatusCode, body)
	}
	if code, body := testenv.Curl(t, "--cacert", ca.File, "--data-binary", "<MSG/>", base+"/cminmsgs/send"); code != 403 {
		t.Errorf("curl send without a client certificate: %d %q", code, body)
	}
	if resp, body := do(t, httpsClient(ca, aodb.Pair), "POST", base+"/cminmsgs/send", ""); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("send with the AODB's certificate: %d %q", resp.StatusCode, body)
	}
	if code, body := testenv.Curl(t, "--cacert", ca.File, "--cert", aodb.CertFile, "--key", aodb.KeyFile,
		"--data-binary", "<MSG/>", base+"/cminmsgs/send"); code != 200 || body != "ok" {
		t.Errorf("curl send with the AODB's certificate: %d %q", code, body)
	}
	// Go's client sends no certificate the server's CA list does not name:
	// this one insists.
	insist := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger.Pair, nil }}}}
	req, _ := http.NewRequest("POST", base+"/cminmsgs/send", strings.NewReader("<MSG/>"))
	if resp, err := insist.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a certificate of another CA was accepted: %d", resp.StatusCode)
	}
	if code, _, err := testenv.TryCurl("--cacert", ca.File, "--cert", stranger.CertFile, "--key", stranger.KeyFile,
		"--data-binary", "<MSG/>", base+"/cminmsgs/send"); err == nil {
		t.Errorf("curl with a certificate of another CA was answered %d", code)
	}
	for _, p := range []string{"/", "/status", "/healthz"} {
		if resp, _ := do(t, httpsClient(ca), "GET", base+p, ""); resp.StatusCode != 200 {
			t.Errorf("GET %s without a client certificate: %d", p, resp.StatusCode)
		}
	}
	if got := s.Stats().NoClientCert; got != 2 {
		t.Errorf("refused for want of a client certificate: %d, want 2", got)
	}
}

// Start-up refuses TLS files that do not load, naming the variable.
func TestTLSFilesThatDoNotLoadAreRefused(t *testing.T) {
	ca := testenv.NewCA(t, "msgx test CA")
	srv, other := ca.Server("msgx"), ca.Server("other")
	for name, tc := range map[string]struct {
		cert, key, clientCA string
		want                string
	}{
		"missing certificate": {"/nonexistent.crt", srv.KeyFile, "", "MSGX_HTTP_TLS_CERT: open /nonexistent.crt"},
		"another key":         {srv.CertFile, other.KeyFile, "", "MSGX_HTTP_TLS_KEY=" + other.KeyFile + ": tls: private key does not match"},
		"key for certificate": {srv.KeyFile, srv.KeyFile, "", "MSGX_HTTP_TLS_CERT=" + srv.KeyFile},
		"client CA not PEM":   {srv.CertFile, srv.KeyFile, srv.KeyFile, "MSGX_HTTP_TLS_CLIENT_CA=" + srv.KeyFile + ": no PEM certificate"},
		"missing client CA":   {srv.CertFile, srv.KeyFile, "/nonexistent-ca.pem", "MSGX_HTTP_TLS_CLIENT_CA: open /nonexistent-ca.pem"},
	} {
		cfg := testConfig()
		cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = tc.cert, tc.key, tc.clientCA
		_, err := New(cfg, Deps{Addr: "127.0.0.1:0", Handler: routes(), Clock: clock.Real{}, Log: quiet()})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	for _, c := range []Config{{TLSCert: srv.CertFile}, {TLSKey: srv.KeyFile}, {TLSClientCA: ca.File}} {
		cfg := testConfig()
		cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = c.TLSCert, c.TLSKey, c.TLSClientCA
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "MSGX_HTTP_TLS_") {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
