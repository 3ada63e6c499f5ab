package ingest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"msgx/sink"
)

// Row is one CMINMSGS row.
type Row struct {
	ID         int64
	Raw        string
	ReceivedAt *time.Time
}

// ErrProbeTimeout means the hole probe waited its whole lock timeout: an
// insert is still in flight, so the hole is left to age.
var ErrProbeTimeout = errors.New("hole probe: lock wait timeout")

// Inbox reads and writes the shared MySQL inbox table.
type Inbox struct {
	db      *sql.DB
	probe   *sql.DB
	table   string
	timeout time.Duration
}

// NewInbox returns access to table through db. probe must be a connection
// pool to the primary whose sessions carry the probe's
// innodb_lock_wait_timeout; it may be nil when the probe is disabled.
func NewInbox(db, probe *sql.DB, table string, timeout time.Duration) *Inbox {
	return &Inbox{db: db, probe: probe, table: table, timeout: timeout}
}

// ReadAfter returns rows with ID > w in ID order: at most limit rows and, past
// the first one, at most maxBytes of message text in all (the first row is
// returned however large it is, so one oversize row cannot stall ingest).
// cut reports that rows were left out for the byte bound: the caller should
// read again at once. The processed mark is never used as the scan predicate
// (docs/design.md#ingest,
// docs/design.md#decisions).
//
// The bound is applied before any text is read: a first query reads the IDs
// and text lengths of up to limit rows, a second one the rows up to the last
// ID that fits. A row inserted into a gap between the two queries is read
// too if the limit allows; it is as contiguous as any other (the plan decides
// on what was read), and costs at most the bound one more row.
func (in *Inbox) ReadAfter(ctx context.Context, w int64, limit, maxBytes int) (rows []Row, cut bool, err error) {
	sizes, err := in.sizesAfter(ctx, w, limit)
	if err != nil || len(sizes) == 0 {
		return nil, false, err
	}
	n := FitBytes(len(sizes), func(i int) int { return sizes[i].bytes }, maxBytes)
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	rs, err := in.db.QueryContext(ctx,
		"SELECT CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED FROM "+in.table+
			" WHERE CMINMSGS_ID > ? AND CMINMSGS_ID <= ? ORDER BY CMINMSGS_ID LIMIT ?", w, sizes[n-1].id, limit)
	if err != nil {
		return nil, false, fmt.Errorf("reading inbox after %d: %w", w, err)
	}
	out, err := scanRows(rs)
	if err != nil {
		return nil, false, fmt.Errorf("reading inbox after %d: %w", w, err)
	}
	return out, n < len(sizes), nil
}

type rowSize struct {
	id    int64
	bytes int
}

