package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/need"
	"msgx/internal/retry"
	"msgx/sink"
)

// Config configures the maintenance jobs. Durations are Go
// durations ("24h", "2160h").
type Config struct {
	// ArchiveAfter is how long a terminal, backfill-settled proc_state row
	// stays unchanged (updated_at) before it is archived: moved to
	// proc_state_hst, leaving an ARCHIVED shadow that keeps its identity
	// (the original design suggests 1 to 7 days; docs/design.md#archive).
	// An archived DEAD message can no longer be replayed, so keep it above
	// the time operators take to replay.
	ArchiveAfter time.Duration `env:"MSGX_ARCHIVE_AFTER" envDefault:"24h"`
	// ArchiveBatch is the number of rows archived (and snap-log rows
	// deleted) per transaction (1..10000). Small transactions keep the row
	// locks short.
	ArchiveBatch int `env:"MSGX_ARCHIVE_BATCH" envDefault:"1000"`
	// SnapLogRetention is how long schd_snap_log rows are kept, both after
	// they were received and after the last day they cover (90 days).
	SnapLogRetention time.Duration `env:"MSGX_SNAP_LOG_RETENTION" envDefault:"2160h"`
	// FlightChangeRetention is how long flight_change rows (the change
	// history of the flights, one row per version) are kept after they were
	// written (90 days; docs/design.md#flight-change). The replay dry run
	// lists what a replay overwrites from it, so keep it above the time
	// operators take to replay.
	FlightChangeRetention time.Duration `env:"MSGX_FLIGHT_CHANGE_RETENTION" envDefault:"2160h"`
	// Period is the pause between two maintenance passes (archive,
	// retention).
	Period time.Duration `env:"MSGX_MAINTENANCE_PERIOD" envDefault:"1h"`
}

// Validate checks every value; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if c.ArchiveAfter <= 0 {
		errs = append(errs, fmt.Errorf("MSGX_ARCHIVE_AFTER=%s: must be positive", c.ArchiveAfter))
	}
	if c.ArchiveBatch < 1 || c.ArchiveBatch > 10000 {
		errs = append(errs, fmt.Errorf("MSGX_ARCHIVE_BATCH=%d: must be 1..10000", c.ArchiveBatch))
	}
	if c.SnapLogRetention <= 0 {
		errs = append(errs, fmt.Errorf("MSGX_SNAP_LOG_RETENTION=%s: must be positive", c.SnapLogRetention))
	}
	if c.FlightChangeRetention <= 0 {
		errs = append(errs, fmt.Errorf("MSGX_FLIGHT_CHANGE_RETENTION=%s: must be positive", c.FlightChangeRetention))
	}
	if c.Period <= 0 {
		errs = append(errs, fmt.Errorf("MSGX_MAINTENANCE_PERIOD=%s: must be positive", c.Period))
	}
	return errors.Join(errs...)
}

// Deps is what the maintenance jobs work with.
type Deps struct {
	// PG is msgx's PostgreSQL.
	PG *pgxpool.Pool
	// Timeout bounds every single database call (MSGX_DB_TIMEOUT), one
	// archive or retention batch included.
	Timeout time.Duration
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the jobs' lines (required; component=maintenance is
	// added).
	Log *slog.Logger
	// Location is the airport time zone, in which schd_snap_log.scope_end
	// dates are days (MSGX_AIRPORT_TZ). Optional: UTC when nil, which moves
	// the retention boundary of a 90-day log by a few hours at most.
	Location *time.Location
}

// Runner is the periodic maintenance job: every Period, the proc_state
// archive, then the snap-log and the flight-change retention. Run it with
// Run on its own goroutine; RunOnce does one pass. It is safe for
// concurrent use.
type Runner struct {
	job
	cfg     Config
	pg      *pgxpool.Pool
	timeout time.Duration
	loc     *time.Location
	// counts are what the passes did, under job.mu.
	counts Stats
}

// New checks cfg and deps and returns the runner.
func New(cfg Config, deps Deps) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.Validate(); err != nil {
		return nil, err
	}
	loc := deps.Location
	if loc == nil {
		loc = time.UTC
	}
	return &Runner{job: newJob("maintenance", deps.Clock, deps.Log, every(cfg.Period)), cfg: cfg, pg: deps.PG,
		timeout: deps.Timeout, loc: loc}, nil
}

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error {
	return need.Check("maintenance", need.Pool(d.PG), need.Timeout(d.Timeout), need.Clock(d.Clock), need.Log(d.Log))
}

