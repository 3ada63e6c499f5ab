package outbound

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"msgx/tables/request"
	"msgx/tables/sis"
)

// outboxFloor reads MAX(COUTMSGS_ID) (0 for an empty outbox). Any row
// inserted after this read gets a larger ID, so it bounds the recovery search
// from below.
func (s *Requests) outboxFloor(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var floor int64
	err := s.my.QueryRowContext(ctx, "SELECT COALESCE(MAX(COUTMSGS_ID), 0) FROM "+s.cfg.OutboxTable).Scan(&floor)
	if err != nil {
		return 0, fmt.Errorf("reading MAX(COUTMSGS_ID): %w", err)
	}
	return floor, nil
}

// insertOutbox writes one request into COUTMSGS and returns its ID. The
// statement runs in autocommit mode: a nil error means the row is committed.
// The other columns keep their legacy defaults.
func (s *Requests) insertOutbox(ctx context.Context, payload string, insertedAt time.Time) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := s.my.ExecContext(ctx,
		"INSERT INTO "+s.cfg.OutboxTable+" (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID) VALUES (?, ?, ?)",
		payload, insertedAt, s.cfg.RoutingID) // the driver writes it in the inbox's zone
	if err != nil {
		return 0, fmt.Errorf("inserting into %s: %w", s.cfg.OutboxTable, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		// Committed, but we do not know the ID: recovery will find it.
		return 0, fmt.Errorf("reading the new COUTMSGS_ID: %w", err)
	}
	return id, nil
}

// findInOutbox looks for r's row among the rows written since its first
// attempt. It returns the row's ID and COUTMSGS_DATE_INSERTED.
//
// The read is a locking read (LOCK IN SHARE MODE) at READ COMMITTED: an
// uncommitted insert of a previous attempt — its connection was lost while
// the server was still executing it — holds a lock on its new row, so the
// search waits for that insert to commit (the row is then found) or roll back
// (it is not), instead of reading past it and inserting the request a second
// time. READ COMMITTED takes no gap locks, so other writers of the outbox are
// not blocked; the wait is bounded by the database call timeout.
//
// The LIKE only narrows the candidates; each one is decoded and must carry
// our SNDR, TYPE and SEQN, so a SEQN that happens to appear elsewhere in
// another message never counts.
func (s *Requests) findInOutbox(ctx context.Context, r request.ReqTrack) (id int64, insertedAt time.Time, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	tx, err := s.my.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("searching the outbox: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only; nothing to keep
	seqn := strconv.FormatInt(r.SEQN, 10)
	rows, err := tx.QueryContext(ctx,
		"SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED FROM "+s.cfg.OutboxTable+
			" WHERE COUTMSGS_ID > ? AND COUTMSGS_CLOB_MSG LIKE ? ORDER BY COUTMSGS_ID LOCK IN SHARE MODE",
		r.OutboxFloor, "%<SEQN>"+seqn+"</SEQN>%")
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("searching the outbox for SEQN %s: %w", seqn, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var (
			rowID int64
			clob  sql.NullString
			at    time.Time
		)
		if err := rows.Scan(&rowID, &clob, &at); err != nil {
			return 0, time.Time{}, false, fmt.Errorf("reading the outbox: %w", err)
		}
		m, derr := sis.Decode([]byte(clob.String), s.loc)
		if derr != nil || m.Meta.SNDR != r.SNDR || m.Meta.TYPE != string(r.Kind) || m.Meta.SEQN != seqn {
			continue
		}
		if !found {
			id, insertedAt, found = rowID, at, true
		}
		ids = append(ids, rowID)
	}
	if err := rows.Err(); err != nil {
		return 0, time.Time{}, false, fmt.Errorf("searching the outbox for SEQN %s: %w", seqn, err)
	}
	if len(ids) > 1 {
		// Not expected: the request reached the outbox more than once. The
		// first row is the request; the AODB will answer the others too,
		// and those answers find the request closed.
		s.log.Error("request found more than once in the outbox", "seqn", r.SEQN, "request_id", r.ID, "outbox_ids", ids)
	}
	return id, insertedAt, found, nil
}
