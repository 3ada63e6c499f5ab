package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"msgx/internal/retry"
)

// provisioning is where the manual lists the grants msgx needs.
const provisioning = "docs/operations.md, Provisioning, lists them"

// MySQLAccess is what one msgx component needs of one shared MySQL table:
// a privilege on some of its columns (column-level grants, so that msgx's
// user can touch nothing else of the AODB's tables).
type MySQLAccess struct {
	// Privilege is SELECT, INSERT or UPDATE.
	Privilege string
	// Table is the table as msgx's statements name it (MSGX_INBOX_TABLE,
	// MSGX_OUTBOX_TABLE).
	Table string
	// Columns are the columns the privilege must cover.
	Columns []string
	// For says who needs it ("the backfill sweeper writes the processed
	// mark"), for the refusal.
	For string
}

// MySQLDeniedError is MySQL refusing msgx's user a privilege msgx needs:
// which one, on which table and columns. Err is MySQL's own answer for the
// first column refused.
type MySQLDeniedError struct {
	Privilege, Database, Table string
	Columns                    []string
	For                        string
	Err                        error
}

func (e *MySQLDeniedError) Error() string {
	what := e.Table
	if e.Database != "" && !strings.Contains(e.Table, ".") {
		what = e.Database + "." + e.Table
	}
	if len(e.Columns) == 1 {
		what += "." + e.Columns[0]
	} else {
		what += " (" + strings.Join(e.Columns, ", ") + ")"
	}
	if e.For != "" {
		what += " (" + e.For + ")"
	}
	return fmt.Sprintf("MySQL denies msgx's user %s on %s: a grant is missing (%s): %v", e.Privilege, what, provisioning, e.Err)
}

func (e *MySQLDeniedError) Unwrap() error { return e.Err }

// MySQL's answers that msgx's user lacks a grant on a table or a column
// (ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR), or may not
// log in (ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR).
var (
	mysqlDenials = map[uint16]bool{1142: true, 1143: true}
	mysqlLogin   = map[uint16]bool{1044: true, 1045: true}
)

// CheckMySQLGrants asks MySQL whether msgx's user holds every access in
// needs, without changing anything: it prepares, and never executes, one
// statement per column that uses the privilege on it (MySQL checks
// privileges when it prepares a statement). The hole probe's locking read
// (LOCK IN SHARE MODE) needs nothing beyond SELECT. It returns one
// MySQLDeniedError per access that lacks a column, naming the columns
// refused, joined; an unreachable MySQL as an outage; any other failure (a
// table that does not exist) with the statement.
func CheckMySQLGrants(ctx context.Context, db *sql.DB, database string, needs []MySQLAccess) error {
	var errs []error
	for _, n := range needs {
		var denied *MySQLDeniedError
		for _, col := range n.Columns {
			var q string
			switch n.Privilege {
			case "SELECT":
				q = "SELECT " + col + " FROM " + n.Table + " LIMIT 0"
			case "INSERT":
				q = "INSERT INTO " + n.Table + " (" + col + ") VALUES (?)"
			case "UPDATE":
				q = "UPDATE " + n.Table + " SET " + col + " = ? WHERE 1 = 0"
			default:
				return fmt.Errorf("checking msgx's MySQL grants: unknown privilege %q", n.Privilege)
			}
			stmt, err := db.PrepareContext(ctx, q)
			if err == nil {
				stmt.Close()
				continue
			}
			var me *mysql.MySQLError
			switch {
			case errors.As(err, &me) && mysqlLogin[me.Number]:
				return fmt.Errorf("MySQL refuses msgx's user the connection: check MSGX_MYSQL_DSN's user, password, host and database (%s): %w", provisioning, err)
			case errors.As(err, &me) && mysqlDenials[me.Number]:
				if denied == nil {
					denied = &MySQLDeniedError{Privilege: n.Privilege, Database: database, Table: n.Table, For: n.For, Err: err}
					errs = append(errs, denied)
				}
				denied.Columns = append(denied.Columns, col)
			case retry.IsOutage(err):
				return retry.Outage("mysql", fmt.Errorf("checking msgx's MySQL grants: %w", err))
			default:
				return fmt.Errorf("checking msgx's MySQL grants with %q: %w", q, err)
			}
		}
	}
	return errors.Join(errs...)
}

// PGDeniedError is PostgreSQL refusing msgx's role the log-in (SQLSTATE
// class 28) or a privilege (42501) at start-up: a provisioning mistake that
// waiting does not mend.
type PGDeniedError struct {
	Role, Database string
	// Code and Message are PostgreSQL's.
	Code, Message string
}

func (e *PGDeniedError) Error() string {
	need := "msgx's role must own its database, and msgx's migrations create every table in it as that role"
	if strings.HasPrefix(e.Code, "28") {
		need = "the role needs LOGIN and a password or pg_hba.conf entry that lets it in"
	}
	return fmt.Sprintf("PostgreSQL denies msgx's role %q on database %q: %s (SQLSTATE %s): %s (%s)",
		e.Role, e.Database, e.Message, e.Code, need, provisioning)
}

// pgSQLState finds a PostgreSQL error in the text of an error whose chain
// was cut (golang-migrate formats the driver's error with %v, the
// migration's SQL after it).
var pgSQLState = regexp.MustCompile(`(?:ERROR|FATAL): ([^\n]*?) \(SQLSTATE (28[0-9A-Z]{3}|42501)\)`)

// PGDenied returns err as a PGDeniedError when PostgreSQL refused msgx's
// role (dsn's user) the log-in or a privilege, else nil. pgx files a
// refused log-in under its connection errors, which are outages; at
// start-up it is a provisioning mistake, so the caller reports it instead
// of waiting for it to pass.
func PGDenied(err error, dsn string) error {
	if err == nil {
		return nil
	}
	d := &PGDeniedError{}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "28") || pe.Code == "42501") {
		d.Code, d.Message = pe.Code, pe.Message
	} else if m := pgSQLState.FindStringSubmatch(err.Error()); m != nil {
		d.Code, d.Message = m[2], m[1]
	} else {
		return nil
	}
	if cfg, perr := pgx.ParseConfig(dsn); perr == nil {
		d.Role, d.Database = cfg.User, cfg.Database
	}
	return d
}
