package flights

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
	"msgx/tables/message"
)

type rig struct {
	t    *testing.T
	tt   *tester.Tester
	pool *pgxpool.Pool
	msgs *sink.Messages
	t0   time.Time
	p    *Processor
	// links is the router's flight index as the messages of send left it.
	links map[string]message.FlightLink
	dsn   string
}

func newRig(t *testing.T) *rig { return newRigWith(t, nil) }

// newRigWith runs the processor on the graph graph builds (nil: its own).
func newRigWith(t *testing.T, graph func(p *Processor) *goka.GroupGraph) *rig {
	t.Helper()
	dsn := sinktest.NewPG(t)
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: dsn, Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rg := &rig{t: t, pool: pool, dsn: dsn, msgs: sink.NewMessages(pool, 10*time.Second), t0: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		links: map[string]message.FlightLink{}}
	p, err := New(Config{TransitionTopic: "msgx.flight-transitions", MsgTopic: "msgx.msg", ScheduleMissing: "keep", SchdTopic: "msgx.schd"},
		Deps{Pool: pool, Timeout: 10 * time.Second, Clock: clock.NewFake(rg.t0), Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	rg.p = p
	rg.tt = tester.New(t)
	var gp *goka.Processor
	if graph == nil {
		gp, err = p.Processor(nil, goka.WithTester(rg.tt))
	} else {
		gp, err = goka.NewProcessor(nil, graph(p), goka.WithTester(rg.tt))
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.RunProcessor(ctx, gp) }()
	t.Cleanup(func() { cancel(); <-done })
	return rg
}

// routed records message id as ROUTED with n transitions, as the router does.
func (rg *rig) routed(id int64, n int) {
	rg.t.Helper()
	ctx := context.Background()
	if _, err := rg.msgs.Touch(ctx, id, nil, rg.t0, rg.t0); err != nil {
		rg.t.Fatal(err)
	}
	if ok, err := rg.msgs.Record(ctx, sink.Decision{MsgID: id, State: message.StateRouted, N: n, Now: rg.t0}); err != nil || !ok {
		rg.t.Fatalf("record %d: %v %v", id, ok, err)
	}
}

// send routes message id as the router does: its own transitions own and
// what they cause (flight.Expand against rg.links), recorded ROUTED with
// their number, then applied. It returns the transitions.
func (rg *rig) send(id int64, own ...flight.Transition) []flight.Transition {
	rg.t.Helper()
	for i := range own {
		own[i].MsgID = id
		if own[i].At.IsZero() {
			own[i].At = rg.t0
		}
	}
	out, changed, err := flight.Expand(own, rg.links, rg.p.opts)
	if err != nil {
		rg.t.Fatal(err)
	}
	for flid, l := range changed {
		rg.links[flid] = l
	}
	rg.routed(id, len(out))
	for _, t := range out {
		rg.apply(t)
	}
	return out
}

func (rg *rig) apply(t flight.Transition) {
	if t.At.IsZero() {
		t.At = rg.t0
	}
	rg.tt.Consume("msgx.flight-transitions", t.FLID, t)
}

// events_ takes the msg events queued in the outbox since the last call.
func (rg *rig) events_() []*flight.Event {
	var out []*flight.Event
	rows, err := rg.pool.Query(context.Background(), `DELETE FROM event_outbox WHERE topic = 'msgx.msg' RETURNING id, value`)
	if err != nil {
		rg.t.Fatal(err)
	}
	type row struct {
		id int64
		v  []byte
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.v); err != nil {
			rg.t.Fatal(err)
		}
		got = append(got, r)
	}
	rows.Close()
	sort.Slice(got, func(i, j int) bool { return got[i].id < got[j].id })
	for _, r := range got {
		v, err := kafka.JSON[flight.Event]{}.Decode(r.v)
		if err != nil {
			rg.t.Fatal(err)
		}
		out = append(out, v.(*flight.Event))
	}
	return out
}

// rechecks lists the outbox's msg events as "FLID vN new" (queued as new,
// sink.Event.New) or "FLID vN recheck" (the publisher looks the version
// up in msg_event first).
func rechecks(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT key || ' v' || state_version || CASE WHEN recheck THEN ' recheck' ELSE ' new' END
		FROM event_outbox WHERE state_version IS NOT NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(s, ", ")
}

func (rg *rig) state(id int64) string {
	m, _, err := rg.msgs.Get(context.Background(), id)
	if err != nil {
		rg.t.Fatal(err)
	}
	return m.State
}

func (rg *rig) pgVersion(flid string) (int64, string) {
	var v int64
	var state string
	err := rg.pool.QueryRow(context.Background(), "SELECT state_version, state FROM flight_schd WHERE flid = $1", flid).Scan(&v, &state)
	if err != nil {
		rg.t.Fatalf("flight %s in PG: %v", flid, err)
	}
	return v, state
}

func TestFlightsProcessor(t *testing.T) {
	rg := newRig(t)
	sched := func(flid string, fields map[string]string) flight.Transition {
		return flight.Transition{Source: "SCHD-DNLD", Kind: flight.KindSchedule, FLID: flid, OperationDay: "2021-01-23", Fields: fields,
			Collections: map[string][]flight.Element{"GTDT": {{"GTNO": "1", "GATE": "G28"}, {"GTNO": "2", "GATE": "G28"}}}}
	}
	out := rg.send(1, sched("15", map[string]string{"FLNO": "YG9028", "SODT": "23JAN210535"}),
		sched("16", map[string]string{"FLNO": "YG9061", "SODT": "23JAN210325", "MAID": "15"}))
	// Two transitions: the master's carries its SCHEDULE and the LINK of
	// its child, both counted in the message's n.
	if len(out) != 2 || len(out[0].Then) != 1 || rg.state(1) != message.StateSucceeded {
		t.Fatalf("transitions %+v, message 1 %s", out, rg.state(1))
	}
	// Every version is new: the publisher need not look any up.
	if got := rechecks(t, rg.pool); got != "15 v1 new, 15 v2 new, 16 v1 new" {
		t.Fatalf("outbox %s", got)
	}
	ev := rg.events_()
	// 15 created, then 15 again with its child in MAFL, then 16 created.
	if len(ev) != 3 || ev[0].FLID != "15" || ev[1].FLID != "15" || ev[1].Source != flight.SourceLink || ev[2].FLID != "16" ||
		len(ev[1].Flight.MAFL) != 1 || ev[1].Flight.MAFL[0].FLID != "16" {
		b, _ := json.Marshal(ev)
		t.Fatalf("events %s", b)
	}
	if v, _ := rg.pgVersion("15"); v != 2 {
		t.Fatalf("master version in PG %d, want 2", v)
	}
	var gates int
	if err := rg.pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM flight_gtdt WHERE flid = '15'").Scan(&gates); err != nil || gates != 2 {
		t.Fatalf("GTDT rows %d (%v): equal gate numbers are two allocations", gates, err)
	}

	esst := rg.send(2, flight.Transition{Source: "FLOP-ESTT", Kind: flight.KindFLOP, STYP: "ESTT", FLID: "15", Fields: map[string]string{"ESTT": "23JAN210600"}})
	ev = rg.events_()
	if len(ev) != 1 || ev[0].EventType != flight.EventUpsert || ev[0].StateVersion != 3 || ev[0].Changed[0] != "ESTT" || rg.state(2) != message.StateSucceeded {
		t.Fatalf("FLOP event %+v, message 2 %s", ev, rg.state(2))
	}
	// A redelivery of the same transition changes nothing and announces
	// nothing again.
	rg.apply(esst[0])
	ev = rg.events_()
	if v, _ := rg.pgVersion("15"); v != 3 || len(ev) != 0 {
		t.Fatalf("replay: version %d, events %+v", v, ev)
	}

	rg.send(3, flight.Transition{Source: "FLOP-FDEL", Kind: flight.KindDelete, FLID: "16"})
	ev = rg.events_()
	if len(ev) != 2 || ev[0].EventType != flight.EventTombstone || ev[0].FLID != "16" || ev[1].FLID != "15" || len(ev[1].Flight.MAFL) != 0 {
		t.Fatalf("delete events %+v", ev)
	}
	if _, st := rg.pgVersion("16"); st != flight.StateDeleted || rg.state(3) != message.StateSucceeded {
		t.Fatalf("deleted flight in PG %s, message 3 %s", st, rg.state(3))
	}
	s, ok := rg.tt.TableValue(Config{}.Table(), "16").(*flight.State)
	if !ok || s.State != flight.StateDeleted {
		t.Fatalf("table value %+v", s)
	}
}

