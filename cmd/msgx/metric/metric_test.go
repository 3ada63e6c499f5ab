package metric

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"msgx/emitters/backfill"
	"msgx/emitters/event"
	"msgx/emitters/schd"
	"msgx/ingest"
	"msgx/inspect/status"
	"msgx/internal/health"
	"msgx/internal/web"
	"msgx/processors/applier"
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

// The HTTP surface's security figures: refusals by the throttle and for
// want of a client certificate, wrong tokens, throttled addresses, and the
// certificate's expiry, which is exported only with TLS.
func TestHTTPSecurityExported(t *testing.T) {
	notAfter := time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC)
	st := web.Stats{Throttled: 7, NoClientCert: 2, WrongCredentials: 11, ThrottledClients: 3, TLSNotAfter: notAfter}
	m := New()
	m.SetSources(Sources{HTTP: func() web.Stats { return st }})
	refused := values(t, m, "msgx_http_refused_total")
	if refused["throttled/"] != 7 || refused["no-client-cert/"] != 2 {
		t.Errorf("msgx_http_refused_total %v", refused)
	}
	if got := values(t, m, "msgx_http_wrong_credentials_total")[""]; got != 11 {
		t.Errorf("msgx_http_wrong_credentials_total = %v", got)
	}
	if got := values(t, m, "msgx_http_throttled_clients")[""]; got != 3 {
		t.Errorf("msgx_http_throttled_clients = %v", got)
	}
	if got := values(t, m, "msgx_http_tls_certificate_expiry_timestamp_seconds")[""]; got != float64(notAfter.Unix()) {
		t.Errorf("msgx_http_tls_certificate_expiry_timestamp_seconds = %v", got)
	}
	st.TLSNotAfter = time.Time{}
	if got := values(t, m, "msgx_http_tls_certificate_expiry_timestamp_seconds"); len(got) != 0 {
		t.Errorf("certificate expiry exported without TLS: %v", got)
	}
}

// The figures the alerting rules of deploy/prometheus need: the halted
// flag, the status thresholds, the report's unread age, max ID, overdue
// marks, group members and unreadable sources, DEAD classes and abandoned reasons exported
// with 0 before the first one, and the binding state.
func TestFiguresForTheAlertingRules(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	reg := health.NewRegistry(func() time.Time { return now })
	reg.Set("flights", health.Running)
	reg.WatchHalt("flights", func() string {
		return "divergence: flight 100 (message #3) is in PostgreSQL flight_schd but not in the flights table"
	})
	reg.Set("refdata", health.Running)
	reg.WatchHalt("refdata", func() string { return "" })
	th := status.Config{MaxCommitDelay: 5 * time.Minute, OldestUnfinishedAge: 4 * time.Minute, InboxLag: 10000,
		UnreadAge: 3 * time.Minute, GroupLag: 1000, BackfillOverdue: 720 * time.Hour, RequestTimeout: 10 * time.Minute}
	rep := status.Report{
		Inbox:    status.InboxStatus{MaxID: 42, Lag: 7, OldestUnread: &status.UnreadRow{MsgID: 36, AgeSeconds: 95}, MaxIDError: "mysql unreachable"},
		Messages: status.MessageStatus{DeadByClass: map[string]int64{"PROTOCOL": 2}},
		Backfill: status.BackfillStatus{Overdue: 3, Abandoned: map[string]int64{}},
		Groups: []status.GroupLag{{Group: "msgx-router", Topic: "msgx.inbox", Members: 1},
			{Group: "msgx-flights", Topic: "msgx.flight-transitions", Members: 0},
			{Group: "msgx-flights", Topic: "msgx.flight-transitions", Members: 0, Error: "unreadable", Lag: -1}},
	}
	m := New()
	m.SetSources(Sources{Health: reg, Thresholds: &th, ReportTTL: time.Hour,
		Report: func(context.Context) (status.Report, error) { return rep, nil }})

	for name, want := range map[string]map[string]float64{
		"msgx_component_halted": {"flights/": 1, "refdata/": 0},
		"msgx_status_threshold": {"MSGX_MAX_COMMIT_DELAY/": 300, "MSGX_STATUS_UNFINISHED_AGE/": 240, "MSGX_STATUS_INBOX_LAG/": 10000,
			"MSGX_STATUS_UNREAD_AGE/": 180, "MSGX_STATUS_GROUP_LAG/": 1000, "MSGX_OVERDUE_BACKFILL/": 2592000, "MSGX_REQUEST_TIMEOUT/": 600},
		"msgx_inbox_oldest_unread_seconds": {"": 95},
		"msgx_inbox_max_id":                {"": 42},
		"msgx_backfill_overdue":            {"": 3},
		"msgx_consumer_group_members":      {"msgx-router/": 1, "msgx-flights/": 0},
		"msgx_dead_messages":               {"MALFORMED/": 0, "PROTOCOL/": 2, "CODEC_ERROR/": 0, "EXHAUSTED/": 0},
		"msgx_backfill_abandoned":          {"MISSING_ROW/": 0, "TRANSIENT_DEADLINE/": 0},
		"msgx_kafka_binding_refused":       {"": 0},
		"msgx_status_source_ok":            {"postgres/": 1, "mysql/": 0, "kafka/": 1},
	} {
		got := values(t, m, name)
		if len(got) != len(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
			continue
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s{%s} = %v (present %v), want %v", name, k, g, ok, v)
			}
		}
	}

	// A refusing process exports the refusal.
	fams, err := Refused().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fams {
		if f.GetName() == "msgx_kafka_binding_refused" {
			found = f.GetMetric()[0].GetGauge().GetValue() == 1
		}
	}
	if !found {
		t.Error("Refused() does not export msgx_kafka_binding_refused 1")
	}
}

