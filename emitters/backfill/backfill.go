package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/need"
	"msgx/internal/retry"
	"msgx/sink"
	"msgx/sink/aodb"
	"msgx/tables/message"
)

// Config configures the backfill sweeper. Durations are Go durations
// ("30s", "15m", "720h").
type Config struct {
	// Period is the pause between passes once the sweeper has nothing more
	// to do right now. A pass that fills its batch and settles rows is
	// followed by the next one at once, so a backlog drains at database
	// speed instead of Batch rows per Period.
	Period time.Duration `env:"MSGX_BACKFILL_PERIOD" envDefault:"30s"`
	// WakeGap is the shortest time from one pass to the next that a
	// notification (Notify: messages became terminal) starts: during a
	// backlog the processors notify after every group commit, several
	// times a second, and each pass is a PostgreSQL transaction; the marks
	// trail the messages by at most this much more. 0: a pass per
	// notification; never longer than Period.
	WakeGap time.Duration `env:"MSGX_BACKFILL_WAKE_GAP" envDefault:"250ms"`
	// Batch is the number of rows claimed per pass (1..10000): one MySQL
	// UPDATE with that many IDs.
	Batch int `env:"MSGX_BACKFILL_BATCH" envDefault:"500"`
	// Backoff is the wait after the first failed attempt of a row; it
	// doubles with every further failure (docs/design.md#backfill).
	Backoff time.Duration `env:"MSGX_BACKFILL_BACKOFF" envDefault:"30s"`
	// BackoffCap is the longest wait between two attempts of a row.
	BackoffCap time.Duration `env:"MSGX_BACKFILL_BACKOFF_CAP" envDefault:"15m"`
	// Overdue is R (docs/design.md#backfill), measured from the row's local
	// enqueued_at: a terminal row older than R is tried on every pass
	// regardless of its backoff, and a transient failure of a row older than R
	// abandons it (TRANSIENT_DEADLINE). Before R a row is never abandoned for
	// failing.
	Overdue time.Duration `env:"MSGX_OVERDUE_BACKFILL" envDefault:"720h"`
	// MaxAttemptsAlarm is the attempt count at which a still failing row is
	// logged at ERROR (an alarm). It never abandons a row: abandonment is by
	// time (Overdue), not by count.
	MaxAttemptsAlarm int `env:"MSGX_BACKFILL_MAX_ATTEMPTS" envDefault:"20"`
	// VacuumRows is how many rows the sweeper settles (takes out of its
	// queue, backfill_owed) between two vacuums of the queue, in rows; 0
	// leaves it to autovacuum. Every settled row leaves an entry at the
	// head of the queue's index that each scan steps over until a vacuum
	// removes it, as for the outbox (MSGX_PUBLISH_VACUUM_ROWS).
	VacuumRows int `env:"MSGX_BACKFILL_VACUUM_ROWS" envDefault:"10000"`
	// Shadow runs msgx beside the legacy system: msgx never writes to
	// MySQL (docs/operations.md#choose-the-cut-over-and-start-in-shadow-mode). The sweeper writes no processed mark
	// (and records nothing in PostgreSQL), so every terminal row stays
	// pending and is marked once shadow mode is switched off; POST
	// /cminmsgs/send answers 503; no request goes to the AODB.
	Shadow bool `env:"MSGX_SHADOW" envDefault:"false"`
}

// Validate checks every value; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if c.Period <= 0 {
		errs = append(errs, errors.New("MSGX_BACKFILL_PERIOD: must be positive"))
	}
	if c.WakeGap < 0 {
		errs = append(errs, fmt.Errorf("MSGX_BACKFILL_WAKE_GAP=%s: must be 0 or more", c.WakeGap))
	}
	if c.VacuumRows < 0 {
		errs = append(errs, fmt.Errorf("MSGX_BACKFILL_VACUUM_ROWS=%d: must be 0 (never) or more", c.VacuumRows))
	}
	if c.Batch < 1 || c.Batch > 10000 {
		errs = append(errs, fmt.Errorf("MSGX_BACKFILL_BATCH=%d: must be 1..10000", c.Batch))
	}
	if c.Backoff <= 0 {
		errs = append(errs, errors.New("MSGX_BACKFILL_BACKOFF: must be positive"))
	}
	if c.BackoffCap < c.Backoff {
		errs = append(errs, fmt.Errorf("MSGX_BACKFILL_BACKOFF_CAP=%s: must be at least MSGX_BACKFILL_BACKOFF=%s", c.BackoffCap, c.Backoff))
	}
	if c.Overdue <= 0 {
		errs = append(errs, errors.New("MSGX_OVERDUE_BACKFILL: must be positive"))
	}
	if c.MaxAttemptsAlarm < 1 {
		errs = append(errs, fmt.Errorf("MSGX_BACKFILL_MAX_ATTEMPTS=%d: must be at least 1", c.MaxAttemptsAlarm))
	}
	return errors.Join(errs...)
}

