package page

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"msgx/inspect/status"
	"msgx/internal/clock"
	"msgx/internal/need"
)

// Config sizes the history of the status page.
type Config struct {
	// Interval is the time between two samples (the resolution of the
	// charts).
	Interval time.Duration `env:"MSGX_PAGE_SAMPLE_INTERVAL" envDefault:"5s"`
	// Window is how far back the history reaches: Window / Interval samples
	// are kept, in memory, at most MaxSamples (10,000).
	Window time.Duration `env:"MSGX_PAGE_WINDOW" envDefault:"15m"`
}

// MaxSamples bounds the history's length whatever the configuration.
const MaxSamples = 10000

// Validate checks the values; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if c.Interval < 100*time.Millisecond {
		errs = append(errs, errors.New("MSGX_PAGE_SAMPLE_INTERVAL: must be at least 100ms"))
	}
	if c.Window < c.Interval {
		errs = append(errs, errors.New("MSGX_PAGE_WINDOW: must be at least MSGX_PAGE_SAMPLE_INTERVAL"))
	} else if c.Interval > 0 && c.Window/c.Interval > MaxSamples {
		errs = append(errs, fmt.Errorf("MSGX_PAGE_WINDOW=%s / MSGX_PAGE_SAMPLE_INTERVAL=%s: more than %d samples", c.Window, c.Interval, MaxSamples))
	}
	return errors.Join(errs...)
}

// Counters are running totals of this process; -1 for one it does not
// keep (the component does not run here, or not yet).
type Counters struct {
	// Decisions are the router's decisions (msgx_messages_decided_total).
	Decisions int64
	// Events are the events produced to Kafka
	// (msgx_events_emitted_total).
	Events int64
}

// Deps are the history's sources.
type Deps struct {
	// Lag reads the inbox and consumer lag (status.Collector.Lag).
	Lag func(ctx context.Context) status.Lag
	// Counters reads the running totals.
	Counters func() Counters
	Clock    clock.Clock
	Log      *slog.Logger
	// Rand picks the observations a full latency window keeps; nil: a
	// random seed.
	Rand *rand.Rand
}

// Sample is the figures at one instant; a figure that could not be read is
// null (never a made-up zero).
type Sample struct {
	At time.Time `json:"at"`
	// InboxLag is MAX(CMINMSGS_ID) − W.
	InboxLag *int64 `json:"inboxLag"`
	// GroupLag is each goka group's lag summed over its input topics; a
	// group with a topic that could not be read is missing.
	GroupLag map[string]int64 `json:"groupLag"`
	// DecisionsPerSecond and EventsPerSecond are the rates since the
	// previous sample.
	DecisionsPerSecond *float64 `json:"decisionsPerSecond"`
	EventsPerSecond    *float64 `json:"eventsPerSecond"`
	// EndToEnd (inbox enqueue to msg event acknowledged) and Decision
	// (delivery to the router to its decision) are the latencies observed
	// since the previous sample; null when none was.
	EndToEnd *Latency `json:"endToEnd"`
	Decision *Latency `json:"decision"`
	// Errors say what could not be read.
	Errors []string `json:"errors,omitempty"`
}

// Latency summarises the latencies of one interval.
type Latency struct {
	// Count is how many were observed; the quantiles are over at most
	// latencyKept of them, chosen uniformly (reservoir sampling).
	Count int64   `json:"count"`
	P50   float64 `json:"p50Seconds"`
	P99   float64 `json:"p99Seconds"`
	Max   float64 `json:"maxSeconds"`
}

// latencyKept bounds the observations held per interval and kind.
const latencyKept = 1024

// errorChars caps an error text in a sample.
const errorChars = 200

// reservoir holds a uniform sample of at most latencyKept observations.
type reservoir struct {
	n    int64
	kept []time.Duration
	max  time.Duration
}

func (r *reservoir) add(d time.Duration, rnd *rand.Rand) {
	r.n++
	r.max = max(r.max, d)
	if len(r.kept) < latencyKept {
		r.kept = append(r.kept, d)
		return
	}
	// Algorithm R: the n-th observation replaces a kept one with
	// probability latencyKept/n.
	if i := rnd.Int64N(r.n); i < latencyKept {
		r.kept[i] = d
	}
}

// summary returns the interval's latency, nil when nothing was observed.
func (r *reservoir) summary() *Latency {
	if r.n == 0 {
		return nil
	}
	v := slices.Clone(r.kept)
	slices.Sort(v)
	return &Latency{Count: r.n, P50: quantile(v, 0.50).Seconds(), P99: quantile(v, 0.99).Seconds(), Max: r.max.Seconds()}
}

// quantile is the nearest-rank q-quantile of sorted, non-empty v.
func quantile(v []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(v))+0.999999999) - 1
	return v[min(max(i, 0), len(v)-1)]
}

