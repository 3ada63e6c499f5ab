package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"
)

// Ready answers /readyz: 200 when every dependency really answers and every
// component runs unpaused, 503 otherwise — with the reasons in the body.
// The endpoint is open to orchestrators (no read token), so it prints no
// error texts: a database error names the user, the database or the host,
// and a component's last error may carry anything. Dependencies get a cause
// from a fixed vocabulary (Cause), components their name and state; the
// details are in the logs and in /status.
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
				res.Checks[name] = "unreachable: " + Cause(err)
				res.Reasons = append(res.Reasons, fmt.Sprintf("%s unreachable: %s", name, Cause(err)))
				return
			}
			res.Checks[name] = "ok"
		}()
	}
	wg.Wait()
	for _, c := range h.Registry.Snapshot() {
		switch c.Effective() {
		case Running:
		case Paused:
			res.Ready = false
			if c.Halted != "" {
				res.Reasons = append(res.Reasons, fmt.Sprintf("component %s paused: %s", c.Name, c.Halted))
				continue
			}
			res.Reasons = append(res.Reasons, fmt.Sprintf("component %s paused by an outage", c.Name))
		default:
			res.Ready = false
			res.Reasons = append(res.Reasons, fmt.Sprintf("component %s is %s", c.Name, c.State))
		}
	}
	sort.Strings(res.Reasons)
	return res
}

// Cause names why a dependency did not answer, in words that never carry
// a DSN part or a credential: timeout, connection refused, connection
// lost, host unreachable, name not resolved, refused by the server
// (with its SQLSTATE when it has one), or "failed (msgx status shows why)".
func Cause(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	var sqlState interface{ SQLState() string }
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection lost"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &dnsErr):
		return "name not resolved"
	case errors.As(err, &sqlState):
		return "refused by the server (SQLSTATE " + sqlState.SQLState() + ")"
	case errors.Is(err, sarama.ErrOutOfBrokers):
		return "no broker reachable"
	}
	return "failed (msgx status shows why)"
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
