package flights

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/retry"
	"msgx/sink"
	"msgx/tables/flight"
)

// BaseGroup is the processor's goka group name before MSGX_KAFKA_PREFIX:
// Config.Group is the group a deployment runs; its table (key FLID) is
// Config.Table and derived transitions (MAFL links, cascades) travel on its
// loop topic Config.LoopTopic (msgx-flights-table and msgx-flights-loop
// without a prefix).
const BaseGroup = "msgx-flights"

// Config configures the flights processor.
type Config struct {
	// TransitionTopic is the processor's input, the router's flight
	// transitions (key FLID; router.Config.FlightTopic reads the same
	// variable).
	TransitionTopic string `env:"MSGX_TOPIC_FLIGHT_TRANSITIONS,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.flight-transitions"`
	// MsgTopic receives one event per applied change (key FLID).
	MsgTopic string `env:"MSGX_TOPIC_MSG,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.msg"`
	// ScheduleMissing: a tag a DNLD/RESP record does not carry is kept ("keep",
	// the default) or cleared ("clear"); docs/design.md#schedule-merge.
	ScheduleMissing string `env:"MSGX_SCHEDULE_MISSING" envDefault:"keep"`
	// SchdTopic is the latest-state topic; the processor writes the
	// tombstone of a flight the history sweep removes (the schd flusher
	// publishes everything else).
	SchdTopic string `env:"MSGX_TOPIC_SCHD,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.schd"`
	// KafkaPrefix goes before the group's name (kafka.Config.Prefix reads
	// the same variable and validates it).
	KafkaPrefix string `env:"MSGX_KAFKA_PREFIX"`
}

// Group is the processor's goka group: MSGX_KAFKA_PREFIX + BaseGroup.
func (c Config) Group() goka.Group { return goka.Group(c.KafkaPrefix + BaseGroup) }

// Table is the flights table topic, named after the group.
func (c Config) Table() goka.Table { return goka.GroupTable(c.Group()) }

// LoopTopic is the group's loop topic: goka names it after the group
// (goka.Loop), and msgx creates it, reports its lag and recreates it on
// rebuild under this name.
func (c Config) LoopTopic() string { return string(c.Group()) + "-loop" }

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.TransitionTopic == "" {
		errs = append(errs, errors.New("MSGX_TOPIC_FLIGHT_TRANSITIONS: empty"))
	}
	if c.MsgTopic == "" || c.SchdTopic == "" {
		errs = append(errs, errors.New("MSGX_TOPIC_MSG and MSGX_TOPIC_SCHD must be set"))
	}
	if c.ScheduleMissing != flight.ScheduleMissingKeep && c.ScheduleMissing != flight.ScheduleMissingClear {
		errs = append(errs, fmt.Errorf("MSGX_SCHEDULE_MISSING=%q: want keep or clear", c.ScheduleMissing))
	}
	return errors.Join(errs...)
}

// TopicSpecs are the topics the processor writes (created at start-up).
func (c Config) TopicSpecs(partitions int32) []kafka.TopicSpec {
	return []kafka.TopicSpec{
		{Name: c.MsgTopic, Partitions: partitions},
		{Name: c.LoopTopic(), Partitions: partitions},
	}
}

// Deps are the processor's collaborators.
type Deps struct {
	// Pool is msgx's PostgreSQL (required).
	Pool *pgxpool.Pool
	// Timeout bounds one write transaction (MSGX_DB_TIMEOUT, positive).
	Timeout time.Duration
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the processor's lines (required; component=flights is
	// added).
	Log *slog.Logger
	// OnMessageDone, if set, runs inside the write transaction that applied
	// a message's last transition: request tracking completes an RQFD there,
	// so the request is DONE exactly when its SCHD RESP is applied.
	OnMessageDone func(ctx context.Context, tx pgx.Tx, t *flight.Transition) error
	// Notify, if set, is called after a transaction queued events: it wakes
	// the outbox publisher.
	Notify func()
}

// Stats are the processor's running figures.
type Stats struct {
	Applied  int64
	Replays  int64
	Events   int64
	Rejected int64
	// Diverged counts transitions whose flight PostgreSQL knows and the
	// table does not.
	Diverged int64
	Paused   bool
	// Halted is why the processor stopped on a transition until an
	// operator acts (a divergence, a rejected transition); "" while not.
	Halted string
}

