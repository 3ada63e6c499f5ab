package commit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"
	"golang.org/x/sync/semaphore"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/need"
	"msgx/internal/retry"
)

// Config sizes the groups. The flights and refdata processors each have
// one, read from the same environment variables.
type Config struct {
	// Size is the most inputs one transaction holds: in msgx, the flight
	// (and, separately, the refdata) transitions whose PostgreSQL writes
	// share one transaction (docs/design.md#group-commits), 1..10000; 0
	// means DefaultSize (1000).
	Size int `env:"MSGX_APPLY_BATCH" envDefault:"1000"`
	// Linger is how long a transaction that found inputs queued behind its
	// first one waits for more (a Go duration, at most 1s; 0: never wait).
	// An input that finds nothing queued behind it is written at once, so
	// an idle pipeline never waits.
	Linger time.Duration `env:"MSGX_APPLY_LINGER" envDefault:"2ms"`
	// Bytes bounds the inputs queued or in a transaction by their size as
	// the caller counts it (an input larger than Bytes counts as Bytes).
	// 0 means 32 MiB; no variable sets it.
	Bytes int64
}

// DefaultSize is the group size of a Config without one.
const DefaultSize = 1000

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Size < 0 || c.Size > 10000 {
		errs = append(errs, fmt.Errorf("MSGX_APPLY_BATCH=%d: must be 1..10000", c.Size))
	}
	if c.Linger < 0 || c.Linger > time.Second {
		errs = append(errs, fmt.Errorf("MSGX_APPLY_LINGER=%v: want 0 to 1s", c.Linger))
	}
	if c.Bytes < 0 {
		errs = append(errs, fmt.Errorf("commit: negative byte bound %d", c.Bytes))
	}
	return errors.Join(errs...)
}

func (c Config) size() int {
	if c.Size == 0 {
		return DefaultSize
	}
	return c.Size
}

func (c Config) bytes() int64 {
	if c.Bytes == 0 {
		return 32 << 20
	}
	return c.Bytes
}

// Deps are a Group's collaborators.
type Deps[T any] struct {
	// Pool is msgx's PostgreSQL (required).
	Pool *pgxpool.Pool
	// Timeout bounds one transaction (positive).
	Timeout time.Duration
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the retries' lines (required).
	Log *slog.Logger
	// Write writes items, in the order they were added, in tx (required).
	// It may run more than once for the same items (a failed transaction is
	// retried whole), so it must not keep state of its own between runs.
	Write func(ctx context.Context, tx pgx.Tx, items []T) error
	// Committed, if set, runs after the transaction of items committed,
	// before their deferred commits.
	Committed func(items []T)
	// SetPaused, if set, reports an outage (true) and its end (false).
	SetPaused func(paused bool, err error)
}

// ErrStopping fails the deferred commits of inputs a stopping Group did not
// write: they are delivered again after the restart.
var ErrStopping = errors.New("stopping before the input's write was committed; it is delivered again after the restart")

// entry is one queued input, or a barrier (Sync).
type entry[T any] struct {
	item T
	done func(error)
	size int64
	// barrier, for a Sync, receives the outcome of the batch before it.
	barrier chan error
}

// Group is one processor's write queue and its worker.
type Group[T any] struct {
	cfg     Config
	d       Deps[T]
	in      chan entry[T]
	budget  *semaphore.Weighted
	stopped chan struct{}
}

// Validate reports which required collaborators are missing.
func (d Deps[T]) Validate() error {
	return need.Check("commit", need.Pool(d.Pool), need.Timeout(d.Timeout), need.Clock(d.Clock), need.Log(d.Log),
		need.Has(d.Write != nil, "write function"))
}

