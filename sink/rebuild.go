package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DerivedTables are the PostgreSQL tables a rebuild empties: everything the
// processors derive from msgx.inbox. Kept are the ingest bridge's own state
// (inbox_cursor, holes, late rows: they describe the MySQL inbox, not the
// topic), outbound request tracking (req_track: what msgx sent cannot be
// derived from what it received) and the replay audit.
func DerivedTables() []string {
	// flight_hist too: the flights it holds come back from the inbox and the
	// next history sweep archives them again; flight_change is written with
	// every version the rebuild makes again, msg_event with every event of
	// those versions the publisher produces again.
	t := []string{"proc_state", "backfill_owed", "proc_state_hst", "transition_applied", "flight_index", "refdata_key_index", "ref_master", "ref_table_state", "schd_snap_log",
		"flight_hist", "flight_change", "msg_event", "flight_placeholder", "purge_pending"}
	return append(t, FlightTables...)
}

// TruncateDerived empties the derived tables and, in the same transaction,
// deletes the msg events still waiting in the outbox. The rebuild makes
// every flight version again and queues its event as new (Event.New: not
// looked up in msg_event), so a waiting event of the state it replaces
// would be published beside it. The schd tombstones of purged flights
// stay: no rebuild purges again.
func TruncateDerived(ctx context.Context, pool *pgxpool.Pool) error {
	names := make([]string, 0, len(DerivedTables()))
	for _, t := range DerivedTables() {
		names = append(names, pgx.Identifier{t}.Sanitize())
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "TRUNCATE "+strings.Join(names, ", ")); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM event_outbox WHERE state_version IS NOT NULL`)
		return err
	})
	if err != nil {
		return fmt.Errorf("emptying the derived tables: %w", err)
	}
	return nil
}
