package sink_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/refdata"
)

// A database an earlier msgx wrote (schema 27) is upgraded: the rows it
// left without the table values this version's crash recovery reads back
// get them, derived from PostgreSQL's own rows — a flight last written
// before migration 0020 (no table_state), the placeholder of a master its
// children name, a category without ref_table_state — and the router's
// flight index gets the flights' links. The derived values are what the
// flights and refdata tables hold, as far as recovery compares them.
func TestUpgradeFillsTheTableStates(t *testing.T) {
	ctx := context.Background()
	cfg := sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 2}
	migrateBelowLinks(t, cfg)
	if v, _, err := sink.MigrationVersion(cfg); err != nil || v != sink.LinksVersion-1 {
		t.Fatalf("schema %d (%v), want %d", v, err, sink.LinksVersion-1)
	}
	pool, err := sink.OpenPG(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	// What the earlier version's flights table held: a master with one
	// child, a child of a master that is no flight, a replayed change.
	master := &flight.State{FLID: "10", OperationDay: "2026-11-30", State: flight.StateActive, StateVersion: 3, LastMsgID: 7, UpdatedAt: at,
		Fields: map[string]string{"FLNO": "CA10"}, MAFL: []flight.MAFLEntry{{FLID: "20", FLNO: "MU20"}},
		Links: map[string]flight.ChildLink{"20": {FLNO: "MU20", Live: true}},
		Last:  &flight.Provenance{MsgID: 7, Source: flight.SourceLink, Changed: []string{flight.ChangedMAFL}}}
	child := &flight.State{FLID: "20", OperationDay: "2026-11-30", State: flight.StateActive, StateVersion: 1, LastMsgID: 6, UpdatedAt: at,
		Fields: map[string]string{"FLNO": "MU20", "MAID": "10"}, Last: &flight.Provenance{MsgID: 6, Source: "SCHD-DNLD", Changed: []string{"FLNO", "MAID", "STATE"}}}
	orphan := &flight.State{FLID: "30", OperationDay: "2026-11-30", State: flight.StateActive, StateVersion: 2, LastMsgID: 9, UpdatedAt: at,
		Fields: map[string]string{"FLNO": "ZH30", "MAID": "99"}, Last: &flight.Provenance{MsgID: 9, Source: "FLOP-ESTT", Changed: []string{"ESTT"}}}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// This version's writer sets the schd mark of migration 0032
		// (which adds the column only if it is missing).
		if _, err := tx.Exec(ctx, `ALTER TABLE flight_schd ADD COLUMN schd_due_since timestamptz`); err != nil {
			return err
		}
		for _, s := range []*flight.State{master, child, orphan} {
			if err := sink.WriteFlight(ctx, tx, s); err != nil {
				return err
			}
		}
		b := &pgx.Batch{}
		if err := sink.QueueFlightChanges(b, []sink.Change{{State: master}, {State: child}, {State: orphan, Replay: 4}}, at); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		cat := refdata.NewState("AIRL")
		res, err := refdata.Apply(cat, refdata.Transition{MsgID: 5, RType: "AIRL", STYP: "ADD", At: at,
			Records: []refdata.Record{{"ITOP": "CA", "ANAM": "Air China"}}})
		if err != nil {
			return err
		}
		if err := sink.WriteRefData(ctx, tx, cat, res); err != nil {
			return err
		}
		// A later message deleted a record: only its applied mark holds
		// its message and the category version it made.
		if _, err := tx.Exec(ctx, `INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at) VALUES (8, 'SUCCEEDED', $1, $1)`, at); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO transition_applied (msg_id, kind, key, applied_at, outcome, state_version)
			VALUES (8, 'refdata', 'AIRL', $1, 'applied', 2)`, at); err != nil {
			return err
		}
		for _, f := range []string{"10", "20", "30"} {
			if _, err := tx.Exec(ctx, `INSERT INTO flight_index (flid, operation_day, first_msg_id, created_at) VALUES ($1, '2026-11-30', 1, $2)`, f, at); err != nil {
				return err
			}
		}
		// Rows of a version before 0020 and 0027 hold no table value.
		if _, err := tx.Exec(ctx, `UPDATE flight_schd SET table_state = NULL`); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM ref_table_state`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	if err := sink.Migrate(cfg); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*flight.State{master, child, orphan} {
		got, found, err := sink.TableState(ctx, pool, want.FLID)
		if err != nil || !found || got == nil {
			t.Fatalf("table state of %s: %v %v %v", want.FLID, got, found, err)
		}
		if want == orphan {
			// Its last change was a replayed message's (flight_change).
			want = want.Clone()
			want.Replayed = &message.ReplayMark{Gen: 4, MsgID: 9}
		}
		if g, w := js(t, got), js(t, want); g != w {
			t.Errorf("table state of %s:\n got %s\nwant %s", want.FLID, g, w)
		}
	}
	p, err := sink.Placeholder(ctx, pool, "99")
	if err != nil || p == nil || !p.Links["30"].Live || p.Links["30"].FLNO != "ZH30" || p.LastMsgID != 9 {
		t.Fatalf("placeholder of 99: %+v (%v)", p, err)
	}
	cat, found, _, err := sink.RefTableState(ctx, pool, "AIRL")
	if err != nil || !found || cat.LastMsgID != 8 || cat.Version != 2 || len(cat.Records) != 1 {
		t.Fatalf("category table state %+v found %v (%v)", cat, found, err)
	}
	var state, maid, flno string
	if err := pool.QueryRow(ctx, `SELECT state, maid, flno FROM flight_index WHERE flid = '20'`).Scan(&state, &maid, &flno); err != nil ||
		state != flight.StateActive || maid != "10" || flno != "MU20" {
		t.Fatalf("index link of 20: %s %s %s (%v)", state, maid, flno, err)
	}
	// Once only: a second start finds nothing to do.
	if _, err := pool.Exec(ctx, `DELETE FROM flight_placeholder`); err != nil {
		t.Fatal(err)
	}
	if err := sink.Migrate(cfg); err != nil {
		t.Fatal(err)
	}
	if p, _ := sink.Placeholder(ctx, pool, "99"); p != nil {
		t.Fatalf("placeholders filled again on a later start: %+v", p)
	}
}

// An earlier version's database is not upgraded while its pipeline holds
// unfinished messages: one line says what to do.
func TestUpgradeNeedsADrainedPipeline(t *testing.T) {
	ctx := context.Background()
	cfg := sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 2}
	if err := sink.UpgradeCheck(ctx, cfg); err != nil {
		t.Fatalf("a current database: %v", err)
	}
	migrateBelowLinks(t, cfg)
	pool, err := sink.OpenPG(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := sink.UpgradeCheck(ctx, cfg); err != nil {
		t.Fatalf("a drained one: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at, n_transitions) VALUES (4, 'ROUTED', now(), now(), 1)`); err != nil {
		t.Fatal(err)
	}
	err = sink.UpgradeCheck(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "1 messages are unfinished (lowest #4)") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a database with a routed message: %v", err)
	}
}

// migrateBelowLinks takes the schema of cfg's database down to the version
// before sink.LinksVersion, the one an earlier msgx left.
func migrateBelowLinks(t *testing.T, cfg sink.Config) {
	t.Helper()
	newest, _, err := sink.MigrationVersion(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.MigrateDown(cfg, int(newest)-(sink.LinksVersion-1)); err != nil {
		t.Fatal(err)
	}
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
