package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A browser cannot send an Authorization header when it navigates to a URL,
// so with MSGX_HTTP_READ_TOKEN set the guard also accepts a session cookie,
// which the login form sets once the operator has typed the token:
//
//  1. GET / (or any read endpoint) from a browser navigation without a
//     valid cookie: 303 to /login?next=/ (counted unauthorized). A script or
//     a curl without the token still gets 401.
//  2. GET /login: the form. POST /login with the token: compared in
//     constant time; wrong: 401 and the form again (counted); right: the
//     cookie and 303 to next (a path on this server only).
//  3. Every later request of that browser carries the cookie, the page's
//     own fetches included.
//
// The cookie holds no session state on the server (nothing a client can
// grow) and not the token itself: it is its expiry and an HMAC-SHA256 of
// that expiry keyed with the token, so it ends after MSGX_HTTP_LOGIN_TTL,
// and changing the token ends every session at once. It is HttpOnly (page
// scripts cannot read it), SameSite=Strict (another site's page cannot
// make the browser send it) and Secure whenever the request came over
// HTTPS: always on a TLS listener, and behind MSGX_HTTP_BEHIND_TLS_PROXY
// when the proxy says https.

// CookieName is the read-session cookie set by POST /login.
const CookieName = "msgx_read"

// loginMaxBody bounds the login form's body.
const loginMaxBody = 4 << 10

//go:embed login.html
var loginHTML string

var loginPage = template.Must(template.New("login").Parse(loginHTML))

// loginCSP allows the login page nothing but its inline style and a form
// posting back here.
const loginCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// sessionMAC is the cookie's signature of its expiry.
func sessionMAC(token string, expiry int64) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("msgx read session until " + strconv.FormatInt(expiry, 10)))
	return m.Sum(nil)
}

// sessionValue is the cookie value of a session ending at expiry.
func sessionValue(token string, expiry time.Time) string {
	e := expiry.Unix()
	return strconv.FormatInt(e, 10) + "." + base64.RawURLEncoding.EncodeToString(sessionMAC(token, e))
}

// validSession reports whether r carries a session cookie for token that
// has not expired at now.
func validSession(r *http.Request, token string, now time.Time) bool {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return false
	}
	exp, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= e {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	return err == nil && hmac.Equal(got, sessionMAC(token, e))
}

// browserNavigation reports whether r is a browser loading a page (which
// can follow a redirect to the form), not a script fetching data.
func browserNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	if m := r.Header.Get("Sec-Fetch-Mode"); m != "" {
		return m == "navigate"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// localPath returns next when it is a path on this server, else "/": the
// form must not redirect to another site.
func localPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") ||
		u.Scheme != "" || u.Host != "" || u.Path == "/login" {
		return "/"
	}
	return next
}

// secure reports whether the browser reached us over HTTPS: directly, or
// through the TLS proxy of MSGX_HTTP_BEHIND_TLS_PROXY, whose
// X-Forwarded-Proto is believed only then (anyone else can write one).
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || (s.cfg.BehindTLSProxy && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}

// serveLogin serves /login and /logout; a wrong token counts against
// client (throttle.go).
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request, client string) {
	token := s.cfg.ReadToken
	if token == "" {
		// Nothing to log in to.
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	switch {
	case r.URL.Path == "/logout" && r.Method == http.MethodPost:
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: s.secure(r)})
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	case r.URL.Path == "/login" && r.Method == http.MethodGet:
		s.loginForm(w, http.StatusOK, localPath(r.URL.Query().Get("next")), "")
	case r.URL.Path == "/login" && r.Method == http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, loginMaxBody)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad login form: "+err.Error(), http.StatusBadRequest)
			return
		}
		next := localPath(r.PostForm.Get("next"))
		// Checked again right before the comparison: the chain's check
		// came before the body, which a client may send slowly on many
		// connections at once.
		if wait := s.throttle.wait(client); wait > 0 {
			s.tooMany(w, r, wait)
			return
		}
		if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(r.PostForm.Get("token"))), []byte(token)) != 1 {
			s.unauthorized.Add(1)
			s.throttle.fail(client)
			s.loginForm(w, http.StatusUnauthorized, next, "That is not the read token (MSGX_HTTP_READ_TOKEN).")
			return
		}
		expiry := s.d.Clock.Now().Add(s.cfg.LoginTTL)
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: sessionValue(token, expiry), Path: "/",
			MaxAge: int(s.cfg.LoginTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(r)})
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *Server) loginForm(w http.ResponseWriter, code int, next, problem string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", loginCSP)
	if code == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="msgx"`)
	}
	w.WriteHeader(code)
	_ = loginPage.Execute(w, struct{ Next, Problem string }{next, problem})
}