// Processor is the msgx-flights processor.
type Processor struct {
	cfg  Config
	opts flight.Options
	d    Deps
	log  *slog.Logger

	mu    sync.Mutex
	stats Stats
}

// New checks cfg and d and returns the processor.
func New(cfg Config, d Deps) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkDeps("flights", d.Pool, d.Timeout, d.Clock, d.Log); err != nil {
		return nil, err
	}
	return &Processor{cfg: cfg, opts: flight.Options{ScheduleMissing: cfg.ScheduleMissing},
		d: d, log: d.Log.With("component", "flights")}, nil
}

// checkDeps reports which of the collaborators every flights component
// needs are missing.
func checkDeps(component string, pool *pgxpool.Pool, timeout time.Duration, clk clock.Clock, log *slog.Logger) error {
	var errs []error
	if pool == nil {
		errs = append(errs, fmt.Errorf("%s: no PostgreSQL pool", component))
	}
	if timeout <= 0 {
		errs = append(errs, errors.New("MSGX_DB_TIMEOUT: must be positive"))
	}
	if clk == nil {
		errs = append(errs, fmt.Errorf("%s: no clock", component))
	}
	if log == nil {
		errs = append(errs, fmt.Errorf("%s: no logger", component))
	}
	return errors.Join(errs...)
}

// Stats returns a snapshot of the running figures.
func (p *Processor) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Graph is the group graph: input transitions, loop for derived ones,
// output msg events, table keyed by FLID.
func (p *Processor) Graph() *goka.GroupGraph {
	return goka.DefineGroup(p.cfg.Group(),
		goka.Input(goka.Stream(p.cfg.TransitionTopic), kafka.JSON[flight.Transition]{}, p.handle),
		goka.Loop(kafka.JSON[flight.Transition]{}, p.handle),
		goka.Persist(kafka.JSON[flight.State]{}),
	)
}

// Processor builds the goka processor (opts: kafka.GokaOptions or a tester).
func (p *Processor) Processor(brokers []string, opts ...goka.ProcessorOption) (*goka.Processor, error) {
	gp, err := goka.NewProcessor(brokers, p.Graph(), opts...)
	if err != nil {
		return nil, retry.Outage("kafka", fmt.Errorf("creating flights processor: %w", err))
	}
	return gp, nil
}

// Run runs the processor until ctx ends.
func (p *Processor) Run(ctx context.Context, brokers []string, opts ...goka.ProcessorOption) error {
	gp, err := p.Processor(brokers, opts...)
	if err != nil {
		return err
	}
	return kafka.RunProcessor(ctx, gp, "flights")
}

// handle applies one transition. The sequence, and what a crash at each
// step leaves behind:
//
//  1. Apply the transition to the table's state (pure).
//  2. One PostgreSQL transaction: the flight row and its collections, and —
//     for a transition the router counted — the (msg, FLID) applied mark,
//     which makes the message SUCCEEDED with its backfill intent when it is
//     the last one. A crash before the commit changes nothing; the
//     transition is delivered again.
//     The same transaction queues the change's msg event in the outbox
//     (and a purged flight's schd tombstone): goka's emits are asynchronous
//     and the table would move on before they are acknowledged, so a crash
//     could lose the event of an intermediate version; from the outbox the
//     publisher produces every version at least once.
//  3. SetValue and the derived transitions (loop topic). A crash after the
//     commit but before goka commits the offset re-delivers the transition:
//     either the table is still old (Apply gives the same state again; the
//     PostgreSQL write is idempotent, the mark a no-op) or it is new (Apply
//     sees msgId <= lastMsgId: a replay, which queues the event that state
//     implies once more). Consumers dedupe by (FLID, stateVersion).
//
// A LINK for a master that is not a flight yet leaves a placeholder in the
// table (flight.State.IsPlaceholder): it is only set as the table value,
// never written to PostgreSQL and never announced, and it completes no
// message (a LINK is not counted). A placeholder's last child leaving drops
// it from the table (Result.Drop).
func (p *Processor) handle(gctx goka.Context, msg any) {
	t, ok := msg.(*flight.Transition)
	if !ok {
		kafka.Abort(gctx, fmt.Errorf("flights: unexpected input %T", msg))
	}
	log := p.log.With("msg_id", t.MsgID, "flid", t.FLID)
	var cur *flight.State
	if v := gctx.Value(); v != nil {
		cur = v.(*flight.State)
	}
	if (cur == nil || cur.IsPlaceholder()) && counted(t) {
		if err := p.checkKnown(gctx, log, t); err != nil {
			kafka.Abort(gctx, err)
		}
	}
	res, err := flight.Apply(cur, *t, p.opts)
	if err != nil {
		// The router validates everything Apply checks (whole package,
		// DEAD with the reason): a transition it rejects is a bug. It is
		// never counted as consumed — its message would end SUCCEEDED
		// without its effect — so the processor halts on it.
		p.mu.Lock()
		p.stats.Rejected++
		p.mu.Unlock()
		p.halt(gctx, log, fmt.Sprintf("transition of message #%d for flight %s rejected (%v)", t.MsgID, t.FLID, err),
			"this is a msgx bug: keep the logs, report it, and replay or skip the message once fixed")
	}
	if err := p.write(gctx.Context(), log, t, res); err != nil {
		// Shutdown: not committed, delivered again after restart.
		kafka.Abort(gctx, err)
	}
	switch {
	case res.Purge, res.Drop:
		gctx.Delete()
	case res.State != nil:
		gctx.SetValue(res.State)
	}
	for _, d := range res.Derived {
		gctx.Loopback(d.FLID, d)
	}
	p.mu.Lock()
	if res.Replay {
		p.stats.Replays++
	} else if res.Applied {
		p.stats.Applied++
	}
	if res.Event != nil {
		p.stats.Events++
	}
	p.mu.Unlock()
	log.Debug("flight transition applied", "outcome", res.Outcome, "state_version", versionOf(res.State), "changed", res.Changed)
}

