package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrCursorMoved means the stored watermark is not the one this instance
// read: another instance advanced it. The bridge must stop and re-acquire the
// ingest lock rather than overwrite it.
var ErrCursorMoved = errors.New("inbox cursor moved under us: another ingest instance is active")

// Cursor is the bridge's durable position: every inbox ID up to Watermark has
// been produced. HoleSince is when the gap right after the watermark was
// first seen (zero when there is none) and HoleEnd the last ID of that gap as
// first observed: a gap that starts at or before HoleEnd is the same hole
// partly filled and keeps its timer; any other gap is new and starts a fresh
// timer.
type Cursor struct {
	Watermark int64
	HoleSince time.Time
	HoleEnd   int64
}

// HasHole reports whether a hole timer is running.
func (c Cursor) HasHole() bool { return !c.HoleSince.IsZero() }

// Released is the cursor after gap g was released as permanent: the
// watermark jumps to the ID before the first existing row and the timer
// stops. Only the hole itself is skipped, never an existing row.
func (c Cursor) Released(g Gap) Cursor {
	return Cursor{Watermark: g.To}
}

// Gap is a run of missing IDs with at least one existing row after it.
type Gap struct {
	// From and To are the first and last missing IDs.
	From, To int64
}

// Hole is a released gap.
type Hole struct {
	Gap
	ObservedAt time.Time
	ReleasedAt time.Time
	Reason     string
}

// Cursors is the store of the ingest bridge's state: its cursor
// (inbox_cursor), the holes it released (inbox_hole) and the late rows it
// found (inbox_late_row). The bridge writes it; the status report and msgx
// trace read it here too. Every call has its own timeout.
type Cursors struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

// NewCursors returns the cursor store on pool.
func NewCursors(pool *pgxpool.Pool, timeout time.Duration) *Cursors {
	return &Cursors{pool: pool, timeout: timeout}
}

// Load returns the stored cursor; ok is false before the first seeding.
func (s *Cursors) Load(ctx context.Context) (c Cursor, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var since *time.Time
	var end *int64
	err = s.pool.QueryRow(ctx, "SELECT watermark, hole_since, hole_end FROM inbox_cursor WHERE id = 1").Scan(&c.Watermark, &since, &end)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cursor{}, false, nil
	}
	if err != nil {
		return Cursor{}, false, fmt.Errorf("loading inbox cursor: %w", err)
	}
	if since != nil {
		c.HoleSince = *since
	}
	if end != nil {
		c.HoleEnd = *end
	}
	return c, true, nil
}

