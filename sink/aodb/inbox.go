package aodb

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

// Row is one CMINMSGS row as msgx reads it.
type Row struct {
	ID         int64
	Raw        string
	ReceivedAt *time.Time
}

// ErrProbeTimeout means the hole probe waited its whole lock timeout: an
// insert is still in flight, so the hole is left to age.
var ErrProbeTimeout = errors.New("hole probe: lock wait timeout")

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
func (t *Tables) ReadAfter(ctx context.Context, w int64, limit, maxBytes int) (rows []Row, cut bool, err error) {
	sizes, err := t.sizesAfter(ctx, w, limit)
	if err != nil || len(sizes) == 0 {
		return nil, false, err
	}
	n := FitBytes(len(sizes), func(i int) int { return sizes[i].bytes }, maxBytes)
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	rs, err := t.db.QueryContext(ctx,
		"SELECT CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED FROM "+t.inbox+
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
func (t *Tables) sizesAfter(ctx context.Context, w int64, limit int) ([]rowSize, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	rows, err := t.db.QueryContext(ctx, "SELECT CMINMSGS_ID, COALESCE(LENGTH(CMINMSGS_CLOB_MSG), 0) FROM "+t.inbox+
		" WHERE CMINMSGS_ID > ? ORDER BY CMINMSGS_ID LIMIT ?", w, limit)
	if err != nil {
		return nil, fmt.Errorf("reading inbox sizes after %d: %w", w, err)
	}
	out, err := scanSizes(rows)
	if err != nil {
		return nil, fmt.Errorf("reading inbox sizes after %d: %w", w, err)
	}
	return out, nil
}

// scanSizes reads rows of (id, text length) and closes them.
func scanSizes(rows *sql.Rows) ([]rowSize, error) {
	defer rows.Close()
	var out []rowSize
	for rows.Next() {
		var s rowSize
		if err := rows.Scan(&s.id, &s.bytes); err != nil {
			return nil, fmt.Errorf("scanning inbox sizes: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Sizes returns the text length in bytes of each of ids that has a row.
func (t *Tables) Sizes(ctx context.Context, ids []int64) (map[int64]int, error) {
	out := make(map[int64]int, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	rows, err := t.db.QueryContext(ctx, "SELECT CMINMSGS_ID, COALESCE(LENGTH(CMINMSGS_CLOB_MSG), 0) FROM "+t.inbox+
		" WHERE CMINMSGS_ID IN ("+sink.IDList(ids)+")")
	if err != nil {
		return nil, fmt.Errorf("reading the sizes of %d inbox rows: %w", len(ids), err)
	}
	sizes, err := scanSizes(rows)
	if err != nil {
		return nil, fmt.Errorf("reading the sizes of %d inbox rows: %w", len(ids), err)
	}
	for _, s := range sizes {
		out[s.id] = s.bytes
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
func (t *Tables) ReadIDs(ctx context.Context, ids []int64) ([]Row, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	rows, err := t.db.QueryContext(ctx, "SELECT CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED FROM "+t.inbox+
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
func (t *Tables) Probe(ctx context.Context, w, next int64, wait time.Duration) ([]int64, error) {
	if t.probe == nil {
		return nil, errors.New("hole probe disabled")
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout+wait)
	defer cancel()
	tx, err := t.probe.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("starting hole probe: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only; rollback releases the share locks
	rows, err := tx.QueryContext(ctx,
		"SELECT CMINMSGS_ID FROM "+t.inbox+" WHERE CMINMSGS_ID > ? AND CMINMSGS_ID < ? ORDER BY CMINMSGS_ID LOCK IN SHARE MODE", w, next)
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
func (t *Tables) Existing(ctx context.Context, ranges []sink.Gap) ([]int64, error) {
	if len(ranges) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var cond []string
	var args []any
	for _, g := range ranges {
		cond = append(cond, "CMINMSGS_ID BETWEEN ? AND ?")
		args = append(args, g.From, g.To)
	}
	rows, err := t.db.QueryContext(ctx, "SELECT CMINMSGS_ID FROM "+t.inbox+" WHERE "+strings.Join(cond, " OR ")+" ORDER BY CMINMSGS_ID", args...)
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
func (t *Tables) Bounds(ctx context.Context) (minID, maxID int64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var lo, hi sql.NullInt64
	if err := t.db.QueryRowContext(ctx, "SELECT MIN(CMINMSGS_ID), MAX(CMINMSGS_ID) FROM "+t.inbox).Scan(&lo, &hi); err != nil {
		return 0, 0, false, fmt.Errorf("reading inbox bounds: %w", err)
	}
	return lo.Int64, hi.Int64, lo.Valid, nil
}

// Insert adds one message as a new row and returns its ID once committed.
func (t *Tables) Insert(ctx context.Context, raw string, receivedAt time.Time) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.db.ExecContext(ctx,
		"INSERT INTO "+t.inbox+" (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, ?, 'VALID')",
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

// InsertNow adds one message as a new row received at the server's clock
// (NOW(), as the AODB writes its own rows: msgx samples) and returns its ID
// once committed.
func (t *Tables) InsertNow(ctx context.Context, raw string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.db.ExecContext(ctx,
		"INSERT INTO "+t.inbox+" (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, NOW(), 'VALID')", raw)
	if err != nil {
		return 0, fmt.Errorf("inserting inbox row: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("reading new inbox ID: %w", err)
	}
	return id, nil
}

// MaxID returns MAX(CMINMSGS_ID): 0 for an empty inbox (IDs start at 1).
func (t *Tables) MaxID(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var hi sql.NullInt64
	if err := t.db.QueryRowContext(ctx, "SELECT MAX(CMINMSGS_ID) FROM "+t.inbox).Scan(&hi); err != nil {
		return 0, fmt.Errorf("reading MAX(CMINMSGS_ID) from %s: %w", t.inbox, err)
	}
	return hi.Int64, nil
}

// FirstAfter returns the ID and receipt time of the first row with ID > w
// (its text is not read); ok is false when there is none.
func (t *Tables) FirstAfter(ctx context.Context, w int64) (r Row, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var rec sql.NullTime
	err = t.db.QueryRowContext(ctx, "SELECT CMINMSGS_ID, CMINMSGS_DATE_RECEIVED FROM "+t.inbox+
		" WHERE CMINMSGS_ID > ? ORDER BY CMINMSGS_ID LIMIT 1", w).Scan(&r.ID, &rec)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Row{}, false, nil
	case err != nil:
		return Row{}, false, fmt.Errorf("reading the first inbox row after W=%d: %w", w, err)
	}
	if rec.Valid {
		at := rec.Time
		r.ReceivedAt = &at
	}
	return r, true, nil
}

// RowInfo is what an inbox row says of its message, without its text.
type RowInfo struct {
	// ReceivedAt and ProcessedAt are CMINMSGS_DATE_RECEIVED and the
	// processed mark CMINMSGS_DATE_PROCESSED (nil: NULL).
	ReceivedAt  *time.Time
	ProcessedAt *time.Time
	Status      string
	// Bytes is the length of the message text.
	Bytes int
}

// Info returns what row id holds (msgx trace); nil when there is no such
// row.
func (t *Tables) Info(ctx context.Context, id int64) (*RowInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var row RowInfo
	var status sql.NullString
	err := t.db.QueryRowContext(ctx, "SELECT CMINMSGS_DATE_RECEIVED, CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS, "+
		"COALESCE(LENGTH(CMINMSGS_CLOB_MSG), 0) FROM "+t.inbox+" WHERE CMINMSGS_ID = ?", id).
		Scan(&row.ReceivedAt, &row.ProcessedAt, &status, &row.Bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading inbox row %d: %w", id, err)
	}
	row.Status = status.String
	return &row, nil
}
