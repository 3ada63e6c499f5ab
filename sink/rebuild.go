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
	t := []string{"proc_state", "proc_state_hst", "transition_applied", "flight_index", "refdata_key_index", "ref_master", "ref_table_state", "schd_snap_log",
		"flight_hist", "flight_change", "msg_event", "flight_placeholder", "purge_pending"}
	return append(t, FlightTables...)
}

// TruncateDerived empties the derived tables in one statement.
func TruncateDerived(ctx context.Context, pool *pgxpool.Pool) error {
	names := make([]string, 0, len(DerivedTables()))
	for _, t := range DerivedTables() {
		names = append(names, pgx.Identifier{t}.Sanitize())
	}
	if _, err := pool.Exec(ctx, "TRUNCATE "+strings.Join(names, ", ")); err != nil {
		return fmt.Errorf("emptying the derived tables: %w", err)
	}
	return nil
}