// New checks cfg and d and returns the Group; Run starts its worker.
func New[T any](cfg Config, d Deps[T]) (*Group[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Group[T]{cfg: cfg, d: d, in: make(chan entry[T], cfg.size()), budget: semaphore.NewWeighted(cfg.bytes()),
		stopped: make(chan struct{})}, nil
}

// Add queues item, of size bytes, with done, the goka deferred commit of
// the input it came from (goka.Context.DeferCommit). It blocks while the
// queue is full or holds Config.Bytes. done is called once: with nil after
// the transaction holding item's write committed, or with an error when
// the Group stops first. Add returns ctx's error if ctx ends first, after
// calling done with it.
func (g *Group[T]) Add(ctx context.Context, item T, size int64, done func(error)) error {
	size = min(max(size, 1), g.cfg.bytes())
	if err := g.budget.Acquire(ctx, size); err != nil {
		done(err)
		return err
	}
	e := entry[T]{item: item, size: size, done: done}
	select {
	case <-g.stopped:
		// Checked first: the queue may have room after the worker stopped.
		g.finish(e, ErrStopping)
		return ErrStopping
	default:
	}
	select {
	case g.in <- e:
		return nil
	case <-g.stopped:
		g.finish(e, ErrStopping)
		return ErrStopping
	case <-ctx.Done():
		g.finish(e, ctx.Err())
		return ctx.Err()
	}
}

// Sync waits until every input added before it has been written and
// committed (or failed by a stopping Group). A processor calls it before it
// reads back from PostgreSQL what its own queued writes may still change.
func (g *Group[T]) Sync(ctx context.Context) error {
	e := entry[T]{barrier: make(chan error, 1)}
	select {
	case g.in <- e:
	case <-g.stopped:
		return ErrStopping
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-e.barrier:
		return err
	case <-g.stopped:
		return ErrStopping
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *Group[T]) finish(e entry[T], err error) {
	if e.barrier != nil {
		e.barrier <- err
		return
	}
	e.done(err)
	g.budget.Release(e.size)
}

// Run writes the queued inputs until ctx ends. A transaction that fails is
// retried whole, waiting out outages (SetPaused) and backing off on other
// errors; nothing is skipped. When ctx ends it writes what is already
// queued in one last attempt (bounded by Deps.Timeout), so that a clean
// shutdown leaves no input's table change without its write, and fails the
// rest with ErrStopping (Drain fails what comes later). It returns nil.
func (g *Group[T]) Run(ctx context.Context) error {
	for {
		b, barrier, err := g.gather(ctx)
		if err == nil && len(b) > 0 {
			err = g.write(ctx, b)
		}
		if err != nil {
			g.last(ctx, b)
			if barrier != nil {
				g.finish(*barrier, ErrStopping)
			}
			return nil
		}
		for _, e := range b {
			g.finish(e, nil)
		}
		if barrier != nil {
			g.finish(*barrier, nil)
		}
	}
}

// last writes b and what is queued behind it once, without ctx's
// cancellation, and finishes them with the outcome.
func (g *Group[T]) last(ctx context.Context, b []entry[T]) {
	var bars []entry[T]
	for more := true; more; {
		select {
		case e := <-g.in:
			if e.barrier != nil {
				bars = append(bars, e)
			} else {
				b = append(b, e)
			}
		default:
			more = false
		}
	}
	var err error = ErrStopping
	if len(b) > 0 {
		items := make([]T, len(b))
		for i, e := range b {
			items[i] = e.item
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.d.Timeout)
		err = pgx.BeginFunc(wctx, g.d.Pool, func(tx pgx.Tx) error { return g.d.Write(wctx, tx, items) })
		cancel()
		if err != nil {
			g.d.Log.Warn("the last writes before stopping failed; their inputs are delivered again after the restart",
				"inputs", len(b), "error", err)
			err = ErrStopping
		} else if g.d.Committed != nil {
			g.d.Committed(items)
		}
	}
	for _, e := range b {
		g.finish(e, err)
	}
	for _, e := range bars {
		g.finish(e, ErrStopping)
	}
}

// gather returns the next batch, like the router's: the first input as it
// comes, whatever is queued behind it, and — only while a backlog flows —
// what arrives within the linger, up to Config.Size. A barrier ends the
// batch; it is released once the batch before it is committed.
func (g *Group[T]) gather(ctx context.Context) ([]entry[T], *entry[T], error) {
	var b []entry[T]
	take := func(e entry[T]) *entry[T] {
		if e.barrier != nil {
			return &e
		}
		b = append(b, e)
		return nil
	}
	select {
	case e := <-g.in:
		if bar := take(e); bar != nil {
			return nil, bar, nil
		}
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	for len(b) < g.cfg.size() {
		select {
		case e := <-g.in:
			if bar := take(e); bar != nil {
				return b, bar, nil
			}
			continue
		default:
		}
		break
	}
	if len(b) == 1 || len(b) >= g.cfg.size() || g.cfg.Linger <= 0 {
		return b, nil, nil
	}
	deadline := g.d.Clock.After(g.cfg.Linger)
	for len(b) < g.cfg.size() {
		select {
		case e := <-g.in:
			if bar := take(e); bar != nil {
				return b, bar, nil
			}
		case <-deadline:
			// What is queued by the deadline joins the batch: select
			// picks at random among ready cases, and an input that came
			// within the linger must not wait for the next batch.
			for len(b) < g.cfg.size() {
				select {
				case e := <-g.in:
					if bar := take(e); bar != nil {
						return b, bar, nil
					}
					continue
				default:
				}
				break
			}
			return b, nil, nil
		case <-ctx.Done():
			return b, nil, ctx.Err()
		}
	}
	return b, nil, nil
}

// write commits b's writes in one transaction, retrying until it commits
// or ctx ends.
func (g *Group[T]) write(ctx context.Context, b []entry[T]) error {
	items := make([]T, len(b))
	for i, e := range b {
		items[i] = e.item
	}
	err := retry.Forever(ctx, g.d.Clock, g.d.Log, g.d.SetPaused, func(ctx context.Context) error {
		wctx, cancel := context.WithTimeout(ctx, g.d.Timeout)
		defer cancel()
		return pgx.BeginFunc(wctx, g.d.Pool, func(tx pgx.Tx) error {
			return g.d.Write(wctx, tx, items)
		})
	})
	if err != nil {
		return err
	}
	if g.d.Committed != nil {
		g.d.Committed(items)
	}
	return nil
}

// drain fails every queued input until the goka processor stopped
// (procDone), so that goka's shutdown does not wait for commits that never
// come.
func (g *Group[T]) drain(procDone <-chan struct{}) {
	close(g.stopped)
	for {
		select {
		case e := <-g.in:
			g.finish(e, ErrStopping)
		case <-procDone:
			for {
				select {
				case e := <-g.in:
					g.finish(e, ErrStopping)
				default:
					return
				}
			}
		}
	}
}

// RunWith runs the goka processor gp and g's worker until ctx ends or the
// processor fails; it can be called once. They stop together: when the
// processor ends, the worker stops, and the worker fails the commits of
// what it did not write until the processor is gone (goka waits for every
// deferred commit before it stops).
func RunWith[T any](ctx context.Context, gp *goka.Processor, name string, g *Group[T]) error {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	procErr := make(chan error, 1)
	procDone := make(chan struct{})
	go func() {
		defer close(procDone)
		procErr <- kafka.RunProcessor(pctx, gp, name)
		cancel()
	}()
	_ = g.Run(pctx)
	cancel()
	g.drain(procDone)
	return <-procErr
}

// Slot holds the group of a processor's running goka processor, where its
// callbacks find it (Group); a processor restarted by its supervisor gets a
// new group each run.
type Slot[T any] struct {
	g atomic.Pointer[Group[T]]
}

// Group is the running group, nil while none runs.
func (s *Slot[T]) Group() *Group[T] { return s.g.Load() }

// Run creates the group (New), runs gp with it (RunWith) until ctx ends or
// gp fails, and empties the slot. One runs at a time.
func (s *Slot[T]) Run(ctx context.Context, gp *goka.Processor, name string, cfg Config, d Deps[T]) error {
	g, err := New(cfg, d)
	if err != nil {
		return err
	}
	if !s.g.CompareAndSwap(nil, g) {
		return fmt.Errorf("%s: the processor is running already", name)
	}
	defer s.g.Store(nil)
	return RunWith(ctx, gp, name, g)
}
