package web

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"msgx/internal/clock"
)

const readToken = "r3ad-t0ken-0f-16-bytes"

// from is a client whose connections leave from local address ip (any
// 127.x.y.z reaches a loopback listener), showing redirects instead of
// following them.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func postLogin(t *testing.T, c *http.Client, base, token string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(url.Values{"token": {token}, "next": {"/status"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func throttled(t *testing.T, logs io.Writer, c clock.Clock, mutate ...func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	cfg := testConfig()
	cfg.ReadToken = readToken
	cfg.ThrottleFailures, cfg.ThrottlePeriod = 5, time.Minute
	for _, m := range mutate {
		m(&cfg)
	}
	mux := http.NewServeMux()
	for _, p := range []string{"GET /status", "GET /metrics", "GET /healthz"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	}
	// The compatibility endpoint with its own token, as ingest's.
	mux.HandleFunc("POST /cminmsgs/send", func(w http.ResponseWriter, r *http.Request) {
		if !Authorized(r, "s3nd-t0ken-0f-16-bytes") {
			Unauthorized(w)
			return
		}
		_, _ = io.WriteString(w, "1")
	})
	s, err := New(cfg, Deps{Addr: "127.0.0.1:0", Handler: mux, ShutdownTimeout: 5 * time.Second, Clock: c,
		Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, srv
}

// The sixth wrong read token from one address within a minute gets 429
// with Retry-After, and so does the right one from there (it is not even
// compared); the right one from another address still logs in. The
// address is logged once for its period; after the period it may try
// again. Sessions keep working from a throttled address.
func TestSixthWrongLoginGets429(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	logs := &syncBuffer{}
	s, srv := throttled(t, logs, fake)
	attacker, operator := from("127.0.0.1"), from("127.0.0.2")
	for i := 1; i <= 5; i++ {
		if resp := postLogin(t, attacker, srv.URL, fmt.Sprintf("guess-%d", i)); resp.StatusCode != 401 {
			t.Fatalf("wrong login %d: %d, want 401", i, resp.StatusCode)
		}
		fake.Advance(10 * time.Second)
	}
	// 50 s after the first failure.
	resp := postLogin(t, attacker, srv.URL, "guess-6")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "10" {
		t.Fatalf("6th wrong login: %d Retry-After %q, want 429 and 10", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := postLogin(t, attacker, srv.URL, readToken); resp.StatusCode != http.StatusTooManyRequests || len(resp.Cookies()) != 0 {
		t.Fatalf("the right token from the throttled address: %d %v, want 429 and no cookie", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := getWithClient(t, attacker, srv.URL+"/status", nil, "Authorization", "Bearer "+readToken); resp.StatusCode != 429 {
		t.Errorf("the right bearer token from the throttled address: %d, want 429", resp.StatusCode)
	}
	resp = postLogin(t, operator, srv.URL, readToken)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/status" {
		t.Fatalf("the right token from another address: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookie := sessionCookie(t, resp)
	// A session needs no comparison of a token: it works from anywhere.
	if resp, _ := getWithClient(t, attacker, srv.URL+"/status", cookie); resp.StatusCode != 200 {
		t.Errorf("a session from the throttled address: %d", resp.StatusCode)
	}
	// The probes and the form itself stay open.
	for _, p := range []string{"/healthz", "/login"} {
		if resp, _ := getWithClient(t, attacker, srv.URL+p, nil); resp.StatusCode != 200 {
			t.Errorf("GET %s from the throttled address: %d", p, resp.StatusCode)
		}
	}
	if n := logs.lines("too many wrong credentials"); n != 1 {
		t.Errorf("the throttled address was logged %d times, want once", n)
	}
	if n := logs.lines(`"client":"127.0.0.1"`); n != 1 {
		t.Errorf("the log does not name the address once: %d", n)
	}
	st := s.Stats()
	if st.WrongCredentials != 5 || st.Throttled != 3 || st.ThrottledClients != 1 || st.Unauthorized != 5 {
		t.Errorf("stats %+v, want 5 wrong, 3 throttled, 1 client throttled, 5 unauthorized", st)
	}

	fake.Advance(10 * time.Second)
	if resp := postLogin(t, attacker, srv.URL, readToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after the period: %d, want the login to work", resp.StatusCode)
	}
	if got := s.Stats().ThrottledClients; got != 0 {
		t.Errorf("%d clients throttled after the period", got)
	}
	// The next period counts afresh and logs again.
	for i := 0; i < 6; i++ {
		postLogin(t, attacker, srv.URL, "again")
	}
	if n := logs.lines("too many wrong credentials"); n != 2 {
		t.Errorf("second period: %d log lines, want 2", n)
	}
}

func getWithClient(t *testing.T, c *http.Client, url string, cookie *http.Cookie, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// Wrong bearer tokens count as wrong logins do, on the read endpoints and
// on an endpoint with its own token (the compatibility endpoint's, checked
// by its handler through Authorized). A request without a credential is no
// guess and counts nothing.
func TestWrongBearerTokensAreThrottled(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	s, srv := throttled(t, io.Discard, fake)
	c := from("127.0.0.1")
	for i := 0; i < 20; i++ {
		if resp, _ := getWithClient(t, c, srv.URL+"/status", nil); resp.StatusCode != 401 {
			t.Fatalf("GET /status without a token: %d, want 401", resp.StatusCode)
		}
	}
	post := func(auth string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/cminmsgs/send", strings.NewReader("<MSG/>"))
		req.Header.Set("Authorization", auth)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, auth := range []string{"Bearer a", "Bearer b", "Basic eDp5"} {
		if code := post(auth); code != 401 {
			t.Fatalf("send with a wrong token %d: %d", i, code)
		}
	}
	for i := 0; i < 2; i++ {
		if resp, _ := getWithClient(t, c, srv.URL+"/metrics", nil, "Authorization", "Bearer nope"); resp.StatusCode != 401 {
			t.Fatalf("GET /metrics with a wrong token: %d", resp.StatusCode)
		}
	}
	if code := post("Bearer s3nd-t0ken-0f-16-bytes"); code != 429 {
		t.Fatalf("the right send token after 5 wrong ones: %d, want 429", code)
	}
	if code := post("Bearer s3nd-t0ken-0f-16-bytes"); code != 429 {
		t.Fatalf("again: %d, want 429", code)
	}
	if st := s.Stats(); st.WrongCredentials != 5 || st.Throttled != 2 {
		t.Errorf("stats %+v, want 5 wrong credentials, 2 throttled", st)
	}
	fake.Advance(time.Minute)
	if code := post("Bearer s3nd-t0ken-0f-16-bytes"); code != 200 {
		t.Fatalf("the right send token after the period: %d", code)
	}
}

// X-Forwarded-For is the client's address only behind
// MSGX_HTTP_BEHIND_TLS_PROXY, and then its last hop (the one the proxy
// appended): a client cannot escape the throttle by writing the header,
// nor blame another address. X-Forwarded-Proto makes the cookie Secure
// (and adds HSTS) only behind the proxy too.
func TestForwardedHeadersTrustedOnlyBehindTheProxy(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	c := from("127.0.0.1")

	// Not behind a proxy: the connection's address, whatever the headers.
	_, srv := throttled(t, io.Discard, fake)
	for i := 0; i < 5; i++ {
		postLogin(t, c, srv.URL, "guess", "X-Forwarded-For", fmt.Sprintf("10.0.0.%d", i))
	}
	if resp := postLogin(t, c, srv.URL, readToken, "X-Forwarded-For", "10.9.9.9"); resp.StatusCode != 429 {
		t.Errorf("a fresh X-Forwarded-For without the proxy setting escaped the throttle: %d", resp.StatusCode)
	}
	_, srv = throttled(t, io.Discard, fake)
	resp := postLogin(t, c, srv.URL, readToken, "X-Forwarded-Proto", "https")
	if cookie := sessionCookie(t, resp); cookie.Secure || resp.Header.Get("Strict-Transport-Security") != "" {
		t.Errorf("X-Forwarded-Proto believed without MSGX_HTTP_BEHIND_TLS_PROXY: Secure %v, HSTS %q", cookie.Secure, resp.Header.Get("Strict-Transport-Security"))
	}

	// Behind the proxy: the last hop.
	_, srv = throttled(t, io.Discard, fake, func(c *Config) { c.BehindTLSProxy = true })
	for i := 0; i < 5; i++ {
		// What the client wrote comes first; the proxy appends 192.0.2.7.
		postLogin(t, c, srv.URL, "guess", "X-Forwarded-For", fmt.Sprintf("10.0.0.%d, 192.0.2.7", i))
	}
	if resp := postLogin(t, c, srv.URL, readToken, "X-Forwarded-For", "10.9.9.9, 192.0.2.7"); resp.StatusCode != 429 {
		t.Errorf("the same last hop: %d, want 429", resp.StatusCode)
	}
	resp = postLogin(t, c, srv.URL, readToken, "X-Forwarded-For", "192.0.2.7, 198.51.100.4", "X-Forwarded-Proto", "https")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("another client behind the same proxy: %d, want the login to work", resp.StatusCode)
	}
	if cookie := sessionCookie(t, resp); !cookie.Secure || resp.Header.Get("Strict-Transport-Security") != hsts {
		t.Errorf("behind the proxy with X-Forwarded-Proto: https: Secure %v, HSTS %q", cookie.Secure, resp.Header.Get("Strict-Transport-Security"))
	}
}

// The table is bounded: expired addresses are dropped, and once it is
// full of live ones every further address shares one more entry — so many
// addresses neither grow it nor multiply the guesses.
func TestThrottleTableBounded(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	th := newThrottle(2, time.Minute, 3, fake, quiet())
	for i := 0; i < 1000; i++ {
		th.fail(fmt.Sprintf("10.0.%d.%d", i/256, i%256))
		if n := len(th.clients); n > 3 || th.order.Len() != n {
			t.Fatalf("after %d addresses the table holds %d (list %d)", i+1, n, th.order.Len())
		}
	}
	if th.wait("10.0.0.0") != 0 || th.wait("10.0.0.1") != 0 {
		t.Error("an address with one failure in the table is refused")
	}
	if th.wait("192.0.2.1") == 0 {
		t.Error("a new address while the table is full of live periods is not refused: the shared entry has 997 failures")
	}
	if _, _, blocked := th.counts(); blocked != 1 {
		t.Errorf("%d throttled, want the shared entry", blocked)
	}
	fake.Advance(time.Minute)
	if th.wait("192.0.2.1") != 0 {
		t.Error("still refused after the period")
	}
	if _, _, blocked := th.counts(); blocked != 0 || len(th.clients) != 0 {
		t.Errorf("after the period: %d throttled, %d in the table", blocked, len(th.clients))
	}
	th.fail("192.0.2.1")
	if len(th.clients) != 1 {
		t.Errorf("a new period: %d in the table, want 1", len(th.clients))
	}
}

func TestClientKey(t *testing.T) {
	for _, tc := range []struct {
		remote, xff string
		proxy       bool
		want        string
	}{
		{"192.0.2.1:5000", "", false, "192.0.2.1"},
		{"192.0.2.1:5000", "203.0.113.9", false, "192.0.2.1"},
		{"192.0.2.1:5000", "203.0.113.9", true, "203.0.113.9"},
		{"192.0.2.1:5000", "1.1.1.1, 203.0.113.9", true, "203.0.113.9"},
		{"192.0.2.1:5000", "1.1.1.1, junk", true, "192.0.2.1"},
		{"192.0.2.1:5000", "", true, "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:5000", "", false, "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:5000", "", false, "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.1]:5000", "", false, "192.0.2.1"},
		{"192.0.2.1:5000", "2001:db8:9:9::1", true, "2001:db8:9:9::/64"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := clientKey(r, tc.proxy); got != tc.want {
			t.Errorf("%s X-Forwarded-For %q proxy %v: %q, want %q", tc.remote, tc.xff, tc.proxy, got, tc.want)
		}
	}
}

// Every response carries nosniff, no referrer and a CSP forbidding
// framing — the pages', the errors', the redirects', the busy 503's — and
// HSTS only over HTTPS.
func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	cfg := testConfig()
	cfg.ReadToken = readToken
	cfg.Pprof = true
	mux := routes()
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		_, _ = io.WriteString(w, "<p>page</p>")
	})
	s := newServer(t, cfg, mux, clock.Real{})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	bearer := []string{"Authorization", "Bearer " + readToken}
	for _, tc := range []struct {
		path   string
		header []string
		code   int
	}{
		{"/status", bearer, 200},
		{"/page", bearer, 200},
		{"/nowhere", bearer, 404},
		{"/status", nil, 401},
		{"/status", []string{"Accept", "text/html"}, 303},
		{"/login", nil, 200},
		{"/debug/pprof/", bearer, 200},
		{"/healthz", nil, 200},
	} {
		resp, _ := getWith(t, srv.URL+tc.path, nil, tc.header...)
		h := resp.Header
		if resp.StatusCode != tc.code || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("Strict-Transport-Security") != "" {
			t.Errorf("GET %s %v: %d, headers %v", tc.path, tc.header, resp.StatusCode, h)
		}
	}

	// Busy: the 503 too.
	cfg.MaxConcurrent = 1
	release := make(chan struct{})
	entered := make(chan struct{})
	mux.HandleFunc("GET /slow", func(http.ResponseWriter, *http.Request) { close(entered); <-release })
	s = newServer(t, cfg, mux, clock.Real{})
	busy := httptest.NewServer(s.Handler())
	defer busy.Close()
	go func() {
		req, _ := http.NewRequest("GET", busy.URL+"/slow", nil)
		req.Header.Set(bearer[0], bearer[1])
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	resp, _ := getWith(t, busy.URL+"/status", nil)
	close(release)
	if resp.StatusCode != 503 || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("busy: %d %v", resp.StatusCode, resp.Header)
	}
}
