package sink

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers the pgx5:// scheme
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/migrations"
)

// Config is how msgx reaches its databases.
type Config struct {
	// PGDSN is msgx's own PostgreSQL (state, read model). URL or key=value form.
	PGDSN string `env:"MSGX_PG_DSN" envDefault:"postgres://postgres@127.0.0.1:5432/msgx?sslmode=disable"`
	// MySQLDSN is the shared legacy inbox (go-sql-driver DSN); it must be the
	// primary, whose locks the hole probe waits on. parseTime and the inbox
	// zone (MSGX_INBOX_TZ) are forced; a loc parameter is ignored. The grants
	// its user needs: docs/operations.md, Provisioning.
	MySQLDSN string `env:"MSGX_MYSQL_DSN" envDefault:"root@tcp(127.0.0.1:3306)/aodbinterface"`
	// InboxTZ is the zone of the inbox's DATETIME columns (CMINMSGS_DATE_*,
	// COUTMSGS_DATE_*): an IANA name (Asia/Shanghai) or an offset (+08:00).
	// Empty (the default): the MySQL session's zone, asked from the server.
	// Logged at start (docs/design.md#inbox-zone).
	InboxTZ string `env:"MSGX_INBOX_TZ"`
	// Timeout bounds every single database call.
	Timeout time.Duration `env:"MSGX_DB_TIMEOUT" envDefault:"10s"`
	// PGMaxConns is the size of the PostgreSQL pool, in connections (at
	// least 2).
	PGMaxConns int32 `env:"MSGX_PG_MAX_CONNS" envDefault:"10"`
	// LockRetry is how often an instance waiting for the process lock tries
	// to take it, as a standby or after PostgreSQL became unreachable: work
	// resumes at most this long after PostgreSQL accepts connections again
	// (the ingest lock retries every MSGX_POLL_INTERVAL).
	LockRetry time.Duration `env:"MSGX_LOCK_RETRY" envDefault:"2s"`
}

// Validate checks both DSNs parse and the limits are sane.
func (c Config) Validate() error {
	if _, err := pgxpool.ParseConfig(c.PGDSN); err != nil {
		return fmt.Errorf("MSGX_PG_DSN: %w", err)
	}
	if _, err := mysql.ParseDSN(c.MySQLDSN); err != nil {
		return fmt.Errorf("MSGX_MYSQL_DSN: %w", err)
	}
	if c.InboxTZ != "" {
		if _, err := ParseZone(c.InboxTZ); err != nil {
			return fmt.Errorf("MSGX_INBOX_TZ=%q: %w", c.InboxTZ, err)
		}
	}
	if c.Timeout <= 0 {
		return errors.New("MSGX_DB_TIMEOUT: must be positive")
	}
	if c.PGMaxConns < 2 {
		return errors.New("MSGX_PG_MAX_CONNS: must be at least 2")
	}
	if c.LockRetry <= 0 || c.LockRetry > time.Minute {
		return errors.New("MSGX_LOCK_RETRY: must be positive and at most 1m")
	}
	return nil
}

// OpenPG opens the PostgreSQL pool. It does not wait for the server: an
// unreachable database is an outage the callers retry, not a start-up crash.
func OpenPG(ctx context.Context, c Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(c.PGDSN)
	if err != nil {
		return nil, fmt.Errorf("parsing MSGX_PG_DSN: %w", err)
	}
	pc.MaxConns = c.PGMaxConns
	pc.ConnConfig.ConnectTimeout = c.Timeout
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("opening postgres: %w", err)
	}
	return pool, nil
}

// The driver logger routes the driver's own messages (e.g. "closing bad idle
// connection") to slog at debug level instead of stderr.
//
// It is set when the package is loaded, before any connection exists: the
// driver reads its logger without a lock, so setting it while another
// goroutine already uses the driver (a test's own connection) is a data race.
func init() { _ = mysql.SetLogger(driverLogger{}) }

type driverLogger struct{}

func (driverLogger) Print(v ...any) {
	slog.Debug(strings.TrimSpace(fmt.Sprint(v...)), "component", "mysql-driver")
}

// OpenMySQL opens the shared inbox database. DATETIME columns are read and
// written in zone, the inbox's zone (the legacy inbox stores wall-clock
// times without a zone); nil means NewInboxZone(c, nil). Connections that
// share a zone learn it once. sessionVars are set on every connection (e.g.
// innodb_lock_wait_timeout for the hole probe).
func OpenMySQL(c Config, zone *InboxZone, sessionVars map[string]string) (*sql.DB, error) {
	mc, err := mysql.ParseDSN(c.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("parsing MSGX_MYSQL_DSN: %w", err)
	}
	if zone == nil {
		if zone, err = NewInboxZone(c, nil); err != nil {
			return nil, err
		}
	}
	for k, v := range sessionVars {
		if mc.Params == nil {
			mc.Params = map[string]string{}
		}
		mc.Params[k] = v
	}
	mc.ParseTime = true
	if mc.Timeout == 0 {
		mc.Timeout = c.Timeout
	}
	db := sql.OpenDB(&zoneConnector{cfg: mc, zone: zone})
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	db.SetConnMaxLifetime(30 * time.Minute)
	return db, nil
}

