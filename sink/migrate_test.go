package sink_test

import (
	"context"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/migrations"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// A process killed while it applies migration N leaves version N dirty and
// the schema at N−1 (the migration's implicit transaction rolled back): the
// next start re-applies N instead of refusing to start for good.
func TestMigrateRecoversFromAKilledMigration(t *testing.T) {
	dsn := sinktest.NewPG(t) // migrated to the newest version
	cfg := sink.Config{PGDSN: dsn, Timeout: 10 * time.Second, PGMaxConns: 2}
	newest, dirty, err := sink.MigrationVersion(cfg)
	if err != nil || dirty {
		t.Fatalf("version %d dirty=%v: %v", newest, dirty, err)
	}
	// The state a kill -9 during migration `newest` leaves behind.
	if err := sink.MigrateDown(cfg, 1); err != nil {
		t.Fatal(err)
	}
	pool, err := sink.OpenPG(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(context.Background(), `UPDATE schema_migrations SET version = $1, dirty = true`, int64(newest)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Migrate(cfg); err != nil {
		t.Fatalf("migrating a dirty schema: %v", err)
	}
	if v, dirty, err := sink.MigrationVersion(cfg); err != nil || dirty || v != newest {
		t.Fatalf("after recovery: version %d dirty=%v %v, want %d clean", v, dirty, err, newest)
	}
}

// A kill after a migration's body committed, before golang-migrate marked
// the version clean, used to leave a dirty version whose objects exist, and
// every later start failed re-applying it. The body now marks its version
// clean in its own transaction: that state cannot arise.
func TestMigrationBodyMarksItsVersionClean(t *testing.T) {
	cfg := sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 2}
	newest, _, err := sink.MigrationVersion(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigrateDown(cfg, 1); err != nil {
		t.Fatal(err)
	}
	body, err := sink.UpMigrationBody(newest)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := sink.OpenPG(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	// golang-migrate's sequence, killed before its last step.
	if _, err := pool.Exec(ctx, `UPDATE schema_migrations SET version = $1, dirty = true`, int64(newest)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, string(body)); err != nil {
		t.Fatal(err)
	}
	if v, dirty, err := sink.MigrationVersion(cfg); err != nil || dirty || v != newest {
		t.Fatalf("after the body: version %d dirty=%v %v, want %d clean", v, dirty, err, newest)
	}
	if err := sink.Migrate(cfg); err != nil {
		t.Fatalf("the next start: %v", err)
	}
}

// The recovery above relies on every migration running as one implicit
// transaction: no transaction control and nothing that refuses to run in a
// transaction block.
func TestMigrationsAreOneTransactionEach(t *testing.T) {
	bad := regexp.MustCompile(`(?i)\b(BEGIN|COMMIT|ROLLBACK|START\s+TRANSACTION|CONCURRENTLY|VACUUM)\b`)
	comment := regexp.MustCompile(`--[^\n]*`)
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		// Function bodies ($$ … $$) may say BEGIN; they are not statements.
		sql := regexp.MustCompile(`(?s)\$\$.*?\$\$`).ReplaceAllString(comment.ReplaceAllString(string(b), ""), "")
		if m := bad.FindString(sql); m != "" {
			t.Errorf("%s: %q would break the one-transaction rule sink.Migrate relies on", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Migration 0033 moves the backfill queue out of proc_state: on the way up
// exactly the terminal rows owing their mark (not confirmed, not abandoned)
// enter backfill_owed, with their attempt count and due time; on the way
// down a mark confirmed since (terminal, out of the queue, not abandoned)
// gets a backfill_at again, and the rows still owed keep none.
func TestBackfillQueueMigration(t *testing.T) {
	cfg := sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 2}
	newest, _, err := sink.MigrationVersion(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The versions from 0026 on have no gaps.
	toBefore := int(newest) - 32
	if err := sink.MigrateDown(cfg, toBefore); err != nil { // to 0032
		t.Fatal(err)
	}
	pool, err := sink.OpenPG(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at, backfill_at, backfill_next_at, backfill_attempts,
			backfill_abandoned_at, backfill_abandoned_reason) VALUES
		(1, 'SUCCEEDED', $1, $1, NULL, $1, 0, NULL, NULL),          -- owed
		(2, 'DEAD', $1, $1, NULL, $2, 3, NULL, NULL),               -- owed, backing off
		(3, 'SKIPPED', $1, $1, $1, $1, 0, NULL, NULL),              -- confirmed
		(4, 'DEAD', $1, $1, NULL, $1, 9, $2, 'TRANSIENT_DEADLINE'), -- abandoned
		(5, 'ROUTED', $1, $1, NULL, NULL, 0, NULL, NULL),           -- not terminal
		(6, 'ARCHIVED', $1, $1, NULL, NULL, 0, NULL, NULL)`, t0, t0.Add(time.Hour))
	if err := sink.Migrate(cfg); err != nil {
		t.Fatal(err)
	}
	type owed struct {
		id       int64
		attempts int
		next     time.Time
	}
	rows, _ := pool.Query(ctx, `SELECT msg_id, attempts, next_at FROM backfill_owed ORDER BY msg_id`)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (owed, error) {
		var o owed
		return o, r.Scan(&o.id, &o.attempts, &o.next)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].id != 1 || got[0].attempts != 0 || !got[0].next.Equal(t0) ||
		got[1].id != 2 || got[1].attempts != 3 || !got[1].next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("queue after 0033: %+v", got)
	}
	// Message 1's mark is confirmed under 0033; then back to 0032.
	exec(`DELETE FROM backfill_owed WHERE msg_id = 1`)
	if err := sink.MigrateDown(cfg, toBefore); err != nil {
		t.Fatal(err)
	}
	rows, _ = pool.Query(ctx, `SELECT msg_id FROM proc_state WHERE backfill_at IS NOT NULL ORDER BY msg_id`)
	marked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(marked, []int64{1, 3}) {
		t.Fatalf("confirmed marks after going back to 0032: %v, want [1 3]", marked)
	}
}
