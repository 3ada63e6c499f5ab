package aodb

import (
	"context"
	"database/sql"
	"fmt"

	"msgx/sink"
)

// Mark is what writing the processed mark found of one inbox row.
type Mark int

const (
	// MarkFailed: not marked, for no reason the row itself gives (try
	// again later).
	MarkFailed Mark = iota
	// MarkWritten: this call wrote the mark.
	MarkWritten
	// MarkFound: a mark was there already; it is kept.
	MarkFound
	// MarkMissing: there is no such row.
	MarkMissing
)

// MarkProcessed writes mark (a DATETIME literal in the inbox's zone) into
// CMINMSGS_DATE_PROCESSED of every row of ids whose mark is NULL, and tells
// each ID's outcome; found holds the mark found on rows marked already. On
// error nothing is known: every row counts as not marked
// (docs/design.md#backfill-results).
//
// The UPDATE and the classifying SELECT run in one transaction: the UPDATE
// locks every row it looks at (REPEATABLE READ keeps the locks of rows it
// did not change), so a purge by the inbox owner cannot delete a row we
// just marked before the SELECT sees it — that would be misread as
// MISSING_ROW.
//
// The IDs are formatted into the statement as integer literals: they are
// int64s (nothing to inject), and a statement without a 500-placeholder
// parameter list saves the driver's prepare round trips. The mark is passed
// as a wall-clock string, not a time.Time, so its value does not depend on
// the connection's loc setting; the SELECT formats the stored value the
// same way, which is how "written by this call" is told from "was there".
func (t *Tables) MarkProcessed(ctx context.Context, ids []int64, mark string) (outcomes map[int64]Mark, found map[int64]string, err error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	list := sink.IDList(ids)
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("starting inbox transaction: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	r, err := tx.ExecContext(ctx, "UPDATE "+t.inbox+" SET CMINMSGS_DATE_PROCESSED = ? WHERE CMINMSGS_ID IN ("+list+
		") AND CMINMSGS_DATE_PROCESSED IS NULL", mark)
	if err != nil {
		return nil, nil, fmt.Errorf("marking %d inbox rows processed: %w", len(ids), err)
	}
	changed, err := r.RowsAffected()
	if err != nil {
		return nil, nil, fmt.Errorf("marking %d inbox rows processed: %w", len(ids), err)
	}
	out := make(map[int64]Mark, len(ids))
	existing := map[int64]string{}
	if int(changed) == len(ids) {
		// The common case: every row was unmarked and is now ours.
		for _, id := range ids {
			out[id] = MarkWritten
		}
	} else {
		for _, id := range ids {
			out[id] = MarkMissing
		}
		rows, err := tx.QueryContext(ctx, "SELECT CMINMSGS_ID, DATE_FORMAT(CMINMSGS_DATE_PROCESSED, '%Y-%m-%d %H:%i:%s') FROM "+
			t.inbox+" WHERE CMINMSGS_ID IN ("+list+")")
		if err != nil {
			return nil, nil, fmt.Errorf("classifying %d unchanged inbox rows: %w", len(ids)-int(changed), err)
		}
		for rows.Next() {
			var id int64
			var v sql.NullString
			if err := rows.Scan(&id, &v); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("classifying inbox rows: %w", err)
			}
			switch {
			case !v.Valid:
				// Cannot happen inside this transaction (the UPDATE saw and
				// locked the row); if it does, try again later.
				out[id] = MarkFailed
			case v.String == mark:
				out[id] = MarkWritten
			default:
				out[id] = MarkFound
				existing[id] = v.String
			}
		}
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("classifying inbox rows: %w", err)
		}
		rows.Close()
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("committing %d inbox marks: %w", len(ids), err)
	}
	return out, existing, nil
}
