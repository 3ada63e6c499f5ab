package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/retry"
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

// Runner runs the maintenance jobs. Run it with Run on its own
// goroutine; RunOnce does one pass. It is safe for concurrent use.
type Runner struct {
	cfg     Config
	pg      *pgxpool.Pool
	timeout time.Duration
	clk     clock.Clock
	log     *slog.Logger
	loc     *time.Location

	pass sync.Mutex // one pass at a time per process (Run and a manual RunOnce)

	mu    sync.Mutex
	stats Stats
}

// New checks cfg and deps and returns the runner.
func New(cfg Config, deps Deps) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var errs []error
	if deps.PG == nil {
		errs = append(errs, errors.New("maintenance: no PostgreSQL pool"))
	}
	if deps.Timeout <= 0 {
		errs = append(errs, errors.New("MSGX_DB_TIMEOUT: must be positive"))
	}
	if deps.Clock == nil {
		errs = append(errs, errors.New("maintenance: no clock"))
	}
	if deps.Log == nil {
		errs = append(errs, errors.New("maintenance: no logger"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	loc := deps.Location
	if loc == nil {
		loc = time.UTC
	}
	return &Runner{cfg: cfg, pg: deps.PG, timeout: deps.Timeout, clk: deps.Clock, log: deps.Log.With("component", "maintenance"), loc: loc}, nil
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
	// Runs counts completed passes, FailedRuns those that stopped on an
	// error (what they did before the error is counted above).
	Runs       int64 `json:"runs"`
	FailedRuns int64 `json:"failedRuns"`
	// LastRun is the start of the last pass (zero before); LastDuration
	// its length.
	LastRun      time.Time     `json:"lastRun"`
	LastDuration time.Duration `json:"lastDuration"`
	// LastError is the last failure, cleared by the next clean pass.
	LastError string `json:"lastError,omitempty"`
}

// Stats returns a copy of the counters.
func (m *Runner) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Run does a pass at once and then every Period until ctx ends, then
// returns nil. A failed pass is logged and retried next Period; nothing here
// stops the daemon. The waits are on the injected clock.
func (m *Runner) Run(ctx context.Context) error {
	m.log.Info("maintenance started", "period", m.cfg.Period.String(), "archive_after", m.cfg.ArchiveAfter.String(),
		"archive_batch", m.cfg.ArchiveBatch, "snap_log_retention", m.cfg.SnapLogRetention.String(),
		"flight_change_retention", m.cfg.FlightChangeRetention.String())
	for {
		res, err := m.RunOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
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
		if err := clock.Sleep(ctx, m.clk, m.cfg.Period); err != nil {
			return nil
		}
	}
}

// RunOnce does one pass: archive every candidate, batch by batch, then the
// snap-log and the flight-change retention. Every job runs even when
// another fails; the error joins their failures and the result counts what
// was done before them.
func (m *Runner) RunOnce(ctx context.Context) (Result, error) {
	m.pass.Lock()
	defer m.pass.Unlock()
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
	err := errors.Join(errArchive, errSnap, errChange)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Archived += int64(res.Archived)
	m.stats.TransitionsDeleted += int64(res.TransitionsDeleted)
	m.stats.SnapLogDeleted += int64(res.SnapLogDeleted)
	m.stats.FlightChangesDeleted += int64(res.FlightChangesDeleted)
	m.stats.LastRun = now
	m.stats.LastDuration = res.Duration
	if err != nil {
		m.stats.FailedRuns++
		m.stats.LastError = err.Error()
	} else {
		m.stats.Runs++
		m.stats.LastError = ""
	}
	return res, err
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

// procStateColumns is every column of proc_state (0002, 0018, 0026, 0028), in the
// order of proc_state_hst (0007, 0018, 0026).
var procStateColumns = []string{
	"msg_id", "state", "identity_key", "sndr", "msg_type", "msg_styp", "seqn", "attempts", "next_attempt_at",
	"error_class", "reason", "last_error", "received_at", "enqueued_at", "updated_at", "routed_at", "n_transitions",
	"n_applied", "backfill_at", "backfill_next_at", "backfill_attempts", "backfill_error", "backfill_abandoned_at",
	"backfill_abandoned_reason", "replay_gen", "inbox_partition", "inbox_offset", "decided_at", "flight_plan",
}

// archivable is the candidate condition on alias a: settled (terminal,
// its processed mark confirmed — no longer owed — and not abandoned) and
// unchanged since $1, the cutoff (now − MSGX_ARCHIVE_AFTER). The states and
// IS NULL test are literals so that the planner matches the partial index
// proc_state_archive; the few rows of it still owing their mark are
// skipped by their backfill_owed row.
func archivable(a string) string {
	return a + `.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND ` + a + `.backfill_abandoned_at IS NULL AND ` +
		a + `.updated_at < $1 AND NOT EXISTS (SELECT 1 FROM backfill_owed o WHERE o.msg_id = ` + a + `.msg_id)`
}

func prefixed(a string, cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = a + "." + c
	}
	return strings.Join(out, ", ")
}

// archiveSQL builds the one-statement batch described in the package comment.
// $1 cutoff, $2 now (archive time), $3 batch size, $4 (byIDs only) the IDs
// to restrict the batch to.
func archiveSQL(byIDs bool) string {
	restrict := ""
	if byIDs {
		restrict = ` AND s.msg_id = ANY($4)`
	}
	cols := strings.Join(procStateColumns, ", ")
	return `WITH cand AS (
		SELECT ` + prefixed("s", procStateColumns) + ` FROM proc_state s
		WHERE ` + archivable("s") + restrict + `
		ORDER BY s.updated_at, s.msg_id
		LIMIT $3
		FOR UPDATE SKIP LOCKED
	), moved AS (
		UPDATE proc_state p SET state = 'ARCHIVED', sndr = NULL, msg_type = NULL, msg_styp = NULL, seqn = NULL,
			attempts = 0, next_attempt_at = NULL, error_class = NULL, reason = NULL, last_error = NULL,
			received_at = NULL, updated_at = $2, routed_at = NULL, n_transitions = NULL, n_applied = 0,
			backfill_at = NULL, backfill_next_at = NULL, backfill_attempts = 0, backfill_error = NULL,
			backfill_abandoned_at = NULL, backfill_abandoned_reason = NULL, replay_gen = 0
		FROM cand c
		WHERE p.msg_id = c.msg_id AND ` + archivable("p") + `
		RETURNING ` + prefixed("c", procStateColumns) + `
	), hst AS (
		INSERT INTO proc_state_hst (` + cols + `, archived_at)
		SELECT ` + cols + `, $2 FROM moved
		RETURNING msg_id
	), ta AS (
		DELETE FROM transition_applied WHERE msg_id IN (SELECT msg_id FROM hst)
		RETURNING 1
	)
	SELECT (SELECT count(*) FROM hst), (SELECT count(*) FROM ta)`
}

var (
	archiveBatchSQL = archiveSQL(false)
	archiveIDsSQL   = archiveSQL(true)
)

// archiveBatch archives up to one batch of candidates (restricted to ids
// when ids is not nil) and returns how many rows it archived and how many
// transition_applied rows it deleted.
func (m *Runner) archiveBatch(ctx context.Context, now time.Time, ids []int64) (archived, transitions int, err error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	cutoff := now.Add(-m.cfg.ArchiveAfter)
	var n, td int64
	if ids == nil {
		err = m.pg.QueryRow(ctx, archiveBatchSQL, cutoff, now, m.cfg.ArchiveBatch).Scan(&n, &td)
	} else {
		err = m.pg.QueryRow(ctx, archiveIDsSQL, cutoff, now, len(ids), ids).Scan(&n, &td)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("archiving proc_state rows settled before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	return int(n), int(td), nil
}

// deleteOrphanTransitions removes transition_applied rows of ARCHIVED
// messages. Archiving deletes a message's rows in the same statement, but a
// transition of an archived message delivered again later (a Kafka
// re-delivery racing the archive) inserts its mark once more before
// MarkApplied finds the message no longer ROUTED. Such rows are rare; the
// join walks transition_applied, which only holds unarchived messages.
func (m *Runner) deleteOrphanTransitions(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	tag, err := m.pg.Exec(ctx, `DELETE FROM transition_applied t USING proc_state p
		WHERE p.msg_id = t.msg_id AND p.state = 'ARCHIVED'`)
	if err != nil {
		return 0, fmt.Errorf("deleting transition marks of archived messages: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ArchiveCandidates lists, oldest settled first, up to limit messages that a
// pass would archive now (a dry run; limit <= 0 means one batch).
func (m *Runner) ArchiveCandidates(ctx context.Context, limit int) ([]int64, error) {
	if limit <= 0 {
		limit = m.cfg.ArchiveBatch
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	cutoff := m.clk.Now().Add(-m.cfg.ArchiveAfter)
	rows, err := m.pg.Query(ctx, `SELECT s.msg_id FROM proc_state s WHERE `+archivable("s")+`
		ORDER BY s.updated_at, s.msg_id LIMIT $2`, cutoff, limit)
	if err != nil {
		return nil, fmt.Errorf("listing archive candidates: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("listing archive candidates: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing archive candidates: %w", err)
	}
	return ids, nil
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
	m.stats.Archived += int64(res.Archived)
	m.stats.TransitionsDeleted += int64(res.TransitionsDeleted)
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
	total := 0
	for ctx.Err() == nil {
		n, err := func() (int64, error) {
			ctx, cancel := context.WithTimeout(ctx, m.timeout)
			defer cancel()
			tag, err := m.pg.Exec(ctx, `DELETE FROM schd_snap_log WHERE id IN (
					SELECT id FROM schd_snap_log WHERE scope_end < $1 AND recv_at < $2
					ORDER BY scope_end, recv_at LIMIT $3)`, day, cutoff, m.cfg.ArchiveBatch)
			if err != nil {
				return 0, err
			}
			return tag.RowsAffected(), nil
		}()
		if err != nil {
			return total, fmt.Errorf("deleting schd_snap_log rows received before %s with scope before %s: %w",
				cutoff.Format(time.RFC3339), day.Format(time.DateOnly), err)
		}
		total += int(n)
		if int(n) < m.cfg.ArchiveBatch {
			break
		}
	}
	return total, ctx.Err()
}

// flightChangeRetention deletes flight_change rows written more than
// MSGX_FLIGHT_CHANGE_RETENTION ago, in batches (docs/design.md#flight-change).
func (m *Runner) flightChangeRetention(ctx context.Context, now time.Time) (int, error) {
	cutoff := now.Add(-m.cfg.FlightChangeRetention)
	total := 0
	for ctx.Err() == nil {
		n, err := func() (int64, error) {
			ctx, cancel := context.WithTimeout(ctx, m.timeout)
			defer cancel()
			// A version's msg_event row (where its event landed, 0026)
			// goes with it.
			var n int64
			err := m.pg.QueryRow(ctx, `WITH d AS (
					DELETE FROM flight_change WHERE (flid, state_version, msg_id) IN (
						SELECT flid, state_version, msg_id FROM flight_change WHERE recorded_at < $1
						ORDER BY recorded_at LIMIT $2)
					RETURNING flid, state_version, msg_id),
				e AS (
					DELETE FROM msg_event m USING d
					WHERE m.flid = d.flid AND m.state_version = d.state_version AND m.msg_id = d.msg_id)
				SELECT count(*) FROM d`, cutoff, m.cfg.ArchiveBatch).Scan(&n)
			return n, err
		}()
		if err != nil {
			return total, fmt.Errorf("deleting flight_change rows written before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		total += int(n)
		if int(n) < m.cfg.ArchiveBatch {
			break
		}
	}
	return total, ctx.Err()
}