// Deps is what the sweeper works with.
type Deps struct {
	// PG is msgx's PostgreSQL (proc_state).
	PG *pgxpool.Pool
	// Inbox is the shared inbox, opened on the primary (sink.OpenMySQL),
	// where the marks are written. It may be nil in shadow mode only.
	Inbox *aodb.Tables
	// Zone is the inbox's zone (sink.InboxZone, docs/design.md#inbox-zone):
	// the mark is the pass's time as a DATETIME in it, like the AODB's own
	// CMINMSGS_DATE_RECEIVED. Required unless in shadow mode.
	Zone *sink.InboxZone
	// Timeout bounds every single database call (MSGX_DB_TIMEOUT); the MySQL
	// transaction of a pass (UPDATE, SELECT, COMMIT) is bounded by it as one
	// unit.
	Timeout time.Duration
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the sweeper's lines (required; component=backfill is
	// added).
	Log *slog.Logger
}

// Sweeper is the sweeper. Run it with Run on its own goroutine; Sweep does
// one pass. A Sweeper is safe for concurrent use (passes serialize on the
// advisory lock).
type Sweeper struct {
	cfg     Config
	pg      *pgxpool.Pool
	inbox   *aodb.Tables
	zone    *sink.InboxZone
	timeout time.Duration
	clk     clock.Clock
	log     *slog.Logger
	// wake ends a pause early (Notify).
	wake chan struct{}

	mu    sync.Mutex
	stats Stats
	// counted is when countPending last counted (the pass's clock), zero
	// before.
	counted time.Time
	// settled counts the rows settled since the last vacuum of the queue.
	settled int
}

// countEvery is how long a sweeper behind a backlog goes without counting
// its pending rows (Stats.Pending); countCaughtUpEvery how long one that
// catches up with every pass does (a backlog the sweeper keeps up with,
// woken by every group commit: at a million messages a count per pass was
// 16 ms of PostgreSQL, two or three times a second).
const (
	countEvery         = 10 * time.Second
	countCaughtUpEvery = time.Second
)

// Validate reports which collaborators every sweeper needs are missing
// (New adds the inbox and its zone outside shadow mode).
func (d Deps) Validate() error {
	return need.Check("backfill", need.Pool(d.PG), need.Timeout(d.Timeout), need.Clock(d.Clock), need.Log(d.Log))
}

// New checks cfg and deps and returns the sweeper.
func New(cfg Config, deps Deps) (*Sweeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Shadow mode writes no mark: it needs neither the inbox nor its zone.
	if err := errors.Join(deps.Validate(), need.Check("backfill",
		need.Has(deps.Inbox != nil || cfg.Shadow, "MySQL connection (only shadow mode may run without one)"),
		need.Has(deps.Zone != nil || cfg.Shadow, "inbox time zone"))); err != nil {
		return nil, err
	}
	return &Sweeper{
		cfg: cfg, pg: deps.PG, inbox: deps.Inbox, zone: deps.Zone,
		timeout: deps.Timeout, clk: deps.Clock, log: deps.Log.With("component", "backfill"), wake: make(chan struct{}, 1),
		stats: Stats{Abandoned: map[string]int64{}, Pending: -1, Shadow: cfg.Shadow},
	}, nil
}

