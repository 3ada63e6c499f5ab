package replay

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The reset: each message back to the shape the router gives one it never
// decided (its identity kept), with its before-image, in the batch's
// transaction.

// reset is the conditional reset of ids, in one statement: lock the rows
// that are still selected and replayable (FOR UPDATE re-evaluates the
// condition on the newest committed version, so a message the router
// decided meanwhile drops out), reset them, delete their transition_applied
// marks and write their before-images. It returns the before-images of the
// rows it reset.
//
// identity_key is deliberately not in the SET list (I5), and neither are
// enqueued_at (the backfill deadline R and the transitions' time are
// measured from the first enqueue) nor received_at. replay_gen becomes the
// replay's generation (its audit id): the router decides the message under
// it (docs/design.md#replay). effects (nil: none) go with the before-images.
func (r *replayer) reset(ctx context.Context, tx pgx.Tx, auditID int64, ids []int64, effects map[int64]Effect) ([]Row, error) {
	var withEffect []int64
	var docs []string
	for _, id := range ids {
		if e, ok := effects[id]; ok {
			doc, err := json.Marshal(e)
			if err != nil {
				return nil, fmt.Errorf("encoding the effect of message %d: %w", id, err)
			}
			withEffect, docs = append(withEffect, id), append(docs, string(doc))
		}
	}
	var out []Row
	err := r.call(ctx, func(ctx context.Context) error {
		cond, args := r.f.sql(6)
		rows, err := tx.Query(ctx, `WITH old AS (
				SELECT `+rowColumns+` FROM proc_state p
				WHERE p.msg_id = ANY($1) AND `+cond+`
				FOR UPDATE
			), reset AS (
				UPDATE proc_state p SET state = 'PENDING', attempts = 0, next_attempt_at = NULL,
					error_class = NULL, reason = NULL, last_error = NULL,
					n_transitions = NULL, n_applied = 0, routed_at = NULL, decided_at = NULL, updated_at = $2,
					backfill_at = NULL, backfill_next_at = NULL, backfill_attempts = 0, backfill_error = NULL,
					backfill_abandoned_at = NULL, backfill_abandoned_reason = NULL, replay_gen = $3
				FROM old WHERE p.msg_id = old.msg_id
			), applied AS (
				DELETE FROM transition_applied t USING old WHERE t.msg_id = old.msg_id
			), owed AS (
				DELETE FROM backfill_owed o USING old WHERE o.msg_id = old.msg_id
			), image AS (
				INSERT INTO replay_audit_msg (audit_id, msg_id, state, error_class, reason, last_error, attempts, identity_key, effect)
				SELECT $3::bigint, old.msg_id, state, error_class, reason, last_error, attempts, identity_key, e.effect::jsonb
				FROM old LEFT JOIN unnest($4::bigint[], $5::text[]) AS e(msg_id, effect) ON e.msg_id = old.msg_id
			)
			SELECT `+rowColumns+` FROM old p ORDER BY p.msg_id`, append([]any{ids, r.now, auditID, withEffect, docs}, args...)...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) { return scanRow(r) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("resetting %d messages for replay: %w", len(ids), err)
	}
	return out, nil
}

// commit appends the batch's resets to the audit row and commits.
func (r *replayer) commit(ctx context.Context, tx pgx.Tx, b *batchResult) error {
	ids := make([]int64, len(b.reset))
	for i, row := range b.reset {
		ids[i] = row.MsgID
	}
	if err := r.call(ctx, func(ctx context.Context) error {
		_, err := tx.Exec(ctx, `UPDATE replay_audit SET count = count + $2, msg_ids = msg_ids || $3::bigint[] WHERE id = $1`,
			b.auditID, len(ids), ids)
		return err
	}); err != nil {
		return fmt.Errorf("updating replay audit row %d: %w", b.auditID, err)
	}
	if err := r.call(ctx, tx.Commit); err != nil {
		// Whether or not the commit reached the server, re-running is
		// safe: either nothing was reset, or the resets are PENDING with
		// unproduced before-images (the crash window).
		return fmt.Errorf("committing the replay of %d messages: %w", len(ids), err)
	}
	return nil
}