// Migrate applies every embedded migration up to the newest.
//
// A process killed while it applies a migration leaves the schema "dirty":
// golang-migrate records version N as dirty in its own transaction before it
// runs migration N, and clears the flag after. Every msgx migration is one
// multi-statement string without transaction commands, which PostgreSQL
// runs as one implicit transaction, so the killed migration rolled back as
// a whole and the schema is exactly version N−1. Migrate therefore goes back
// to the version before N and applies N again. A migration that fails on its
// own (an SQL error) rolls back the same way and fails again with its
// reason.
func Migrate(c Config) error {
	m, err := newMigrate(c.PGDSN)
	if err != nil {
		return err
	}
	defer m.Close()
	err = m.Up()
	var dirty migrate.ErrDirty
	if errors.As(err, &dirty) {
		prev, perr := previousVersion(uint(dirty.Version))
		if perr != nil {
			return fmt.Errorf("migrating postgres up: version %d is dirty: %w", dirty.Version, perr)
		}
		if ferr := m.Force(prev); ferr != nil {
			return fmt.Errorf("migrating postgres up: undoing the dirty version %d: %w", dirty.Version, ferr)
		}
		err = m.Up()
	}
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrating postgres up: %w", err)
	}
	return fillAfterUpgrade(c)
}

// fillAfterUpgrade writes what rows of an earlier msgx lack
// (fillTableStates), in one transaction.
func fillAfterUpgrade(c Config) error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.PGDSN)
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	// A one-time fill at start-up, before any component and its clock run:
	// the rows it writes are stamped with the database's clock.
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return err
		}
		return fillTableStates(ctx, tx, now)
	}); err != nil {
		return fmt.Errorf("filling in the table states of an earlier version's rows: %w", err)
	}
	return nil
}

// previousVersion is the embedded migration before v, or -1 (no migration
// applied) when v is the first.
func previousVersion(v uint) (int, error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return 0, fmt.Errorf("reading embedded migrations: %w", err)
	}
	defer src.Close()
	prev, err := src.Prev(v)
	if errors.Is(err, fs.ErrNotExist) {
		return database.NilVersion, nil
	}
	if err != nil {
		return 0, fmt.Errorf("looking up the migration before %d: %w", v, err)
	}
	return int(prev), nil
}

// cleanOnCommit appends to every up migration the statement that marks its
// version clean. golang-migrate marks a version dirty, runs the body (one
// implicit transaction: a multi-statement simple query) and marks it clean
// in a second transaction; a kill between the two left a version dirty whose
// body had committed, and Migrate's "undo the dirty version, apply it again"
// then failed on the objects it already made (relation … already exists),
// at every start. With the clean mark inside the body's transaction, a dirty
// version is always one whose body rolled back. (The clean mark
// golang-migrate writes afterwards is then a no-op.)
type cleanOnCommit struct{ source.Driver }

func (s cleanOnCommit) ReadUp(version uint) (io.ReadCloser, string, error) {
	r, id, err := s.Driver.ReadUp(version)
	if err != nil {
		return r, id, err
	}
	defer r.Close()
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, id, fmt.Errorf("reading migration %d: %w", version, err)
	}
	body = fmt.Appendf(body, "\n;\nUPDATE schema_migrations SET dirty = false WHERE version = %d;\n", version)
	return io.NopCloser(bytes.NewReader(body)), id, nil
}

// MigrateDown reverts the given number of migrations (all when steps <= 0).
func MigrateDown(c Config, steps int) error {
	m, err := newMigrate(c.PGDSN)
	if err != nil {
		return err
	}
	defer m.Close()
	if steps <= 0 {
		err = m.Down()
	} else {
		err = m.Steps(-steps)
	}
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrating postgres down: %w", err)
	}
	return nil
}

// MigrationVersion reports the applied schema version and whether a failed
// migration left it dirty.
func MigrationVersion(c Config) (version uint, dirty bool, err error) {
	m, err := newMigrate(c.PGDSN)
	if err != nil {
		return 0, false, err
	}
	defer m.Close()
	version, dirty, err = m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	return version, dirty, err
}

func newMigrate(dsn string) (*migrate.Migrate, error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	url, err := pgx5URL(dsn)
	if err != nil {
		return nil, err
	}
	m, err := migrate.NewWithSourceInstance("iofs", cleanOnCommit{src}, url)
	if err != nil {
		return nil, fmt.Errorf("connecting migrations to postgres: %w", err)
	}
	return m, nil
}

// pgx5URL turns a postgres:// URL into golang-migrate's pgx5:// form.
func pgx5URL(dsn string) (string, error) {
	for _, p := range []string{"postgres://", "postgresql://"} {
		if strings.HasPrefix(dsn, p) {
			return "pgx5://" + strings.TrimPrefix(dsn, p), nil
		}
	}
	return "", fmt.Errorf("MSGX_PG_DSN must be a postgres:// URL for migrations, got %q", dsn)
}

// OperatorCallTimeout bounds each database call of an operator command
// (msgx backfill, replay, status) that has no configured timeout at hand. A
// shorter deadline on the caller's context still wins.
const OperatorCallTimeout = 30 * time.Second

// tableName is what a configurable table name may look like: a name or
// schema.name of letters, digits and underscores. Table names are spliced
// into SQL, so nothing else is accepted.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?$`)

// CheckTableName returns an error naming variable when name cannot be a
// table name.
func CheckTableName(variable, name string) error {
	if !tableName.MatchString(name) {
		return fmt.Errorf("%s=%q: not a table name (letters, digits, _; optionally schema.table)", variable, name)
	}
	return nil
}

// IDList renders ids as a comma-separated SQL list. They are integers, so
// the list cannot carry anything but numbers into the statement.
func IDList(ids []int64) string {
	var sb strings.Builder
	sb.Grow(len(ids) * 8)
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(id, 10))
	}
	return sb.String()
}
