package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/tables/message"
)

// The backfill sweeper's queue (docs/design.md#backfill): the statements of
// a pass — claim the rows due, record what writing their marks found,
// count and vacuum the queue — and the operator's list and reopening of the
// marks it gave up on. The pass's policy (backoff, deadline, when to count
// and vacuum) is the sweeper's, emitters/backfill.

// scanSQL is the predicate and order of docs/design.md#backfill-predicate:
// the messages owing their mark are the rows of backfill_owed (terminal,
// mark neither confirmed nor abandoned: written with the terminal state,
// deleted when the mark is confirmed or abandoned), in the order of its
// index backfill_owed_order (attempts, msg_id). ARCHIVED shadow rows and
// replayed messages are never owed (the archive takes only settled rows;
// a replay reset deletes the row); each row is re-checked against
// proc_state all the same.
//
// The re-check is a subquery per row taken, not a join: joined, PostgreSQL
// planned a scan of proc_state for every pass.
const scanSQL = `SELECT o.msg_id, o.enqueued_at, o.attempts FROM backfill_owed o
	WHERE (o.next_at IS NULL OR o.next_at <= $1 OR o.enqueued_at < $2)
	  AND (SELECT ` + BackfillStillOwed + ` FROM proc_state p WHERE p.msg_id = o.msg_id)
	ORDER BY o.attempts, o.msg_id
	LIMIT $3`

// BackfillClaim is one row due for its processed mark.
type BackfillClaim struct {
	MsgID      int64
	EnqueuedAt time.Time
	Attempts   int
}

// ClaimBackfills returns, inside tx, up to limit rows due at now (or
// enqueued before overdue, due whatever their backoff), in fair order.
func ClaimBackfills(ctx context.Context, tx pgx.Tx, now, overdue time.Time, limit int) ([]BackfillClaim, error) {
	rows, err := tx.Query(ctx, scanSQL, now, overdue, limit)
	if err != nil {
		return nil, fmt.Errorf("scanning rows due for backfill: %w", err)
	}
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BackfillClaim, error) {
		var c BackfillClaim
		err := r.Scan(&c.MsgID, &c.EnqueuedAt, &c.Attempts)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("scanning rows due for backfill: %w", err)
	}
	return claims, nil
}

// BackfillOutcome is what a pass found of its claimed rows, each in one
// list (docs/design.md#backfill-results).
type BackfillOutcome struct {
	// Done are the rows now marked, by this pass or before: their mark is
	// confirmed. Retried are those of them that failed before (an error to
	// clear).
	Done, Retried []int64
	// Missing are the rows without an inbox row: abandoned MISSING_ROW.
	Missing []int64
	// Failed are the rows not marked, each with its next attempt (NextAt)
	// and whether it is abandoned now (Abandon: TRANSIENT_DEADLINE);
	// Error is the failure recorded with them.
	Failed  []int64
	NextAt  []time.Time
	Abandon []bool
	Error   string
}

// RecordBackfills writes o into proc_state and backfill_owed, inside tx
// (the pass's transaction), in one round trip. Every statement re-checks
// that the row is still a terminal row owing its mark (defence in depth:
// the advisory lock already keeps replay and reopen out).
func RecordBackfills(ctx context.Context, tx pgx.Tx, o BackfillOutcome, now time.Time) error {
	const owed = ` AND ` + BackfillStillOwed
	batch := &pgx.Batch{}
	if len(o.Done) > 0 {
		// The mark is confirmed: the message owes nothing more. Its
		// proc_state row is not written (a third version of it, with an
		// entry in each of its indexes, cost as much as its insert); the
		// mark's time is the inbox row's (docs/design.md#backfill).
		batch.Queue(`DELETE FROM backfill_owed WHERE msg_id = ANY($1)`, o.Done)
	}
	if len(o.Retried) > 0 {
		// Only rows that failed before carry an error to clear.
		batch.Queue(`UPDATE proc_state SET backfill_error = NULL WHERE msg_id = ANY($1)`+owed, o.Retried)
	}
	if len(o.Missing) > 0 {
		batch.Queue(`WITH a AS (
				UPDATE proc_state SET backfill_abandoned_at = $2, backfill_abandoned_reason = $3,
					backfill_error = 'inbox row not found', updated_at = $2
				WHERE msg_id = ANY($1)`+owed+`
				RETURNING msg_id)
			DELETE FROM backfill_owed o USING a WHERE o.msg_id = a.msg_id`, o.Missing, now, message.AbandonMissingRow)
	}
	if len(o.Failed) > 0 {
		// proc_state keeps the attempt for the operator (trace, msgx
		// backfill abandoned); backfill_owed its copy for the scan's
		// order and due test, or loses the row when it is abandoned.
		batch.Queue(`WITH f AS (
				UPDATE proc_state p SET backfill_attempts = p.backfill_attempts + 1, backfill_error = $4,
					backfill_next_at = u.next_at,
					backfill_abandoned_at = CASE WHEN u.abandon THEN $5::timestamptz END,
					backfill_abandoned_reason = CASE WHEN u.abandon THEN $6::text END,
					updated_at = CASE WHEN u.abandon THEN $5::timestamptz ELSE p.updated_at END
				FROM unnest($1::bigint[], $2::timestamptz[], $3::boolean[]) AS u(id, next_at, abandon)
				WHERE p.msg_id = u.id`+owed+`
				RETURNING p.msg_id, p.backfill_attempts, p.backfill_next_at, p.backfill_abandoned_at IS NOT NULL AS abandoned),
			gone AS (DELETE FROM backfill_owed o USING f WHERE o.msg_id = f.msg_id AND f.abandoned)
			UPDATE backfill_owed o SET attempts = f.backfill_attempts, next_at = f.backfill_next_at
			FROM f WHERE o.msg_id = f.msg_id AND NOT f.abandoned`,
			o.Failed, o.NextAt, o.Abandon, o.Error, now, message.AbandonTransientDeadline)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("recording backfill results of %d rows: %w", len(o.Done)+len(o.Missing)+len(o.Failed), err)
	}
	return nil
}

