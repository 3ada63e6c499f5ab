package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// /readyz is open to orchestrators: whatever the errors say, it prints no
// user, database, host, password or message text, only the dependency's
// cause and the component's name and state.
func TestReadyPrintsNoCredentials(t *testing.T) {
	secret := []string{"msgx_ops", "s3cr3t", "aodbinterface", "db.internal", "10.1.2.3", "flight 666"}
	dsnErr := func(cause error) error {
		return fmt.Errorf("failed to connect to `user=msgx_ops database=aodbinterface host=db.internal` password=s3cr3t (10.1.2.3:5432): %w", cause)
	}
	reg := NewRegistry(func() time.Time { return t0 })
	reg.Set("router", Running)
	reg.WatchPause("router", func() (bool, string) { return true, dsnErr(syscall.ECONNREFUSED).Error() })
	reg.Set("ingest", Running)
	reg.Failed("ingest", dsnErr(errors.New("flight 666 rejected")))
	h := &Ready{Registry: reg, Timeout: time.Second, Checks: map[string]Check{
		"postgres": func(context.Context) error { return dsnErr(syscall.ECONNREFUSED) },
		"mysql":    func(context.Context) error { return dsnErr(context.DeadlineExceeded) },
		"kafka":    func(context.Context) error { return dsnErr(errors.New("something else")) },
	}}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 503 {
		t.Fatalf("/readyz %d", rec.Code)
	}
	for _, s := range secret {
		if strings.Contains(string(body), s) {
			t.Errorf("/readyz shows %q:\n%s", s, body)
		}
	}
	for _, want := range []string{"postgres unreachable: connection refused", "mysql unreachable: timeout",
		"kafka unreachable: failed (msgx status shows why)", "component router paused by an outage", "component ingest is restarting"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/readyz lacks %q:\n%s", want, body)
		}
	}
}

// A component's pause flag counts only while it runs: once stopped (its
// instance lost the process lock) or restarting it is that, not paused.
func TestPausedOnlyWhileRunning(t *testing.T) {
	reg := NewRegistry(func() time.Time { return t0 })
	reg.WatchPause("flights", func() (bool, string) { return true, "PostgreSQL unavailable" })
	state := func() (string, string) {
		c := reg.Snapshot()[0]
		return c.Effective(), c.Paused
	}
	for _, tc := range []struct {
		set        func()
		want, why  string
		readyEntry string
	}{
		{func() { reg.Set("flights", Running) }, Paused, "PostgreSQL unavailable", "component flights paused by an outage"},
		{func() { reg.Failed("flights", errors.New("kafka down")) }, Restarting, "", "component flights is restarting"},
		{func() { reg.Set("flights", Stopped) }, Stopped, "", "component flights is stopped"},
	} {
		tc.set()
		if got, why := state(); got != tc.want || why != tc.why {
			t.Errorf("state %q (%q), want %q (%q)", got, why, tc.want, tc.why)
		}
		res := (&Ready{Registry: reg, Timeout: time.Second}).Evaluate(context.Background())
		if res.Ready || len(res.Reasons) != 1 || res.Reasons[0] != tc.readyEntry {
			t.Errorf("readiness %+v, want %q", res, tc.readyEntry)
		}
	}
}

// A halt is msgx's own words about a flight that needs an operator:
// readiness names it (a dependency's error text it never prints), and
// only while the component runs.
func TestHaltNamedInReadiness(t *testing.T) {
	reg := NewRegistry(func() time.Time { return t0 })
	halted := ""
	reg.WatchHalt("flights", func() string { return halted })
	reg.Set("flights", Running)
	ready := func() Result { return (&Ready{Registry: reg, Timeout: time.Second}).Evaluate(context.Background()) }
	if res := ready(); !res.Ready {
		t.Fatalf("not halted: %+v", res)
	}
	halted = "divergence: flight 100 (message #3) is in PostgreSQL flight_schd but not in the flights table"
	c := reg.Snapshot()[0]
	if c.Effective() != Paused || c.Halted != halted {
		t.Fatalf("component %+v", c)
	}
	if res := ready(); res.Ready || len(res.Reasons) != 1 || res.Reasons[0] != "component flights paused: "+halted {
		t.Fatalf("readiness %+v", res)
	}
	reg.Set("flights", Stopped)
	if c := reg.Snapshot()[0]; c.Halted != "" || c.Effective() != Stopped {
		t.Fatalf("a stopped component reports a halt: %+v", c)
	}
}
