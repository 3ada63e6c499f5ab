package health

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Ready answers /readyz: 200 when every dependency really answers and every
// component runs unpaused, 503 otherwise — with the reasons in the body.
type Ready struct {
	Registry *Registry
	// Checks probe the dependencies by name ("postgres", "mysql", "kafka").
	Checks map[string]Check
	// Timeout bounds each probe.
	Timeout time.Duration
}

// Result is the readiness verdict.
type Result struct {
	Ready   bool              `json:"ready"`
	Checks  map[string]string `json:"checks"`
	Reasons []string          `json:"reasons,omitempty"`
}

// Evaluate runs the probes concurrently and looks at the components.
func (h *Ready) Evaluate(ctx context.Context) Result {
	res := Result{Ready: true, Checks: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, check := range h.Checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, h.Timeout)
			defer cancel()
			err := check(cctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Ready = false
				res.Checks[name] = "unreachable: " + err.Error()
				res.Reasons = append(res.Reasons, fmt.Sprintf("%s unreachable: %v", name, err))
				return
			}
			res.Checks[name] = "ok"
		}()
	}
	wg.Wait()
	for _, c := range h.Registry.Snapshot() {
		switch {
		case c.State != Running:
			res.Ready = false
			reason := fmt.Sprintf("component %s is %s", c.Name, c.State)
			if c.LastError != "" {
				reason += ": " + c.LastError
			}
			res.Reasons = append(res.Reasons, reason)
		case c.Paused != "":
			res.Ready = false
			res.Reasons = append(res.Reasons, fmt.Sprintf("component %s paused by an outage: %s", c.Name, c.Paused))
		}
	}
	sort.Strings(res.Reasons)
	return res
}

func (h *Ready) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res := h.Evaluate(r.Context())
	w.Header().Set("Content-Type", "application/json")
	if !res.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(res)
}

// Live answers /healthz: the process is alive and serving HTTP.
func Live(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}
