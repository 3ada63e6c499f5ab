package sink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The maintenance jobs' statements on msgx's own tables
// (docs/design.md#maintenance): the proc_state archive, the retention of
// schd_snap_log and of flight_change. Each call is one statement, hence one
// transaction, of at most one batch; when to run them and how many batches
// is the jobs' (maintenance/).

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

// archiveSQL builds the one-statement batch of docs/design.md#archive (the
// steps are in maintenance's package comment).
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

// ArchiveBatch archives up to limit candidates settled before cutoff
// (restricted to ids when ids is not nil) at now, the archive time, and
// returns how many rows it archived and how many transition_applied rows
// it deleted.
func ArchiveBatch(ctx context.Context, pool *pgxpool.Pool, cutoff, now time.Time, limit int, ids []int64) (archived, transitions int, err error) {
	var n, td int64
	if ids == nil {
		err = pool.QueryRow(ctx, archiveBatchSQL, cutoff, now, limit).Scan(&n, &td)
	} else {
		err = pool.QueryRow(ctx, archiveIDsSQL, cutoff, now, limit, ids).Scan(&n, &td)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("archiving proc_state rows settled before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	return int(n), int(td), nil
}

// DeleteOrphanTransitions removes transition_applied rows of ARCHIVED
// messages. Archiving deletes a message's rows in the same statement, but a
// transition of an archived message delivered again later (a Kafka
// re-delivery racing the archive) inserts its mark once more before
// MarkApplied finds the message no longer ROUTED. Such rows are rare; the
// join walks transition_applied, which only holds unarchived messages.
func DeleteOrphanTransitions(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	tag, err := pool.Exec(ctx, `DELETE FROM transition_applied t USING proc_state p
		WHERE p.msg_id = t.msg_id AND p.state = 'ARCHIVED'`)
	if err != nil {
		return 0, fmt.Errorf("deleting transition marks of archived messages: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ArchiveCandidates lists, oldest settled first, up to limit messages
// settled before cutoff that a pass would archive.
func ArchiveCandidates(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, limit int) ([]int64, error) {
	rows, err := pool.Query(ctx, `SELECT s.msg_id FROM proc_state s WHERE `+archivable("s")+`
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

// ExpireSnapLog deletes up to limit schd_snap_log rows received before
// cutoff and covering no day after day, by (scope_end, recv_at)
// (docs/design.md#snaplog-retention), and returns how many.
func ExpireSnapLog(ctx context.Context, pool *pgxpool.Pool, day, cutoff time.Time, limit int) (int, error) {
	tag, err := pool.Exec(ctx, `DELETE FROM schd_snap_log WHERE id IN (
					SELECT id FROM schd_snap_log WHERE scope_end < $1 AND recv_at < $2
					ORDER BY scope_end, recv_at LIMIT $3)`, day, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("deleting schd_snap_log rows received before %s with scope before %s: %w",
			cutoff.Format(time.RFC3339), day.Format(time.DateOnly), err)
	}
	return int(tag.RowsAffected()), nil
}

// ExpireFlightChanges deletes up to limit flight_change rows written before
// cutoff (docs/design.md#flight-change), each version's msg_event row (where
// its event landed, 0026) with it, and returns how many.
func ExpireFlightChanges(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, limit int) (int, error) {
	var n int64
	err := pool.QueryRow(ctx, `WITH d AS (
					DELETE FROM flight_change WHERE (flid, state_version, msg_id) IN (
						SELECT flid, state_version, msg_id FROM flight_change WHERE recorded_at < $1
						ORDER BY recorded_at LIMIT $2)
					RETURNING flid, state_version, msg_id),
				e AS (
					DELETE FROM msg_event m USING d
					WHERE m.flid = d.flid AND m.state_version = d.state_version AND m.msg_id = d.msg_id)
				SELECT count(*) FROM d`, cutoff, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("deleting flight_change rows written before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	return int(n), nil
}
