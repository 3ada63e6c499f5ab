package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"msgx/ingest/replay"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// manualSQL returns the statements of the manual's provisioning block
// whose first line starts with header (docs/operations.md, Provisioning):
// the test runs exactly what the manual prints.
func manualSQL(t *testing.T, header string) []string {
	t.Helper()
	manual, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sql\n" + regexp.QuoteMeta(header) + "[^\n]*\n(.*?)```").FindSubmatch(manual)
	if m == nil {
		t.Fatalf("docs/operations.md has no ```sql block starting %q", header)
	}
	var out []string
	for _, s := range strings.Split(string(m[1]), ";\n") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// provisioned is a deployment's databases as the manual provisions them:
// a MariaDB user with the manual's grants on a fresh inbox database, and a
// PostgreSQL role owning a fresh database of its own.
type provisioned struct {
	myAdmin string // the inbox database as its administrator (the AODB) sees it
	env     map[string]string
}

// provision runs the manual's MySQL statements for which keep is true, and
// its PostgreSQL statements after pg rewrites each (nil: as printed), with
// unique names, dropped at the end of the test.
func provision(t *testing.T, keep func(string) bool, pg func(string) string) provisioned {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := strings.ToLower(strings.TrimSuffix(testenv.KafkaPrefix(), ".")) // unique per test
	name = "msgx_p" + regexp.MustCompile(`[^a-z0-9]`).ReplaceAllString(name, "")

	myAdmin := testenv.NewMySQL(t)
	mc, err := mysql.ParseDSN(myAdmin)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", testenv.MySQLAdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	t.Cleanup(func() {
		a, err := sql.Open("mysql", testenv.MySQLAdminDSN())
		if err != nil {
			return
		}
		defer a.Close()
		if _, err := a.Exec("DROP USER IF EXISTS '" + name + "'@'%'"); err != nil {
			t.Logf("dropping MySQL user %s: %v", name, err)
		}
	})
	for _, s := range manualSQL(t, "-- MariaDB / MySQL") {
		if !keep(s) {
			continue
		}
		s = strings.ReplaceAll(s, "'msgx'@'%'", "'"+name+"'@'%'")
		s = strings.ReplaceAll(s, "aodbinterface.", mc.DBName+".")
		s = strings.ReplaceAll(s, "'change-me'", "'pw-"+name+"'")
		if _, err := admin.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	mine := *mc
	mine.User, mine.Passwd = name, "pw-"+name

	pgAdmin, err := pgx.Connect(ctx, testenv.PGAdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pgAdmin.Close(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a, err := pgx.Connect(ctx, testenv.PGAdminDSN())
		if err != nil {
			return
		}
		defer a.Close(context.Background())
		for _, s := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "DROP ROLE IF EXISTS " + name} {
			if _, err := a.Exec(ctx, s); err != nil {
				t.Logf("%s: %v", s, err)
			}
		}
	})
	word := regexp.MustCompile(`\bmsgx\b`)
	for _, s := range manualSQL(t, "-- PostgreSQL") {
		if pg != nil {
			s = pg(s)
		}
		s = word.ReplaceAllString(s, name)
		if _, err := pgAdmin.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	pc, err := pgx.ParseConfig(testenv.PGAdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	return provisioned{myAdmin: myAdmin, env: map[string]string{
		"MSGX_PG_DSN":              fmt.Sprintf("postgres://%s:change-me@%s:%d/%s?sslmode=disable", name, pc.Host, pc.Port, name),
		"MSGX_MYSQL_DSN":           mine.FormatDSN(),
		"MSGX_STATE_DIR":           t.TempDir(),
		"MSGX_EMBEDDED_KAFKA_ADDR": freeAddr(t),
		"MSGX_HTTP_ADDR":           freeAddr(t),
		"MSGX_CUTOVER_WATERMARK":   "min",
		"MSGX_POLL_INTERVAL":       "50ms",
		"MSGX_HOLE_GRACE":          "200ms",
		"MSGX_HISTORY_RETENTION":   "0",
	}}
}

// TestProvisioning runs msgx under exactly the database grants of the
// manual (docs/operations.md, Provisioning) — a MariaDB user with
// column-level grants on the inbox and outbox, a PostgreSQL role that is
// no superuser and owns only its database — and, in the first subtest,
// the Kafka ACLs of 3.6 on Apache Kafka's SASL_SSL listener: the demo
// day, a message through POST /cminmsgs/send, an inbox hole resolved by
// the probe's locking read, every processed mark, a msgx replay and a
// msgx request. Then each MySQL grant is left out in turn (and one column,
// a wrong password, the role's LOGIN, its database's ownership, tables
// another role created): msgx refuses to start with one line naming what
// is missing, within seconds, having processed nothing; and with MySQL
// away at start, it starts and refuses once MySQL answers. The refusals
// come before msgx touches Kafka, so those subtests use the embedded
// Kafka (the Kafka ACLs' own refusals are TestLeastPrivilege's).
func TestProvisioning(t *testing.T) {
	t.Parallel()
	t.Run("every grant", func(t *testing.T) {
		t.Parallel()
		k := testenv.RealKafka(t)
		u := newACLUser(t, k)
		for _, a := range leastPrivilege(u.prefix) {
			u.grant(t, k, a.acl)
		}
		p := provision(t, func(string) bool { return true }, nil)
		for key, v := range u.env {
			p.env[key] = v
		}
		cfg, err := loadConfig(p.env)
		if err != nil {
			t.Fatal(err)
		}
		runProvisioned(t, cfg, p.myAdmin)
	})

	// Each GRANT of the manual left out, and one column short.
	var grants []string
	for _, s := range manualSQL(t, "-- MariaDB / MySQL") {
		if strings.HasPrefix(s, "GRANT ") {
			grants = append(grants, s)
		}
	}
	if len(grants) != 5 {
		t.Fatalf("the manual lists %d MySQL grants, want 5: %q", len(grants), grants)
	}
	grantRE := regexp.MustCompile(`^GRANT (\w+) \(([^)]*)\) ON aodbinterface\.(\w+) TO`)
	for _, g := range grants {
		m := grantRE.FindStringSubmatch(g)
		if m == nil {
			t.Fatalf("unexpected grant %q", g)
		}
		priv, cols, table := m[1], strings.Split(m[2], ", "), m[3]
		t.Run("without "+priv+" on "+table, func(t *testing.T) {
			t.Parallel()
			p := provision(t, func(s string) bool { return s != g }, nil)
			what := table + " (" + strings.Join(cols, ", ") + ")"
			if len(cols) == 1 {
				what = table + "." + cols[0]
			}
			refused(t, p, "MySQL denies msgx's user "+priv+" on "+dbOf(t, p.myAdmin)+"."+what+" (")
		})
	}
	t.Run("without SELECT on CMINMSGS_STATUS", func(t *testing.T) {
		t.Parallel()
		p := provision(t, func(string) bool { return true }, nil)
		admin := sinktest.OpenMySQL(t, p.myAdmin)
		if _, err := admin.Exec("REVOKE SELECT (CMINMSGS_STATUS) ON " + dbOf(t, p.myAdmin) + ".cminmsgs FROM '" + userOf(t, p) + "'@'%'"); err != nil {
			t.Fatal(err)
		}
		refused(t, p, "MySQL denies msgx's user SELECT on "+dbOf(t, p.myAdmin)+".cminmsgs.CMINMSGS_STATUS (")
	})
	t.Run("a wrong MySQL password", func(t *testing.T) {
		t.Parallel()
		p := provision(t, func(string) bool { return true }, nil)
		p.env["MSGX_MYSQL_DSN"] = strings.Replace(p.env["MSGX_MYSQL_DSN"], ":pw-", ":wrong-", 1)
		refused(t, p, "MySQL refuses msgx's user the connection: check MSGX_MYSQL_DSN's user, password, host and database (")
	})
	t.Run("without LOGIN", func(t *testing.T) {
		t.Parallel()
		p := provision(t, func(string) bool { return true }, func(s string) string { return strings.Replace(s, " LOGIN ", " NOLOGIN ", 1) })
		refused(t, p, "PostgreSQL denies msgx's role "+`"`+userOf(t, p)+`"`+" on database "+`"`+userOf(t, p)+`": role "`+userOf(t, p)+`" is not permitted to log in (SQLSTATE 28000)`)
	})
	t.Run("without owning its database", func(t *testing.T) {
		t.Parallel()
		p := provision(t, func(string) bool { return true }, func(s string) string {
			// The database is the administrator's; msgx may connect.
			s = strings.Replace(s, " OWNER msgx", "", 1)
			return strings.Replace(s, "REVOKE ALL ON DATABASE msgx FROM PUBLIC", "GRANT CONNECT ON DATABASE msgx TO msgx", 1)
		})
		refused(t, p, "PostgreSQL denies msgx's role "+`"`+userOf(t, p)+`"`+" on database "+`"`+userOf(t, p)+`": permission denied for schema public (SQLSTATE 42501)`)
	})
	t.Run("tables of another role", func(t *testing.T) {
		t.Parallel()
		p := provision(t, func(string) bool { return true }, nil)
		// Migrated by the administrator first: its tables, not msgx's.
		pc, err := pgx.ParseConfig(testenv.PGAdminDSN())
		if err != nil {
			t.Fatal(err)
		}
		name := userOf(t, p)
		if err := sink.Migrate(sink.Config{PGDSN: fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", pc.User, pc.Host, pc.Port, name)}); err != nil {
			t.Fatal(err)
		}
		refused(t, p, `PostgreSQL denies msgx's role "`+name+`" on database "`+name+`": permission denied for table `)
	})
	// MySQL away at start: msgx starts, and refuses once MySQL answers.
	t.Run("checked when MySQL comes back", func(t *testing.T) {
		t.Parallel()
		p := provision(t, func(s string) bool { return !strings.HasPrefix(s, "GRANT UPDATE") }, nil)
		proxy := testenv.NewProxy(t, "127.0.0.1:3306")
		proxy.Down()
		p.env["MSGX_MYSQL_DSN"] = strings.Replace(p.env["MSGX_MYSQL_DSN"], "127.0.0.1:3306", proxy.Addr(), 1)
		p.env["MSGX_DB_TIMEOUT"] = "1s"
		cfg, err := loadConfig(p.env)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- runGateway(context.Background(), cfg, testenv.Logger(t), roleAll) }()
		waitFor(t, "msgx started without MySQL", time.Minute, func() bool {
			code, body := get(t, "http://"+cfg.HTTPAddr+"/readyz")
			return code == http.StatusServiceUnavailable && strings.Contains(body, "mysql unreachable")
		})
		select {
		case err := <-done:
			t.Fatalf("msgx stopped while MySQL was away: %v", err)
		case <-time.After(time.Second):
		}
		proxy.Up()
		select {
		case err := <-done:
			want := "MySQL denies msgx's user UPDATE on " + dbOf(t, p.myAdmin) + ".cminmsgs.CMINMSGS_DATE_PROCESSED ("
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("msgx stopped with %v, want the line %q", err, want)
			}
			t.Logf("refused: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("msgx neither refused nor stopped within a minute of MySQL coming back")
		}
	})
}

// flop15 is an ESTT of the demo day's flight 15.
func flop15(seqn int, estt string) string {
	return strings.Replace(replayFLOP(seqn, estt), "<FLID>100</FLID>", "<FLID>15</FLID>", 1)
}

func dbOf(t *testing.T, dsn string) string {
	t.Helper()
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return mc.DBName
}

func userOf(t *testing.T, p provisioned) string {
	t.Helper()
	mc, err := mysql.ParseDSN(p.env["MSGX_MYSQL_DSN"])
	if err != nil {
		t.Fatal(err)
	}
	return mc.User
}

// refused starts msgx on p with the demo day in its inbox and wants it to
// stop within seconds with one line starting want (after "msgx's user" or
// "msgx's role"), never having marked a message.
func refused(t *testing.T, p provisioned, want string) {
	t.Helper()
	loadDemo(t, p.myAdmin)
	cfg, err := loadConfig(p.env)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- runGateway(context.Background(), cfg, testenv.Logger(t), roleAll) }()
	select {
	case err := <-done:
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("msgx stopped with %v\nwant one line starting %q", err, want)
		}
		t.Logf("refused in %v: %v", time.Since(began).Round(time.Millisecond), err)
	case <-time.After(time.Minute):
		t.Fatal("msgx neither refused to start nor stopped within a minute")
	}
	var marked int
	if err := sinktest.OpenMySQL(t, p.myAdmin).QueryRow("SELECT COUNT(*) FROM cminmsgs WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL").Scan(&marked); err != nil || marked != 0 {
		t.Fatalf("%d processed marks written by a refused start (%v)", marked, err)
	}
}

