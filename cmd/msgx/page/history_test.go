package page

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"msgx/inspect/status"
	"msgx/internal/clock"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// sources are controllable figures for the history.
type sources struct {
	mu  sync.Mutex
	c   Counters
	lag status.Lag
}

func (s *sources) set(f func(*sources)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *sources) deps(c clock.Clock) Deps {
	return Deps{
		Lag:      func(context.Context) status.Lag { s.mu.Lock(); defer s.mu.Unlock(); return s.lag },
		Counters: func() Counters { s.mu.Lock(); defer s.mu.Unlock(); return s.c },
		Clock:    c, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Rand: rand.New(rand.NewPCG(1, 2)),
	}
}

func newHistory(t *testing.T, cfg Config, d Deps) *History {
	t.Helper()
	h, err := New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func ptr[T any](v *T) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprint(*v)
}

// Run samples at once and then every interval on the injected clock, and
// keeps exactly Window / Interval samples, oldest first.
func TestHistoryKeepsTheWindow(t *testing.T) {
	fake := clock.NewFake(t0)
	src := &sources{c: Counters{Decisions: 0, Events: -1}, lag: status.Lag{Inbox: 0}}
	h := newHistory(t, Config{Interval: 5 * time.Second, Window: 30 * time.Second}, src.deps(fake))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	for i := 1; i <= 10; i++ {
		if err := fake.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		src.set(func(s *sources) { s.c.Decisions, s.lag.Inbox = int64(10*i), int64(i) })
		fake.Advance(5 * time.Second)
	}
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	got := h.Samples()
	if len(got) != 6 {
		t.Fatalf("%d samples kept, want 6 (30s / 5s)", len(got))
	}
	for i, s := range got {
		// Samples 5..10 of 0..10: at t0+25s … t0+50s, inbox lag i+5.
		if want := t0.Add(time.Duration(25+5*i) * time.Second); !s.At.Equal(want) {
			t.Errorf("sample %d at %v, want %v", i, s.At, want)
		}
		if ptr(s.InboxLag) != fmt.Sprint(i+5) || ptr(s.DecisionsPerSecond) != "2" || s.EventsPerSecond != nil {
			t.Errorf("sample %d: inbox %s decisions/s %s events/s %s", i, ptr(s.InboxLag), ptr(s.DecisionsPerSecond), ptr(s.EventsPerSecond))
		}
	}
}

// Rates are the counters' increase over the real time between samples; the
// first sample has none, a counter that went back counts from zero, and an
// unknown counter gives no rate.
func TestHistoryRates(t *testing.T) {
	fake := clock.NewFake(t0)
	src := &sources{c: Counters{Decisions: 100, Events: 50}}
	h := newHistory(t, Config{Interval: 5 * time.Second, Window: time.Minute}, src.deps(fake))
	steps := []struct {
		after     time.Duration
		decisions int64
		events    int64
		want      string
	}{
		{0, 100, 50, "null null"},
		{5 * time.Second, 150, 50, "10 0"},
		{10 * time.Second, 170, 80, "2 3"},  // a late sample: over its real 10 s
		{5 * time.Second, 20, 85, "4 1"},    // the router built anew: 20 since
		{5 * time.Second, -1, 90, "null 1"}, // the router stopped (standby)
		{5 * time.Second, 30, 90, "null 0"}, // and back: no previous value
		{5 * time.Second, 45, 90, "3 0"},    //
		{0, 50, 90, "null null"},            // no time passed: no rate
		{2500 * time.Millisecond, 60, 95, "4 2"},
	}
	for i, st := range steps {
		fake.Advance(st.after)
		src.set(func(s *sources) { s.c = Counters{Decisions: st.decisions, Events: st.events} })
		h.Sample(context.Background())
		s := h.Samples()[i]
		if got := ptr(s.DecisionsPerSecond) + " " + ptr(s.EventsPerSecond); got != st.want {
			t.Errorf("step %d: rates %s, want %s", i, got, st.want)
		}
	}
}

