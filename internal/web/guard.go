package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
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
// in constant time). A request that reached the Server's handler chain and
// presents any other Authorization counts against its client address
// (throttle.go): every bearer check, the compatibility endpoint's
// included, feeds the login throttle.
func Authorized(r *http.Request, want string) bool {
	if got, ok := Bearer(r); ok && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 {
		return true
	}
	if r.Header.Get("Authorization") != "" {
		if wrong, ok := r.Context().Value(wrongKey{}).(func()); ok {
			wrong()
		}
	}
	return false
}

// wrongKey carries, in a request's context, the function that counts a
// wrong credential against its client address.
type wrongKey struct{}

// Unauthorized answers 401 with the bearer challenge.
func Unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="msgx"`)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// defaultCSP is the Content-Security-Policy of every response that does
// not set its own (JSON, text, errors, redirects): nothing may load, and
// no other site may frame it. The status page and the login form set
// theirs, with frame-ancestors 'none' as well.
const defaultCSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// hsts is the Strict-Transport-Security of a response over HTTPS: browsers
// that saw it use HTTPS for this host name for a year.
const hsts = "max-age=31536000"

// Handler is the server's handler chain around Deps.Handler:
//
//  1. Security headers on every response (nosniff, no referrer, a CSP
//     that handlers rendering a page replace with theirs; HSTS over HTTPS).
//  2. The bound on concurrent requests (/healthz exempt, so a flood never
//     makes the process look dead).
//  3. The login throttle: a client address that presented too many wrong
//     credentials gets 429 for its next ones, before they are compared.
//  4. With MSGX_HTTP_TLS_CLIENT_CA, /cminmsgs/send only with a verified
//     client certificate (403 without).
//  5. The read token — a bearer header, or the session cookie of the
//     login form (login.go), which the server serves itself. A browser
//     navigation refused for want of it is sent to the form instead of a
//     bare 401.
//  6. The routes. Every request body reports a read cut off by the read
//     timeout, so the slow client is counted whichever handler was
//     reading.
func (s *Server) Handler() http.Handler {
	slots := make(chan struct{}, s.cfg.MaxConcurrent)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reached(r)
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", defaultCSP)
		if s.secure(r) {
			h.Set("Strict-Transport-Security", hsts)
		}
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
		client := clientKey(r, s.cfg.BehindTLSProxy)
		r = r.WithContext(context.WithValue(r.Context(), wrongKey{}, func() { s.throttle.fail(client) }))
		login := r.URL.Path == "/login" || r.URL.Path == "/logout"
		if presentsCredential(r) {
			if wait := s.throttle.wait(client); wait > 0 {
				s.tooMany(w, r, wait)
				return
			}
		}
		if s.cfg.TLSClientCA != "" && r.URL.Path == "/cminmsgs/send" && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			s.noClientCert.Add(1)
			http.Error(w, "client certificate required: /cminmsgs/send needs one signed by MSGX_HTTP_TLS_CLIENT_CA", http.StatusForbidden)
			return
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
		if login {
			s.serveLogin(w, r, client)
			return
		}
		if s.cfg.Pprof && strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			servePprof(w, r)
			return
		}
		s.d.Handler.ServeHTTP(w, r)
	})
}

// presentsCredential reports whether r asks for a credential to be
// compared: an Authorization header, or the login form's token. The
// probes compare nothing.
func presentsCredential(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz":
		return false
	case "/login":
		if r.Method == http.MethodPost {
			return true
		}
	}
	return r.Header.Get("Authorization") != ""
}

// tooMany answers a throttled client 429 with Retry-After: the login form
// with the reason for a browser's login, plain text for the others.
func (s *Server) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After", retryAfter(wait))
	msg := fmt.Sprintf("Too many wrong tokens from your address: try again in %s s.", retryAfter(wait))
	if r.URL.Path == "/login" && s.cfg.ReadToken != "" {
		s.loginForm(w, http.StatusTooManyRequests, localPath(r.URL.Query().Get("next")), msg)
		return
	}
	http.Error(w, msg, http.StatusTooManyRequests)
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
