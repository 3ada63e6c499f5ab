package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"msgx/internal/kafka"
)

// InboxSchema is the idempotent DDL of the legacy CMINMSGS / COUTMSGS tables.
//
//go:embed inbox.sql
var InboxSchema string

// Shanghai is the default airport time zone.
var Shanghai = mustLoad("Asia/Shanghai")

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// PGAdminDSN is the PostgreSQL superuser connection the tests create their
// databases with (MSGX_TEST_PG_ADMIN_DSN).
func PGAdminDSN() string { return pgAdminDSN() }

// MySQLAdminDSN is the MariaDB administrator connection the tests create
// their databases with (MSGX_TEST_MYSQL_ADMIN_DSN), without a database.
func MySQLAdminDSN() string { return mysqlAdminDSN() }

func pgAdminDSN() string {
	if v := os.Getenv("MSGX_TEST_PG_ADMIN_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func mysqlAdminDSN() string {
	if v := os.Getenv("MSGX_TEST_MYSQL_ADMIN_DSN"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/"
}

func uniqueName(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// NewEmptyPG creates an empty PostgreSQL database without migrations.
func NewEmptyPG(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, pgAdminDSN())
	if err != nil {
		t.Fatalf("connecting to PostgreSQL (is it running? see README): %v", err)
	}
	defer admin.Close(context.Background())
	name := uniqueName("msgx_t")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a, err := pgx.Connect(ctx, pgAdminDSN())
		if err != nil {
			t.Logf("dropping %s: %v", name, err)
			return
		}
		defer a.Close(context.Background())
		if _, err := a.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("dropping %s: %v", name, err)
		}
	})
	cfg, err := pgx.ParseConfig(pgAdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// NewMySQL creates a MariaDB database holding empty CMINMSGS and COUTMSGS
// tables and returns its DSN. The database is dropped at the end of the test.
func NewMySQL(t testing.TB) string {
	t.Helper()
	admin, err := sql.Open("mysql", mysqlAdminDSN()+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := uniqueName("msgx_t")
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("creating MariaDB test database (is it running? see README): %v", err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("mysql", mysqlAdminDSN())
		if err != nil {
			return
		}
		defer a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := a.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Logf("dropping %s: %v", name, err)
		}
	})
	mc, err := mysql.ParseDSN(mysqlAdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	mc.DBName = name
	dsn := mc.FormatDSN()
	db, err := sql.Open("mysql", dsn+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, InboxSchema); err != nil {
		t.Fatalf("creating inbox tables: %v", err)
	}
	return dsn
}

// InsertInbox inserts one raw message into CMINMSGS and returns its ID.
func InsertInbox(t testing.TB, db *sql.DB, xml string) int64 {
	t.Helper()
	res, err := db.Exec("INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, NOW(), 'VALID')", xml)
	if err != nil {
		t.Fatalf("inserting inbox row: %v", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// NewBroker starts an in-memory embedded Kafka on a free port and returns its
// bootstrap addresses.
func NewBroker(t testing.TB) []string {
	t.Helper()
	b, err := kafka.StartBroker("127.0.0.1:0", "", Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b.Addrs()
}

// KafkaConfig returns a Kafka configuration for the test broker.
func KafkaConfig(brokers []string) kafka.Config {
	return kafka.Config{
		Brokers: brokers, Version: "4.0.0", Replication: 1, Acks: "all",
		Idempotent: true, MaxInFlight: 1, Timeout: 10 * time.Second, SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second, MaxMessageBytes: 1000000,
	}
}

// Logger returns a JSON slog logger writing warnings and errors into the test
// log (MSGX_TEST_LOG=debug shows everything).
func Logger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if strings.EqualFold(os.Getenv("MSGX_TEST_LOG"), "debug") {
		level = slog.LevelDebug
	}
	w := &testWriter{t: t}
	// Background goroutines may still log after the test returned, when
	// t.Log panics; from then on lines go to stderr.
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if w.done.Load() {
		return os.Stderr.Write(p)
	}
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = (*testWriter)(nil)

// OweBackfillSQL puts into the backfill sweeper's queue (backfill_owed)
// the terminal proc_state rows of the IDs $1 (bigint[]; NULL: every row)
// whose mark is neither recorded in backfill_at nor abandoned, as migration
// 0033 does for an upgraded database: for a test that writes proc_state
// rows itself (msgx's writers record the intent with the terminal state, in
// the same statement).
const OweBackfillSQL = `INSERT INTO backfill_owed (msg_id, attempts, next_at, enqueued_at)
	SELECT msg_id, backfill_attempts, backfill_next_at, enqueued_at FROM proc_state
	WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NULL AND backfill_abandoned_at IS NULL
	  AND ($1::bigint[] IS NULL OR msg_id = ANY($1))
	ON CONFLICT (msg_id) DO NOTHING`