// The requests section: counts by kind and state, the age of the open
// request of each kind, the newest request's state, and the EROR answers
// paired with nothing; every series present before the first request, none
// when the section could not be read.
func TestRequestsExported(t *testing.T) {
	rep := status.Report{Requests: status.RequestStatus{
		ByKind:        map[string]map[string]int64{"RQFD": {"FAILED": 1, "SENT": 1}, "RQRD": {"DONE": 3}},
		Open:          []status.RequestSummary{{ID: 9, Kind: "RQFD", State: "SENT", AgeSeconds: 700}},
		Latest:        map[string]status.RequestSummary{"RQFD": {ID: 9, Kind: "RQFD", State: "SENT"}, "RQRD": {ID: 4, Kind: "RQRD", State: "FAILED"}},
		UnpairedErors: 2,
	}}
	m := New()
	m.SetSources(Sources{ReportTTL: time.Hour, Report: func(context.Context) (status.Report, error) { return rep, nil }})
	got := values(t, m, "msgx_requests")
	if len(got) != 10 || got["RQFD/FAILED/"] != 1 || got["RQFD/SENT/"] != 1 || got["RQRD/DONE/"] != 3 || got["RQRD/PENDING/"] != 0 {
		t.Errorf("msgx_requests %v", got)
	}
	if got := values(t, m, "msgx_request_oldest_open_seconds"); len(got) != 2 || got["RQFD/"] != 700 || got["RQRD/"] != 0 {
		t.Errorf("msgx_request_oldest_open_seconds %v", got)
	}
	latest := values(t, m, "msgx_request_latest")
	if len(latest) != 10 || latest["RQFD/SENT/"] != 1 || latest["RQRD/FAILED/"] != 1 || latest["RQFD/FAILED/"] != 0 {
		t.Errorf("msgx_request_latest %v", latest)
	}
	if got := values(t, m, "msgx_request_unpaired_erors"); got[""] != 2 {
		t.Errorf("msgx_request_unpaired_erors %v", got)
	}

	m = New()
	m.SetSources(Sources{ReportTTL: time.Hour, Report: func(context.Context) (status.Report, error) {
		return status.Report{Requests: status.RequestStatus{UnpairedErors: -1, Errors: []string{"counting requests: refused"}}}, nil
	}})
	for _, name := range []string{"msgx_requests", "msgx_request_latest", "msgx_request_unpaired_erors"} {
		if got := values(t, m, name); len(got) != 0 {
			t.Errorf("%s exported from an unreadable section: %v", name, got)
		}
	}
	if got := values(t, m, "msgx_status_source_ok"); got["postgres/"] != 0 {
		t.Errorf("msgx_status_source_ok %v with the requests unreadable", got)
	}
}

// The catalogue (docs/reference.md's metrics) is the registry: every
// metric New's registry describes is in it, and every one a fully fed
// collector exports has the catalogue's type and labels.
func TestCatalogueIsTheRegistry(t *testing.T) {
	cat := map[string]Info{}
	for _, i := range Catalogue() {
		cat[i.Name] = i
	}
	m := New()
	described := make(chan *prometheus.Desc, 1000)
	m.Registry.Describe(described)
	close(described)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	n := 0
	for d := range described {
		name := fqName.FindStringSubmatch(d.String())[1]
		if strings.HasPrefix(name, "msgx_") {
			n++
			if _, ok := cat[name]; !ok {
				t.Errorf("%s is registered but not in the catalogue", name)
			}
		}
	}
	if n != len(cat) {
		t.Errorf("the registry describes %d msgx metrics, the catalogue lists %d", n, len(cat))
	}

	reg := health.NewRegistry(time.Now)
	reg.Set("router", health.Running)
	reg.WatchHalt("router", func() string { return "" })
	m.SetSources(Sources{
		Ingest: func() ingest.Stats { return ingest.Stats{} }, Router: func() router.Stats { return router.Stats{} },
		Flights: func() applier.Stats { return applier.Stats{} }, Refdata: func() applier.Stats { return applier.Stats{} },
		Backfill: func() backfill.Stats { return backfill.Stats{} }, Schd: func() schd.Stats { return schd.Stats{} },
		Publisher: func() event.Stats { return event.Stats{ExactlyOnce: true} }, HTTP: func() web.Stats { return web.Stats{} },
		Health: reg, Thresholds: &status.Config{}, ReportTTL: time.Hour,
		Report: func(context.Context) (status.Report, error) {
			return status.Report{Groups: []status.GroupLag{{Group: "g", Topic: "t"}}}, nil
		},
	})
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range fams {
		info, ok := cat[f.GetName()]
		if !ok {
			continue
		}
		seen++
		if got := strings.ToLower(f.GetType().String()); got != info.Type {
			t.Errorf("%s is exported as a %s, the catalogue says %s", f.GetName(), got, info.Type)
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		if !slices.Equal(labels, slices.Sorted(slices.Values(info.Labels))) {
			t.Errorf("%s has the labels %v, the catalogue says %v", f.GetName(), labels, info.Labels)
		}
	}
	t.Logf("%d of %d cataloged metrics exported with the catalogue's type and labels", seen, len(cat))
}
