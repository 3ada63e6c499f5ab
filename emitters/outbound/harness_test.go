package outbound

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/request"
)

// start is the fake clock's first instant, with a fraction of a second to
// show that SentAt is what COUTMSGS_DATE_INSERTED can hold.
var start = time.Date(2026, 3, 14, 10, 0, 0, 500_000_000, testenv.Shanghai)

// env is one msgx "process" against fresh databases. The service reaches
// MySQL through a proxy that a test can take down; assertions read MySQL
// directly.
type env struct {
	t     *testing.T
	cfg   Config
	pg    *pgxpool.Pool
	my    *sql.DB // through the proxy, what the service uses
	raw   *sql.DB // direct, for assertions
	proxy *testenv.Proxy
	clk   *clock.Fake
	s     *Requests
}

func newEnv(t *testing.T, mut func(*Config)) *env {
	t.Helper()
	cfg := DefaultConfig()
	cfg.CheckInterval = time.Minute
	if mut != nil {
		mut(&cfg)
	}
	e := &env{t: t, cfg: cfg, clk: clock.NewFake(start)}
	pgDSN := sinktest.NewPG(t)
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: pgDSN, Timeout: 5 * time.Second, PGMaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pg = pool

	myDSN := testenv.NewMySQL(t)
	e.raw = sinktest.OpenMySQLIn(t, myDSN, sinktest.ShanghaiInbox)
	mc, err := mysql.ParseDSN(myDSN)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = testenv.NewProxy(t, mc.Addr)
	mc.Addr = e.proxy.Addr()
	e.my, err = sink.OpenMySQL(sink.Config{MySQLDSN: mc.FormatDSN(), Timeout: 2 * time.Second}, sinktest.ShanghaiInbox, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.my.Close() })
	e.s = e.restart()
	return e
}

// restart returns a new service on the same databases and clock: what a
// process restart looks like (no in-memory state survives).
func (e *env) restart() *Requests {
	e.t.Helper()
	s, err := New(e.cfg, Deps{PG: e.pg, Outbox: sinktest.Tables(e.t, e.my, nil, "cminmsgs", 5*time.Second), Clock: e.clk, Log: testenv.Logger(e.t),
		Location: testenv.Shanghai, DBTimeout: 5 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

type outRow struct {
	ID        int64
	XML       string
	Inserted  time.Time
	RoutingID string
}

// outbox returns every COUTMSGS row, read directly.
func (e *env) outbox() []outRow {
	e.t.Helper()
	rows, err := e.raw.Query("SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID FROM coutmsgs ORDER BY COUTMSGS_ID")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []outRow
	for rows.Next() {
		var r outRow
		if err := rows.Scan(&r.ID, &r.XML, &r.Inserted, &r.RoutingID); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// get reads one request from req_track.
func (e *env) get(id int64) request.ReqTrack {
	e.t.Helper()
	r, err := getReq(context.Background(), e.pg, id, false)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// all returns every request, by id.
func (e *env) all() []request.ReqTrack {
	e.t.Helper()
	rs, err := queryReqs(context.Background(), e.pg, `SELECT `+reqCols+` FROM req_track ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

// complete runs Complete in its own transaction, committed unless rollback.
func (e *env) complete(s *Requests, kind request.Kind, styp string, msgID int64, dttm time.Time, rollback bool) (request.ReqTrack, bool) {
	e.t.Helper()
	c := context.Background()
	tx, err := e.pg.Begin(c)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback(c) //nolint:errcheck
	r, ok, err := s.complete(c, tx, kind, styp, msgID, dttm, e.clk.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	if !rollback {
		if err := tx.Commit(c); err != nil {
			e.t.Fatal(err)
		}
	}
	return r, ok
}

// runInBackground starts Run and returns a stop function that waits for it.
// When it returns, Run has finished its first round and is asleep.
func (e *env) runInBackground(s *Requests) (stop func()) {
	e.t.Helper()
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(c) }()
	e.waitAsleep()
	return func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}
}

// waitAsleep waits until Run sleeps again, i.e. its round is over.
func (e *env) waitAsleep() {
	e.t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.clk.BlockUntil(c, 1); err != nil {
		e.t.Fatal("Run did not go back to sleep:", err)
	}
}

// tick advances the clock by d and waits for the round it triggers.
func (e *env) tick(d time.Duration) {
	e.t.Helper()
	e.clk.Advance(d)
	e.waitAsleep()
}