// Seed creates the cursor at watermark w. It reports false when a cursor
// already exists: an instance with a cursor is never re-seeded.
func (s *Cursors) Seed(ctx context.Context, w int64, mode string, now time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `INSERT INTO inbox_cursor (id, watermark, seed_mode, seeded_at, updated_at)
		VALUES (1, $1, $2, $3, $3) ON CONFLICT (id) DO NOTHING`, w, mode, now)
	if err != nil {
		return false, fmt.Errorf("seeding inbox cursor: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Save stores next if the stored watermark is still old (compare-and-set).
func (s *Cursors) Save(ctx context.Context, old int64, next Cursor, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return save(ctx, s.pool, old, next, now)
}

// execer is what pgxpool.Pool and pgx.Tx have in common.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func save(ctx context.Context, q execer, old int64, next Cursor, now time.Time) error {
	var since *time.Time
	var end *int64
	if next.HasHole() {
		since, end = &next.HoleSince, &next.HoleEnd
	}
	tag, err := q.Exec(ctx, `UPDATE inbox_cursor SET watermark = $2, hole_since = $3, hole_end = $4, updated_at = $5
		WHERE id = 1 AND watermark = $1`, old, next.Watermark, since, end, now)
	if err != nil {
		return fmt.Errorf("saving inbox cursor: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return ErrCursorMoved
	}
	return nil
}

// Release records hole h as permanent and moves the watermark past it in one
// transaction.
func (s *Cursors) Release(ctx context.Context, old int64, h Hole) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO inbox_hole (first_id, last_id, observed_at, released_at, reason)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (first_id) DO NOTHING`, h.From, h.To, h.ObservedAt, h.ReleasedAt, h.Reason); err != nil {
			return fmt.Errorf("recording released hole %d-%d: %w", h.From, h.To, err)
		}
		return save(ctx, tx, old, Cursor{Watermark: h.To}, h.ReleasedAt)
	})
}

// Watched returns the holes released since the given time (newest first, at
// most limit): the bounded watch list for late rows.
func (s *Cursors) Watched(ctx context.Context, since time.Time, limit int) ([]Hole, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT first_id, last_id, observed_at, released_at, reason FROM inbox_hole
		WHERE released_at >= $1 ORDER BY first_id DESC LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("listing released holes: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Hole, error) {
		var h Hole
		err := r.Scan(&h.From, &h.To, &h.ObservedAt, &h.ReleasedAt, &h.Reason)
		return h, err
	})
}

// RecordLate stores late rows and returns the IDs not reported before.
func (s *Cursors) RecordLate(ctx context.Context, late map[int64]int64, now time.Time) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var fresh []int64
	for id, hole := range late {
		tag, err := s.pool.Exec(ctx, `INSERT INTO inbox_late_row (msg_id, hole_id, seen_at) VALUES ($1, $2, $3)
			ON CONFLICT (msg_id) DO NOTHING`, id, hole, now)
		if err != nil {
			return fresh, fmt.Errorf("recording late row %d: %w", id, err)
		}
		if tag.RowsAffected() == 1 {
			fresh = append(fresh, id)
		}
	}
	return fresh, nil
}

// The reads of the operator's read models (inspect/status, inspect/trace):
// the cursor's whole row, the released holes and the late rows. Their
// errors are the driver's, unwrapped: the report words them.
const (
	sqlCursorRow = `SELECT watermark, hole_since, hole_end, seed_mode, seeded_at, updated_at FROM inbox_cursor WHERE id = 1`
	sqlHoleCount = `SELECT count(*), COALESCE(sum(last_id - first_id + 1), 0)::bigint FROM inbox_hole`
	// inbox_hole_released_at gives the order.
	sqlRecentHoles = `SELECT first_id, last_id, released_at, reason FROM inbox_hole ORDER BY released_at DESC, first_id DESC LIMIT 5`
	sqlLateRows    = `SELECT count(*), COALESCE((SELECT array_agg(msg_id ORDER BY msg_id) FROM
		(SELECT msg_id FROM inbox_late_row ORDER BY msg_id DESC LIMIT 20) l), '{}') FROM inbox_late_row`
)

// CursorRow is the cursor as its row holds it: with how and when it was
// seeded (MSGX_CUTOVER_WATERMARK) and when the bridge last saved it.
type CursorRow struct {
	Cursor
	SeedMode  string
	SeededAt  *time.Time
	UpdatedAt *time.Time
}

// Row returns the cursor's row; ok is false before the first seeding.
func (s *Cursors) Row(ctx context.Context) (r CursorRow, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var since *time.Time
	var end *int64
	var mode *string
	err = s.pool.QueryRow(ctx, sqlCursorRow).Scan(&r.Watermark, &since, &end, &mode, &r.SeededAt, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return CursorRow{}, false, nil
	}
	if err != nil {
		return CursorRow{}, false, err
	}
	if since != nil {
		r.HoleSince = *since
	}
	if end != nil {
		r.HoleEnd = *end
	}
	if mode != nil {
		r.SeedMode = *mode
	}
	return r, true, nil
}

// Watermark returns W alone (one primary-key read, for the status page's
// samples); ok is false before the first seeding.
func (s *Cursors) Watermark(ctx context.Context) (w int64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err = s.pool.QueryRow(ctx, `SELECT watermark FROM inbox_cursor WHERE id = 1`).Scan(&w)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return w, err == nil, err
}

// HoleCount returns the number of released holes and of the IDs they
// cover.
func (s *Cursors) HoleCount(ctx context.Context) (holes, ids int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err = s.pool.QueryRow(ctx, sqlHoleCount).Scan(&holes, &ids)
	return holes, ids, err
}

// RecentHoles returns the last five released holes, newest first (their
// ObservedAt is not read).
func (s *Cursors) RecentHoles(ctx context.Context) ([]Hole, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, sqlRecentHoles)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Hole, error) {
		var h Hole
		return h, r.Scan(&h.From, &h.To, &h.ReleasedAt, &h.Reason)
	})
}

// LateRows returns the number of late rows and the newest 20 of them,
// ascending.
func (s *Cursors) LateRows(ctx context.Context) (n int64, newest []int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err = s.pool.QueryRow(ctx, sqlLateRows).Scan(&n, &newest)
	return n, newest, err
}

// IngestOf is what the bridge's state says about one inbox ID.
type IngestOf struct {
	// Seeded is false when the bridge has no cursor yet; nothing else is
	// known then.
	Seeded bool
	// Watermark is W, HoleSince when the gap right after it was first seen.
	Watermark int64
	HoleSince *time.Time
	// Hole is the released hole that holds the ID, if any (its ObservedAt
	// is not read).
	Hole *Hole
	// LateAt is when the ID appeared after its hole was released.
	LateAt *time.Time
}

// QueueIngestOf queues into b the read of what the bridge's state says
// about msgID (msgx trace: one round trip with the rest of a trace); the
// result is filled in when b has run.
func QueueIngestOf(b *pgx.Batch, msgID int64) *IngestOf {
	out := &IngestOf{}
	b.Queue(`SELECT c.watermark, c.hole_since, h.first_id, h.last_id, h.released_at, h.reason, l.seen_at
		FROM inbox_cursor c
		-- Holes do not overlap: the nearest one starting at or below the ID
		-- is the only one that can hold it (one primary-key step).
		LEFT JOIN LATERAL (SELECT * FROM inbox_hole h WHERE h.first_id <= $1
			ORDER BY h.first_id DESC LIMIT 1) h ON h.last_id >= $1
		LEFT JOIN inbox_late_row l ON l.msg_id = $1`, msgID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var first, last *int64
			var released *time.Time
			var reason *string
			if err := rows.Scan(&out.Watermark, &out.HoleSince, &first, &last, &released, &reason, &out.LateAt); err != nil {
				return err
			}
			if first != nil && last != nil && released != nil && reason != nil {
				out.Hole = &Hole{Gap: Gap{From: *first, To: *last}, ReleasedAt: *released, Reason: *reason}
			}
			out.Seeded = true
		}
		return rows.Err()
	})
	return out
}
