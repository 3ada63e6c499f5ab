package aodb

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"
)

// OutboxFloor reads MAX(COUTMSGS_ID) (0 for an empty outbox). Any row
// inserted after this read gets a larger ID, so it bounds a later search
// for a request's row from below (docs/design.md#requests).
func (t *Tables) OutboxFloor(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var floor int64
	err := t.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(COUTMSGS_ID), 0) FROM "+t.outbox).Scan(&floor)
	if err != nil {
		return 0, fmt.Errorf("reading MAX(COUTMSGS_ID): %w", err)
	}
	return floor, nil
}

// InsertRequest writes one request (payload, the SIS XML) into COUTMSGS
// with its insert time and routing ID, and returns its ID. The statement
// runs in autocommit mode: a nil error means the row is committed. The
// other columns keep their legacy defaults.
func (t *Tables) InsertRequest(ctx context.Context, payload string, insertedAt time.Time, routingID string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.db.ExecContext(ctx,
		"INSERT INTO "+t.outbox+" (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID) VALUES (?, ?, ?)",
		payload, insertedAt, routingID) // the driver writes it in the inbox's zone
	if err != nil {
		return 0, fmt.Errorf("inserting into %s: %w", t.outbox, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		// Committed, but we do not know the ID: recovery will find it.
		return 0, fmt.Errorf("reading the new COUTMSGS_ID: %w", err)
	}
	return id, nil
}

// OutboxRow is one COUTMSGS row.
type OutboxRow struct {
	ID         int64
	Text       string
	InsertedAt time.Time
}

// FindRequest returns the rows written after floor whose text holds
// <SEQN>seqn</SEQN>, in ID order: the candidates for a request's row. The
// LIKE only narrows them; the caller decodes each and checks it is its
// request.
//
// The read is a locking read (LOCK IN SHARE MODE) at READ COMMITTED: an
// uncommitted insert of a previous attempt — its connection was lost while
// the server was still executing it — holds a lock on its new row, so the
// search waits for that insert to commit (the row is then found) or roll
// back (it is not), instead of reading past it and inserting the request a
// second time. READ COMMITTED takes no gap locks, so other writers of the
// outbox are not blocked; the wait is bounded by the call timeout. The
// primary key bounds the search to the rows written since the floor.
func (t *Tables) FindRequest(ctx context.Context, floor, seqn int64) ([]OutboxRow, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	tx, err := t.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("searching the outbox: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only; nothing to keep
	s := strconv.FormatInt(seqn, 10)
	rows, err := tx.QueryContext(ctx,
		"SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED FROM "+t.outbox+
			" WHERE COUTMSGS_ID > ? AND COUTMSGS_CLOB_MSG LIKE ? ORDER BY COUTMSGS_ID LOCK IN SHARE MODE",
		floor, "%<SEQN>"+s+"</SEQN>%")
	if err != nil {
		return nil, fmt.Errorf("searching the outbox for SEQN %s: %w", s, err)
	}
	defer rows.Close()
	var out []OutboxRow
	for rows.Next() {
		var r OutboxRow
		var text sql.NullString
		if err := rows.Scan(&r.ID, &text, &r.InsertedAt); err != nil {
			return nil, fmt.Errorf("reading the outbox: %w", err)
		}
		r.Text = text.String
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("searching the outbox for SEQN %s: %w", s, err)
	}
	return out, nil
}