// runProvisioned runs msgx on cfg through what each grant is for and checks
// the end state through the administrator's connection myAdmin.
func runProvisioned(t *testing.T, cfg Config, myAdmin string) {
	ctx := context.Background()
	aodb := sinktest.OpenMySQL(t, myAdmin)
	loadDemo(t, myAdmin)
	stop := start(t, cfg)
	defer stop()
	pool := openPool(t, cfg)
	terminal := func() int {
		return count(t, pool, "SELECT COUNT(*) FROM proc_state WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')")
	}
	waitFor(t, "the demo day decided", 2*time.Minute, func() bool { return terminal() == 13 })

	// The compatibility endpoint inserts (INSERT on cminmsgs).
	resp, err := http.Post("http://"+cfg.HTTPAddr+"/cminmsgs/send", "application/xml", strings.NewReader(flop15(910001, "23JAN210541")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /cminmsgs/send: %s", resp.Status)
	}
	waitFor(t, "the posted message decided", time.Minute, func() bool { return terminal() == 14 })

	// A hole: an insert the AODB rolled back leaves an ID unused; the probe
	// (SELECT … LOCK IN SHARE MODE, nothing but SELECT) releases it at once
	// instead of after MSGX_MAX_COMMIT_DELAY (5 minutes).
	tx, err := aodb.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES ('<MSG/>', NOW())"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	testenv.InsertInbox(t, aodb, flop15(910002, "23JAN210542"))
	waitFor(t, "the message behind the hole decided", time.Minute, func() bool { return terminal() == 15 })
	if n := count(t, pool, "SELECT COUNT(*) FROM inbox_hole WHERE reason = 'probe' AND first_id = 15"); n != 1 {
		t.Fatalf("%d holes released by the probe at ID 15, want 1", n)
	}

	// msgx replay re-reads the inbox rows (SELECT).
	var out strings.Builder
	if err := runCommand(ctx, cfg, "replay", []string{"--reason-prefix", "unsupported:", "--who", "provisioning"}, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	var res replay.Result
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil || len(res.Replayed) != 1 {
		t.Fatalf("replay: %s (%v)", out.String(), err)
	}
	waitFor(t, "the replayed message decided again", time.Minute, func() bool {
		return count(t, pool, "SELECT COUNT(*) FROM proc_state WHERE msg_id = $1 AND state = 'SKIPPED'", res.Replayed[0].MsgID) == 1 && terminal() == 15
	})

	// msgx request writes COUTMSGS (INSERT, SELECT on coutmsgs).
	out.Reset()
	if err := runCommand(ctx, cfg, "request", []string{"refdata", "AIRL"}, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, "SELECT COUNT(*) FROM req_track WHERE state = 'SENT' AND outbox_id IS NOT NULL"); n != 1 {
		t.Fatalf("%d requests SENT, want 1", n)
	}
	var outbox int
	if err := aodb.QueryRow("SELECT COUNT(*) FROM coutmsgs WHERE COUTMSGS_CLOB_MSG LIKE '%<SNDR>MSGX</SNDR>%'").Scan(&outbox); err != nil || outbox != 1 {
		t.Fatalf("%d requests in COUTMSGS (%v), want 1", outbox, err)
	}

	// Every message's processed mark (UPDATE of CMINMSGS_DATE_PROCESSED).
	waitFor(t, "every processed mark written", time.Minute, func() bool {
		var unmarked int
		_ = aodb.QueryRow("SELECT COUNT(*) FROM cminmsgs WHERE CMINMSGS_DATE_PROCESSED IS NULL").Scan(&unmarked)
		return unmarked == 0
	})
	var rows int
	if err := aodb.QueryRow("SELECT COUNT(*) FROM cminmsgs").Scan(&rows); err != nil || rows != 15 {
		t.Fatalf("%d inbox rows (%v), want 15", rows, err)
	}
	noSilentSuccess(t, pool)
	waitFor(t, "every msg event published", time.Minute, func() bool {
		return count(t, pool, "SELECT COUNT(*) FROM event_outbox") == 0 && count(t, pool, "SELECT COUNT(*) FROM msg_event") > 0
	})
}
