package metric

import (
	"errors"
	"testing"
	"time"

	"msgx/emitters/event"
	"msgx/internal/health"
	"msgx/internal/web"
	"msgx/processors/router"
)

// values returns the samples of a metric family by their label values.
func values(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				key += l.GetValue() + "/"
			}
			out[key] = s.GetGauge().GetValue() + s.GetCounter().GetValue() // one of them is nil: 0
		}
	}
	return out
}

// A component stopped after losing its lock is exported as stopped, not
// paused, even though its last run left its pause flag set; a running one
// waiting for PostgreSQL is paused.
func TestComponentStateIsExact(t *testing.T) {
	reg := health.NewRegistry(func() time.Time { return time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC) })
	reg.Set("flights", health.Running)
	reg.WatchPause("flights", func() (bool, string) { return true, "PostgreSQL unavailable" })
	reg.Set("router", health.Running)
	reg.WatchPause("router", func() (bool, string) { return true, "postgres unavailable" })
	reg.Set("flights", health.Stopped)
	reg.Set("ingest", health.Running)
	reg.Failed("ingest", errors.New("lock lost"))
	m := New()
	m.SetSources(Sources{Health: reg, HTTP: func() web.Stats { return web.Stats{SlowClients: 3, Busy: 2, Unauthorized: 1} }})

	paused := values(t, m, "msgx_component_paused")
	if paused["flights/"] != 0 || paused["router/"] != 1 || paused["ingest/"] != 0 {
		t.Errorf("msgx_component_paused %v", paused)
	}
	state := values(t, m, "msgx_component_state")
	for key, want := range map[string]float64{"flights/stopped/": 1, "flights/paused/": 0, "router/paused/": 1, "router/running/": 0,
		"ingest/restarting/": 1, "ingest/running/": 0} {
		if state[key] != want {
			t.Errorf("msgx_component_state %s = %v, want %v", key, state[key], want)
		}
	}
	refused := values(t, m, "msgx_http_refused_total")
	if refused["slow/"] != 3 || refused["busy/"] != 2 || refused["unauthorized/"] != 1 {
		t.Errorf("msgx_http_refused_total %v", refused)
	}
}

// The router's batch figures are exported: their ratio is the average
// batch size.
func TestRouterBatchesExported(t *testing.T) {
	m := New()
	m.SetSources(Sources{Router: func() router.Stats { return router.Stats{Batches: 3, Batched: 1200} }})
	if got := values(t, m, "msgx_router_batches_total")[""]; got != 3 {
		t.Errorf("msgx_router_batches_total = %v, want 3", got)
	}
	if got := values(t, m, "msgx_router_batched_messages_total")[""]; got != 1200 {
		t.Errorf("msgx_router_batched_messages_total = %v, want 1200", got)
	}
}

// The exactly-once publisher's transactions, fencing and position are
// exported; both transaction results exist before the first abort.
func TestPublisherExported(t *testing.T) {
	m := New()
	st := event.Stats{ExactlyOnce: true, Transactions: map[string]int64{"committed": 7}, Position: 42, Reconciled: 3, Deduplicated: 2,
		Published: map[string]int64{"msgx.msg": 10}}
	m.SetSources(Sources{Publisher: func() event.Stats { return st }})
	if got := values(t, m, "msgx_publisher_transactions_total"); got["committed/"] != 7 || got["aborted/"] != 0 || len(got) != 2 {
		t.Errorf("msgx_publisher_transactions_total %v", got)
	}
	for name, want := range map[string]float64{"msgx_publisher_fenced": 0, "msgx_publisher_exactly_once": 1, "msgx_publisher_position": 42,
		"msgx_publisher_reconciled_total": 3, "msgx_publisher_deduplicated_total": 2} {
		if got, ok := values(t, m, name)[""]; !ok || got != want {
			t.Errorf("%s = %v (exported %v), want %v", name, got, ok, want)
		}
	}
	st.Fenced = "fenced: …"
	if got := values(t, m, "msgx_publisher_fenced")[""]; got != 1 {
		t.Errorf("msgx_publisher_fenced = %v while fenced", got)
	}
	st = event.Stats{Published: map[string]int64{}}
	if got := values(t, m, "msgx_publisher_transactions_total"); len(got) != 0 {
		t.Errorf("at-least-once publishing exports transactions %v", got)
	}
	if got, ok := values(t, m, "msgx_publisher_exactly_once")[""]; !ok || got != 0 {
		t.Errorf("msgx_publisher_exactly_once = %v (%v) at least once", got, ok)
	}
}