// SweepResult is what one pass did.
type SweepResult struct {
	// Scanned is the number of rows claimed.
	Scanned int
	// Marked rows got the mark from this pass (UPDATE changed them).
	Marked int
	// AlreadyMarked rows carried a mark already (a crash window, or the
	// legacy system marked them); they are settled without overwriting it.
	AlreadyMarked int
	// Missing rows were abandoned MISSING_ROW.
	Missing int
	// Failed rows could not be marked (transient failure): attempt counted,
	// backoff set.
	Failed int
	// Deadline rows failed past R and were abandoned TRANSIENT_DEADLINE
	// (also counted in Failed).
	Deadline int
	// Busy: another holder of the backfill lock (a replay) was active; the
	// pass did nothing and the rows are swept next time.
	Busy bool
	// Shadow: shadow mode, nothing was done.
	Shadow bool
	// MySQLErr is the failure of the inbox write when Failed > 0.
	MySQLErr error
}

// Settled is the number of rows that left the backfill queue in this pass
// (marked, already marked or abandoned).
func (r SweepResult) Settled() int { return r.Marked + r.AlreadyMarked + r.Missing + r.Deadline }

// Stats are the sweeper's counters since start, for msgx status and
// metrics.
type Stats struct {
	// Marked is the number of marks written.
	Marked int64 `json:"marked"`
	// AlreadyMarked is the number of rows found marked and settled without
	// overwriting.
	AlreadyMarked int64 `json:"alreadyMarked"`
	// Abandoned counts abandoned rows by reason (MISSING_ROW,
	// TRANSIENT_DEADLINE).
	Abandoned map[string]int64 `json:"abandoned"`
	// TransientFailures is the number of failed row attempts.
	TransientFailures int64 `json:"transientFailures"`
	// Alarms is the number of rows that reached MSGX_BACKFILL_MAX_ATTEMPTS.
	Alarms int64 `json:"alarms"`
	// Pending is the number of terminal rows still owing the mark (not
	// abandoned), counted after a pass that left nothing due, and every
	// 10 s meanwhile; -1 until first counted.
	Pending int64 `json:"pending"`
	// Sweeps is the number of completed passes; FailedSweeps those that
	// could not complete (PostgreSQL unreachable, …).
	Sweeps       int64 `json:"sweeps"`
	FailedSweeps int64 `json:"failedSweeps"`
	// LastSweep is the time of the last completed pass (zero before).
	LastSweep time.Time `json:"lastSweep"`
	// LastError is the last pass or inbox-write failure, cleared by the next
	// pass that writes to the inbox successfully.
	LastError string `json:"lastError,omitempty"`
	// Shadow reports shadow mode (nothing is written).
	Shadow bool `json:"shadow"`
}

// Stats returns a copy of the counters.
func (b *Sweeper) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.Abandoned = make(map[string]int64, len(b.stats.Abandoned))
	for k, v := range b.stats.Abandoned {
		s.Abandoned[k] = v
	}
	return s
}

