package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"msgx/internal/health"
	"msgx/internal/retry"
)

// startGate serves /healthz, /readyz and /metrics from the moment the
// daemon starts, before its dependencies answer: while start-up waits (a
// database or Kafka unreachable, a migration), /readyz answers 503 naming
// the step and the dependency it waits for, instead of refusing
// connections; once started, the real readiness and metrics take over
// (open), or the refusal's (refuse).
type startGate struct {
	mu      sync.Mutex
	waiting string       // the step start-up waits at, with its cause
	ready   http.Handler // nil while starting
	metrics http.Handler
}

func (g *startGate) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", health.Live)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if h := g.handler(func() http.Handler { return g.ready }); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		g.mu.Lock()
		reason := "starting"
		if g.waiting != "" {
			reason += ": " + g.waiting
		}
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(health.Result{Checks: map[string]string{}, Reasons: []string{reason}})
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if h := g.handler(func() http.Handler { return g.metrics }); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	})
}

// wrap answers every other request 503 (Retry-After) while the daemon
// starts: a client that reaches the port early — the AODB posting to
// /cminmsgs/send — must be told to come back, not that the path does not
// exist.
func (g *startGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
		default:
			if g.handler(func() http.Handler { return g.ready }) == nil {
				w.Header().Set("Retry-After", "5")
				http.Error(w, "msgx is starting", http.StatusServiceUnavailable)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (g *startGate) handler(get func() http.Handler) http.Handler {
	g.mu.Lock()
	defer g.mu.Unlock()
	return get()
}

// wait records that start-up waits at step for err's dependency. The
// reason is open to orchestrators: it names the dependency and the kind
// of failure (health.Cause), never a DSN or a credential; the log has the
// whole error.
func (g *startGate) wait(step string, err error) {
	dep := retry.Dependency(err)
	if dep == "" {
		dep = "a dependency"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting = fmt.Sprintf("%s: waiting for %s (%s)", step, dep, health.Cause(err))
}

// open hands /readyz and /metrics to the started daemon's handlers.
func (g *startGate) open(ready, metrics http.Handler) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ready, g.metrics, g.waiting = ready, metrics, ""
}
