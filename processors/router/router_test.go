package router

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"msgx/ingest"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/refdata"
)

// rig runs the router under goka's tester (no Kafka) against a real,
// freshly migrated PostgreSQL.
type rig struct {
	t       *testing.T
	tt      *tester.Tester
	r       *Router
	msgs    *sink.Messages
	pool    *pgxpool.Pool
	clock   *clock.Fake
	flights *tester.QueueTracker
	refs    *tester.QueueTracker
	t0      time.Time
}

func testConfig() Config {
	return Config{InboxTopic: "msgx.inbox", FlightTopic: "msgx.flight-transitions", RefdataTopic: "msgx.refdata-transitions", Partitions: 1,
		MaxAttempts: 5, Backoff: "1s,2s,4s,8s", BackoffCap: time.Minute, IgnoreRules: "LDM-*,EROR-*",
		OpdayCutover: "00:00", ScheduleAbsent: "keep"}
}

func newRig(t *testing.T, mut func(*Config)) *rig {
	t.Helper()
	cfg := testConfig()
	if mut != nil {
		mut(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: testenv.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rg := &rig{t: t, pool: pool, t0: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	rg.clock = clock.NewFake(rg.t0)
	rg.msgs = sink.NewMessages(pool, 10*time.Second)
	if rg.r, err = New(cfg, Deps{Messages: rg.msgs, Clock: rg.clock, Log: testenv.Logger(t), Loc: shanghai}); err != nil {
		t.Fatal(err)
	}
	rg.tt = tester.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	proc, err := rg.r.Processor(nil, goka.WithTester(rg.tt))
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- kafka.RunProcessor(ctx, proc, "router") }()
	t.Cleanup(func() { cancel(); <-done })
	rg.flights = rg.tt.NewQueueTracker(cfg.FlightTopic)
	rg.refs = rg.tt.NewQueueTracker(cfg.RefdataTopic)
	return rg
}

// consume feeds one inbox record and waits for the callback to finish.
func (rg *rig) consume(id int64, raw string) {
	rg.tt.Consume("msgx.inbox", strconv.FormatInt(id, 10), ingest.Record{MsgID: id, EnqueuedAt: rg.t0, Raw: raw})
}

func (rg *rig) row(id int64) sink.Message {
	rg.t.Helper()
	m, ok, err := rg.msgs.Get(context.Background(), id)
	if err != nil || !ok {
		rg.t.Fatalf("message %d: %v %v", id, ok, err)
	}
	return m
}

func (rg *rig) drainFlights() []*flight.Transition {
	var out []*flight.Transition
	for {
		_, v, ok := rg.flights.Next()
		if !ok {
			return out
		}
		out = append(out, v.(*flight.Transition))
	}
}

func str(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func flop(seqn, flid, styp, body string) string {
	return msg("FLOP", styp, seqn, "<FLOP><FLID>"+flid+"</FLID>"+body+"</FLOP>")
}

func TestRouterOutcomes(t *testing.T) {
	rg := newRig(t, nil)
	rg.consume(1, sampleXML(t, "INSERT_CMINMSGS_SCHD.sql", 0)) // DNLD: flights 15 and 16
	rg.consume(2, flop("10", "15", "ESTT", "<ESTT>23JAN210600</ESTT>"))
	rg.consume(3, flop("10", "15", "ESTT", "<ESTT>23JAN210610</ESTT>")) // same identity as 2
	rg.consume(4, msg("LDM", "X", "1", "<LDM/>"))
	rg.consume(5, "not xml at all")
	rg.consume(6, flop("11", "404", "ESTT", "<ESTT>23JAN210600</ESTT>"))
	rg.consume(7, sampleXML(t, "INSERT_CMINMSGS_COBT.sql", 0))
	rg.consume(8, dnld(2, fltr("16", "24JAN210535", ""), fltr("20", "23JAN210535", ""))) // 16 is on the 23rd
	rg.consume(9, sampleXML(t, "INSERT_CMINMSGS_AIRL.sql", 0))
	rg.consume(10, strings.Replace(dnld(0), "<SEQN>77<", "<SEQN>78<", 1))

	for _, tc := range []struct {
		id     int64
		state  string
		class  string
		reason string
		n      int
	}{
		{1, message.StateRouted, "", "", 2},
		{2, message.StateRouted, "", "", 1},
		{3, message.StateSkipped, "", "duplicate-of:2", 0},
		{4, message.StateSkipped, "", "ignored:LDM-*", 0},
		{5, message.StateDead, message.ClassMalformed, "", 0},
		{6, message.StateSkipped, "", "no-match", 0},
		{7, message.StateSkipped, "", "unsupported:FLOP-COBT", 0},
		{8, message.StateDead, message.ClassProtocol, "FLID 16: operation day 2021-01-24 conflicts with its indexed day 2021-01-23", 0},
		{9, message.StateRouted, "", "", 1},
		{10, message.StateSucceeded, "", "", 0},
	} {
		m := rg.row(tc.id)
		if m.State != tc.state || (tc.class != "" && str(m.ErrorClass) != tc.class) || (tc.reason != "" && str(m.Reason) != tc.reason) {
			t.Errorf("message %d: %s/%s %q, want %s/%s %q", tc.id, m.State, str(m.ErrorClass), str(m.Reason), tc.state, tc.class, tc.reason)
		}
		if m.State == message.StateRouted && (m.NTransitions == nil || *m.NTransitions != tc.n) {
			t.Errorf("message %d: n_transitions %v, want %d", tc.id, m.NTransitions, tc.n)
		}
		// Terminal states carry their backfill intent.
		if message.IsTerminal(m.State) {
			var due *time.Time
			if err := rg.pool.QueryRow(context.Background(), "SELECT backfill_next_at FROM proc_state WHERE msg_id = $1", tc.id).Scan(&due); err != nil || due == nil {
				t.Errorf("message %d (%s) has no backfill intent", tc.id, m.State)
			}
		}
		e, ok := rg.tt.TableValue(Table, strconv.FormatInt(tc.id, 10)).(*Entry)
		if !ok || e.State != tc.state {
			t.Errorf("router table for %d: %+v", tc.id, e)
		}
	}
	if k := str(rg.row(2).IdentityKey); k != "AODB|FLOP|ESTT|10" {
		t.Errorf("identity of 2: %s", k)
	}
	if rg.row(3).IdentityKey != nil || rg.row(4).IdentityKey != nil {
		t.Error("a duplicate or ignored message bound an identity")
	}

	got := rg.drainFlights()
	if len(got) != 3 || got[0].FLID != "15" || got[1].FLID != "16" || got[2].FLID != "15" || got[2].Kind != flight.KindFLOP ||
		got[2].OperationDay != "2021-01-23" || got[2].Fields["ESTT"] != "23JAN210600" {
		t.Fatalf("flight transitions %+v", got)
	}
	_, v, ok := rg.refs.Next()
	if rt, isT := v.(*refdata.Transition); !ok || !isT || rt.RType != "AIRL" || len(rt.Records) != 3 {
		t.Fatalf("refdata transition %v %v", v, ok)
	}
	// The protocol-violating DNLD indexed nothing.
	var n int
	if err := rg.pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM flight_index WHERE flid = '20'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rejected package indexed flight 20: %d %v", n, err)
	}
}

func TestRouterReplayReemitsWithoutChangingState(t *testing.T) {
	rg := newRig(t, nil)
	raw := sampleXML(t, "INSERT_CMINMSGS_SCHD.sql", 0)
	rg.consume(1, raw)
	first := rg.drainFlights()
	before := rg.row(1)
	// The same MSG_ID again (ingest duplicate or re-delivery after a crash).
	rg.consume(1, raw)
	again := rg.drainFlights()
	after := rg.row(1)
	if len(again) != 2 || fmt.Sprint(*again[0]) != fmt.Sprint(*first[0]) || fmt.Sprint(*again[1]) != fmt.Sprint(*first[1]) {
		t.Fatalf("re-emitted %+v, want the same as %+v", again, first)
	}
	if !after.UpdatedAt.Equal(before.UpdatedAt) || after.State != message.StateRouted || after.Attempts != 0 {
		t.Fatalf("re-delivery changed the row: %+v → %+v", before, after)
	}
	// A finished message emits nothing when seen again.
	if _, err := rg.pool.Exec(context.Background(), "UPDATE proc_state SET state = 'SUCCEEDED' WHERE msg_id = 1"); err != nil {
		t.Fatal(err)
	}
	rg.consume(1, raw)
	if n := len(rg.drainFlights()); n != 0 {
		t.Fatalf("a SUCCEEDED message re-emitted %d transitions", n)
	}
}

func TestRouterRetriesHeadThenExhausts(t *testing.T) {
	rg := newRig(t, nil)
	bad := `<?xml version="1.0"?><MSG><META><SNDR>A</SNDR><SEQN>1</SEQN><DTTM>2026-11-30</DTTM><TYPE>FLOP</TYPE><STYP>ESTT</STYP></META></MSG>`
	done := make(chan struct{})
	go func() {
		rg.consume(1, bad)
		rg.consume(2, msg("LDM", "X", "1", "<LDM/>"))
		close(done)
	}()
	// Four waits (1s, 2s, 4s, 8s) between five attempts; message 2 must wait.
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		if err := rg.clock.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		m := rg.row(1)
		if m.State != message.StateFailed || m.Attempts != i+1 || str(m.ErrorClass) != message.ClassCodecError {
			t.Fatalf("after failure %d: %+v", i+1, m)
		}
		if !m.NextAttempt.Equal(rg.clock.Now().Add(wait)) {
			t.Fatalf("next attempt %v, want now+%v", m.NextAttempt, wait)
		}
		if _, ok, _ := rg.msgs.Get(context.Background(), 2); ok {
			t.Fatal("message 2 moved while the head was failing")
		}
		rg.clock.Advance(wait)
	}
	<-done
	m := rg.row(1)
	if m.State != message.StateDead || str(m.ErrorClass) != message.ClassExhausted || m.Attempts != 5 || str(m.LastError) == "<nil>" {
		t.Fatalf("exhausted head %+v", m)
	}
	if rg.row(2).State != message.StateSkipped {
		t.Fatal("message 2 not processed after the head became terminal")
	}
}

func TestRouterOversizeMarkerIsDead(t *testing.T) {
	rg := newRig(t, nil)
	rg.tt.Consume("msgx.inbox", "1", ingest.Record{MsgID: 1, EnqueuedAt: rg.t0, Oversize: 2_000_000})
	m := rg.row(1)
	if m.State != message.StateDead || str(m.ErrorClass) != message.ClassMalformed || str(m.Reason) != "raw-too-large" {
		t.Fatalf("oversize row %+v", m)
	}
}

// A SCHD RESP found ROUTED passed the RESP guard when it was decided: seen
// again (after a crash), its transitions go out again even though its
// request is closed by now.
func TestRouterRerouteOfGuardedResp(t *testing.T) {
	rg := newRig(t, func(c *Config) { c.RespGuard = true })
	resp := strings.Replace(strings.Replace(dnld(1, fltr("1", "23JAN210535", "")), "<STYP>DNLD<", "<STYP>RESP<", 1), "<SEQN>77<", "<SEQN>81<", 1)
	ctx := context.Background()
	if _, err := rg.msgs.Touch(ctx, 1, nil, rg.t0, rg.t0); err != nil {
		t.Fatal(err)
	}
	if ok, err := rg.msgs.Record(ctx, sink.Decision{MsgID: 1, State: message.StateRouted, N: 1, Now: rg.t0,
		Index: []message.FlightDay{{FLID: "1", Day: day("2021-01-23")}}}); err != nil || !ok {
		t.Fatalf("record: %v %v", ok, err)
	}
	rg.consume(1, resp)
	if got := rg.drainFlights(); len(got) != 1 || got[0].FLID != "1" {
		t.Fatalf("re-emitted %v", got)
	}
	if rg.row(1).State != message.StateRouted {
		t.Fatal("re-routing changed the message")
	}
}

// New names what is missing: a nil collaborator is an error, not a panic.
func TestNewRefusesIncompleteDeps(t *testing.T) {
	_, err := New(testConfig(), Deps{})
	for _, want := range []string{"no proc_state store", "no clock", "no logger", "no airport time zone"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with empty deps: %v, want it to name %q", err, want)
		}
	}
	cfg := testConfig()
	cfg.InboxTopic = ""
	if _, err := New(cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "MSGX_TOPIC_INBOX") {
		t.Errorf("New without an input topic: %v", err)
	}
}
