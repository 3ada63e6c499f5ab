package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/tables/flight"
)

// PurgeFlight archives a flight's last state into flight_hist and removes it
// from the read model (flight_schd and its collection tables), inside the
// flights processor's transaction. Purging twice (a re-delivered PURGE after
// the table entry is gone) finds nothing to remove and archives nothing.
func PurgeFlight(ctx context.Context, tx pgx.Tx, s *flight.State, now time.Time) error {
	doc, err := json.Marshal(s.View())
	if err != nil {
		return fmt.Errorf("encoding flight %s for history: %w", s.FLID, err)
	}
	var day *time.Time
	if d, err := time.Parse(time.DateOnly, s.OperationDay); err == nil {
		day = &d
	}
	// Wait for a schd flush in progress: it may have read this flight and
	// not produced it yet; after this commit no flush sees the row, so
	// nothing is published after the purge's tombstone.
	if err := XactLock(ctx, tx, LockSchdFlush); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `DELETE FROM flight_schd WHERE flid = $1`, s.FLID)
	if err != nil {
		return fmt.Errorf("removing flight %s: %w", s.FLID, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	for _, t := range FlightTables[1:] {
		if _, err := tx.Exec(ctx, "DELETE FROM "+ident(t)+" WHERE flid = $1", s.FLID); err != nil {
			return fmt.Errorf("removing flight %s from %s: %w", s.FLID, t, err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO flight_hist (flid, operation_day, state, state_version, last_msg_id, doc, purged_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, s.FLID, day, s.State, s.StateVersion, s.LastMsgID, doc, now); err != nil {
		return fmt.Errorf("archiving flight %s: %w", s.FLID, err)
	}
	return nil
}

// HistoryCandidates lists up to limit flights of the read model whose
// operation day is before day: what the history sweep purges.
func HistoryCandidates(ctx context.Context, pool *pgxpool.Pool, day time.Time, limit int) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT flid FROM flight_schd WHERE operation_day < $1 ORDER BY operation_day, flid LIMIT $2`, day, limit)
	if err != nil {
		return nil, fmt.Errorf("listing history candidates: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
