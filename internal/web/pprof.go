package web

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// servePprof serves Go's profiler (MSGX_PPROF): /debug/pprof/ lists the
// profiles; profile (CPU, ?seconds=N), trace, cmdline and symbol are the
// special ones, every other name a runtime profile (heap, goroutine,
// allocs, block, mutex, threadcreate). A CPU profile or trace longer than
// MSGX_HTTP_WRITE_TIMEOUT is cut off.
func servePprof(w http.ResponseWriter, r *http.Request) {
	// The index page has an inline style.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	switch strings.TrimPrefix(r.URL.Path, "/debug/pprof/") {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r)
	}
}