// CountOwedBackfills counts the terminal rows still owing their mark (not
// abandoned), inside tx.
func CountOwedBackfills(ctx context.Context, tx pgx.Tx) (int64, error) {
	var n int64
	err := tx.QueryRow(ctx, `SELECT count(*) FROM backfill_owed`).Scan(&n)
	return n, err
}

// VacuumBackfills vacuums backfill_owed (skipped while another vacuum of it
// runs), outside any transaction (VACUUM cannot run in one): every settled
// row leaves an entry at the head of the queue's index that each scan
// steps over until a vacuum removes it.
func VacuumBackfills(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `VACUUM (SKIP_LOCKED) backfill_owed`)
	return err
}

// AbandonedBackfill is a terminal message whose mark the sweeper stopped trying
// to write. It is not marked: the inbox owner must not purge it on that
// basis until it has been reconciled by hand (docs/design.md#backfill).
type AbandonedBackfill struct {
	MsgID       int64     `json:"msgId"`
	State       string    `json:"state"`
	Type        *string   `json:"type"`
	STYP        *string   `json:"styp"`
	Reason      string    `json:"reason"`
	AbandonedAt time.Time `json:"abandonedAt"`
	Attempts    int       `json:"attempts"`
	LastError   *string   `json:"lastError"`
	EnqueuedAt  time.Time `json:"enqueuedAt"`
}

// AbandonedBackfills lists abandoned backfills in MSG_ID order (for msgx
// backfill abandoned); limit <= 0 lists them all.
func AbandonedBackfills(ctx context.Context, pool *pgxpool.Pool, limit int) ([]AbandonedBackfill, error) {
	ctx, cancel := context.WithTimeout(ctx, OperatorCallTimeout)
	defer cancel()
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := pool.Query(ctx, `SELECT msg_id, state, msg_type, msg_styp, backfill_abandoned_reason, backfill_abandoned_at,
			backfill_attempts, backfill_error, enqueued_at
		FROM proc_state
		WHERE `+BackfillAbandoned+`
		ORDER BY msg_id LIMIT $1`, lim)
	if err != nil {
		return nil, fmt.Errorf("listing abandoned backfills: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AbandonedBackfill, error) {
		var a AbandonedBackfill
		var reason *string
		err := r.Scan(&a.MsgID, &a.State, &a.Type, &a.STYP, &reason, &a.AbandonedAt, &a.Attempts, &a.LastError, &a.EnqueuedAt)
		if reason != nil {
			a.Reason = *reason
		}
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing abandoned backfills: %w", err)
	}
	return out, nil
}

// ReopenBackfills puts abandoned backfills of ids back into the sweeper's
// queue (for msgx backfill reopen): the abandonment and error are cleared,
// attempts reset, and the row is due at now. It returns how many rows were
// reopened; IDs that are not abandoned are left alone.
//
// A reopened row older than R is tried on the next pass and, if the inbox
// write still fails, abandoned again at once (TRANSIENT_DEADLINE): reopen
// buys one more attempt per call, not a new R window, because the deadline
// is measured from enqueued_at. Reopen takes the backfill lock,
// so it never interleaves with a pass.
func ReopenBackfills(ctx context.Context, pool *pgxpool.Pool, ids []int64, now time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var n int64
	err := func() error {
		ctx, cancel := context.WithTimeout(ctx, OperatorCallTimeout)
		defer cancel()
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := XactLock(ctx, tx, LockBackfill); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `WITH r AS (
					UPDATE proc_state SET backfill_abandoned_at = NULL, backfill_abandoned_reason = NULL,
						backfill_attempts = 0, backfill_error = NULL, backfill_next_at = $2, updated_at = $2
					WHERE msg_id = ANY($1) AND `+BackfillAbandoned+`
					RETURNING msg_id, enqueued_at)
				INSERT INTO backfill_owed (msg_id, next_at, enqueued_at) SELECT msg_id, $2, enqueued_at FROM r
				ON CONFLICT (msg_id) DO UPDATE SET attempts = 0, next_at = EXCLUDED.next_at`, ids, now)
			if err != nil {
				return fmt.Errorf("reopening %d backfills: %w", len(ids), err)
			}
			n = tag.RowsAffected()
			return nil
		})
	}()
	if err != nil {
		return 0, err
	}
	return int(n), nil
}
