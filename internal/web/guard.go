package web

import (
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
)

// Open reports whether a request may pass without MSGX_HTTP_READ_TOKEN: the
// orchestrators' probes /healthz and /readyz (which print no credentials
// and no message data), the compatibility endpoint, which has its own
// MSGX_HTTP_TOKEN, and the login form (/login, /logout), which checks the
// read token itself. Every other route, including any added later, is a
// read endpoint and needs the read token when one is set.
func Open(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/cminmsgs/send", "/login", "/logout":
		return true
	}
	return false
}

// Bearer returns the token of an "Authorization: Bearer <token>" header.
// The scheme is case-insensitive (RFC 7235 §2.1) and may be followed by
// more than one space.
func Bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Authorized reports whether r carries want as its bearer token (compared
// in constant time).
func Authorized(r *http.Request, want string) bool {
	got, ok := Bearer(r)
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// Unauthorized answers 401 with the bearer challenge.
func Unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="msgx"`)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// Handler is the server's handler chain around Deps.Handler: the bound on
// concurrent requests (/healthz exempt, so a flood never makes the process
// look dead), then the read token — a bearer header, or the session cookie
// of the login form (login.go), which the server serves itself — then the
// routes. A browser navigation refused for want of the token is sent to the
// form instead of a bare 401. Every request body reports a read cut off by
// the read timeout, so the slow client is counted whichever handler was
// reading.
func (s *Server) Handler() http.Handler {
	slots := make(chan struct{}, s.cfg.MaxConcurrent)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reached(r)
		if r.URL.Path != "/healthz" {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			default:
				s.busy.Add(1)
				w.Header().Set("Retry-After", "1")
				http.Error(w, "busy: too many requests at once, retry", http.StatusServiceUnavailable)
				return
			}
		}
		if s.cfg.ReadToken != "" && !Open(r) && !Authorized(r, s.cfg.ReadToken) &&
			!validSession(r, s.cfg.ReadToken, s.d.Clock.Now()) {
			s.unauthorized.Add(1)
			if browserNavigation(r) {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			Unauthorized(w)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &timedBody{ReadCloser: r.Body, slow: &s.slow}
		}
		if r.URL.Path == "/login" || r.URL.Path == "/logout" {
			s.serveLogin(w, r)
			return
		}
		if s.cfg.Pprof && strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			servePprof(w, r)
			return
		}
		s.d.Handler.ServeHTTP(w, r)
	})
}

// timedBody counts, once, a body read that failed because the client did
// not send the body within the read timeout.
type timedBody struct {
	io.ReadCloser
	slow    *atomic.Int64
	counted bool
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.counted && IsTimeout(err) {
		b.counted = true
		b.slow.Add(1)
	}
	return n, err
}

// IsTimeout reports whether err is a read cut off by a deadline (the
// server's read timeout): the client was too slow.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
