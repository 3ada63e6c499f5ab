package sink_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"msgx/internal/kafka"
	"msgx/sink"
	"msgx/tables/flight"
	"msgx/tables/refdata"
)

func TestBinding(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if _, ok, err := sink.LoadBinding(ctx, pool); err != nil || ok {
		t.Fatalf("fresh database bound: %v %v", ok, err)
	}
	a := kafka.Identity{ClusterID: "A", InboxTopic: "msgx.inbox", InboxTopicID: "ta"}
	b := kafka.Identity{ClusterID: "B", InboxTopic: "msgx.inbox", InboxTopicID: "tb"}
	got, err := sink.BindFirst(ctx, pool, a, t0)
	if err != nil || got.Identity != a || got.BoundBy != sink.BoundFirstStart || !got.BoundAt.Equal(t0) {
		t.Fatalf("first bind: %+v %v", got, err)
	}
	// A second first start, on another cluster, finds the first binding.
	got, err = sink.BindFirst(ctx, pool, b, t0.Add(time.Minute))
	if err != nil || got.Identity != a || got.Mismatch(b) == "" {
		t.Fatalf("second first start: %+v %v", got, err)
	}
	if _, err := sink.BindFirst(ctx, pool, kafka.Identity{ClusterID: "C", InboxTopic: "msgx.inbox"}, t0); err == nil {
		t.Fatal("bound to a cluster without msgx.inbox")
	}
	if err := sink.Rebind(ctx, pool, b, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, ok, err := sink.LoadBinding(ctx, pool)
	if err != nil || !ok || got.Identity != b || got.BoundBy != sink.BoundByOperator {
		t.Fatalf("after rebind: %+v %v %v", got, ok, err)
	}
	var logged []string
	rows, _ := pool.Query(ctx, `SELECT cluster_id || ' ' || bound_by FROM kafka_binding_log ORDER BY id`)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		logged = append(logged, s)
	}
	rows.Close()
	if want := []string{"A first-start", "B msgx bind --force"}; !reflect.DeepEqual(logged, want) {
		t.Fatalf("binding log %q, want %q", logged, want)
	}
}

func TestFlightKnown(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	flWrite(t, pool, &flight.State{FLID: "1", OperationDay: "2026-12-01", State: flight.StateActive, StateVersion: 1, LastMsgID: 1, UpdatedAt: t0})
	if _, err := pool.Exec(ctx, `INSERT INTO flight_index (flid, operation_day, first_msg_id, created_at) VALUES
		('1', '2026-12-01', 1, now()), ('2', '2026-12-01', 2, now()), ('3', '2026-12-01', 3, now());
		INSERT INTO flight_hist (flid, state, state_version, last_msg_id, doc, purged_at) VALUES ('3', 'ACTIVE', 1, 3, '{}', now())`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flid string
		msg  int64
		want string
	}{
		{"1", 9, "flight_schd"},
		{"1", 1, ""},             // the read model holds what this very message wrote: a redelivery after a crash
		{"2", 9, "flight_index"}, // indexed by an older message, never applied
		{"2", 2, ""},             // indexed by this very message: its creation
		{"3", 9, ""},             // purged by the history sweep
		{"4", 9, ""},             // unknown
	} {
		got, err := sink.FlightKnown(ctx, pool, tc.flid, tc.msg)
		if err != nil || got != tc.want {
			t.Errorf("FlightKnown(%s, %d) = %q, %v; want %q", tc.flid, tc.msg, got, err, tc.want)
		}
	}
}

// What reseed reads back is what the processors wrote: the flights' whole
// table values and the reference categories.
func TestReseedSources(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := flApply(t, nil, flight.Transition{MsgID: 3, Source: "SCHD-ADFT", Kind: flight.KindADFT, FLID: "7", OperationDay: "2026-12-01", At: t0,
		Fields: map[string]string{"FLNO": "MU7", "MAID": "9"}})
	flWrite(t, pool, s)
	states, legacy, err := sink.TableStates(ctx, pool)
	if err != nil || len(legacy) != 0 || len(states) != 1 {
		t.Fatalf("TableStates = %+v %v %v", states, legacy, err)
	}
	// The goka table's codec is JSON: equal JSON is the same table value.
	if got, want := asJSON(t, states[0]), asJSON(t, s); got != want {
		t.Fatalf("table state read back\n got %s\nwant %s", got, want)
	}
	if _, err := pool.Exec(ctx, `UPDATE flight_schd SET table_state = NULL`); err != nil {
		t.Fatal(err)
	}
	if _, legacy, err := sink.TableStates(ctx, pool); err != nil || !reflect.DeepEqual(legacy, []string{"7"}) {
		t.Fatalf("legacy rows %v %v", legacy, err)
	}

	cat := refdata.NewState("AIRL")
	res, err := refdata.Apply(cat, refdata.Transition{MsgID: 4, RType: "AIRL", STYP: refdata.STYPUPD, At: t0,
		Records: []refdata.Record{{"ITOP": "MU", "NAME": "China Eastern"}}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.WriteRefData(ctx, tx, cat, res); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cats, err := sink.RefdataStates(ctx, pool)
	if err != nil || len(cats) != 1 {
		t.Fatalf("RefdataStates = %+v %v", cats, err)
	}
	cat.LastDeletes = nil
	if got, want := asJSON(t, cats[0]), asJSON(t, cat); got != want {
		t.Fatalf("category read back\n got %s\nwant %s", got, want)
	}
	if known, err := sink.RefdataKnown(ctx, pool, "AIRL", 5); err != nil || !known {
		t.Fatalf("RefdataKnown(AIRL, 5) = %v %v", known, err)
	}
	// Written by message 4 itself: a redelivery after a crash.
	if known, err := sink.RefdataKnown(ctx, pool, "AIRL", 4); err != nil || known {
		t.Fatalf("RefdataKnown(AIRL, 4) = %v %v", known, err)
	}
	if known, err := sink.RefdataKnown(ctx, pool, "ARPT", 5); err != nil || known {
		t.Fatalf("RefdataKnown(ARPT, 5) = %v %v", known, err)
	}
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