// checkKnown halts the processor when the table lacks t's flight but
// PostgreSQL knows it from older messages (docs/design.md#divergence): the
// goka table is not the state PostgreSQL was built from (another Kafka
// cluster, a wiped or re-created table topic), and applying t would answer
// no-match — or create the flight anew — and mark its message applied.
// Only transitions the router counted are checked: they complete messages.
// Derived ones (LINK, cascade, PURGE) arrive on the loop topic in another
// order than their flight's own transitions, and complete none.
func (p *Processor) checkKnown(gctx goka.Context, log *slog.Logger, t *flight.Transition) error {
	var where string
	err := retry.Forever(gctx.Context(), p.d.Clock, log, p.setPaused, func(ctx context.Context) error {
		qctx, cancel := context.WithTimeout(ctx, p.d.Timeout)
		defer cancel()
		var err error
		where, err = sink.FlightKnown(qctx, p.d.Pool, t.FLID, t.MsgID)
		return err
	})
	if err != nil || where == "" {
		return err
	}
	p.mu.Lock()
	p.stats.Diverged++
	p.mu.Unlock()
	p.halt(gctx, log, fmt.Sprintf("divergence: flight %s (message #%d) is in PostgreSQL %s but not in the flights table", t.FLID, t.MsgID, where),
		sink.DivergenceAdvice)
	return nil
}

// halt stops the processor on t without applying or committing it
// (kafka.Halt); Stats.Halted carries the reason meanwhile.
func (p *Processor) halt(gctx goka.Context, log *slog.Logger, reason, todo string) {
	kafka.Halt(gctx, log, "flights", reason, todo, func(r string) {
		p.mu.Lock()
		p.stats.Halted = r
		p.mu.Unlock()
	})
}

// counted reports whether the router counted t in its message's n: derived
// transitions (MAFL links, cascade deletes) are not.
func counted(t *flight.Transition) bool {
	return t.Kind != flight.KindLink && t.Kind != flight.KindPurge && !t.Cascade
}

// write runs step 2, waiting out outages (no progress, nothing lost) and
// retrying other failures with backoff. It returns only the context's error.
func (p *Processor) write(ctx context.Context, log *slog.Logger, t *flight.Transition, res flight.Result) error {
	// A placeholder is table bookkeeping, not a flight: no row.
	row := res.State != nil && !res.State.IsPlaceholder()
	if !row && res.Event == nil && !counted(t) {
		return nil
	}
	events, err := p.events(t, res)
	if err != nil {
		return err
	}
	err = retry.Forever(ctx, p.d.Clock, log, p.setPaused, func(ctx context.Context) error {
		wctx, cancel := context.WithTimeout(ctx, p.d.Timeout)
		defer cancel()
		return pgx.BeginFunc(wctx, p.d.Pool, func(tx pgx.Tx) error {
			// One round trip for the common case: the events, the
			// applied mark and the flight's incremental write.
			b := &pgx.Batch{}
			w, err := p.queueWrite(b, log, t, res, events, p.d.Clock.Now())
			if err != nil {
				return err
			}
			if b.Len() > 0 {
				if err := tx.SendBatch(wctx, b).Close(); err != nil {
					return err
				}
			}
			return p.finishWrite(wctx, tx, w)
		})
	})
	if err == nil && len(events) > 0 && p.d.Notify != nil {
		p.d.Notify()
	}
	return err
}

