package refdata

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
	"msgx/tables/refdata"
)

// BaseGroup is the processor's goka group name before MSGX_KAFKA_PREFIX:
// Config.Group is the group a deployment runs, Config.Table its table keyed
// by RTYPE (msgx-refdata-table without a prefix).
const BaseGroup = "msgx-refdata"

// Config configures the refdata processor.
type Config struct {
	// TransitionTopic is the processor's input, the router's reference
	// transitions (key RTYPE; router.Config.RefdataTopic reads the same
	// variable).
	TransitionTopic string `env:"MSGX_TOPIC_REFDATA_TRANSITIONS,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.refdata-transitions"`
	// KafkaPrefix goes before the group's name (kafka.Config.Prefix reads
	// the same variable and validates it).
	KafkaPrefix string `env:"MSGX_KAFKA_PREFIX"`
}

// Group is the processor's goka group: MSGX_KAFKA_PREFIX + BaseGroup.
func (c Config) Group() goka.Group { return goka.Group(c.KafkaPrefix + BaseGroup) }

// Table is the refdata table topic, named after the group.
func (c Config) Table() goka.Table { return goka.GroupTable(c.Group()) }

// Validate checks the configuration; errors name the variable.
func (c Config) Validate() error {
	if c.TransitionTopic == "" {
		return errors.New("MSGX_TOPIC_REFDATA_TRANSITIONS: empty")
	}
	return nil
}

// Deps are the processor's collaborators.
type Deps struct {
	// Pool is msgx's PostgreSQL (required).
	Pool *pgxpool.Pool
	// Timeout bounds one write transaction (MSGX_DB_TIMEOUT, positive).
	Timeout time.Duration
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the processor's lines (required; component=refdata is
	// added).
	Log *slog.Logger
	// OnApplied, if set, runs inside the write transaction after the
	// category was written: outbound request tracking completes a
	// request there, so it closes only once its response's data is applied.
	OnApplied func(ctx context.Context, tx pgx.Tx, t *refdata.Transition) error
}

// Stats are the processor's running figures.
type Stats struct {
	Applied  int64
	Replays  int64
	Rejected int64
	Paused   bool
	// Halted is why the processor stopped on a transition until an
	// operator acts (a divergence, a rejected transition); "" while not.
	Halted string
}

// Processor is the msgx-refdata processor.
type Processor struct {
	cfg Config
	d   Deps
	log *slog.Logger

	mu    sync.Mutex
	stats Stats
}