// History samples the figures every Interval and keeps the last Window of
// them: the data behind the status page's charts (GET /status/history).
// It is in memory only and starts empty with the process.
type History struct {
	cfg Config
	d   Deps
	log *slog.Logger

	omu           sync.Mutex // observations of the current interval
	rnd           *rand.Rand
	e2e, decision reservoir

	mu      sync.Mutex // the samples
	samples []Sample   // ring of cap samples; next is the oldest once full
	next    int

	// The previous sample's counters (touched by Run's goroutine only).
	prevAt         time.Time
	prev           Counters
	havePrevCounts bool
}

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error {
	return need.Check("page", need.Has(d.Lag != nil, "lag"), need.Has(d.Counters != nil, "counters"), need.Clock(d.Clock), need.Log(d.Log))
}

// New checks cfg and deps and returns the history; Run fills it.
func New(cfg Config, d Deps) (*History, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	rnd := d.Rand
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	n := int(cfg.Window / cfg.Interval)
	return &History{cfg: cfg, d: d, log: d.Log.With("component", "page"), rnd: rnd, samples: make([]Sample, 0, n)}, nil
}

// ObserveDecision takes one router decision latency (metric.Observer).
func (h *History) ObserveDecision(d time.Duration) {
	h.omu.Lock()
	h.decision.add(d, h.rnd)
	h.omu.Unlock()
}

// ObserveEndToEnd takes one end-to-end latency (metric.Observer).
func (h *History) ObserveEndToEnd(d time.Duration) {
	h.omu.Lock()
	h.e2e.add(d, h.rnd)
	h.omu.Unlock()
}

// Run takes a sample at once and then every Interval until ctx ends.
func (h *History) Run(ctx context.Context) error {
	for {
		h.Sample(ctx)
		if err := clock.Sleep(ctx, h.d.Clock, h.cfg.Interval); err != nil {
			return nil
		}
	}
}

// Sample takes one sample now. Run calls it; it must not be called
// concurrently.
func (h *History) Sample(ctx context.Context) {
	now := h.d.Clock.Now()
	s := Sample{At: now}

	// Rates: the counters' increase since the previous sample. A counter
	// below its previous value was reset (the component was built anew
	// after the process lock was lost and taken again): its whole value is
	// the increase since then, as Prometheus' rate() counts it.
	c := h.d.Counters()
	if dt := now.Sub(h.prevAt).Seconds(); h.havePrevCounts && dt > 0 {
		s.DecisionsPerSecond = rate(h.prev.Decisions, c.Decisions, dt)
		s.EventsPerSecond = rate(h.prev.Events, c.Events, dt)
	}
	h.prevAt, h.prev, h.havePrevCounts = now, c, true

	h.omu.Lock()
	s.EndToEnd, s.Decision = h.e2e.summary(), h.decision.summary()
	h.e2e, h.decision = reservoir{kept: h.e2e.kept[:0]}, reservoir{kept: h.decision.kept[:0]}
	h.omu.Unlock()

	lag := h.d.Lag(ctx)
	if ctx.Err() != nil {
		return // stopping: what was read may be cut short
	}
	if lag.Inbox >= 0 {
		v := lag.Inbox
		s.InboxLag = &v
	}
	s.GroupLag = groupLag(lag.Groups)
	for _, e := range lag.Errors {
		s.Errors = append(s.Errors, clip(e, errorChars))
	}
	if len(s.Errors) > 0 {
		h.log.Debug("status page sample incomplete", "errors", s.Errors)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) < cap(h.samples) {
		h.samples = append(h.samples, s)
		return
	}
	h.samples[h.next] = s
	h.next = (h.next + 1) % len(h.samples)
}

// rate is the per-second increase from prev to cur over dt seconds; nil
// when either is unknown.
func rate(prev, cur int64, dt float64) *float64 {
	if prev < 0 || cur < 0 {
		return nil
	}
	inc := cur - prev
	if inc < 0 {
		inc = cur
	}
	r := float64(inc) / dt
	return &r
}

// groupLag sums each group's lag over its topics, leaving out a group of
// which a topic could not be read.
func groupLag(rows []status.GroupLag) map[string]int64 {
	out := map[string]int64{}
	bad := map[string]bool{}
	for _, g := range rows {
		if g.Error != "" || g.Lag < 0 {
			bad[g.Group] = true
			continue
		}
		out[g.Group] += g.Lag
	}
	for g := range bad {
		delete(out, g)
	}
	return out
}

// Samples returns the kept samples, oldest first.
func (h *History) Samples() []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Sample, 0, len(h.samples))
	out = append(out, h.samples[h.next:]...)
	return append(out, h.samples[:h.next]...)
}

// Response is the JSON of GET /status/history.
type Response struct {
	IntervalSeconds float64  `json:"intervalSeconds"`
	WindowSeconds   float64  `json:"windowSeconds"`
	Samples         []Sample `json:"samples"`
}

// ServeHTTP answers GET /status/history.
func (h *History) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(Response{
		IntervalSeconds: h.cfg.Interval.Seconds(), WindowSeconds: h.cfg.Window.Seconds(), Samples: h.Samples(),
	})
}

// clip shortens s to at most n characters without splitting one.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