// txWrite is one transition's share of a write transaction. The write is
// split in two so that several transitions can share a transaction and a
// round trip (a batched commit: queueWrite for each on one batch, send it,
// finishWrite for each in the same order, commit): queueWrite puts the
// statements on the batch, finishWrite runs what depends on their results.
type txWrite struct {
	log  *slog.Logger
	t    *flight.Transition
	res  flight.Result
	now  time.Time
	mark *sink.QueuedMark
	fw   *sink.QueuedFlightWrite
}

// queueWrite queues the transition's events, its applied mark (for a
// transition the router counted) and the flight's incremental write on b.
func (p *Processor) queueWrite(b *pgx.Batch, log *slog.Logger, t *flight.Transition, res flight.Result, events []sink.Event, now time.Time) (*txWrite, error) {
	w := &txWrite{log: log, t: t, res: res, now: now}
	sink.BatchEvents(b, events, now)
	if counted(t) {
		// What the transition did goes with its mark (msgx trace).
		a := sink.Applied{Outcome: res.Outcome}
		if res.Applied && res.State != nil {
			a.StateVersion = res.State.StateVersion
		}
		w.mark = sink.QueueMarkApplied(b, t.MsgID, "flight", t.FLID, a, now)
	}
	// A placeholder is table bookkeeping, not a flight: no row.
	if !res.Purge && res.State != nil && !res.State.IsPlaceholder() {
		var err error
		if w.fw, err = sink.QueueFlightWrite(b, res.State); err != nil {
			return nil, err
		}
	}
	// Every new version leaves its line in the change history, in the
	// same transaction (docs/design.md#flight-change).
	if res.Applied && res.State != nil {
		if err := sink.QueueFlightChange(b, res.State, t.Replay, now); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// finishWrite runs, once the batch has, the rest of the write in tx: a
// purge, the full write an incremental one left to do, and the completion
// hook of a message whose last transition this was.
func (p *Processor) finishWrite(ctx context.Context, tx pgx.Tx, w *txWrite) error {
	switch {
	case w.res.Purge:
		if err := sink.PurgeFlight(ctx, tx, w.res.State, w.now); err != nil {
			return err
		}
	case w.fw != nil:
		full, err := w.fw.FullWriteNeeded()
		if err != nil {
			return err
		}
		if full {
			if err := sink.WriteFlight(ctx, tx, w.res.State); err != nil {
				return err
			}
		}
	}
	if w.mark != nil && w.mark.Completed() {
		w.log.Debug("message succeeded: all its transitions are applied")
		if p.d.OnMessageDone != nil {
			return p.d.OnMessageDone(ctx, tx, w.t)
		}
	}
	return nil
}

// events are what the result announces: the msg event of a change (or the
// one a replay implies) and, for a purged flight, the schd tombstone.
func (p *Processor) events(t *flight.Transition, res flight.Result) ([]sink.Event, error) {
	var out []sink.Event
	if res.Event != nil {
		v, err := kafka.JSON[flight.Event]{}.Encode(res.Event)
		if err != nil {
			return nil, fmt.Errorf("encoding the event of %s: %w", t.FLID, err)
		}
		e := sink.Event{Topic: p.cfg.MsgTopic, Key: t.FLID, Value: v, MsgID: res.Event.MsgID, StateVersion: res.Event.StateVersion}
		if res.Applied {
			// Only a first application measures end-to-end latency; a
			// replay's event would be timed from long ago.
			e.OriginAt = t.At
		}
		out = append(out, e)
	}
	if res.Purge {
		out = append(out, sink.Event{Topic: p.cfg.SchdTopic, Key: t.FLID})
	}
	return out, nil
}

func (p *Processor) setPaused(v bool, _ error) {
	p.mu.Lock()
	p.stats.Paused = v
	p.mu.Unlock()
}

func versionOf(s *flight.State) int64 {
	if s == nil {
		return 0
	}
	return s.StateVersion
}
