package backfill_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/emitters/backfill"
	"msgx/internal/clock"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/message"
)

// bfT0 is 09:00:00.25 in Shanghai: the mark must be the local wall clock,
// whole seconds.
var bfT0 = time.Date(2026, 3, 10, 1, 0, 0, 250_000_000, time.UTC)

const bfMark0 = "2026-03-10 09:00:00"

// bfEnv is one test's databases, clock and configuration.
type bfEnv struct {
	t     *testing.T
	pg    *pgxpool.Pool
	myDSN string
	my    *sql.DB // direct connection, for setting up and checking the inbox
	clk   *clock.Fake
	cfg   backfill.Config
}

// bfDefaults parses the configuration from an empty environment, so the
// tests run on the documented defaults.
func bfDefaults(t testing.TB) backfill.Config {
	t.Helper()
	cfg, err := env.ParseAsWithOptions[backfill.Config](env.Options{Environment: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newBF(t *testing.T, mods ...func(*backfill.Config)) *bfEnv {
	t.Helper()
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	dsn := testenv.NewMySQL(t)
	cfg := bfDefaults(t)
	for _, m := range mods {
		m(&cfg)
	}
	return &bfEnv{t: t, pg: pool, myDSN: dsn, my: sinktest.OpenMySQL(t, dsn), clk: clock.NewFake(bfT0), cfg: cfg}
}

// sweeper returns a Sweeper writing through db (the direct connection when
// nil).
func (e *bfEnv) sweeper(db *sql.DB) *backfill.Sweeper {
	e.t.Helper()
	if db == nil {
		db = e.my
	}
	b, err := backfill.New(e.cfg, backfill.Deps{PG: e.pg, Inbox: sinktest.Tables(e.t, db, nil, "cminmsgs", 5*time.Second), Zone: sinktest.ShanghaiInbox,
		Timeout: 5 * time.Second, Clock: e.clk, Log: testenv.Logger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// proxied opens the inbox through a proxy the test can take down.
func (e *bfEnv) proxied() (*testenv.Proxy, *sql.DB) {
	e.t.Helper()
	mc, err := mysql.ParseDSN(e.myDSN)
	if err != nil {
		e.t.Fatal(err)
	}
	p := testenv.NewProxy(e.t, mc.Addr)
	mc.Addr = p.Addr()
	db, err := sink.OpenMySQL(sink.Config{MySQLDSN: mc.FormatDSN(), Timeout: 2 * time.Second}, sinktest.ShanghaiInbox, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	return p, db
}

func (e *bfEnv) sweep(b *backfill.Sweeper) backfill.SweepResult {
	e.t.Helper()
	res, err := b.Sweep(context.Background())
	if err != nil {
		e.t.Fatalf("Sweep: %v", err)
	}
	return res
}

// inbox inserts inbox rows with the given IDs, unmarked.
func (e *bfEnv) inbox(ids ...int64) {
	e.t.Helper()
	for _, id := range ids {
		if _, err := e.my.Exec("INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES (?, '<MSG/>', NOW())", id); err != nil {
			e.t.Fatal(err)
		}
	}
}

// setMark marks an inbox row the way someone else (or an earlier pass) did.
func (e *bfEnv) setMark(id int64, mark string) {
	e.t.Helper()
	if _, err := e.my.Exec("UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ? WHERE CMINMSGS_ID = ?", mark, id); err != nil {
		e.t.Fatal(err)
	}
}

// mark returns the inbox row's mark ("" when NULL) and whether the row exists.
func (e *bfEnv) mark(id int64) (string, bool) {
	e.t.Helper()
	var v sql.NullString
	err := e.my.QueryRow("SELECT DATE_FORMAT(CMINMSGS_DATE_PROCESSED, '%Y-%m-%d %H:%i:%s') FROM cminmsgs WHERE CMINMSGS_ID = ?", id).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return v.String, true
}

func (e *bfEnv) wantMark(id int64, want string) {
	e.t.Helper()
	got, ok := e.mark(id)
	if !ok || got != want {
		e.t.Errorf("inbox row %d: mark %q (exists %v), want %q", id, got, ok, want)
	}
}

// procRow is what a test sets in proc_state.
type procRow struct {
	id       int64
	state    string
	enqueued time.Time
	nextAt   *time.Time // nil: NULL
	attempts int
}

// proc inserts terminal-style rows the way the router leaves them: the
// backfill intent (backfill_next_at) is the terminal time.
func (e *bfEnv) proc(rows ...procRow) {
	e.t.Helper()
	ids := make([]int64, len(rows))
	for i, r := range rows {
		if _, err := e.pg.Exec(context.Background(), `INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at, backfill_next_at, backfill_attempts)
			VALUES ($1, $2, $3, $3, $4, $5)`, r.id, r.state, r.enqueued, r.nextAt, r.attempts); err != nil {
			e.t.Fatal(err)
		}
		ids[i] = r.id
	}
	e.owe(ids...)
}

// owe records the backfill intent of the terminal rows of ids, as the
// writer that made them terminal does.
func (e *bfEnv) owe(ids ...int64) {
	e.t.Helper()
	if _, err := e.pg.Exec(context.Background(), testenv.OweBackfillSQL, ids); err != nil {
		e.t.Fatal(err)
	}
}

// due is a terminal row enqueued and finished at bfT0.
func due(id int64, state string) procRow {
	t := bfT0
	return procRow{id: id, state: state, enqueued: bfT0, nextAt: &t}
}

// bfState is a row's backfill columns.
type bfState struct {
	// Marked: the mark is confirmed (terminal, not abandoned, no longer
	// in the sweeper's queue).
	Marked      bool
	NextAt      *time.Time
	Attempts    int
	Err         *string
	AbandonedAt *time.Time
	Reason      *string
	UpdatedAt   time.Time
}

func (e *bfEnv) state(id int64) bfState {
	e.t.Helper()
	var s bfState
	var owed bool
	var owedAttempts *int
	var owedNext *time.Time
	err := e.pg.QueryRow(context.Background(), `SELECT p.backfill_next_at, p.backfill_attempts, p.backfill_error,
			p.backfill_abandoned_at, p.backfill_abandoned_reason, p.updated_at, o.msg_id IS NOT NULL, o.attempts, o.next_at,
			p.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND p.backfill_abandoned_at IS NULL AND o.msg_id IS NULL
		FROM proc_state p LEFT JOIN backfill_owed o ON o.msg_id = p.msg_id WHERE p.msg_id = $1`, id).
		Scan(&s.NextAt, &s.Attempts, &s.Err, &s.AbandonedAt, &s.Reason, &s.UpdatedAt, &owed, &owedAttempts, &owedNext, &s.Marked)
	if err != nil {
		e.t.Fatal(err)
	}
	// The queue's copy of the attempt count and due time follows the row.
	if owed && (*owedAttempts != s.Attempts || (owedNext == nil) != (s.NextAt == nil) || owedNext != nil && !owedNext.Equal(*s.NextAt)) {
		e.t.Fatalf("message %d: backfill_owed has attempts %d, next %v; proc_state %d, %v", id, *owedAttempts, owedNext, s.Attempts, s.NextAt)
	}
	return s
}

func sameTime(a *time.Time, b time.Time) bool { return a != nil && a.Equal(b) }

func TestBackfillConfigDefaultsAndValidate(t *testing.T) {
	cfg := bfDefaults(t)
	want := backfill.Config{Period: 30 * time.Second, Batch: 500, Backoff: 30 * time.Second, BackoffCap: 15 * time.Minute,
		Overdue: 720 * time.Hour, MaxAttemptsAlarm: 20, VacuumRows: 10000, WakeGap: 250 * time.Millisecond}
	if cfg != want {
		t.Fatalf("defaults %+v, want %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := backfill.Config{Batch: 0, Backoff: time.Minute, BackoffCap: time.Second, MaxAttemptsAlarm: 0, VacuumRows: -1, WakeGap: -1}
	err := bad.Validate()
	for _, v := range []string{"MSGX_BACKFILL_PERIOD", "MSGX_BACKFILL_BATCH", "MSGX_BACKFILL_BACKOFF_CAP", "MSGX_OVERDUE_BACKFILL", "MSGX_BACKFILL_MAX_ATTEMPTS",
		"MSGX_BACKFILL_VACUUM_ROWS", "MSGX_BACKFILL_WAKE_GAP"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("Validate() = %v, want it to name %s", err, v)
		}
	}
	shadow, err := env.ParseAsWithOptions[backfill.Config](env.Options{Environment: map[string]string{
		"MSGX_SHADOW": "true", "MSGX_BACKFILL_BACKOFF": "10s", "MSGX_BACKFILL_BACKOFF_CAP": "1m", "MSGX_OVERDUE_BACKFILL": "48h"}})
	if err != nil || !shadow.Shadow || shadow.Backoff != 10*time.Second || shadow.BackoffCap != time.Minute || shadow.Overdue != 48*time.Hour {
		t.Fatalf("parsed %+v, %v", shadow, err)
	}
}

func TestBackfillNewRejectsBadDeps(t *testing.T) {
	cfg := bfDefaults(t)
	_, err := backfill.New(cfg, backfill.Deps{Timeout: time.Second, Zone: sinktest.ShanghaiInbox})
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL") || !strings.Contains(err.Error(), "MySQL") {
		t.Fatalf("New = %v", err)
	}
}

// Result 1 of docs/design.md#backfill-results: the mark is written (the pass's
// time as an airport DATETIME) and backfill_at recorded, for every terminal
// state.
func TestBackfillMarksTerminalRows(t *testing.T) {
	e := newBF(t)
	e.inbox(1, 2, 3)
	e.proc(due(1, message.StateSucceeded), due(2, message.StateSkipped), due(3, message.StateDead))
	b := e.sweeper(nil)
	if s := b.Stats(); s.Pending != -1 || s.Sweeps != 0 {
		t.Fatalf("stats before any pass: %+v", s)
	}

	res := e.sweep(b)
	if res.Scanned != 3 || res.Marked != 3 || res.Settled() != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, id := range []int64{1, 2, 3} {
		e.wantMark(id, bfMark0)
		s := e.state(id)
		if !s.Marked || s.Attempts != 0 || s.AbandonedAt != nil || !s.UpdatedAt.Equal(bfT0) {
			t.Errorf("row %d: %+v", id, s)
		}
	}
	st := b.Stats()
	if st.Marked != 3 || st.Pending != 0 || st.Sweeps != 1 || !st.LastSweep.Equal(bfT0) || st.LastError != "" {
		t.Errorf("stats %+v", st)
	}
	// Nothing is left to do.
	if res := e.sweep(b); res.Scanned != 0 {
		t.Fatalf("second pass %+v", res)
	}
}

// A sweeper behind a backlog (full passes) counts its pending rows at most
// every 10 s; the pass that catches up counts them again.
func TestBackfillPendingCountedWhenCaughtUp(t *testing.T) {
	e := newBF(t, func(c *backfill.Config) { c.Batch = 2 })
	e.inbox(1, 2, 3, 4, 5, 6, 7)
	var rows []procRow
	for id := int64(1); id <= 7; id++ {
		rows = append(rows, due(id, message.StateSucceeded))
	}
	e.proc(rows...)
	b := e.sweeper(nil)
	pending := func(want int64) {
		t.Helper()
		if got := b.Stats().Pending; got != want {
			t.Fatalf("pending %d, want %d", got, want)
		}
	}
	e.sweep(b) // the first count: 5 owed
	pending(5)
	e.sweep(b) // full: not counted
	pending(5)
	e.clk.Advance(10 * time.Second)
	e.sweep(b) // full, 10 s after the last count
	pending(1)
	e.clk.Advance(time.Second)
	if res := e.sweep(b); res.Marked != 1 { // caught up, a second after the last count
		t.Fatalf("last pass %+v", res)
	}
	pending(0)
	// A pass that catches up within a second of the last count leaves it:
	// 9 is owed but not due yet.
	later := e.clk.Now().Add(time.Hour)
	e.inbox(8, 9)
	e.proc(due(8, message.StateSucceeded), procRow{id: 9, state: message.StateSucceeded, enqueued: bfT0, nextAt: &later})
	if res := e.sweep(b); res.Marked != 1 {
		t.Fatalf("pass %+v", res)
	}
	pending(0)
	e.clk.Advance(time.Second)
	e.sweep(b) // nothing due: counted
	pending(1)
}

// The router's terminal rows carry backfill_next_at; a terminal row without
// one is the anomaly branch of the predicate and is swept too.
func TestBackfillNullNextAtIsDue(t *testing.T) {
	e := newBF(t)
	e.inbox(7)
	e.proc(procRow{id: 7, state: message.StateSucceeded, enqueued: bfT0})
	if res := e.sweep(e.sweeper(nil)); res.Marked != 1 {
		t.Fatalf("result %+v", res)
	}
	e.wantMark(7, bfMark0)
}

// Only terminal rows are ever marked (I6): PENDING, FAILED and ROUTED rows
// and ARCHIVED shadow rows are never scanned, even with a due intent.
func TestBackfillNeverMarksNonTerminalRows(t *testing.T) {
	e := newBF(t)
	states := []string{message.StatePending, message.StateFailed, message.StateRouted, message.StateArchived}
	for i, st := range states {
		id := int64(i + 1)
		e.inbox(id)
		r := due(id, st)
		r.enqueued = bfT0.Add(-100 * 24 * time.Hour) // overdue too
		e.proc(r)
	}
	b := e.sweeper(nil)
	res := e.sweep(b)
	if res.Scanned != 0 {
		t.Fatalf("non-terminal rows scanned: %+v", res)
	}
	for i := range states {
		e.wantMark(int64(i+1), "")
		if s := e.state(int64(i + 1)); s.Marked || s.Attempts != 0 {
			t.Errorf("%s row touched: %+v", states[i], s)
		}
	}
	// Once the router finishes one, it is marked.
	if _, err := e.pg.Exec(context.Background(), `UPDATE proc_state SET state = 'SUCCEEDED' WHERE msg_id = 3`); err != nil {
		t.Fatal(err)
	}
	e.owe(3)
	if res := e.sweep(b); res.Marked != 1 {
		t.Fatalf("result %+v", res)
	}
	e.wantMark(3, bfMark0)
	e.wantMark(1, "")
}

// Result 2, and the crash window "mark written in MySQL, backfill_at not
// saved": the next pass finds the mark, keeps it, and records success.
func TestBackfillAlreadyMarkedIsNotOverwritten(t *testing.T) {
	e := newBF(t)
	e.inbox(1, 2)
	e.proc(due(1, message.StateSucceeded), due(2, message.StateDead))
	const earlier = "2026-03-10 08:59:30" // the crashed pass's mark
	e.setMark(1, earlier)

	b := e.sweeper(nil)
	res := e.sweep(b)
	if res.Scanned != 2 || res.Marked != 1 || res.AlreadyMarked != 1 {
		t.Fatalf("result %+v", res)
	}
	e.wantMark(1, earlier)
	e.wantMark(2, bfMark0)
	for _, id := range []int64{1, 2} {
		if s := e.state(id); !s.Marked || s.AbandonedAt != nil {
			t.Errorf("row %d: %+v", id, s)
		}
	}
	if st := b.Stats(); st.AlreadyMarked != 1 || st.Marked != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A replayed pass in the same second (PostgreSQL commit lost, pass retried
// at once) finds its own value: success either way, nothing overwritten.
func TestBackfillSameSecondRetryIsSuccess(t *testing.T) {
	e := newBF(t)
	e.inbox(1, 2)
	e.proc(due(1, message.StateSucceeded), due(2, message.StateSucceeded))
	e.setMark(1, bfMark0)
	res := e.sweep(e.sweeper(nil))
	if res.Settled() != 2 || res.Failed != 0 {
		t.Fatalf("result %+v", res)
	}
	e.wantMark(1, bfMark0)
	e.wantMark(2, bfMark0)
}

// Result 3: the inbox row is gone → abandoned at once (long before R),
// MISSING_ROW, never marked, never scanned again, listed for reconciliation.
func TestBackfillMissingRowAbandonedAtOnce(t *testing.T) {
	e := newBF(t)
	e.inbox(1, 3)
	e.proc(due(1, message.StateSucceeded), due(2, message.StateSkipped), due(3, message.StateDead))

	b := e.sweeper(nil)
	res := e.sweep(b)
	if res.Scanned != 3 || res.Marked != 2 || res.Missing != 1 || res.Failed != 0 {
		t.Fatalf("result %+v", res)
	}
	s := e.state(2)
	if s.Marked || !sameTime(s.AbandonedAt, bfT0) || s.Reason == nil || *s.Reason != message.AbandonMissingRow || s.Attempts != 0 {
		t.Fatalf("row 2: %+v", s)
	}
	if _, ok := e.mark(2); ok {
		t.Fatal("an inbox row was created")
	}
	e.clk.Advance(time.Hour)
	if res := e.sweep(b); res.Scanned != 0 {
		t.Fatalf("abandoned row scanned again: %+v", res)
	}
	list, err := sink.AbandonedBackfills(context.Background(), e.pg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].MsgID != 2 || list[0].Reason != message.AbandonMissingRow || !list[0].AbandonedAt.Equal(bfT0) ||
		list[0].State != message.StateSkipped {
		t.Fatalf("abandoned list %+v", list)
	}
	if st := b.Stats(); st.Abandoned[message.AbandonMissingRow] != 1 || st.Pending != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Result 4 before R: a transient failure counts an attempt and backs off
// 30s, 60s, … doubling to the 15m cap; the row is never abandoned by count.
// It is not retried before its backoff ends, and is marked once MySQL is
// back.
func TestBackfillBackoffDoublesToCap(t *testing.T) {
	e := newBF(t, func(c *backfill.Config) { c.MaxAttemptsAlarm = 3 })
	e.inbox(1)
	e.proc(due(1, message.StateSucceeded))
	proxy, db := e.proxied()
	b := e.sweeper(db)
	proxy.Down()

	wantWaits := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		15 * time.Minute, 15 * time.Minute, 15 * time.Minute}
	for i, wait := range wantWaits {
		now := e.clk.Now()
		res := e.sweep(b)
		if res.Scanned != 1 || res.Failed != 1 || res.Deadline != 0 || res.MySQLErr == nil {
			t.Fatalf("attempt %d: %+v", i+1, res)
		}
		s := e.state(1)
		if s.Attempts != i+1 || !sameTime(s.NextAt, now.Add(wait)) || s.AbandonedAt != nil || s.Err == nil || s.Marked {
			t.Fatalf("attempt %d: %+v, want next_at %v", i+1, s, now.Add(wait))
		}
		// Still backing off one second before the wait ends.
		e.clk.Advance(wait - time.Second)
		if res := e.sweep(b); res.Scanned != 0 {
			t.Fatalf("attempt %d: retried during backoff: %+v", i+1, res)
		}
		e.clk.Advance(time.Second)
	}
	e.wantMark(1, "")
	st := b.Stats()
	if st.TransientFailures != int64(len(wantWaits)) || st.Alarms != 1 || st.Pending != 1 || st.LastError == "" {
		t.Errorf("stats %+v", st)
	}

	proxy.Up()
	res := e.sweep(b)
	if res.Marked != 1 {
		t.Fatalf("after recovery: %+v", res)
	}
	mark := e.clk.Now().In(testenv.Shanghai).Format(time.DateTime)
	e.wantMark(1, mark)
	if s := e.state(1); !s.Marked || s.Err != nil || s.AbandonedAt != nil {
		t.Fatalf("after recovery: %+v", s)
	}
	if st := b.Stats(); st.LastError != "" || st.Pending != 0 {
		t.Errorf("stats %+v", st)
	}
}

// MySQL down: every row stays pending (not abandoned, not marked), and all
// of them are marked once it is back and the backoff has passed.
func TestBackfillMySQLOutageThenRecovery(t *testing.T) {
	e := newBF(t)
	ids := []int64{10, 11, 12, 13}
	e.inbox(ids...)
	for _, id := range ids {
		e.proc(due(id, message.StateSucceeded))
	}
	proxy, db := e.proxied()
	b := e.sweeper(db)
	// A first pass works, with a pooled connection that the outage cuts.
	e.setMark(10, bfMark0)
	if res := e.sweep(b); res.Settled() != 4 {
		t.Fatalf("first pass %+v", res)
	}
	more := []int64{20, 21, 22}
	e.inbox(more...)
	for _, id := range more {
		e.proc(due(id, message.StateDead))
	}
	proxy.Down()
	res := e.sweep(b)
	if res.Scanned != 3 || res.Failed != 3 || res.Settled() != 0 {
		t.Fatalf("outage pass %+v", res)
	}
	for _, id := range more {
		e.wantMark(id, "")
		if s := e.state(id); s.Marked || s.AbandonedAt != nil || s.Attempts != 1 {
			t.Fatalf("row %d during outage: %+v", id, s)
		}
	}
	proxy.Up()
	e.clk.Advance(30 * time.Second)
	res = e.sweep(b)
	if res.Marked != 3 {
		t.Fatalf("recovery pass %+v", res)
	}
	for _, id := range more {
		e.wantMark(id, "2026-03-10 09:00:30")
	}
}

// R (docs/design.md#backfill): a row older than R is tried on every pass,
// whatever its backoff says.
func TestBackfillOverdueIgnoresBackoff(t *testing.T) {
	e := newBF(t)
	e.inbox(1, 2)
	later := bfT0.Add(15 * time.Minute)
	e.proc(
		procRow{id: 1, state: message.StateSucceeded, enqueued: bfT0.Add(-e.cfg.Overdue - time.Second), nextAt: &later, attempts: 6},
		procRow{id: 2, state: message.StateSucceeded, enqueued: bfT0.Add(-e.cfg.Overdue + time.Second), nextAt: &later, attempts: 6},
	)
	res := e.sweep(e.sweeper(nil))
	if res.Scanned != 1 || res.Marked != 1 {
		t.Fatalf("result %+v", res)
	}
	e.wantMark(1, bfMark0)
	e.wantMark(2, "")
}

// Result 4 at R: transient failures never abandon a row before R, however
// many there are; past R the row is tried on the next pass (backoff
// ignored) and a failure abandons it TRANSIENT_DEADLINE.
func TestBackfillTransientDeadlineOnlyAfterR(t *testing.T) {
	const r = 2 * time.Hour
	e := newBF(t, func(c *backfill.Config) { c.Overdue = r; c.MaxAttemptsAlarm = 5 })
	e.inbox(1, 2)
	e.proc(due(1, message.StateSucceeded), due(2, message.StateDead))
	proxy, db := e.proxied()
	b := e.sweeper(db)
	proxy.Down()

	// Sweep whenever a row is due, up to the last moment before R.
	for {
		res := e.sweep(b)
		if res.Deadline != 0 {
			t.Fatalf("abandoned before R at %v: %+v", e.clk.Now().Sub(bfT0), res)
		}
		next := e.state(1).NextAt
		if !next.Before(bfT0.Add(r)) {
			break
		}
		e.clk.Set(*next)
	}
	s := e.state(1)
	if s.AbandonedAt != nil || s.Attempts < 10 || !s.NextAt.After(bfT0.Add(r)) {
		t.Fatalf("before R: %+v", s)
	}
	// Exactly R old: not overdue yet (enqueued_at < now − R is strict).
	e.clk.Set(bfT0.Add(r))
	if res := e.sweep(b); res.Scanned != 0 {
		t.Fatalf("at R: %+v", res)
	}
	// Just past R the backoff no longer holds the rows back; the failure
	// abandons them.
	e.clk.Advance(time.Second)
	res := e.sweep(b)
	if res.Scanned != 2 || res.Failed != 2 || res.Deadline != 2 {
		t.Fatalf("past R: %+v", res)
	}
	for _, id := range []int64{1, 2} {
		s := e.state(id)
		if s.Marked || !sameTime(s.AbandonedAt, e.clk.Now()) || s.Reason == nil || *s.Reason != message.AbandonTransientDeadline {
			t.Fatalf("row %d past R: %+v", id, s)
		}
	}
	if res := e.sweep(b); res.Scanned != 0 {
		t.Fatalf("abandoned rows scanned: %+v", res)
	}
	if st := b.Stats(); st.Abandoned[message.AbandonTransientDeadline] != 2 || st.Alarms != 2 {
		t.Errorf("stats %+v", st)
	}
	e.wantMark(1, "")
}

// Fair order (attempts, then msg_id): rows that keep failing sink behind
// fresh ones and cannot fill the batch.
func TestBackfillFairOrder(t *testing.T) {
	e := newBF(t, func(c *backfill.Config) { c.Batch = 2 })
	past := bfT0.Add(-time.Minute)
	e.inbox(1, 2, 3, 4, 5)
	e.proc(
		procRow{id: 1, state: message.StateDead, enqueued: bfT0, nextAt: &past, attempts: 7},
		procRow{id: 2, state: message.StateDead, enqueued: bfT0, nextAt: &past, attempts: 3},
		procRow{id: 5, state: message.StateSucceeded, enqueued: bfT0, nextAt: &past},
		procRow{id: 4, state: message.StateSucceeded, enqueued: bfT0, nextAt: &past},
		procRow{id: 3, state: message.StateSucceeded, enqueued: bfT0, nextAt: &past},
	)
	b := e.sweeper(nil)
	var order [][]int64
	for range 3 {
		before := e.marked(1, 2, 3, 4, 5)
		e.sweep(b)
		after := e.marked(1, 2, 3, 4, 5)
		var got []int64
		for _, id := range after {
			if !slices.Contains(before, id) {
				got = append(got, id)
			}
		}
		order = append(order, got)
	}
	want := [][]int64{{3, 4}, {2, 5}, {1}} // pass 2: 5 (0 attempts), then 2 (3) before 1 (7)
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("marked per pass %v, want %v", order, want)
	}
}

func (e *bfEnv) marked(ids ...int64) []int64 {
	var out []int64
	for _, id := range ids {
		if m, _ := e.mark(id); m != "" {
			out = append(out, id)
		}
	}
	return out
}

// MSGX_SHADOW=true: nothing is written anywhere; the rows stay pending and
// are marked by the first non-shadow pass. Run logs and idles.
func TestBackfillShadowWritesNothing(t *testing.T) {
	e := newBF(t, func(c *backfill.Config) { c.Shadow = true })
	e.inbox(1)
	e.proc(due(1, message.StateSucceeded), due(2, message.StateSucceeded)) // 2 would be MISSING_ROW
	b := e.sweeper(nil)
	res := e.sweep(b)
	if !res.Shadow || res.Scanned != 0 {
		t.Fatalf("result %+v", res)
	}
	e.wantMark(1, "")
	for _, id := range []int64{1, 2} {
		if s := e.state(id); s.Marked || s.AbandonedAt != nil || s.Attempts != 0 {
			t.Fatalf("row %d touched in shadow mode: %+v", id, s)
		}
	}
	if st := b.Stats(); !st.Shadow || st.Marked != 0 {
		t.Errorf("stats %+v", st)
	}
	// Shadow mode needs no inbox connection at all.
	if _, err := backfill.New(e.cfg, backfill.Deps{PG: e.pg, Zone: sinktest.ShanghaiInbox, Timeout: time.Second,
		Clock: e.clk, Log: testenv.Logger(t)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.wantMark(1, "")

	e.cfg.Shadow = false
	if res := e.sweep(e.sweeper(nil)); res.Marked != 1 || res.Missing != 1 {
		t.Fatalf("first live pass %+v", res)
	}
}

// Operator commands: the abandoned list and reopen, which puts rows back in
// the queue with fresh attempts.
func TestBackfillReopen(t *testing.T) {
	e := newBF(t)
	e.inbox(1)
	e.proc(due(1, message.StateSucceeded), due(2, message.StateSucceeded), due(3, message.StateDead))
	b := e.sweeper(nil)
	if res := e.sweep(b); res.Missing != 2 {
		t.Fatalf("result %+v", res)
	}
	list, err := sink.AbandonedBackfills(context.Background(), e.pg, 1)
	if err != nil || len(list) != 1 || list[0].MsgID != 2 {
		t.Fatalf("limited list %+v, %v", list, err)
	}

	// The inbox owner restores row 2; the operator reopens it (and names a
	// row that is not abandoned, which is left alone).
	e.inbox(2)
	e.clk.Advance(time.Hour)
	n, err := sink.ReopenBackfills(context.Background(), e.pg, []int64{1, 2}, e.clk.Now())
	if err != nil || n != 1 {
		t.Fatalf("Reopen = %d, %v", n, err)
	}
	s := e.state(2)
	if s.AbandonedAt != nil || s.Reason != nil || s.Attempts != 0 || s.Err != nil || !sameTime(s.NextAt, e.clk.Now()) {
		t.Fatalf("reopened row %+v", s)
	}
	list, err = sink.AbandonedBackfills(context.Background(), e.pg, 0)
	if err != nil || len(list) != 1 || list[0].MsgID != 3 {
		t.Fatalf("list after reopen %+v, %v", list, err)
	}
	res := e.sweep(b)
	if res.Scanned != 1 || res.Marked != 1 {
		t.Fatalf("pass after reopen %+v", res)
	}
	e.wantMark(2, "2026-03-10 10:00:00")
	if n, err := sink.ReopenBackfills(context.Background(), e.pg, nil, e.clk.Now()); n != 0 || err != nil {
		t.Fatalf("empty reopen %d, %v", n, err)
	}
}

// Run sweeps at once, then every Period on the injected clock; a pass that
// fills its batch is followed by the next at once (backlog drain).
func TestBackfillRunLoop(t *testing.T) {
	e := newBF(t, func(c *backfill.Config) { c.Batch = 2; c.Period = 30 * time.Second })
	ids := []int64{1, 2, 3, 4, 5}
	e.inbox(ids...)
	for _, id := range ids {
		e.proc(due(id, message.StateSucceeded))
	}
	b := e.sweeper(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	wait := func() {
		t.Helper()
		wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer wcancel()
		if err := e.clk.BlockUntil(wctx, 1); err != nil {
			t.Fatalf("sweeper never went to sleep: %v", err)
		}
	}

	wait() // 3 passes (2+2+1) without the clock moving
	for _, id := range ids {
		e.wantMark(id, bfMark0)
	}
	if st := b.Stats(); st.Sweeps != 3 || st.Marked != 5 {
		t.Fatalf("stats %+v", st)
	}

	e.inbox(6)
	e.proc(due(6, message.StateSkipped))
	e.clk.Advance(29 * time.Second)
	if e.clk.Waiters() != 1 {
		t.Fatal("woke before the period")
	}
	e.wantMark(6, "")
	e.clk.Advance(time.Second)
	wait()
	e.wantMark(6, "2026-03-10 09:00:30")

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// BackfillLock: while a replay holds it, a pass does nothing (and does not
// wait); while a pass is writing marks, a replay waits for it and then
// sees the pass's results.
func TestBackfillLockExcludesReplay(t *testing.T) {
	e := newBF(t)
	e.inbox(1, 2)
	e.proc(due(1, message.StateDead))
	b := e.sweeper(nil)
	ctx := context.Background()

	// A replay in progress: the pass is skipped, nothing written.
	tx, err := e.pg.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.XactLock(ctx, tx, sink.LockBackfill); err != nil {
		t.Fatal(err)
	}
	if res := e.sweep(b); !res.Busy || res.Scanned != 0 {
		t.Fatalf("pass during replay %+v", res)
	}
	e.wantMark(1, "")
	// The replay moves the row back to PENDING; the pass after it never
	// marks it.
	if _, err := tx.Exec(ctx, `UPDATE proc_state SET state = 'PENDING' WHERE msg_id = 1`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res := e.sweep(b); res.Busy || res.Scanned != 0 {
		t.Fatalf("pass after replay %+v", res)
	}
	e.wantMark(1, "")

	// A pass in flight: hold its inbox UPDATE on a MySQL row lock.
	e.proc(due(2, message.StateDead))
	myTx, err := e.my.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer myTx.Rollback() //nolint:errcheck
	if _, err := myTx.ExecContext(ctx, "SELECT CMINMSGS_ID FROM cminmsgs WHERE CMINMSGS_ID = 2 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	passDone := make(chan backfill.SweepResult, 1)
	go func() {
		res, err := b.Sweep(ctx)
		if err != nil {
			t.Error(err)
		}
		passDone <- res
	}()
	// Wait (without sleeping: each probe is a round trip) until the pass
	// holds the lock.
	deadline := time.Now().Add(10 * time.Second)
	for !e.lockHeld() {
		if time.Now().After(deadline) {
			t.Fatal("the pass never took the backfill lock")
		}
	}
	var replaySaw atomic.Value
	replayDone := make(chan error, 1)
	go func() {
		replayDone <- pgx.BeginFunc(ctx, e.pg, func(tx pgx.Tx) error {
			if err := sink.XactLock(ctx, tx, sink.LockBackfill); err != nil {
				return err
			}
			var marked bool
			if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM backfill_owed WHERE msg_id = 2)`).Scan(&marked); err != nil {
				return err
			}
			replaySaw.Store(marked)
			return nil
		})
	}()
	for !e.lockWaited() {
		select {
		case err := <-replayDone:
			t.Fatalf("replay did not wait for the pass: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the replay never queued for the backfill lock")
		}
	}
	select {
	case <-passDone:
		t.Fatal("pass finished while its inbox row was locked")
	default:
	}
	if err := myTx.Commit(); err != nil {
		t.Fatal(err)
	}
	if res := <-passDone; res.Marked != 1 {
		t.Fatalf("pass %+v", res)
	}
	if err := <-replayDone; err != nil {
		t.Fatal(err)
	}
	if saw, _ := replaySaw.Load().(bool); !saw {
		t.Fatal("replay ran before the pass committed")
	}
}

// lockHeld reports whether some session holds the backfill advisory lock.
func (e *bfEnv) lockHeld() bool { return e.lockCount(true) > 0 }

// lockWaited reports whether some session waits for it.
func (e *bfEnv) lockWaited() bool { return e.lockCount(false) > 0 }

func (e *bfEnv) lockCount(granted bool) int {
	e.t.Helper()
	var n int
	err := e.pg.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND granted = $2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND ((classid::bigint << 32) | objid::bigint) = $1 AND objsubid = 1`, int64(sink.LockBackfill), granted).Scan(&n)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// Throughput of the inbox write on 10k due rows, in default-size batches.
func TestBackfillThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("throughput measurement")
	}
	const n = 10000
	for _, batch := range []int{500, 2000} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			e := newBF(t, func(c *backfill.Config) { c.Batch = batch })
			var sb strings.Builder
			for id := 1; id <= n; id++ {
				if sb.Len() > 0 {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, "(%d,'<MSG/>',NOW())", id)
				if id%1000 == 0 {
					if _, err := e.my.Exec("INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES " + sb.String()); err != nil {
						t.Fatal(err)
					}
					sb.Reset()
				}
			}
			if _, err := e.pg.Exec(context.Background(), `INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at, backfill_next_at)
				SELECT g, 'SUCCEEDED', $2, $2, $2 FROM generate_series(1, $1) g`, n, bfT0); err != nil {
				t.Fatal(err)
			}
			if _, err := e.pg.Exec(context.Background(), testenv.OweBackfillSQL, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := e.pg.Exec(context.Background(), `ANALYZE proc_state`); err != nil {
				t.Fatal(err)
			}
			b := e.sweeper(nil)
			start := time.Now()
			total := 0
			for {
				res := e.sweep(b)
				if res.Scanned == 0 {
					break
				}
				total += res.Marked
			}
			elapsed := time.Since(start)
			if total != n {
				t.Fatalf("marked %d of %d", total, n)
			}
			var unmarked int
			if err := e.my.QueryRow("SELECT COUNT(*) FROM cminmsgs WHERE CMINMSGS_DATE_PROCESSED IS NULL").Scan(&unmarked); err != nil || unmarked != 0 {
				t.Fatalf("%d rows unmarked (%v)", unmarked, err)
			}
			t.Logf("batch %d: %d marks in %v = %.0f marks/s", batch, n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
		})
	}
}

// TestBackfillNotifyEndsThePause: a message completed while the sweeper
// waits out its period gets its mark when the sweeper is notified —
// WakeGap after the last pass began (the fake clock moves only that far),
// at once when that is past — and without a notification it waits.
func TestBackfillNotifyEndsThePause(t *testing.T) {
	e := newBF(t)
	e.inbox(1, 2, 3)
	e.proc(due(1, message.StateSucceeded))
	b := e.sweeper(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// The first pass marks 1, then the sweeper waits its period.
	if err := e.clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.wantMark(1, bfMark0)
	marked := func(id int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if m, _ := e.mark(id); m != "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("message %d not marked", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	gap := e.cfg.WakeGap
	if gap <= 0 {
		t.Fatalf("WakeGap %v: the default should space the passes", gap)
	}
	e.proc(due(2, message.StateSucceeded))
	if m, _ := e.mark(2); m != "" {
		t.Fatal("message 2 marked before the sweeper was notified")
	}
	// Notified within WakeGap of the last pass: it waits out the rest
	// (a second timer beside the period's), then marks.
	b.Notify()
	if err := e.clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if m, _ := e.mark(2); m != "" {
		t.Fatal("message 2 marked within WakeGap of the last pass")
	}
	e.clk.Advance(gap)
	marked(2)
	// Notified when WakeGap has passed since the last pass: at once, the
	// clock standing still.
	if err := e.clk.BlockUntil(ctx, 2); err != nil { // the new period, and the stale one of before
		t.Fatal(err)
	}
	e.clk.Advance(gap)
	e.proc(due(3, message.StateSucceeded))
	b.Notify()
	marked(3)
}
