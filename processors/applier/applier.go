package applier

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"

	"msgx/internal/clock"
	"msgx/internal/commit"
	"msgx/internal/kafka"
	"msgx/internal/need"
	"msgx/internal/retry"
)

// DivergenceAdvice is what a processor that halted on a divergence (its
// goka table lacks what PostgreSQL knows, docs/design.md#divergence) tells
// the operator to do.
const DivergenceAdvice = "the goka tables are not the ones PostgreSQL was built with: stop msgx and point it at that Kafka cluster " +
	"(docs/operations.md#msgxprocessorhalted); to move to another cluster, follow docs/operations.md#moving-to-another-kafka-cluster (msgx reseed, msgx bind --force)"

// Stats are an applier's running figures.
type Stats struct {
	// Applied counts the transitions applied, Replays those that were a
	// redelivery (nothing applied again), Rejected those the pure
	// transition function refused (a bug: the processor halts on it).
	Applied, Replays, Rejected int64
	// Events counts the msg events queued (flights; reference data has
	// none).
	Events int64
	// Diverged counts transitions of a key PostgreSQL knows and the table
	// does not (docs/design.md#divergence): the processor halts on them.
	Diverged int64
	// Recovered counts redelivered transitions applied again to
	// PostgreSQL's state because the table was ahead of it (a crash
	// between a table write and its transaction's commit).
	Recovered int64
	// Batches counts the transactions of the group commit, Batched the
	// transitions they wrote.
	Batches, Batched int64
	// Paused says PostgreSQL is unreachable and the processor waits.
	Paused bool
	// Halted is why the processor stopped on a transition until an
	// operator acts (a divergence, a rejected transition); "" while not.
	Halted string
}

// Spec is what an applier of transitions T, whose PostgreSQL writes are W,
// brings to the shell.
type Spec[T, W any] struct {
	// Name is the component's name: its logs' component, its errors'
	// prefix, its group commit's name.
	Name string
	// Group is the goka group, Input the transitions' topic, Table the
	// codec of the group table.
	Group goka.Group
	Input string
	Table goka.Codec
	// Commit sizes the group commit.
	Commit commit.Config
	// Attrs are the log attributes of a transition (its message and key).
	Attrs func(t *T) []any
	// Apply is the processor's part of the callback: apply t to the table's
	// state, hand its writes to g with goka's deferred commit, set the
	// table. log carries the component and Attrs.
	Apply func(gctx goka.Context, g *commit.Group[W], log *slog.Logger, t *T)
	// Write writes a group of writes in one transaction (commit.Deps.Write).
	Write func(ctx context.Context, tx pgx.Tx, ws []W) error
	// Wakes says whether a committed group is worth Notify; nil: every one.
	Wakes func(ws []W) bool
}

// Deps are every applier's collaborators.
type Deps struct {
	// Pool is msgx's PostgreSQL (required).
	Pool *pgxpool.Pool
	// Timeout bounds one write transaction and each read (MSGX_DB_TIMEOUT,
	// positive).
	Timeout time.Duration
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the processor's lines (required; component=Spec.Name is
	// added).
	Log *slog.Logger
	// Notify, if set, is called after a group commit Spec.Wakes accepts:
	// it wakes the outbox publisher and the backfill sweeper.
	Notify func()
}

// Validate reports which required collaborators of component are missing.
func (d Deps) Validate(component string) error {
	return need.Check(component, need.Pool(d.Pool), need.Timeout(d.Timeout), need.Clock(d.Clock), need.Log(d.Log))
}

// Shell is the goka and group-commit shell a per-key applier runs in: the
// group graph (input transitions, the table as goka persists it), the
// processor under a group commit, the callback's prologue, and what every
// applier does the same way — reading PostgreSQL through an outage,
// counting a recovery, halting on a transition, its figures. The
// processor (flights, refdata) brings Spec: the transition's application
// and its writes.
type Shell[T, W any] struct {
	spec Spec[T, W]
	d    Deps
	log  *slog.Logger

	// group is the running processor's group commit (RunProcessor).
	group commit.Slot[W]

	mu    sync.Mutex
	stats Stats
}

// New returns the shell of spec on d (the caller validated d).
func New[T, W any](spec Spec[T, W], d Deps) *Shell[T, W] {
	return &Shell[T, W]{spec: spec, d: d, log: d.Log.With("component", spec.Name)}
}

// Stats returns a snapshot of the running figures.
func (s *Shell[T, W]) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Count updates the running figures.
func (s *Shell[T, W]) Count(fn func(*Stats)) {
	s.mu.Lock()
	fn(&s.stats)
	s.mu.Unlock()
}