// Latencies: the quantiles of what was observed since the previous sample,
// none when nothing was; a busy interval keeps at most latencyKept
// observations, chosen uniformly, and still counts them all.
func TestHistoryLatency(t *testing.T) {
	fake := clock.NewFake(t0)
	src := &sources{c: Counters{Decisions: -1, Events: -1}}
	h := newHistory(t, Config{Interval: 5 * time.Second, Window: time.Minute}, src.deps(fake))
	for i := 100; i >= 1; i-- {
		h.ObserveEndToEnd(time.Duration(i) * time.Millisecond)
	}
	h.ObserveDecision(7 * time.Millisecond)
	h.Sample(context.Background())
	s := h.Samples()[0]
	if s.EndToEnd == nil || *s.EndToEnd != (Latency{Count: 100, P50: 0.050, P99: 0.099, Max: 0.100}) {
		t.Errorf("end-to-end %+v, want 100 observations, p50 50ms, p99 99ms, max 100ms", s.EndToEnd)
	}
	if s.Decision == nil || *s.Decision != (Latency{Count: 1, P50: 0.007, P99: 0.007, Max: 0.007}) {
		t.Errorf("decision %+v", s.Decision)
	}

	fake.Advance(5 * time.Second)
	h.Sample(context.Background())
	if s := h.Samples()[1]; s.EndToEnd != nil || s.Decision != nil {
		t.Errorf("an interval without observations: %+v %+v, want null", s.EndToEnd, s.Decision)
	}

	// 100 000 observations, uniform over 0..100 s: p50 ≈ 50 s, p99 ≈ 99 s.
	for i := range 100000 {
		h.ObserveEndToEnd(time.Duration(i) * time.Millisecond)
	}
	if n := len(h.e2e.kept); n != latencyKept {
		t.Fatalf("%d observations kept, want %d", n, latencyKept)
	}
	fake.Advance(5 * time.Second)
	h.Sample(context.Background())
	e := h.Samples()[2].EndToEnd
	if e == nil || e.Count != 100000 || math.Abs(e.P50-50) > 5 || math.Abs(e.P99-99) > 2 || e.Max != 99.999 {
		t.Errorf("busy interval: %+v, want 100000 observations, p50 ≈ 50 s, p99 ≈ 99 s, max 99.999 s", e)
	}
}

// Lag: the inbox lag, each group's lag summed over its topics, and what
// could not be read left out (null or missing) and said.
func TestHistoryLag(t *testing.T) {
	fake := clock.NewFake(t0)
	src := &sources{c: Counters{Decisions: -1, Events: -1}, lag: status.Lag{Inbox: 12, Groups: []status.GroupLag{
		{Group: "msgx-router", Topic: "msgx.inbox", Lag: 3},
		{Group: "msgx-flights", Topic: "msgx.flight-transitions", Lag: 4},
		{Group: "msgx-flights", Topic: "msgx-flights-loop", Lag: 1},
		{Group: "msgx-refdata", Topic: "msgx.refdata-transitions", Lag: 2},
		{Group: "msgx-refdata", Topic: "other", Lag: -1, Error: "UNKNOWN_TOPIC_OR_PARTITION"},
	}}}
	h := newHistory(t, Config{Interval: time.Second, Window: time.Minute}, src.deps(fake))
	h.Sample(context.Background())
	long := strings.Repeat("é", 300)
	src.set(func(s *sources) { s.lag = status.Lag{Inbox: -1, Errors: []string{long}} })
	fake.Advance(time.Second)
	h.Sample(context.Background())

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/status/history", nil))
	var resp struct {
		IntervalSeconds float64 `json:"intervalSeconds"`
		WindowSeconds   float64 `json:"windowSeconds"`
		Samples         []map[string]any
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if resp.IntervalSeconds != 1 || resp.WindowSeconds != 60 || len(resp.Samples) != 2 {
		t.Fatalf("history %s", rec.Body)
	}
	first, second := resp.Samples[0], resp.Samples[1]
	if fmt.Sprint(first["inboxLag"], first["groupLag"]) != "12 map[msgx-flights:5 msgx-router:3]" {
		t.Errorf("first sample %v", first)
	}
	if second["inboxLag"] != nil || fmt.Sprint(second["groupLag"]) != "map[]" {
		t.Errorf("second sample %v: want the unknown lag null", second)
	}
	errs, _ := second["errors"].([]any)
	if len(errs) != 1 || len([]rune(errs[0].(string))) != errorChars {
		t.Errorf("errors %v: want the one error clipped to %d characters", errs, errorChars)
	}
	for _, k := range []string{"at", "decisionsPerSecond", "eventsPerSecond", "endToEnd", "decision"} {
		if _, ok := first[k]; !ok {
			t.Errorf("sample has no %q: %v", k, first)
		}
	}
}

func TestHistoryConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Interval: 5 * time.Second, Window: 15 * time.Minute}, ""},
		{Config{Interval: 0, Window: time.Minute}, "MSGX_PAGE_SAMPLE_INTERVAL"},
		{Config{Interval: time.Minute, Window: time.Second}, "MSGX_PAGE_WINDOW"},
		{Config{Interval: 100 * time.Millisecond, Window: 24 * time.Hour}, "more than 10000 samples"},
	} {
		err := tc.cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New(Config{Interval: time.Second, Window: time.Minute}, Deps{}); err == nil {
		t.Error("New without deps")
	}
}