// Run sweeps every Period until ctx ends, then returns nil. A pass that
// fills its batch and settles rows is followed by the next at once (backlog
// drain). Failed passes are logged and retried next Period; nothing here
// stops the daemon. In shadow mode Run logs that once and idles.
func (b *Sweeper) Run(ctx context.Context) error {
	if b.cfg.Shadow {
		// Shadow mode must leave the inbox exactly as the legacy system
		// keeps it, and must not fill proc_state with attempts or
		// abandonments that would be wrong once msgx goes live: the rows
		// just stay pending and are marked by the first non-shadow pass.
		b.log.Info("shadow mode (MSGX_SHADOW=true): the backfill sweeper writes no processed marks; terminal rows stay pending")
		<-ctx.Done()
		return nil
	}
	b.log.Info("backfill sweeper started", "period", b.cfg.Period.String(), "batch", b.cfg.Batch,
		"backoff", b.cfg.Backoff.String(), "backoff_cap", b.cfg.BackoffCap.String(), "overdue", b.cfg.Overdue.String())
	for {
		started := b.clk.Now()
		res, err := b.Sweep(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := b.cfg.Period
		switch {
		case err != nil:
			level := slog.LevelError
			if retry.IsOutage(err) {
				level = slog.LevelWarn
			}
			b.log.Log(ctx, level, "backfill pass failed; retrying next period", "err", err, "retry_in", wait.String())
		case res.Scanned == b.cfg.Batch && res.Settled() > 0:
			// More rows are probably due: drain without waiting. Each such
			// pass settles at least one row, so this cannot spin.
			wait = 0
		}
		if wait == 0 {
			continue
		}
		select {
		case <-b.clk.After(wait):
		case <-b.wake:
			// Messages were completed: their marks are due now, or
			// WakeGap after the last pass began, so that a backlog's
			// group commits do not each start a pass (a transaction).
			if gap := min(b.cfg.WakeGap, b.cfg.Period) - b.clk.Now().Sub(started); gap > 0 {
				select {
				case <-b.clk.After(gap):
				case <-ctx.Done():
					return nil
				}
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// Notify tells the sweeper that messages became terminal: a pause ends at
// once, so that the processed marks keep up with a backlog instead of
// trailing it by a period. It never blocks; the period remains the
// fallback (the flights and refdata processors call it after each group
// commit, which also covers the router's terminal decisions in between).
func (b *Sweeper) Notify() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Sweep does one pass (see the package comment) and returns what it did. The
// error reports a pass that could not complete, with an empty result:
// PostgreSQL unreachable, or the results not saved (the marks written
// meanwhile are found "already marked" next time). A failed inbox write is not an error of the pass: it
// is recorded per row (attempts, backoff, maybe TRANSIENT_DEADLINE) and
// reported in SweepResult.Failed and MySQLErr.
func (b *Sweeper) Sweep(ctx context.Context) (SweepResult, error) {
	if b.cfg.Shadow {
		return SweepResult{Shadow: true}, nil
	}
	now := b.clk.Now()
	res, err := b.sweep(ctx, now)
	if err != nil {
		if ctx.Err() != nil {
			return SweepResult{}, ctx.Err()
		}
		b.mu.Lock()
		b.stats.FailedSweeps++
		b.stats.LastError = err.Error()
		b.mu.Unlock()
		return SweepResult{}, err
	}
	b.mu.Lock()
	b.stats.Sweeps++
	b.stats.LastSweep = now
	b.stats.Marked += int64(res.Marked)
	b.stats.AlreadyMarked += int64(res.AlreadyMarked)
	b.stats.Abandoned[message.AbandonMissingRow] += int64(res.Missing)
	b.stats.Abandoned[message.AbandonTransientDeadline] += int64(res.Deadline)
	b.stats.TransientFailures += int64(res.Failed)
	b.settled += res.Settled()
	vacuum := b.cfg.VacuumRows > 0 && b.settled >= b.cfg.VacuumRows
	if vacuum {
		b.settled = 0
	}
	// LastError stays until the inbox is written successfully again: a
	// pass with nothing due (rows backing off) proves nothing.
	if res.MySQLErr != nil {
		b.stats.LastError = res.MySQLErr.Error()
	} else if res.Scanned > 0 {
		b.stats.LastError = ""
	}
	b.mu.Unlock()
	if vacuum {
		b.vacuumQueue(ctx)
	}
	return res, nil
}

// vacuumQueue vacuums backfill_owed (skipped while another vacuum of it
// runs), outside any transaction (VACUUM cannot run in one). A failed
// vacuum is a warning: the marks are recorded all the same, autovacuum
// remains, and the next one is tried after as many rows again.
func (b *Sweeper) vacuumQueue(ctx context.Context) {
	vctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if err := sink.VacuumBackfills(vctx, b.pg); err != nil && ctx.Err() == nil {
		b.log.Warn("vacuuming the backfill queue failed; autovacuum will", "err", err)
	}
}

func (b *Sweeper) sweep(ctx context.Context, now time.Time) (SweepResult, error) {
	var res SweepResult
	tx, err := b.beginPG(ctx)
	if err != nil {
		return res, err
	}
	defer b.rollback(tx)

	// The lock is taken with try: a pass never waits behind an operator's
	// replay; it simply sweeps next period.
	ok, err := b.tryLock(ctx, tx)
	if err != nil {
		return res, err
	}
	if !ok {
		b.log.Debug("backfill lock held by a replay or reopen; pass skipped")
		res.Busy = true
		return res, nil
	}

	claims, err := b.scan(ctx, tx, now)
	if err != nil {
		return res, err
	}
	res.Scanned = len(claims)
	if len(claims) == 0 {
		// Nothing due: the count is the pass's only result, read in its
		// transaction, which rolls back (no commit of its own).
		b.countPending(ctx, tx, now)
		return res, nil
	}

	ids := make([]int64, len(claims))
	for i, c := range claims {
		ids[i] = c.MsgID
	}
	var mark string
	var outcomes map[int64]aodb.Mark
	var existing map[int64]string
	loc, myErr := b.zone.Location(ctx)
	if myErr == nil {
		mark = now.In(loc).Truncate(time.Second).Format(time.DateTime)
		outcomes, existing, myErr = b.inbox.MarkProcessed(ctx, ids, mark)
	}
	if myErr != nil && ctx.Err() != nil {
		// Shutdown is not an outage: count nothing; the rows stay due.
		return res, ctx.Err()
	}
	res.MySQLErr = myErr

	if err := b.record(ctx, tx, now, claims, outcomes, myErr, &res); err != nil {
		return res, err
	}
	// Counted inside the transaction, with this pass's results: one commit
	// for both (PostgreSQL commits per message, docs/design.md#backfill).
	// A full pass leaves more due, which the next pass claims at once: the
	// count then waits for the pass that catches up (countCaughtUpEvery
	// after the last), or countEvery. It is
	// a count over every owed row, which a backlog of a million messages
	// makes a scan of tens of milliseconds per pass (docs/benchmarks.md).
	b.mu.Lock()
	since := now.Sub(b.counted)
	count := len(claims) < b.cfg.Batch && since >= countCaughtUpEvery || since >= countEvery
	b.mu.Unlock()
	if count {
		b.countPending(ctx, tx, now)
	}
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		// Crash window: the marks may be in the inbox while the rows are
		// still in the queue; the next pass finds them already marked.
		return res, fmt.Errorf("committing backfill results of %d rows: %w", len(claims), err)
	}
	b.logOutcomes(claims, outcomes, existing, myErr, now, mark)
	return res, nil
}

func (b *Sweeper) beginPG(ctx context.Context) (pgx.Tx, error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	tx, err := b.pg.Begin(cctx)
	if err != nil {
		return nil, fmt.Errorf("starting backfill transaction: %w", err)
	}
	return tx, nil
}

func (b *Sweeper) rollback(tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	_ = tx.Rollback(ctx) // no-op after Commit
}

func (b *Sweeper) tryLock(ctx context.Context, tx pgx.Tx) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return sink.TryXactLock(cctx, tx, sink.LockBackfill)
}

// scan claims the rows due (docs/design.md#backfill-predicate).
func (b *Sweeper) scan(ctx context.Context, tx pgx.Tx, now time.Time) ([]sink.BackfillClaim, error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return sink.ClaimBackfills(cctx, tx, now, now.Add(-b.cfg.Overdue), b.cfg.Batch)
}

// record decides what each claimed row's outcome means — settled, abandoned
// MISSING_ROW, or an attempt more with its backoff, abandoned
// TRANSIENT_DEADLINE past R — and writes it inside the pass's transaction
// (sink.RecordBackfills).
func (b *Sweeper) record(ctx context.Context, tx pgx.Tx, now time.Time, claims []sink.BackfillClaim, outcomes map[int64]aodb.Mark,
	myErr error, res *SweepResult) error {
	var o sink.BackfillOutcome
	for _, c := range claims {
		m := aodb.MarkFailed
		if myErr == nil {
			m = outcomes[c.MsgID]
		}
		switch m {
		case aodb.MarkWritten, aodb.MarkFound:
			o.Done = append(o.Done, c.MsgID)
			if c.Attempts > 0 {
				o.Retried = append(o.Retried, c.MsgID)
			}
			if m == aodb.MarkWritten {
				res.Marked++
			} else {
				res.AlreadyMarked++
			}
		case aodb.MarkMissing:
			o.Missing = append(o.Missing, c.MsgID)
			res.Missing++
		default:
			attempts := c.Attempts + 1
			// Past R the row is abandoned instead of waiting again; before
			// R it only backs off, whatever its attempt count.
			abandon := c.EnqueuedAt.Before(now.Add(-b.cfg.Overdue))
			o.Failed = append(o.Failed, c.MsgID)
			o.NextAt = append(o.NextAt, now.Add(retry.Exponential(b.cfg.Backoff, b.cfg.BackoffCap, attempts)))
			o.Abandon = append(o.Abandon, abandon)
			res.Failed++
			if abandon {
				res.Deadline++
			}
		}
	}
	o.Error = "inbox row still unmarked after the update"
	if myErr != nil {
		o.Error = message.Clip(myErr.Error(), 512)
	}
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return sink.RecordBackfills(cctx, tx, o, now)
}

// logOutcomes logs after the commit, so that a line never reports a result
// that was rolled back.
func (b *Sweeper) logOutcomes(claims []sink.BackfillClaim, outcomes map[int64]aodb.Mark, existing map[int64]string, myErr error,
	now time.Time, mark string) {
	failed := 0
	for _, c := range claims {
		o := aodb.MarkFailed
		if myErr == nil {
			o = outcomes[c.MsgID]
		}
		switch o {
		case aodb.MarkWritten:
			b.log.Debug("inbox row marked processed", "msg_id", c.MsgID, "mark", mark)
		case aodb.MarkFound:
			b.log.Info("inbox row already marked; kept its mark", "msg_id", c.MsgID, "mark", existing[c.MsgID])
		case aodb.MarkMissing:
			b.log.Warn("inbox row missing; backfill abandoned (MISSING_ROW), reconcile by hand", "msg_id", c.MsgID,
				"reason", message.AbandonMissingRow)
		default:
			failed++
			attempts := c.Attempts + 1
			if c.EnqueuedAt.Before(now.Add(-b.cfg.Overdue)) {
				b.log.Error("processed mark still not written after MSGX_OVERDUE_BACKFILL; backfill abandoned (TRANSIENT_DEADLINE)",
					"msg_id", c.MsgID, "reason", message.AbandonTransientDeadline, "attempts", attempts, "enqueued_at", c.EnqueuedAt, "err", myErr)
				continue
			}
			if attempts == b.cfg.MaxAttemptsAlarm {
				b.mu.Lock()
				b.stats.Alarms++
				b.mu.Unlock()
				b.log.Error("processed mark keeps failing (MSGX_BACKFILL_MAX_ATTEMPTS reached; still retried until MSGX_OVERDUE_BACKFILL)",
					"msg_id", c.MsgID, "attempts", attempts, "err", myErr)
				continue
			}
			b.log.Debug("processed mark failed; backing off", "msg_id", c.MsgID, "attempts", attempts,
				"retry_in", retry.Exponential(b.cfg.Backoff, b.cfg.BackoffCap, attempts).String())
		}
	}
	if failed > 0 {
		// One line per pass, not per row: an outage would otherwise log
		// the whole batch every period.
		level := slog.LevelError
		if retry.IsOutage(myErr) {
			level = slog.LevelWarn
		}
		b.log.Log(context.Background(), level, "writing processed marks failed; rows back off", "rows", failed,
			"msg_id", claims[0].MsgID, "err", myErr)
	}
}

// countPending refreshes Stats.Pending, the terminal rows still owing their
// mark, within the pass's transaction tx (its own writes counted), under a
// savepoint: the count is a statistic, and a failed one is logged and
// leaves the pass's results to commit.
func (b *Sweeper) countPending(ctx context.Context, tx pgx.Tx, now time.Time) {
	b.mu.Lock()
	b.counted = now
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	sp, err := tx.Begin(ctx)
	if err != nil {
		b.log.Debug("counting pending backfills", "err", err)
		return
	}
	n, err := sink.CountOwedBackfills(ctx, sp)
	if err != nil {
		_ = sp.Rollback(ctx)
		b.log.Debug("counting pending backfills", "err", err)
		return
	}
	if err := sp.Commit(ctx); err != nil {
		b.log.Debug("counting pending backfills", "err", err)
		return
	}
	b.mu.Lock()
	b.stats.Pending = n
	b.mu.Unlock()
}