// Result is what one pass did.
type Result struct {
	// Archived is the number of proc_state rows moved to proc_state_hst.
	Archived int
	// ArchiveBatches is the number of archive transactions that archived
	// at least one row.
	ArchiveBatches int
	// TransitionsDeleted is the number of transition_applied rows deleted
	// with the archived messages (or left behind by a late re-delivery of
	// an archived message's transition).
	TransitionsDeleted int
	// SnapLogDeleted is the number of expired schd_snap_log rows deleted.
	SnapLogDeleted int
	// FlightChangesDeleted is the number of expired flight_change rows
	// deleted.
	FlightChangesDeleted int
	// Duration is the pass's wall time.
	Duration time.Duration
}

// Stats are the runner's counters since start, for msgx status
// and metrics.
type Stats struct {
	// Archived is the number of proc_state rows archived.
	Archived int64 `json:"archived"`
	// TransitionsDeleted is the number of transition_applied rows deleted.
	TransitionsDeleted int64 `json:"transitionsDeleted"`
	// SnapLogDeleted is the number of schd_snap_log rows deleted.
	SnapLogDeleted int64 `json:"snapLogDeleted"`
	// FlightChangesDeleted is the number of flight_change rows deleted.
	FlightChangesDeleted int64 `json:"flightChangesDeleted"`
	// Passes count the passes (a failed one's work before the error is
	// counted above).
	Passes
}

// Stats returns a copy of the counters.
func (m *Runner) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.counts
	s.Passes = m.passes
	return s
}

// Run does a pass at once and then every Period until ctx ends, then
// returns nil. A failed pass is logged and retried next Period; nothing here
// stops the daemon. The waits are on the injected clock.
func (m *Runner) Run(ctx context.Context) error {
	m.log.Info("maintenance started", "period", m.cfg.Period.String(), "archive_after", m.cfg.ArchiveAfter.String(),
		"archive_batch", m.cfg.ArchiveBatch, "snap_log_retention", m.cfg.SnapLogRetention.String(),
		"flight_change_retention", m.cfg.FlightChangeRetention.String())
	var res Result
	return m.run(ctx, func(ctx context.Context) (err error) {
		res, err = m.onePass(ctx)
		return err
	}, func(err error) {
		switch {
		case err != nil:
			level := slog.LevelError
			if retry.IsOutage(err) {
				level = slog.LevelWarn
			}
			m.log.Log(ctx, level, "maintenance pass failed; retrying next period", "err", err,
				"archived", res.Archived, "snap_log_deleted", res.SnapLogDeleted, "flight_changes_deleted", res.FlightChangesDeleted,
				"retry_in", m.cfg.Period.String())
		case res.Archived > 0 || res.SnapLogDeleted > 0 || res.TransitionsDeleted > 0 || res.FlightChangesDeleted > 0:
			m.log.Info("maintenance pass done", "archived", res.Archived, "transitions_deleted", res.TransitionsDeleted,
				"snap_log_deleted", res.SnapLogDeleted, "flight_changes_deleted", res.FlightChangesDeleted, "duration", res.Duration.String())
		default:
			m.log.Debug("maintenance pass: nothing to do")
		}
	})
}

// RunOnce does one pass now (counted as Run's are).
func (m *Runner) RunOnce(ctx context.Context) (Result, error) {
	var res Result
	err := m.once(ctx, func(ctx context.Context) (err error) {
		res, err = m.onePass(ctx)
		return err
	})
	return res, err
}

// onePass is one pass: archive every candidate, batch by batch, then the
// snap-log and the flight-change retention. Every step runs even when
// another fails; the error joins their failures and the result counts what
// was done before them.
func (m *Runner) onePass(ctx context.Context) (Result, error) {
	start := time.Now()
	now := m.clk.Now()
	var res Result
	errArchive := m.archiveAll(ctx, now, &res)
	var errSnap, errChange error
	if ctx.Err() == nil {
		var n int
		n, errSnap = m.snapLogRetention(ctx, now)
		res.SnapLogDeleted = n
	}
	if ctx.Err() == nil {
		var n int
		n, errChange = m.flightChangeRetention(ctx, now)
		res.FlightChangesDeleted = n
	}
	res.Duration = time.Since(start)
	m.mu.Lock()
	m.counts.Archived += int64(res.Archived)
	m.counts.TransitionsDeleted += int64(res.TransitionsDeleted)
	m.counts.SnapLogDeleted += int64(res.SnapLogDeleted)
	m.counts.FlightChangesDeleted += int64(res.FlightChangesDeleted)
	m.mu.Unlock()
	return res, errors.Join(errArchive, errSnap, errChange)
}

