package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/emitters/backfill"
	"msgx/internal/clock"
	"msgx/internal/testenv"
	"msgx/maintenance"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/message"
	"msgx/tables/route"
)

// arT0 is the maintenance tests' "now" (whole microseconds: PostgreSQL's
// precision).
var arT0 = time.Date(2026, 3, 10, 1, 0, 0, 0, time.UTC)

// arEnv is one test's database, clock and configuration.
type arEnv struct {
	t   *testing.T
	pg  *pgxpool.Pool
	clk *clock.Fake
	cfg maintenance.Config
}

// arDefaults parses the configuration from an empty environment, so the
// tests run on the documented defaults.
func arDefaults(t testing.TB) maintenance.Config {
	t.Helper()
	cfg, err := env.ParseAsWithOptions[maintenance.Config](env.Options{Environment: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newAR(t *testing.T, mods ...func(*maintenance.Config)) *arEnv {
	t.Helper()
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cfg := arDefaults(t)
	for _, m := range mods {
		m(&cfg)
	}
	return &arEnv{t: t, pg: pool, clk: clock.NewFake(arT0), cfg: cfg}
}

func (e *arEnv) maint() *maintenance.Runner {
	e.t.Helper()
	m, err := maintenance.New(e.cfg, maintenance.Deps{PG: e.pg, Timeout: 10 * time.Second, Clock: e.clk,
		Log: testenv.Logger(e.t), Location: testenv.Shanghai})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *arEnv) runOnce(m *maintenance.Runner) maintenance.Result {
	e.t.Helper()
	res, err := m.RunOnce(context.Background())
	if err != nil {
		e.t.Fatalf("RunOnce: %v", err)
	}
	return res
}

func (e *arEnv) exec(sql string, args ...any) int64 {
	e.t.Helper()
	tag, err := e.pg.Exec(context.Background(), sql, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

func (e *arEnv) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pg.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// arRow is a proc_state row a test inserts; every other column gets a
// non-NULL value, so that a history row missing a column shows.
type arRow struct {
	id        int64
	state     string
	identity  string     // "" → NULL
	updated   time.Time  // updated_at
	settled   *time.Time // backfill_at
	abandoned *time.Time // backfill_abandoned_at
}

// old is well past MSGX_ARCHIVE_AFTER (24h) at arT0.
var arOld = arT0.Add(-48 * time.Hour)

func arSettled(id int64, state string) arRow {
	at := arOld
	return arRow{id: id, state: state, identity: fmt.Sprintf("SNDR|SCHD|DNLD|%d", id), updated: arOld, settled: &at}
}

func (e *arEnv) insert(rows ...arRow) {
	e.t.Helper()
	for _, r := range rows {
		var identity *string
		if r.identity != "" {
			identity = &r.identity
		}
		var reason *string
		if r.abandoned != nil {
			s := message.AbandonMissingRow
			reason = &s
		}
		enq := r.updated.Add(-time.Hour)
		e.exec(`INSERT INTO proc_state (msg_id, state, identity_key, sndr, msg_type, msg_styp, seqn, attempts,
				next_attempt_at, error_class, reason, last_error, received_at, enqueued_at, updated_at, routed_at,
				n_transitions, n_applied, backfill_at, backfill_next_at, backfill_attempts, backfill_error,
				backfill_abandoned_at, backfill_abandoned_reason)
			VALUES ($1, $2, $3, 'SNDR', 'SCHD', 'DNLD', $13, 3, $4, 'CODEC_ERROR', 'exhausted:CODEC_ERROR',
				'bad SODT', $5, $6, $7, $8, 2, 2, $9, $10, 1, 'timeout', $11, $12)`,
			r.id, r.state, identity, enq.Add(time.Minute), enq.Add(-time.Second), enq, r.updated, enq.Add(time.Second),
			r.settled, r.updated, r.abandoned, reason, fmt.Sprint(r.id))
		// A row not settled owes its mark, as its writer records it.
		e.exec(testenv.OweBackfillSQL, []int64{r.id})
	}
}

func (e *arEnv) state(id int64) string {
	e.t.Helper()
	var s string
	if err := e.pg.QueryRow(context.Background(), `SELECT state FROM proc_state WHERE msg_id = $1`, id).Scan(&s); err != nil {
		e.t.Fatalf("state of %d: %v", id, err)
	}
	return s
}

// rowJSON returns a row as PostgreSQL's to_jsonb sees it, decoded (nil when
// there is no such row).
func (e *arEnv) rowJSON(sql string, id int64) map[string]any {
	e.t.Helper()
	var b []byte
	err := e.pg.QueryRow(context.Background(), sql, id).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *arEnv) live(id int64) map[string]any {
	return e.rowJSON(`SELECT to_jsonb(p) FROM proc_state p WHERE msg_id = $1`, id)
}

// hst is the history row without archived_at, which proc_state has not.
func (e *arEnv) hst(id int64) map[string]any {
	return e.rowJSON(`SELECT to_jsonb(h) - 'archived_at' FROM proc_state_hst h WHERE msg_id = $1`, id)
}

func (e *arEnv) wantStates(want map[int64]string) {
	e.t.Helper()
	for id, s := range want {
		if got := e.state(id); got != s {
			e.t.Errorf("message %d: state %s, want %s", id, got, s)
		}
	}
}

func TestMaintenanceConfigDefaultsAndValidate(t *testing.T) {
	cfg := arDefaults(t)
	want := maintenance.Config{ArchiveAfter: 24 * time.Hour, ArchiveBatch: 1000, SnapLogRetention: 90 * 24 * time.Hour,
		FlightChangeRetention: 90 * 24 * time.Hour, Period: time.Hour}
	if cfg != want {
		t.Fatalf("defaults %+v, want %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := maintenance.Config{ArchiveAfter: 0, ArchiveBatch: 10001, SnapLogRetention: -time.Hour, Period: 0}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, v := range []string{"MSGX_ARCHIVE_AFTER", "MSGX_ARCHIVE_BATCH", "MSGX_SNAP_LOG_RETENTION", "MSGX_FLIGHT_CHANGE_RETENTION",
		"MSGX_MAINTENANCE_PERIOD"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error %q does not name %s", err, v)
		}
	}
	if _, err := maintenance.New(cfg, maintenance.Deps{}); err == nil ||
		!strings.Contains(err.Error(), "PostgreSQL") || !strings.Contains(err.Error(), "MSGX_DB_TIMEOUT") {
		t.Fatalf("New without deps: %v", err)
	}
}

// proc_state_hst must carry every proc_state column, same type, same order
// (plus archived_at, which columns added after 0007 follow): a migration that
// adds a column to proc_state and forgets the history table fails here.
func TestArchiveSchemaMirrorsProcState(t *testing.T) {
	e := newAR(t)
	cols := func(table string) []string {
		rows, err := e.pg.Query(context.Background(), `SELECT column_name || ' ' || data_type FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	live, hst := cols("proc_state"), cols("proc_state_hst")
	archivedAt := slices.Index(hst, "archived_at timestamp with time zone")
	if archivedAt < 0 {
		t.Fatalf("proc_state_hst has no archived_at: %v", hst)
	}
	if got := slices.Delete(slices.Clone(hst), archivedAt, archivedAt+1); !slices.Equal(got, live) {
		t.Fatalf("proc_state_hst columns but archived_at\n%v\nwant\n%v", got, live)
	}
}

// Only terminal, backfill-settled rows unchanged for MSGX_ARCHIVE_AFTER are
// archived; abandoned rows wait until they are reopened and settled, and
// then for another MSGX_ARCHIVE_AFTER.
func TestArchiveOnlyTerminalSettledOldRows(t *testing.T) {
	e := newAR(t, func(c *maintenance.Config) { c.ArchiveBatch = 2 })
	cutoff := arT0.Add(-e.cfg.ArchiveAfter)
	recent := cutoff.Add(time.Second)
	now := arT0

	r := func(id int64, state string, f func(*arRow)) arRow {
		row := arSettled(id, state)
		if f != nil {
			f(&row)
		}
		return row
	}
	e.insert(
		r(1, message.StateSucceeded, func(r *arRow) { r.updated = arOld.Add(time.Minute) }),
		r(2, message.StateSkipped, func(r *arRow) { r.identity = "" }), // ignored/duplicates carry no identity
		r(3, message.StateDead, func(r *arRow) { r.updated = cutoff.Add(-time.Microsecond) }),
		r(4, message.StateSucceeded, func(r *arRow) { r.updated = recent }),                               // not old enough
		r(5, message.StateSucceeded, func(r *arRow) { r.updated = cutoff }),                               // exactly at the threshold: not yet
		r(6, message.StateDead, func(r *arRow) { r.settled = nil }),                                       // still owes the mark
		r(7, message.StateDead, func(r *arRow) { r.settled = nil; r.abandoned = &arOld }),                 // abandoned (docs/design.md#archive)
		r(8, message.StateSucceeded, func(r *arRow) { r.abandoned = &arOld }),                             // never both, but never archived
		r(9, message.StatePending, nil), r(10, message.StateFailed, nil), r(11, message.StateRouted, nil), // never, even "settled"
	)
	m := e.maint()
	cands, err := m.ArchiveCandidates(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{2, 1, 3}; !slices.Equal(cands, want) { // oldest updated_at first
		t.Fatalf("candidates %v, want %v", cands, want)
	}
	res := e.runOnce(m)
	if res.Archived != 3 || res.ArchiveBatches != 2 {
		t.Fatalf("result %+v", res)
	}
	e.wantStates(map[int64]string{1: "ARCHIVED", 2: "ARCHIVED", 3: "ARCHIVED", 4: "SUCCEEDED", 5: "SUCCEEDED",
		6: "DEAD", 7: "DEAD", 8: "SUCCEEDED", 9: "PENDING", 10: "FAILED", 11: "ROUTED"})
	if n := e.count(`SELECT count(*) FROM proc_state_hst`); n != 3 {
		t.Fatalf("%d history rows", n)
	}

	// The abandoned row is on the list the inbox owner relies on and stays
	// there; once reopened and marked it is archived like any other row,
	// MSGX_ARCHIVE_AFTER after its last change (the reopening).
	list, err := sink.AbandonedBackfills(context.Background(), e.pg, 0)
	if err != nil || len(list) != 1 || list[0].MsgID != 7 {
		t.Fatalf("abandoned list %+v, %v", list, err)
	}
	if n, err := sink.ReopenBackfills(context.Background(), e.pg, []int64{7}, now); n != 1 || err != nil {
		t.Fatalf("reopen %d, %v", n, err)
	}
	e.exec(`DELETE FROM backfill_owed WHERE msg_id = $1`, 7) // the sweeper's "written"
	e.clk.Set(now.Add(e.cfg.ArchiveAfter))
	if res := e.runOnce(m); res.Archived != 2 { // 4 and 5 are old enough now; 7 was reopened just 24h ago
		t.Fatalf("second pass %+v", res)
	}
	e.wantStates(map[int64]string{4: "ARCHIVED", 5: "ARCHIVED", 7: "DEAD"})
	e.clk.Advance(time.Microsecond)
	if res := e.runOnce(m); res.Archived != 1 {
		t.Fatalf("third pass %+v", res)
	}
	e.wantStates(map[int64]string{6: "DEAD", 7: "ARCHIVED", 8: "SUCCEEDED", 9: "PENDING", 10: "FAILED", 11: "ROUTED"})
}

// The history row equals the original row; the shadow keeps msg_id,
// identity_key and enqueued_at, updated_at is the archive time, everything
// else is cleared; the message's transition marks go, others stay.
func TestArchiveHistoryRowAndShadow(t *testing.T) {
	e := newAR(t)
	e.insert(arSettled(1, message.StateDead), arSettled(2, message.StateSucceeded))
	e.exec(`INSERT INTO transition_applied (msg_id, kind, key, applied_at) VALUES
		(1, 'flight', 'F1', $1), (1, 'refdata', 'AIRL', $1), (3, 'flight', 'F1', $1)`, arOld)
	before := e.live(1)
	e.clk.Advance(1500 * time.Millisecond)
	now := e.clk.Now()
	res := e.runOnce(e.maint())
	if res.Archived != 2 || res.TransitionsDeleted != 2 {
		t.Fatalf("result %+v", res)
	}
	if got := e.hst(1); !reflect.DeepEqual(got, before) {
		t.Fatalf("history row\n%v\nwant the original\n%v", got, before)
	}
	var archivedAt time.Time
	if err := e.pg.QueryRow(context.Background(), `SELECT archived_at FROM proc_state_hst WHERE msg_id = 1`).Scan(&archivedAt); err != nil || !archivedAt.Equal(now) {
		t.Fatalf("archived_at %v (%v), want %v", archivedAt, err, now)
	}

	var shadow struct {
		state, identity string
		enqueued, upd   time.Time
		cleared         bool
	}
	err := e.pg.QueryRow(context.Background(), `SELECT state, identity_key, enqueued_at, updated_at,
			sndr IS NULL AND msg_type IS NULL AND msg_styp IS NULL AND seqn IS NULL AND attempts = 0
			AND next_attempt_at IS NULL AND error_class IS NULL AND reason IS NULL AND last_error IS NULL
			AND received_at IS NULL AND routed_at IS NULL AND n_transitions IS NULL AND n_applied = 0
			AND backfill_at IS NULL AND backfill_next_at IS NULL AND backfill_attempts = 0 AND backfill_error IS NULL
			AND backfill_abandoned_at IS NULL AND backfill_abandoned_reason IS NULL
		FROM proc_state WHERE msg_id = 1`).Scan(&shadow.state, &shadow.identity, &shadow.enqueued, &shadow.upd, &shadow.cleared)
	if err != nil {
		t.Fatal(err)
	}
	if shadow.state != message.StateArchived || shadow.identity != "SNDR|SCHD|DNLD|1" || !shadow.cleared ||
		!shadow.enqueued.Equal(arOld.Add(-time.Hour)) || !shadow.upd.Equal(now) {
		t.Fatalf("shadow row %+v", shadow)
	}
	if got := e.count(`SELECT count(*) FROM transition_applied WHERE msg_id = 3`); got != 1 {
		t.Fatal("another message's transition mark was deleted")
	}
	if got := e.count(`SELECT count(*) FROM transition_applied WHERE msg_id = 1`); got != 0 {
		t.Fatal("the archived message's transition marks were kept")
	}
}

// After archiving, the identity still belongs to the archived message: a new
// row cannot take it (UNIQUE), Lookup names the archived message as owner
// and the router's decision is SKIPPED duplicate-of:<archived id>. A
// re-delivery of the archived message finds it finished.
func TestArchiveKeepsIdentity(t *testing.T) {
	e := newAR(t)
	const key = "SNDR|SCHD|DNLD|1"
	e.insert(arSettled(1, message.StateSucceeded))
	if res := e.runOnce(e.maint()); res.Archived != 1 {
		t.Fatalf("result %+v", res)
	}
	ctx := context.Background()
	now := e.clk.Now()

	_, err := e.pg.Exec(ctx, `INSERT INTO proc_state (msg_id, state, identity_key, enqueued_at, updated_at)
		VALUES (2, 'PENDING', $1, $2, $2)`, key, now)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("a new row took the archived identity: %v", err)
	}

	msgs := sink.NewMessages(e.pg, 10*time.Second)
	if _, err := msgs.Touch(ctx, 2, nil, now, now); err != nil {
		t.Fatal(err)
	}
	// Without the lookup, binding the identity fails on the constraint.
	_, err = msgs.Record(ctx, sink.Decision{MsgID: 2, State: message.StateSucceeded, IdentityKey: key, Now: now})
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("Record bound the archived identity: %v", err)
	}
	l, err := msgs.Lookup(ctx, 2, key, nil, nil)
	if err != nil || l.Owner != 1 {
		t.Fatalf("Lookup owner %d, %v; want the archived message 1", l.Owner, err)
	}
	v := route.Decide(route.Plan{MsgID: 2, IdentityKey: key}, l, now)
	if v.State != message.StateSkipped || v.Reason != "duplicate-of:1" {
		t.Fatalf("router decision %+v", v)
	}
	if ok, err := msgs.Record(ctx, sink.Decision{MsgID: 2, State: v.State, Reason: v.Reason, Now: now}); !ok || err != nil {
		t.Fatalf("recording the duplicate: %v, %v", ok, err)
	}

	m, err := msgs.Touch(ctx, 1, nil, now, now)
	if err != nil || m.State != message.StateArchived || !message.IsTerminal(m.State) || m.IdentityKey == nil || *m.IdentityKey != key {
		t.Fatalf("re-delivered archived message %+v, %v", m, err)
	}
}

// The UPDATE re-checks the candidate condition: a DEAD message replayed to
// PENDING after it was listed is skipped and keeps its row; nothing of it
// reaches the history. A row held by an open replay transaction is skipped
// without waiting.
func TestArchiveSkipsRowReplayedMeanwhile(t *testing.T) {
	e := newAR(t)
	e.insert(arSettled(1, message.StateDead), arSettled(2, message.StateDead), arSettled(3, message.StateDead), arSettled(4, message.StateSkipped))
	m := e.maint()
	ctx := context.Background()
	ids, err := m.ArchiveCandidates(ctx, 0)
	if err != nil || len(ids) != 4 {
		t.Fatalf("candidates %v, %v", ids, err)
	}
	replay := `UPDATE proc_state SET state = 'PENDING', attempts = 0, next_attempt_at = NULL, error_class = NULL,
		reason = NULL, backfill_at = NULL, backfill_next_at = NULL, updated_at = $2 WHERE msg_id = $1`
	e.exec(replay, 2, e.clk.Now())
	replayed := e.live(2)

	// Message 3 is being replayed right now, in a transaction that has not
	// committed yet.
	tx, err := e.pg.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, replay, 3, e.clk.Now()); err != nil {
		t.Fatal(err)
	}

	actx, cancel := context.WithTimeout(ctx, 5*time.Second) // a wait for the lock would hit this
	defer cancel()
	res, err := m.Archive(actx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if res.Archived != 2 || res.Skipped != 2 {
		t.Fatalf("result %+v", res)
	}
	if got := e.live(2); !reflect.DeepEqual(got, replayed) {
		t.Fatalf("replayed row changed\n%v\nwas\n%v", got, replayed)
	}
	for _, id := range []int64{2, 3} {
		if e.hst(id) != nil {
			t.Fatalf("message %d reached the history", id)
		}
	}
	e.wantStates(map[int64]string{1: "ARCHIVED", 4: "ARCHIVED"})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res := e.runOnce(m); res.Archived != 0 {
		t.Fatalf("archived a replayed row: %+v", res)
	}
	e.wantStates(map[int64]string{2: "PENDING", 3: "PENDING"})
	if n := e.count(`SELECT count(*) FROM proc_state_hst`); n != 2 {
		t.Fatalf("%d history rows", n)
	}
}

// A lock held by someone else (a re-delivery's Touch, a replay) only
// postpones the row to a later pass.
func TestArchiveLockedRowWaitsForNextPass(t *testing.T) {
	e := newAR(t)
	e.insert(arSettled(1, message.StateSucceeded), arSettled(2, message.StateSucceeded))
	ctx := context.Background()
	tx, err := e.pg.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT 1 FROM proc_state WHERE msg_id = 2 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	m := e.maint()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := m.RunOnce(rctx)
	if err != nil || res.Archived != 1 {
		t.Fatalf("first pass %+v, %v", res, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if res := e.runOnce(m); res.Archived != 1 {
		t.Fatalf("second pass %+v", res)
	}
	e.wantStates(map[int64]string{1: "ARCHIVED", 2: "ARCHIVED"})
}

// Running again changes nothing: the shadow rows are no candidates, even
// long after.
func TestArchiveIdempotent(t *testing.T) {
	e := newAR(t)
	e.insert(arSettled(1, message.StateSucceeded), arSettled(2, message.StateDead))
	m := e.maint()
	if res := e.runOnce(m); res.Archived != 2 {
		t.Fatalf("first pass %+v", res)
	}
	shadow, hist := e.live(1), e.hst(1)
	for range 2 {
		e.clk.Advance(30 * 24 * time.Hour)
		if res := e.runOnce(m); res.Archived != 0 || res.TransitionsDeleted != 0 {
			t.Fatalf("re-run %+v", res)
		}
	}
	if !reflect.DeepEqual(e.live(1), shadow) || !reflect.DeepEqual(e.hst(1), hist) {
		t.Fatal("re-run changed the archived message")
	}
	if n := e.count(`SELECT count(*) FROM proc_state_hst`); n != 2 {
		t.Fatalf("%d history rows", n)
	}
	if res, err := m.Archive(context.Background(), []int64{1, 2, 99}); err != nil || res.Archived != 0 || res.Skipped != 3 {
		t.Fatalf("Archive of archived rows %+v, %v", res, err)
	}
	if st := m.Stats(); st.Archived != 2 || st.Runs != 3 || st.FailedRuns != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// ARCHIVED rows are not heads, not open, not backlog and never backfill
// candidates: every partial index on proc_state excludes them, none is in
// the sweeper's queue (backfill_owed), the sweeper does not pick them, and
// its pending count does not include them.
func TestArchivedRowsInvisibleToOtherJobs(t *testing.T) {
	e := newAR(t)
	ctx := context.Background()
	e.insert(arSettled(1, message.StateSucceeded), arSettled(2, message.StateDead), arSettled(3, message.StateSkipped))
	if res := e.runOnce(e.maint()); res.Archived != 3 {
		t.Fatalf("result %+v", res)
	}

	rows, err := e.pg.Query(ctx, `SELECT c.relname, pg_get_expr(i.indpred, i.indrelid) FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'proc_state'::regclass AND i.indpred IS NOT NULL ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type partial struct{ name, pred string }
	indexes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (partial, error) {
		var p partial
		return p, r.Scan(&p.name, &p.pred)
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ix := range indexes {
		names = append(names, ix.name)
		if n := e.count(`SELECT count(*) FROM proc_state WHERE state = 'ARCHIVED' AND (` + ix.pred + `)`); n != 0 {
			t.Errorf("partial index %s (%s) holds %d ARCHIVED rows", ix.name, ix.pred, n)
		}
	}
	for _, want := range []string{"proc_state_archive", "proc_state_open"} {
		if !slices.Contains(names, want) {
			t.Errorf("partial index %s not found (have %v)", want, names)
		}
	}
	if n := e.count(`SELECT count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED', 'ROUTED')`); n != 0 {
		t.Errorf("%d open rows", n)
	}
	if n := e.count(`SELECT count(*) FROM backfill_owed`); n != 0 {
		t.Errorf("%d rows owe their processed mark", n)
	}

	my := sinktest.OpenMySQL(t, testenv.NewMySQL(t))
	for _, id := range []int64{1, 2, 3} {
		if _, err := my.Exec("INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES (?, '<MSG/>', NOW())", id); err != nil {
			t.Fatal(err)
		}
	}
	bcfg, err := env.ParseAsWithOptions[backfill.Config](env.Options{Environment: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := backfill.New(bcfg, backfill.Deps{PG: e.pg, Inbox: sinktest.Tables(t, my, nil, "cminmsgs", 5*time.Second), Zone: sinktest.ShanghaiInbox,
		Timeout: 5 * time.Second, Clock: e.clk, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Sweep(ctx)
	if err != nil || res.Scanned != 0 {
		t.Fatalf("sweep over archived rows %+v, %v", res, err)
	}
	if n := b.Stats().Pending; n != 0 {
		t.Errorf("backfill pending %d", n)
	}
	var marked int
	if err := my.QueryRow("SELECT COUNT(*) FROM cminmsgs WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL").Scan(&marked); err != nil || marked != 0 {
		t.Fatalf("%d inbox rows marked (%v)", marked, err)
	}
	if list, err := sink.AbandonedBackfills(ctx, e.pg, 0); err != nil || len(list) != 0 {
		t.Fatalf("abandoned list %+v, %v", list, err)
	}
}

// Snap-log retention deletes rows both received and scoped before the
// cutoff, in batches; the scope defaults to the latest operation day.
func TestSnapLogRetention(t *testing.T) {
	e := newAR(t, func(c *maintenance.Config) { c.ArchiveBatch = 2 })
	ctx := context.Background()
	now := arT0                    // 09:00 in Shanghai
	day := func(d int) time.Time { // d days from today's local date
		l := now.In(testenv.Shanghai)
		return time.Date(l.Year(), l.Month(), l.Day()+d, 0, 0, 0, 0, time.UTC)
	}
	ago := func(d int) time.Time { return now.Add(-time.Duration(d) * 24 * time.Hour) }
	cutoff := now.Add(-e.cfg.SnapLogRetention)
	entries := []struct {
		e    sink.SnapLogEntry
		kept bool
	}{
		{sink.SnapLogEntry{MsgID: 1, STYP: "DNLD", OperationDays: []time.Time{day(-101), day(-100)}, Flights: 300, RecvAt: ago(101)}, false},
		{sink.SnapLogEntry{MsgID: 2, STYP: "RESP", OperationDays: []time.Time{day(-91)}, Flights: 1, RecvAt: ago(91)}, false},
		{sink.SnapLogEntry{MsgID: 3, STYP: "DNLD", Flights: 0, RecvAt: ago(100)}, false}, // RECS=0: scoped on its receipt day
		{sink.SnapLogEntry{MsgID: 4, STYP: "DNLD", Flights: 5, RecvAt: ago(95), ScopeEnd: day(-91)}, false},
		{sink.SnapLogEntry{MsgID: 5, STYP: "DNLD", OperationDays: []time.Time{day(-100), day(10)}, Flights: 9, RecvAt: ago(100)}, true}, // covers a future day
		{sink.SnapLogEntry{MsgID: 6, STYP: "DNLD", OperationDays: []time.Time{day(-100)}, Flights: 9, RecvAt: ago(10)}, true},           // received recently
		{sink.SnapLogEntry{MsgID: 7, STYP: "RESP", OperationDays: []time.Time{day(-89)}, Flights: 1, RecvAt: ago(89)}, true},
		{sink.SnapLogEntry{MsgID: 8, STYP: "DNLD", OperationDays: []time.Time{day(-95)}, Flights: 1, RecvAt: cutoff}, true},  // exactly at the cutoff
		{sink.SnapLogEntry{MsgID: 9, STYP: "DNLD", OperationDays: []time.Time{day(-90)}, Flights: 1, RecvAt: ago(95)}, true}, // scope ends on the cutoff's day
	}
	for _, x := range entries {
		if err := sink.AppendSnapLog(ctx, e.pg, x.e); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.AppendSnapLog(ctx, e.pg, sink.SnapLogEntry{MsgID: 10, Flights: 1, RecvAt: now}); err == nil {
		t.Fatal("an entry without STYP was appended")
	}
	var days []time.Time
	var scope time.Time
	var flights int
	if err := e.pg.QueryRow(ctx, `SELECT operation_days, scope_end, flights FROM schd_snap_log WHERE msg_id = 5`).Scan(&days, &scope, &flights); err != nil {
		t.Fatal(err)
	}
	if len(days) != 2 || !days[1].Equal(day(10)) || !scope.Equal(day(10)) || flights != 9 {
		t.Fatalf("stored entry: days %v, scope %v, flights %d", days, scope, flights)
	}

	m := e.maint()
	res := e.runOnce(m)
	if res.SnapLogDeleted != 4 {
		t.Fatalf("result %+v", res)
	}
	rows, err := e.pg.Query(ctx, `SELECT msg_id FROM schd_snap_log ORDER BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, x := range entries {
		if x.kept {
			want = append(want, x.e.MsgID)
		}
	}
	if !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	if res := e.runOnce(m); res.SnapLogDeleted != 0 {
		t.Fatalf("re-run %+v", res)
	}
	if st := m.Stats(); st.SnapLogDeleted != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// Flight-change retention deletes the rows written before the cutoff, in
// batches, and keeps the rest.
func TestFlightChangeRetention(t *testing.T) {
	e := newAR(t, func(c *maintenance.Config) { c.ArchiveBatch = 2 })
	ctx := context.Background()
	cutoff := arT0.Add(-e.cfg.FlightChangeRetention)
	written := []time.Time{cutoff.Add(-48 * time.Hour), cutoff.Add(-time.Hour), cutoff.Add(-time.Second), cutoff, cutoff.Add(time.Hour), arT0}
	for i, at := range written {
		if _, err := e.pg.Exec(ctx, `INSERT INTO flight_change (flid, state_version, msg_id, source, state, changed, at, recorded_at)
			VALUES ('15', $1, $1, 'FLOP-ESTT', 'ACTIVE', '{ESTT}', $2, $2)`, i+1, at); err != nil {
			t.Fatal(err)
		}
	}
	m := e.maint()
	if res := e.runOnce(m); res.FlightChangesDeleted != 3 {
		t.Fatalf("result %+v", res)
	}
	rows, err := e.pg.Query(ctx, `SELECT state_version FROM flight_change ORDER BY state_version`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []int64{4, 5, 6}) {
		t.Fatalf("left versions %v, want 4 5 6 (from the cutoff on)", left)
	}
	if res := e.runOnce(m); res.FlightChangesDeleted != 0 || m.Stats().FlightChangesDeleted != 3 {
		t.Fatalf("re-run %+v, stats %+v", res, m.Stats())
	}
}

// Run does a pass at once, then every Period on the injected clock.
func TestMaintenanceRunLoop(t *testing.T) {
	e := newAR(t)
	// Old enough only after one Period.
	row := arSettled(1, message.StateSucceeded)
	row.updated = arT0.Add(-e.cfg.ArchiveAfter + 30*time.Minute)
	e.insert(row)
	m := e.maint()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	wait := func() {
		t.Helper()
		wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer wcancel()
		if err := e.clk.BlockUntil(wctx, 1); err != nil {
			t.Fatalf("maintenance never went to sleep: %v", err)
		}
	}
	wait()
	if st := m.Stats(); st.Runs != 1 || st.Archived != 0 {
		t.Fatalf("after the first pass %+v", st)
	}
	e.clk.Advance(e.cfg.Period - time.Second)
	if e.clk.Waiters() != 1 {
		t.Fatal("woke before the period")
	}
	e.clk.Advance(time.Second)
	wait()
	if st := m.Stats(); st.Runs != 2 || st.Archived != 1 || !st.LastRun.Equal(arT0.Add(e.cfg.Period)) {
		t.Fatalf("after the second pass %+v", st)
	}
	e.wantStates(map[int64]string{1: "ARCHIVED"})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// A pass that cannot reach PostgreSQL reports it and counts a failed run.
func TestMaintenanceFailureReported(t *testing.T) {
	e := newAR(t)
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: "postgres://postgres@127.0.0.1:1/none?sslmode=disable",
		Timeout: time.Second, PGMaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := maintenance.New(e.cfg, maintenance.Deps{PG: pool, Timeout: time.Second, Clock: e.clk, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.RunOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "archiving") || !strings.Contains(err.Error(), "schd_snap_log") {
		t.Fatalf("RunOnce = %v", err)
	}
	if st := m.Stats(); st.FailedRuns != 1 || st.Runs != 0 || st.LastError == "" {
		t.Fatalf("stats %+v", st)
	}
}

// The down migration removes the archive tables; up brings them back.
func TestArchiveMigrationDownUp(t *testing.T) {
	dsn := sinktest.NewPG(t)
	cfg := sink.Config{PGDSN: dsn}
	for {
		v, dirty, err := sink.MigrationVersion(cfg)
		if err != nil || dirty {
			t.Fatalf("version %d dirty %v: %v", v, dirty, err)
		}
		if v < 7 {
			break
		}
		if err := sink.MigrateDown(cfg, 1); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exists := func() bool {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_class
			WHERE relname IN ('proc_state_hst', 'schd_snap_log', 'proc_state_archive')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 3
	}
	if exists() {
		t.Fatal("archive tables left after down")
	}
	if err := sink.Migrate(cfg); err != nil {
		t.Fatal(err)
	}
	if !exists() {
		t.Fatal("archive tables missing after up")
	}
}

// Archiving a large batch never holds up the message path: while a pass
// archives 20k rows, new messages are touched, looked up and decided, and
// old ones are delivered again (their rows may be in the batch being
// archived); every call stays fast.
func TestMaintenanceNeverBlocksPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("archives 20k rows")
	}
	const rows = 20000
	e := newAR(t)
	ctx := context.Background()
	e.exec(`INSERT INTO proc_state (msg_id, state, identity_key, sndr, msg_type, msg_styp, seqn, enqueued_at, updated_at,
			routed_at, n_transitions, n_applied, backfill_at, backfill_next_at)
		SELECT g, 'SUCCEEDED', 'SNDR|SCHD|DNLD|' || g, 'SNDR', 'SCHD', 'DNLD', g::text, $1, $1, $1, 1, 1, $1, $1
		FROM generate_series(1, $2::int) g`, arOld, rows)
	e.exec(`INSERT INTO transition_applied (msg_id, kind, key, applied_at)
		SELECT g, 'flight', 'F' || g, $1 FROM generate_series(1, $2::int) g`, arOld, rows)
	e.exec(`ANALYZE proc_state`)
	msgs := sink.NewMessages(e.pg, 10*time.Second)
	m := e.maint()

	stop := make(chan struct{})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		maxLat time.Duration
		ops    int
		opErr  error
	)
	measure := func(f func() error) {
		start := time.Now()
		err := f()
		d := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		if err != nil && opErr == nil {
			opErr = err
		}
		ops++
		maxLat = max(maxLat, d)
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := 1_000_000 + int64(w)*1_000_000 + i
				key := fmt.Sprintf("SNDR|SCHD|DNLD|n%d", id)
				now := e.clk.Now()
				measure(func() error { _, err := msgs.Touch(ctx, id, nil, now, now); return err })
				measure(func() error { _, err := msgs.Lookup(ctx, id, key, nil, nil); return err })
				measure(func() error {
					_, err := msgs.Record(ctx, sink.Decision{MsgID: id, State: message.StateSucceeded, IdentityKey: key, Now: now})
					return err
				})
				// A re-delivery of an old message, maybe in the batch being
				// archived right now.
				old := 1 + (i*997+int64(w)*7919)%rows
				measure(func() error { _, err := msgs.Touch(ctx, old, nil, now, now); return err })
			}
		}()
	}
	start := time.Now()
	res, err := m.RunOnce(ctx)
	elapsed := time.Since(start)
	mu.Lock()
	during := ops
	mu.Unlock()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if opErr != nil {
		t.Fatalf("message path failed: %v", opErr)
	}
	// A row a re-delivery held at that moment is skipped, not waited for;
	// the next pass takes it.
	if res.Archived < rows-10 || res.TransitionsDeleted != res.Archived {
		t.Fatalf("result %+v", res)
	}
	if rest := e.runOnce(m); res.Archived+rest.Archived != rows {
		t.Fatalf("passes archived %d + %d rows, want %d", res.Archived, rest.Archived, rows)
	}
	t.Logf("archived %d rows in %s (%.0f rows/s, %d batches); %d message-path calls meanwhile, slowest %s",
		res.Archived, elapsed.Round(time.Millisecond), float64(res.Archived)/elapsed.Seconds(), res.ArchiveBatches, during, maxLat)
	if during == 0 {
		t.Fatal("no message-path call overlapped the pass")
	}
	if maxLat >= 2*time.Second {
		t.Fatalf("a message-path call took %s while archiving", maxLat)
	}
	if n := e.count(`SELECT count(*) FROM proc_state_hst`); n != rows {
		t.Fatalf("%d history rows", n)
	}
	if n := e.count(`SELECT count(*) FROM proc_state WHERE msg_id <= $1 AND state <> 'ARCHIVED'`, rows); n != 0 {
		t.Fatalf("%d old rows not archived", n)
	}
}