// Graph is the group graph: input transitions, the table keyed as the
// transitions are.
func (s *Shell[T, W]) Graph() *goka.GroupGraph {
	return goka.DefineGroup(s.spec.Group,
		goka.Input(goka.Stream(s.spec.Input), kafka.JSON[T]{}, s.handle),
		goka.Persist(s.spec.Table),
	)
}

// Processor builds the goka processor (opts: kafka.GokaOptions or a tester).
func (s *Shell[T, W]) Processor(brokers []string, opts ...goka.ProcessorOption) (*goka.Processor, error) {
	gp, err := goka.NewProcessor(brokers, s.Graph(), opts...)
	if err != nil {
		return nil, retry.Outage("kafka", fmt.Errorf("creating %s processor: %w", s.spec.Name, err))
	}
	return gp, nil
}

// Run runs the processor until ctx ends.
func (s *Shell[T, W]) Run(ctx context.Context, brokers []string, opts ...goka.ProcessorOption) error {
	gp, err := s.Processor(brokers, opts...)
	if err != nil {
		return err
	}
	return s.RunProcessor(ctx, gp)
}

// RunProcessor runs gp, a goka processor on the shell's callback, with the
// group commit the callback hands its writes to, until ctx ends or gp
// fails. One runs at a time.
func (s *Shell[T, W]) RunProcessor(ctx context.Context, gp *goka.Processor) error {
	return s.group.Run(ctx, gp, s.spec.Name, s.spec.Commit, commit.Deps[W]{Pool: s.d.Pool, Timeout: s.d.Timeout,
		Clock: s.d.Clock, Log: s.log, Write: s.spec.Write, Committed: s.committed, SetPaused: s.setPaused})
}

// handle is the callback: the prologue every applier shares, then
// Spec.Apply.
func (s *Shell[T, W]) handle(gctx goka.Context, msg any) {
	t, ok := msg.(*T)
	if !ok {
		kafka.Abort(gctx, fmt.Errorf("%s: unexpected input %T", s.spec.Name, msg))
	}
	g := s.group.Group()
	if g == nil {
		kafka.Abort(gctx, fmt.Errorf("%s: the processor runs without its group commit (RunProcessor)", s.spec.Name))
	}
	s.spec.Apply(gctx, g, s.log.With(s.spec.Attrs(t)...), t)
}

// Read runs read against PostgreSQL, each try under the call timeout,
// until it succeeds or ctx ends: an outage pauses the processor
// (Stats.Paused) instead of failing the transition (I7).
func (s *Shell[T, W]) Read(ctx context.Context, log *slog.Logger, read func(ctx context.Context) error) error {
	return retry.Forever(ctx, s.d.Clock, log, s.setPaused, func(ctx context.Context) error {
		qctx, cancel := context.WithTimeout(ctx, s.d.Timeout)
		defer cancel()
		return read(qctx)
	})
}

// Recovered counts a transition applied again to PostgreSQL's state (the
// table was ahead of it after a crash) and logs line with attrs: one WARN
// line for the crash, not one per key it left behind — the others are
// counted (msgx_transitions_recovered_total) and logged at DEBUG.
func (s *Shell[T, W]) Recovered(ctx context.Context, log *slog.Logger, line string, attrs ...any) {
	s.mu.Lock()
	s.stats.Recovered++
	first := s.stats.Recovered == 1
	s.mu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelWarn
	}
	log.Log(ctx, level, line, attrs...)
}

// Halt stops the processor on the transition at hand without applying or
// committing it (kafka.Halt); Stats.Halted carries the reason meanwhile.
func (s *Shell[T, W]) Halt(gctx goka.Context, log *slog.Logger, reason, todo string) {
	kafka.Halt(gctx, log, s.spec.Name, reason, todo, func(r string) {
		s.mu.Lock()
		s.stats.Halted = r
		s.mu.Unlock()
	})
}

// committed counts the transaction and wakes whoever waits for what it
// committed (Deps.Notify) when Spec.Wakes says so.
func (s *Shell[T, W]) committed(ws []W) {
	s.mu.Lock()
	s.stats.Batches++
	s.stats.Batched += int64(len(ws))
	s.mu.Unlock()
	if s.d.Notify != nil && (s.spec.Wakes == nil || s.spec.Wakes(ws)) {
		s.d.Notify()
	}
}

func (s *Shell[T, W]) setPaused(v bool, _ error) {
	s.mu.Lock()
	s.stats.Paused = v
	s.mu.Unlock()
}
