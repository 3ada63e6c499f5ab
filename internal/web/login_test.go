package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"msgx/internal/clock"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func send(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func login(t *testing.T, base, token, next string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(url.Values{"token": {token}, "next": {next}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return send(t, req)
}

func getWith(t *testing.T, url string, c *http.Cookie, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if c != nil {
		req.AddCookie(c)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return send(t, req)
}

func sessionCookie(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", CookieName, resp.Header["Set-Cookie"])
	return nil
}

// The login form: a wrong token gets 401 and the form again (counted); the
// right one sets an HttpOnly, SameSite=Strict session cookie that opens
// every read endpoint until MSGX_HTTP_LOGIN_TTL has passed, and redirects
// to next — only ever a path on this server.
func TestLoginSessionCookie(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.ReadToken = "r3ad"
	s := newServer(t, cfg, routes(), fake)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	resp, body := getWith(t, srv.URL+"/login?next=/status", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `name="token"`) || !strings.Contains(body, `value="/status"`) {
		t.Fatalf("GET /login: %d\n%s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("login page CSP %q", csp)
	}

	for _, wrong := range []string{"", "nope", "r3ad2", "R3AD"} {
		resp, body = login(t, srv.URL, wrong, "/")
		if resp.StatusCode != 401 || !strings.Contains(body, "not the read token") || len(resp.Cookies()) != 0 {
			t.Errorf("login with %q: %d %v\n%s", wrong, resp.StatusCode, resp.Cookies(), body)
		}
	}
	if got := s.Stats().Unauthorized; got != 4 {
		t.Errorf("wrong logins counted %d, want 4", got)
	}

	resp, _ = login(t, srv.URL, "r3ad", "/status?x=1")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/status?x=1" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	c := sessionCookie(t, resp)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != 3600 || c.Secure {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, Max-Age=3600, not Secure over plain HTTP", c)
	}
	if strings.Contains(c.Value, "r3ad") {
		t.Errorf("the cookie carries the token: %q", c.Value)
	}
	for _, p := range []string{"/", "/status", "/metrics", "/later"} {
		if resp, _ := getWith(t, srv.URL+p, c); resp.StatusCode != 200 {
			t.Errorf("GET %s with the session cookie: %d", p, resp.StatusCode)
		}
	}

	// Tampered, foreign or expired cookies open nothing.
	e, sig, _ := strings.Cut(c.Value, ".")
	for name, v := range map[string]string{
		"later expiry":      "9" + e + "." + sig,
		"other token":       sessionValue("other", fake.Now().Add(time.Hour)),
		"no signature":      e,
		"garbage":           "x.y",
		"the token itself":  "r3ad",
		"bad base64":        e + ".!!!",
		"expired signature": sessionValue("r3ad", fake.Now().Add(-time.Second)),
	} {
		if resp, _ := getWith(t, srv.URL+"/status", &http.Cookie{Name: CookieName, Value: v}); resp.StatusCode != 401 {
			t.Errorf("cookie %s: %d, want 401", name, resp.StatusCode)
		}
	}
	fake.Advance(time.Hour - time.Second)
	if resp, _ := getWith(t, srv.URL+"/status", c); resp.StatusCode != 200 {
		t.Errorf("cookie just before MSGX_HTTP_LOGIN_TTL: %d", resp.StatusCode)
	}
	fake.Advance(time.Second)
	if resp, _ := getWith(t, srv.URL+"/status", c); resp.StatusCode != 401 {
		t.Errorf("cookie after MSGX_HTTP_LOGIN_TTL: %d, want 401", resp.StatusCode)
	}

	// next never leaves the server.
	for next, want := range map[string]string{
		"https://evil.example/": "/", "//evil.example/x": "/", "/\\evil.example": "/", "evil": "/", "": "/",
		"/login": "/", "/flights/15": "/flights/15", "javascript:alert(1)": "/",
	} {
		resp, _ = login(t, srv.URL, "r3ad", next)
		if got := resp.Header.Get("Location"); got != want {
			t.Errorf("next %q redirects to %q, want %q", next, got, want)
		}
	}

	// Logout ends the cookie in the browser.
	req, _ := http.NewRequest("POST", srv.URL+"/logout", nil)
	resp, _ = send(t, req)
	if out := sessionCookie(t, resp); resp.StatusCode != http.StatusSeeOther || out.MaxAge >= 0 || out.Value != "" {
		t.Errorf("logout: %d %+v", resp.StatusCode, out)
	}
	if resp, _ := getWith(t, srv.URL+"/login", nil); resp.StatusCode != 200 {
		t.Errorf("GET /login: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("DELETE", srv.URL+"/login", nil)
	if resp, _ := send(t, req); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE /login: %d", resp.StatusCode)
	}
	// The body of the form is bounded.
	req, _ = http.NewRequest("POST", srv.URL+"/login", strings.NewReader("token="+strings.Repeat("x", 10<<10)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, _ := send(t, req); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("10 KiB login form: %d, want 400", resp.StatusCode)
	}
}

// A browser navigating to a read endpoint without the token is sent to the
// form (and back afterwards); a script gets 401 as before.
func TestBrowserNavigationGoesToTheForm(t *testing.T) {
	cfg := testConfig()
	cfg.ReadToken = "r3ad"
	s := newServer(t, cfg, routes(), clock.Real{})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, h := range [][]string{
		{"Accept", "text/html,application/xhtml+xml,*/*;q=0.8"},
		{"Sec-Fetch-Mode", "navigate", "Accept", "*/*"},
	} {
		resp, _ := getWith(t, srv.URL+"/flights?day=2026-11-30", nil, h...)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Fflights%3Fday%3D2026-11-30" {
			t.Errorf("navigation %v: %d to %q", h, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, h := range [][]string{nil, {"Accept", "*/*"}, {"Sec-Fetch-Mode", "cors", "Accept", "text/html"}} {
		if resp, _ := getWith(t, srv.URL+"/status", nil, h...); resp.StatusCode != 401 {
			t.Errorf("fetch %v: %d, want 401", h, resp.StatusCode)
		}
	}
	if got := s.Stats().Unauthorized; got != 5 {
		t.Errorf("unauthorized counted %d, want 5", got)
	}

	// Without a read token there is nothing to log in to.
	s = newServer(t, testConfig(), routes(), clock.Real{})
	srv2 := httptest.NewServer(s.Handler())
	defer srv2.Close()
	if resp, _ := getWith(t, srv2.URL+"/login", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("GET /login without a read token: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}