// archiveAll archives batch after batch until a batch comes back short:
// then there is nothing left that is not locked by someone else (those
// rows wait for the next pass). Every batch that is not short archived a
// full batch, so the loop ends.
func (m *Runner) archiveAll(ctx context.Context, now time.Time, res *Result) error {
	for ctx.Err() == nil {
		n, td, err := m.archiveBatch(ctx, now, nil)
		if err != nil {
			return err
		}
		res.Archived += n
		res.TransitionsDeleted += td
		if n > 0 {
			res.ArchiveBatches++
			m.log.Debug("archived a batch", "rows", n, "transitions_deleted", td)
		}
		if n < m.cfg.ArchiveBatch {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	td, err := m.deleteOrphanTransitions(ctx)
	res.TransitionsDeleted += td
	return err
}

// archiveBatch archives up to one batch of candidates (restricted to ids
// when ids is not nil) and returns how many rows it archived and how many
// transition_applied rows it deleted.
func (m *Runner) archiveBatch(ctx context.Context, now time.Time, ids []int64) (archived, transitions int, err error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	limit := m.cfg.ArchiveBatch
	if ids != nil {
		limit = len(ids)
	}
	return sink.ArchiveBatch(ctx, m.pg, now.Add(-m.cfg.ArchiveAfter), now, limit, ids)
}

// deleteOrphanTransitions removes the transition_applied rows of archived
// messages a late re-delivery left behind (sink.DeleteOrphanTransitions).
func (m *Runner) deleteOrphanTransitions(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return sink.DeleteOrphanTransitions(ctx, m.pg)
}

// ArchiveCandidates lists, oldest settled first, up to limit messages that a
// pass would archive now (a dry run; limit <= 0 means one batch).
func (m *Runner) ArchiveCandidates(ctx context.Context, limit int) ([]int64, error) {
	if limit <= 0 {
		limit = m.cfg.ArchiveBatch
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return sink.ArchiveCandidates(ctx, m.pg, m.clk.Now().Add(-m.cfg.ArchiveAfter), limit)
}

// ArchiveResult is what Archive did.
type ArchiveResult struct {
	// Archived is the number of rows archived.
	Archived int
	// Skipped is the number of IDs that were not archived: no longer (or
	// never) candidates, unknown, already archived, or locked by someone
	// else at that moment. Their rows are left as they are.
	Skipped int
	// TransitionsDeleted is the number of transition_applied rows deleted.
	TransitionsDeleted int
}

// Archive archives the given messages, each only if it is still a
// candidate now (the same conditional write as a pass, in batches of
// MSGX_ARCHIVE_BATCH). It serves operators who archive what
// ArchiveCandidates listed, and shows that a row changed in between is
// skipped, not archived.
func (m *Runner) Archive(ctx context.Context, ids []int64) (ArchiveResult, error) {
	var res ArchiveResult
	now := m.clk.Now()
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), m.cfg.ArchiveBatch)]
		ids = ids[len(chunk):]
		n, td, err := m.archiveBatch(ctx, now, chunk)
		if err != nil {
			return res, err
		}
		res.Archived += n
		res.Skipped += len(chunk) - n
		res.TransitionsDeleted += td
	}
	m.mu.Lock()
	m.counts.Archived += int64(res.Archived)
	m.counts.TransitionsDeleted += int64(res.TransitionsDeleted)
	m.mu.Unlock()
	if res.Archived > 0 || res.Skipped > 0 {
		m.log.Info("archived messages on request", "archived", res.Archived, "skipped", res.Skipped)
	}
	return res, nil
}

// snapLogRetention deletes expired schd_snap_log rows in batches: received more
// than MSGX_SNAP_LOG_RETENTION ago and covering no day after the day of that
// cutoff (by (scope_end, recv_at), docs/design.md#snaplog-retention). Both must
// hold: a package about a far future day stays until that day is old too.
func (m *Runner) snapLogRetention(ctx context.Context, now time.Time) (int, error) {
	cutoff := now.Add(-m.cfg.SnapLogRetention)
	local := cutoff.In(m.loc)
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
	return m.batches(ctx, func(ctx context.Context) (int, error) {
		return sink.ExpireSnapLog(ctx, m.pg, day, cutoff, m.cfg.ArchiveBatch)
	})
}

// flightChangeRetention deletes flight_change rows written more than
// MSGX_FLIGHT_CHANGE_RETENTION ago, in batches (docs/design.md#flight-change).
func (m *Runner) flightChangeRetention(ctx context.Context, now time.Time) (int, error) {
	cutoff := now.Add(-m.cfg.FlightChangeRetention)
	return m.batches(ctx, func(ctx context.Context) (int, error) {
		return sink.ExpireFlightChanges(ctx, m.pg, cutoff, m.cfg.ArchiveBatch)
	})
}

// batches runs batch, each call under the call timeout, until one deletes
// fewer than MSGX_ARCHIVE_BATCH rows, and returns how many rows they
// deleted.
func (m *Runner) batches(ctx context.Context, batch func(context.Context) (int, error)) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := func() (int, error) {
			ctx, cancel := context.WithTimeout(ctx, m.timeout)
			defer cancel()
			return batch(ctx)
		}()
		if err != nil {
			return total, err
		}
		total += n
		if n < m.cfg.ArchiveBatch {
			break
		}
	}
	return total, ctx.Err()
}