// New checks cfg and d and returns the processor.
func New(cfg Config, d Deps) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var errs []error
	if d.Pool == nil {
		errs = append(errs, errors.New("refdata: no PostgreSQL pool"))
	}
	if d.Timeout <= 0 {
		errs = append(errs, errors.New("MSGX_DB_TIMEOUT: must be positive"))
	}
	if d.Clock == nil {
		errs = append(errs, errors.New("refdata: no clock"))
	}
	if d.Log == nil {
		errs = append(errs, errors.New("refdata: no logger"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Processor{cfg: cfg, d: d, log: d.Log.With("component", "refdata")}, nil
}

// Stats returns a snapshot of the running figures.
func (p *Processor) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Graph is the group graph: input transitions, table keyed by RTYPE.
func (p *Processor) Graph() *goka.GroupGraph {
	return goka.DefineGroup(p.cfg.Group(),
		goka.Input(goka.Stream(p.cfg.TransitionTopic), kafka.JSON[refdata.Transition]{}, p.handle),
		goka.Persist(kafka.JSON[refdata.State]{}),
	)
}

// Processor builds the goka processor (opts: kafka.GokaOptions or a tester).
func (p *Processor) Processor(brokers []string, opts ...goka.ProcessorOption) (*goka.Processor, error) {
	gp, err := goka.NewProcessor(brokers, p.Graph(), opts...)
	if err != nil {
		return nil, retry.Outage("kafka", fmt.Errorf("creating refdata processor: %w", err))
	}
	return gp, nil
}

// Run runs the processor until ctx ends.
func (p *Processor) Run(ctx context.Context, brokers []string, opts ...goka.ProcessorOption) error {
	gp, err := p.Processor(brokers, opts...)
	if err != nil {
		return err
	}
	return kafka.RunProcessor(ctx, gp, "refdata")
}

// handle applies one transition: Apply on the table's state, then one
// PostgreSQL transaction (ref_master rows + the applied mark that completes
// the message), then SetValue. A crash before the commit changes nothing; a
// crash after it re-delivers the transition, which either applies again to
// the old table value (same rows, idempotent) or is a redelivery to the new
// one (Apply re-lists the writes still current; the sink's never-backwards
// guard on (version, last_msg_id) keeps them from overwriting anything
// newer). A replayed message (docs/design.md#replay) is applied like a new
// one.
func (p *Processor) handle(gctx goka.Context, msg any) {
	t, ok := msg.(*refdata.Transition)
	if !ok {
		kafka.Abort(gctx, fmt.Errorf("refdata: unexpected input %T", msg))
	}
	log := p.log.With("msg_id", t.MsgID, "rtype", t.RType)
	s, _ := gctx.Value().(*refdata.State)
	if s == nil {
		p.checkKnown(gctx, log, t)
		s = refdata.NewState(t.RType)
	}
	res, err := refdata.Apply(s, *t)
	if err != nil {
		// The router validates whole packages (refdata.Check, the key-tag
		// index): a transition Apply still rejects is a bug. It is never
		// counted as consumed — its message would end SUCCEEDED without
		// its effect — so the processor halts on it.
		p.mu.Lock()
		p.stats.Rejected++
		p.mu.Unlock()
		p.halt(gctx, log, fmt.Sprintf("transition of message #%d for category %s rejected (%v)", t.MsgID, t.RType, err),
			"this is a msgx bug: keep the logs, report it, and replay or skip the message once fixed")
	}
	err = retry.Forever(gctx.Context(), p.d.Clock, log, p.setPaused, func(ctx context.Context) error {
		wctx, cancel := context.WithTimeout(ctx, p.d.Timeout)
		defer cancel()
		return pgx.BeginFunc(wctx, p.d.Pool, func(tx pgx.Tx) error {
			return p.writeTx(wctx, tx, log, t, s, res, p.d.Clock.Now())
		})
	})
	if err != nil {
		kafka.Abort(gctx, err) // shutdown: delivered again after restart
	}
	if !res.Replay {
		gctx.SetValue(s)
	}
	p.mu.Lock()
	if res.Replay {
		p.stats.Replays++
	} else {
		p.stats.Applied++
	}
	p.mu.Unlock()
}

// checkKnown halts the processor when the table lacks t's category but
// ref_master holds records of it from older messages
// (docs/design.md#divergence): the goka table is not the state PostgreSQL
// was built from, and applying t to an empty category would miss the
// deletions a full replace implies and mark the message applied. Records of
// t's own message or later are a crash's redelivery (sink.RefdataKnown).
func (p *Processor) checkKnown(gctx goka.Context, log *slog.Logger, t *refdata.Transition) {
	var known bool
	err := retry.Forever(gctx.Context(), p.d.Clock, log, p.setPaused, func(ctx context.Context) error {
		qctx, cancel := context.WithTimeout(ctx, p.d.Timeout)
		defer cancel()
		var err error
		known, err = sink.RefdataKnown(qctx, p.d.Pool, t.RType, t.MsgID)
		return err
	})
	if err != nil {
		kafka.Abort(gctx, err) // shutdown: delivered again after restart
	}
	if known {
		p.halt(gctx, log, fmt.Sprintf("divergence: category %s (message #%d) is in PostgreSQL ref_master but not in the refdata table", t.RType, t.MsgID),
			sink.DivergenceAdvice)
	}
}

// halt stops the processor on t without applying or committing it
// (kafka.Halt); Stats.Halted carries the reason meanwhile.
func (p *Processor) halt(gctx goka.Context, log *slog.Logger, reason, todo string) {
	kafka.Halt(gctx, log, "refdata", reason, todo, func(r string) {
		p.mu.Lock()
		p.stats.Halted = r
		p.mu.Unlock()
	})
}

// writeTx is one transition's share of a write transaction: the category's
// rows, the completion hook and the applied mark that completes the
// message. It is the seam of a batched commit:
// several transitions share a transaction by calling it for each in order
// before the commit.
func (p *Processor) writeTx(ctx context.Context, tx pgx.Tx, log *slog.Logger, t *refdata.Transition, s *refdata.State,
	res refdata.Result, now time.Time) error {
	if err := sink.WriteRefData(ctx, tx, s, res); err != nil {
		return err
	}
	if p.d.OnApplied != nil {
		if err := p.d.OnApplied(ctx, tx, t); err != nil {
			return err
		}
	}
	// What the transition did goes with its mark (msgx trace).
	a := sink.Applied{Outcome: "no-change"}
	switch {
	case res.Replay:
		a.Outcome = "replay"
	case res.Changed:
		a = sink.Applied{Outcome: "applied", StateVersion: s.Version}
	}
	done, err := sink.MarkApplied(ctx, tx, t.MsgID, "refdata", t.RType, a, now)
	if err == nil && done {
		log.Debug("message succeeded: reference data applied", "upserts", len(res.Upserts), "deletes", len(res.Deletes))
	}
	return err
}

func (p *Processor) setPaused(v bool, _ error) {
	p.mu.Lock()
	p.stats.Paused = v
	p.mu.Unlock()
}
