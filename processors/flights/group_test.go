package flights

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"msgx/sink"
	"msgx/tables/flight"
	"msgx/tables/message"
)

// aheadOf is the table value t leaves when applied to s, computed purely:
// what the table holds after a crash that lost t's transaction.
func aheadOf(t *testing.T, s *flight.State, tr flight.Transition) *flight.State {
	t.Helper()
	res, err := flight.Apply(s, tr, flight.Options{ScheduleMissing: "keep"})
	if err != nil || res.State == nil {
		t.Fatalf("apply: %v", err)
	}
	return res.State
}

func (rg *rig) changes(flid string) []int64 {
	rg.t.Helper()
	rows, err := rg.pool.Query(context.Background(), `SELECT state_version FROM flight_change WHERE flid = $1 ORDER BY state_version`, flid)
	if err != nil {
		rg.t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rg.t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestTableAheadOfPostgreSQLIsRecovered: a crash between the table write
// and the group commit leaves the table at a version PostgreSQL never got
// (the goka table is written at once, PostgreSQL later). The redelivered
// transition, which the table claims as applied, is applied again to
// PostgreSQL's state: the lost version gets its row, its history line and
// its event, its message completes, and the table is back in step.
func TestTableAheadOfPostgreSQLIsRecovered(t *testing.T) {
	rg := newRig(t)
	rg.routed(1, 1)
	rg.routed(2, 1)
	rg.routed(3, 1)
	create := schedule(1, "40", map[string]string{"FLNO": "CA40"})
	create.At = rg.t0
	rg.apply(create)
	rg.events_()
	v1 := rg.table("40")
	estt := flight.Transition{MsgID: 2, Source: "FLOP-ESTT", Kind: flight.KindFLOP, STYP: "ESTT", FLID: "40",
		Fields: map[string]string{"ESTT": "01DEC260900"}, At: rg.t0}
	etot := flight.Transition{MsgID: 3, Source: "FLOP-EOBT", Kind: flight.KindFLOP, STYP: "EOBT", FLID: "40",
		Fields: map[string]string{"EOBT": "01DEC260915"}, At: rg.t0}
	// The crash: messages 2 and 3 reached the table, not PostgreSQL.
	v3 := aheadOf(t, aheadOf(t, v1, estt), etot)
	rg.tt.SetTableValue(Config{}.Table(), "40", v3)

	rg.apply(estt) // redelivered
	if v, _ := rg.pgVersion("40"); v != 2 || rg.state(2) != message.StateSucceeded {
		t.Fatalf("after the redelivery of message 2: PostgreSQL at v%d, message 2 %s", v, rg.state(2))
	}
	if got := rg.table("40"); got.StateVersion != 2 || got.LastMsgID != 2 {
		t.Fatalf("table at v%d/msg %d after the recovery, want v2/msg 2", got.StateVersion, got.LastMsgID)
	}
	rg.apply(etot) // redelivered
	if v, _ := rg.pgVersion("40"); v != 3 || rg.state(3) != message.StateSucceeded {
		t.Fatalf("after the redelivery of message 3: PostgreSQL at v%d, message 3 %s", v, rg.state(3))
	}
	ev := rg.events_()
	if len(ev) != 2 || ev[0].StateVersion != 2 || ev[1].StateVersion != 3 || ev[1].Flight.Fields["EOBT"] == "" {
		t.Fatalf("events of the lost versions: %+v", ev)
	}
	if got := rg.changes("40"); len(got) != 3 {
		t.Fatalf("history versions %v, want 1 2 3", got)
	}
	if st := rg.table("40"); st.StateVersion != v3.StateVersion || st.Fields["EOBT"] != v3.Fields["EOBT"] {
		t.Fatalf("table %+v, want the state of an undisturbed run %+v", st, v3)
	}
	if n := rg.p.Stats().Recovered; n != 1 {
		t.Fatalf("Recovered = %d, want 1 (only the first redelivery found the table ahead)", n)
	}

	// Delivered once more, now that PostgreSQL has it: a plain redelivery,
	// which announces nothing again (the events were committed with the
	// versions).
	rg.apply(etot)
	if v, _ := rg.pgVersion("40"); v != 3 || rg.p.Stats().Recovered != 1 || len(rg.events_()) != 0 {
		t.Fatalf("a redelivery PostgreSQL has: v%d, recovered %d", v, rg.p.Stats().Recovered)
	}
}

// TestTableAheadOfAnUpgradedRow: the flight was last written by a version
// of msgx that kept no table value in PostgreSQL (before migration 0020);
// the upgrade's start derived it from the row (sink.Migrate), so the first
// crash after the upgrade is recovered as exactly as any other.
func TestTableAheadOfAnUpgradedRow(t *testing.T) {
	rg := newRig(t)
	rg.routed(1, 1)
	create := schedule(1, "41", map[string]string{"FLNO": "CA41", "SODT": "30NOV261000"})
	rg.apply(create)
	v1 := rg.table("41")
	ctx := context.Background()
	if _, err := rg.pool.Exec(ctx, `UPDATE flight_schd SET table_state = NULL WHERE flid = '41'`); err != nil {
		t.Fatal(err)
	}
	if err := sink.Migrate(sink.Config{PGDSN: rg.dsn}); err != nil { // the upgraded start
		t.Fatal(err)
	}
	rg.events_()
	rg.routed(2, 1)
	estt := flight.Transition{MsgID: 2, Source: "FLOP-ESTT", Kind: flight.KindFLOP, STYP: "ESTT", FLID: "41",
		Fields: map[string]string{"ESTT": "30NOV261020"}, At: rg.t0}
	// The crash: message 2 reached the table, not PostgreSQL.
	rg.tt.SetTableValue(Config{}.Table(), "41", aheadOf(t, v1, estt))
	rg.apply(estt) // redelivered
	if v, _ := rg.pgVersion("41"); v != 2 || rg.state(2) != message.StateSucceeded || rg.p.Stats().Recovered != 1 {
		t.Fatalf("PostgreSQL at v%d, message 2 %s, recovered %d", v, rg.state(2), rg.p.Stats().Recovered)
	}
	if ev := rg.events_(); len(ev) != 1 || ev[0].StateVersion != 2 {
		t.Fatalf("events of the lost version: %+v", ev)
	}
}

// TestTableAheadWithAFlightPostgreSQLLacks: the lost transaction created
// the flight; PostgreSQL has no row, so the redelivered creation starts
// from nothing again.
func TestTableAheadWithAFlightPostgreSQLLacks(t *testing.T) {
	rg := newRig(t)
	rg.routed(1, 1)
	create := schedule(1, "41", map[string]string{"FLNO": "CA41"})
	create.At = rg.t0
	rg.tt.SetTableValue(Config{}.Table(), "41", aheadOf(t, nil, create))
	rg.apply(create)
	if v, _ := rg.pgVersion("41"); v != 1 || rg.state(1) != message.StateSucceeded {
		t.Fatalf("PostgreSQL at v%d, message 1 %s", v, rg.state(1))
	}
	if ev := rg.events_(); len(ev) != 1 || ev[0].StateVersion != 1 {
		t.Fatalf("events %+v", ev)
	}
	if got := rg.changes("41"); len(got) != 1 {
		t.Fatalf("history %v", got)
	}
}

// TestGroupWritesTheNewestStateWhole: a group holding a flight's creation
// and a later version writes only the newest state, and writes it whole —
// also the collections the later version did not change — with a history
// line and an applied mark for each transition.
func TestGroupWritesTheNewestStateWhole(t *testing.T) {
	rg := newRig(t)
	rg.routed(1, 1)
	rg.routed(2, 1)
	create := schedule(1, "42", map[string]string{"FLNO": "CA42"})
	create.At = rg.t0
	create.Collections = map[string][]flight.Element{"GTDT": {{"GTNO": "1", "GATE": "G7"}}}
	gates := flight.Transition{MsgID: 2, Source: "FLOP-CKDT", Kind: flight.KindFLOP, STYP: "CKDT", FLID: "42", At: rg.t0,
		Collections: map[string][]flight.Element{"CKDT": {{"CKNO": "1", "CHKC": "A01"}}}}
	var ws []*txWrite
	var s *flight.State
	for _, tr := range []flight.Transition{create, gates} {
		res, err := flight.Apply(s, tr, rg.p.opts)
		if err != nil {
			t.Fatal(err)
		}
		w, err := rg.p.prepare(rg.p.d.Log, &tr, s, res)
		if err != nil || w == nil {
			t.Fatalf("prepare: %v", err)
		}
		ws, s = append(ws, w), res.State
	}
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, rg.pool, func(tx pgx.Tx) error { return rg.p.writeBatch(ctx, tx, ws) }); err != nil {
		t.Fatal(err)
	}
	if v, _ := rg.pgVersion("42"); v != 2 {
		t.Fatalf("PostgreSQL at v%d, want 2", v)
	}
	var gts, cks int
	if err := rg.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM flight_gtdt WHERE flid = '42'), (SELECT count(*) FROM flight_ckdt WHERE flid = '42')`).
		Scan(&gts, &cks); err != nil || gts != 1 || cks != 1 {
		t.Fatalf("%d gate and %d counter rows (%v), want v1's gate and v2's counter", gts, cks, err)
	}
	if got := rg.changes("42"); len(got) != 2 || rg.state(1) != message.StateSucceeded || rg.state(2) != message.StateSucceeded {
		t.Fatalf("history %v, messages %s %s", got, rg.state(1), rg.state(2))
	}
	if ev := rg.events_(); len(ev) != 2 || ev[0].StateVersion != 1 || ev[1].StateVersion != 2 {
		t.Fatalf("events %+v", ev)
	}
}
