package sink_test

import (
	"context"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"time"

	"msgx/internal/testenv"
	"msgx/migrations"
	"msgx/sink"
)

// A process killed while it applies migration N leaves version N dirty and
// the schema at N−1 (the migration's implicit transaction rolled back): the
// next start re-applies N instead of refusing to start for good.
func TestMigrateRecoversFromAKilledMigration(t *testing.T) {
	dsn := testenv.NewPG(t) // migrated to the newest version
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
	cfg := sink.Config{PGDSN: testenv.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 2}
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
