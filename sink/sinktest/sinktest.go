// Package sinktest gives tests databases as msgx opens them: a PostgreSQL
// database migrated with msgx's schema ([NewPG]) and MySQL connections
// whose DATETIMEs are read in the inbox's zone ([OpenMySQL]). It adds
// sink's migrator and connectors to internal/testenv, which creates the
// databases and knows nothing of msgx's packages; [Tables] are the shared
// MySQL tables as sink/aodb reaches them.
package sinktest

import (
	"database/sql"
	"testing"
	"time"

	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/aodb"
)

// ShanghaiInbox is an inbox zone fixed to Shanghai (as MSGX_INBOX_TZ=Asia/Shanghai
// sets it), for tests whose inbox times are written by msgx itself.
var ShanghaiInbox = sink.FixedInboxZone(testenv.Shanghai, "MSGX_INBOX_TZ")

// NewPG creates an empty PostgreSQL database, applies msgx's migrations and
// returns its DSN. The database is dropped at the end of the test.
func NewPG(t testing.TB) string {
	t.Helper()
	dsn := testenv.NewEmptyPG(t)
	if err := sink.Migrate(sink.Config{PGDSN: dsn}); err != nil {
		t.Fatalf("migrating test database: %v", err)
	}
	return dsn
}

// OpenMySQL opens dsn the way msgx does by default: DATETIMEs in the MySQL
// session's zone.
func OpenMySQL(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	return OpenMySQLIn(t, dsn, nil)
}

// OpenMySQLIn opens dsn with its DATETIMEs in zone (nil: the session's).
func OpenMySQLIn(t testing.TB, dsn string, zone *sink.InboxZone) *sql.DB {
	t.Helper()
	db, err := sink.OpenMySQL(sink.Config{MySQLDSN: dsn, Timeout: 10 * time.Second}, zone, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Tables returns the shared tables on db: the inbox table inbox and the
// outbox coutmsgs, the hole probe through probe (nil: none), every call
// bounded by timeout.
func Tables(t testing.TB, db, probe *sql.DB, inbox string, timeout time.Duration) *aodb.Tables {
	t.Helper()
	tables, err := aodb.New(aodb.Config{InboxTable: inbox, OutboxTable: "coutmsgs"}, aodb.Deps{DB: db, Probe: probe, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return tables
}