func TestPurgeThroughTheProcessor(t *testing.T) {
	rg := newRig(t)
	rg.routed(1, 1)
	rg.apply(flight.Transition{MsgID: 1, Source: "SCHD-DNLD", Kind: flight.KindSchedule, FLID: "30", OperationDay: "2026-09-01",
		Fields: map[string]string{"FLNO": "CA30"}, Collections: map[string][]flight.Element{"GTDT": {{"GTNO": "1", "GATE": "G1"}}}})
	rg.events_()
	rg.apply(flight.Transition{Kind: flight.KindPurge, Source: flight.SourceHistory, FLID: "30", PurgeBefore: "2026-10-01"})
	ev := rg.events_()
	if len(ev) != 1 || ev[0].EventType != flight.EventTombstone || ev[0].StateVersion != 2 {
		t.Fatalf("purge events %+v", ev)
	}
	var tombstones int
	_ = rg.pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM event_outbox WHERE topic = 'msgx.schd' AND key = '30' AND value IS NULL").Scan(&tombstones)
	if tombstones != 1 {
		t.Fatalf("schd tombstones queued after purge: %d", tombstones)
	}
	if rg.tt.TableValue(Config{}.Table(), "30") != nil {
		t.Fatal("the purged flight is still in the table")
	}
	ctx := context.Background()
	var inSchd, inGates, inHist int
	_ = rg.pool.QueryRow(ctx, "SELECT COUNT(*) FROM flight_schd WHERE flid = '30'").Scan(&inSchd)
	_ = rg.pool.QueryRow(ctx, "SELECT COUNT(*) FROM flight_gtdt WHERE flid = '30'").Scan(&inGates)
	_ = rg.pool.QueryRow(ctx, "SELECT COUNT(*) FROM flight_hist WHERE flid = '30' AND state = 'DELETED' AND state_version = 2").Scan(&inHist)
	if inSchd != 0 || inGates != 0 || inHist != 1 {
		t.Fatalf("read model %d/%d, history %d", inSchd, inGates, inHist)
	}
	// Delivered again: nothing left to purge, nothing archived twice.
	rg.apply(flight.Transition{Kind: flight.KindPurge, Source: flight.SourceHistory, FLID: "30", PurgeBefore: "2026-10-01"})
	_ = rg.pool.QueryRow(ctx, "SELECT COUNT(*) FROM flight_hist WHERE flid = '30'").Scan(&inHist)
	if inHist != 1 || len(rg.events_()) != 0 {
		t.Fatalf("a second purge archived again (%d) or emitted", inHist)
	}
}

// New names what is missing: a nil collaborator is an error, not a panic.
func TestNewRefusesIncompleteDeps(t *testing.T) {
	cfg := Config{TransitionTopic: "msgx.flight-transitions", MsgTopic: "msgx.msg", ScheduleMissing: "keep", SchdTopic: "msgx.schd"}
	_, err := New(cfg, Deps{})
	for _, want := range []string{"no PostgreSQL pool", "MSGX_DB_TIMEOUT", "no clock", "no logger"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with empty deps: %v, want it to name %q", err, want)
		}
	}
	cfg.TransitionTopic = ""
	if _, err := New(cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "MSGX_TOPIC_FLIGHT_TRANSITIONS") {
		t.Errorf("New without an input topic: %v", err)
	}
}
