package aodb

import (
	"database/sql"
	"errors"
	"time"

	"msgx/internal/need"
	"msgx/sink"
)

// Config names the shared tables. The names are formatted into the
// statements, so Validate admits table names only.
type Config struct {
	// InboxTable is the shared inbox table (the legacy CMINMSGS).
	InboxTable string `env:"MSGX_INBOX_TABLE" envDefault:"cminmsgs"`
	// OutboxTable is the shared outbox table (the legacy COUTMSGS).
	OutboxTable string `env:"MSGX_OUTBOX_TABLE" envDefault:"coutmsgs"`
}

// Validate checks the names; errors name the variable.
func (c Config) Validate() error {
	return errors.Join(sink.CheckTableName("MSGX_INBOX_TABLE", c.InboxTable), sink.CheckTableName("MSGX_OUTBOX_TABLE", c.OutboxTable))
}

// Deps are the connections to the shared database.
type Deps struct {
	// DB is a connection pool to the shared database's primary
	// (sink.OpenMySQL, its DATETIMEs in the inbox's zone; required).
	DB *sql.DB
	// Probe is a pool to the primary whose sessions carry the hole probe's
	// innodb_lock_wait_timeout (MSGX_HOLE_PROBE_TIMEOUT); nil when nothing
	// probes (Probe then fails).
	Probe *sql.DB
	// Timeout bounds every call (MSGX_DB_TIMEOUT); a transaction of several
	// statements (marking, searching the outbox) is bounded by it as one
	// unit.
	Timeout time.Duration
}

// Validate reports what is missing.
func (d Deps) Validate() error {
	return need.Check("aodb", need.Has(d.DB != nil, "MySQL connection"), need.Timeout(d.Timeout))
}

// Tables is the one owner of the shared tables: every statement msgx runs
// against CMINMSGS and COUTMSGS is a method of it. It is safe for
// concurrent use.
type Tables struct {
	db      *sql.DB
	probe   *sql.DB
	inbox   string
	outbox  string
	timeout time.Duration
}

// New checks cfg and deps and returns the tables.
func New(cfg Config, deps Deps) (*Tables, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.Validate(); err != nil {
		return nil, err
	}
	return &Tables{db: deps.DB, probe: deps.Probe, inbox: cfg.InboxTable, outbox: cfg.OutboxTable, timeout: deps.Timeout}, nil
}
