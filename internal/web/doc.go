// Package web is msgx's HTTP server: every daemon role serves its health,
// readiness, metrics, status and read endpoints and (ingest) the
// compatibility endpoint through it. It bounds what a client can hold: the
// time to send a whole request and to take its response, the number of
// requests served at once; it cuts slow clients off and counts them, keeps
// the read endpoints behind an optional bearer token (or the session cookie
// of its login form, for browsers: login.go), limits the wrong tokens a
// client address may try (throttle.go), speaks TLS with certificates it
// reads again when they are renewed and, with a client CA, requires the
// AODB's client certificate on /cminmsgs/send (tls.go), sets the security
// headers of every response, and retries binding its address for a while
// when a previous instance is still closing it.
package web