// sizesAfter returns the IDs and text lengths (bytes) of up to limit rows
// with ID > w, in ID order.
func (in *Inbox) sizesAfter(ctx context.Context, w int64, limit int) ([]rowSize, error) {
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	rows, err := in.db.QueryContext(ctx, "SELECT CMINMSGS_ID, COALESCE(LENGTH(CMINMSGS_CLOB_MSG), 0) FROM "+in.table+
		" WHERE CMINMSGS_ID > ? ORDER BY CMINMSGS_ID LIMIT ?", w, limit)
	if err != nil {
		return nil, fmt.Errorf("reading inbox sizes after %d: %w", w, err)
	}
	defer rows.Close()
	var out []rowSize
	for rows.Next() {
		var s rowSize
		if err := rows.Scan(&s.id, &s.bytes); err != nil {
			return nil, fmt.Errorf("scanning inbox sizes: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading inbox sizes after %d: %w", w, err)
	}
	return out, nil
}

// Sizes returns the text length in bytes of each of ids that has a row.
func (in *Inbox) Sizes(ctx context.Context, ids []int64) (map[int64]int, error) {
	out := make(map[int64]int, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	rows, err := in.db.QueryContext(ctx, "SELECT CMINMSGS_ID, COALESCE(LENGTH(CMINMSGS_CLOB_MSG), 0) FROM "+in.table+
		" WHERE CMINMSGS_ID IN ("+sink.IDList(ids)+")")
	if err != nil {
		return nil, fmt.Errorf("reading the sizes of %d inbox rows: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("scanning inbox sizes: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the sizes of %d inbox rows: %w", len(ids), err)
	}
	return out, nil
}

// FitBytes returns how many of n items, from the first, fit in maxBytes
// when item i takes size(i) bytes: always at least one (n > 0), however
// large, and never one that would take the total over maxBytes.
func FitBytes(n int, size func(i int) int, maxBytes int) int {
	if n == 0 {
		return 0
	}
	total := size(0)
	k := 1
	for ; k < n; k++ {
		if total+size(k) > maxBytes {
			break
		}
		total += size(k)
	}
	return k
}

// ReadIDs returns the rows of ids in ID order; IDs without a row are
// absent from the result.
func (in *Inbox) ReadIDs(ctx context.Context, ids []int64) ([]Row, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	rows, err := in.db.QueryContext(ctx, "SELECT CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED FROM "+in.table+
		" WHERE CMINMSGS_ID IN ("+sink.IDList(ids)+") ORDER BY CMINMSGS_ID")
	if err != nil {
		return nil, fmt.Errorf("reading %d inbox rows: %w", len(ids), err)
	}
	return scanRows(rows)
}

// scanRows reads rows of (id, text, received) and closes them.
func scanRows(rows *sql.Rows) ([]Row, error) {
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var raw sql.NullString
		var rec sql.NullTime
		if err := rows.Scan(&r.ID, &raw, &rec); err != nil {
			return nil, fmt.Errorf("scanning inbox row: %w", err)
		}
		r.Raw = raw.String
		if rec.Valid {
			t := rec.Time
			r.ReceivedAt = &t
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading inbox rows: %w", err)
	}
	return out, nil
}

// Probe runs the locking read over the gap (w, next): under READ COMMITTED a
// LOCK IN SHARE MODE read blocks on the record lock of an insert that is
// still in flight and returns once it commits (the row is then seen) or rolls
// back (nothing is seen). It returns the IDs found, or ErrProbeTimeout when
// the lock wait timed out.
func (in *Inbox) Probe(ctx context.Context, w, next int64, wait time.Duration) ([]int64, error) {
	if in.probe == nil {
		return nil, errors.New("hole probe disabled")
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout+wait)
	defer cancel()
	tx, err := in.probe.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("starting hole probe: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only; rollback releases the share locks
	rows, err := tx.QueryContext(ctx,
		"SELECT CMINMSGS_ID FROM "+in.table+" WHERE CMINMSGS_ID > ? AND CMINMSGS_ID < ? ORDER BY CMINMSGS_ID LOCK IN SHARE MODE", w, next)
	if err != nil {
		return nil, probeErr(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scanning hole probe: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, probeErr(err)
	}
	return ids, nil
}

func probeErr(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1205 { // ER_LOCK_WAIT_TIMEOUT
		return ErrProbeTimeout
	}
	return fmt.Errorf("hole probe: %w", err)
}

// Existing returns the IDs present in the inclusive ranges (late-row check).
func (in *Inbox) Existing(ctx context.Context, ranges []sink.Gap) ([]int64, error) {
	if len(ranges) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	var cond []string
	var args []any
	for _, g := range ranges {
		cond = append(cond, "CMINMSGS_ID BETWEEN ? AND ?")
		args = append(args, g.From, g.To)
	}
	rows, err := in.db.QueryContext(ctx, "SELECT CMINMSGS_ID FROM "+in.table+" WHERE "+strings.Join(cond, " OR ")+" ORDER BY CMINMSGS_ID", args...)
	if err != nil {
		return nil, fmt.Errorf("checking released holes: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scanning released holes: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Bounds returns MIN and MAX of the inbox IDs; ok is false for an empty table.
func (in *Inbox) Bounds(ctx context.Context) (minID, maxID int64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	var lo, hi sql.NullInt64
	if err := in.db.QueryRowContext(ctx, "SELECT MIN(CMINMSGS_ID), MAX(CMINMSGS_ID) FROM "+in.table).Scan(&lo, &hi); err != nil {
		return 0, 0, false, fmt.Errorf("reading inbox bounds: %w", err)
	}
	return lo.Int64, hi.Int64, lo.Valid, nil
}

// Insert adds one message as a new row and returns its ID once committed.
func (in *Inbox) Insert(ctx context.Context, raw string, receivedAt time.Time) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	res, err := in.db.ExecContext(ctx,
		"INSERT INTO "+in.table+" (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, ?, 'VALID')",
		raw, receivedAt)
	if err != nil {
		return 0, fmt.Errorf("inserting inbox row: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("reading new inbox ID: %w", err)
	}
	return id, nil
}
