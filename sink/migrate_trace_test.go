package sink_test

import (
	"context"
	"testing"
	"time"

	"msgx/migrations"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// Migration 0026 committed, then the process was killed before
// golang-migrate cleared its dirty flag: sink.Migrate applies it again,
// which must change nothing and not fail (its statements are IF NOT
// EXISTS), or msgx would never start again. Its down migration likewise.
func TestTraceMigrationIsRepeatable(t *testing.T) {
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, name := range []string{"0026_trace.up.sql", "0026_trace.down.sql", "0026_trace.down.sql", "0026_trace.up.sql", "0026_trace.up.sql"} {
		sql, err := migrations.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("applying %s again: %v", name, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE (table_name, column_name) IN (('proc_state', 'inbox_offset'), ('proc_state', 'decided_at'), ('msg_event', 'kafka_offset'))`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d of the 3 columns after re-applying 0026 (%v)", n, err)
	}
}
