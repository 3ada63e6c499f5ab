package router

import (
	"context"
	"fmt"
	"reflect"
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
	"msgx/internal/sample"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/refdata"
	"msgx/tables/route/routetest"
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
	table   *tester.QueueTracker
	entries map[string]*Entry
	t0      time.Time
}

func testConfig() Config {
	return Config{InboxTopic: "msgx.inbox", FlightTopic: "msgx.flight-transitions", RefdataTopic: "msgx.refdata-transitions", Partitions: 1,
		MaxAttempts: 5, Backoff: "1s,2s,4s,8s", BackoffCap: time.Minute, IgnoreRules: "LDM-*,EROR-*",
		OpdayCutover: "00:00", ScheduleAbsent: "keep"}
}

func newRig(t *testing.T, mut func(*Config)) *rig {
	t.Helper()
	return newRigWith(t, mut, nil)
}

// newRigWith is newRig with request tracking made by reqs on the rig's
// database and clock (nil: none).
func newRigWith(t *testing.T, mut func(*Config), reqs func(*pgxpool.Pool, *clock.Fake) Requests) *rig {
	t.Helper()
	cfg := testConfig()
	if mut != nil {
		mut(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rg := &rig{t: t, pool: pool, t0: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), entries: map[string]*Entry{}}
	rg.clock = clock.NewFake(rg.t0)
	rg.msgs = sink.NewMessages(pool, 10*time.Second)
	d := Deps{Messages: rg.msgs, Clock: rg.clock, Log: testenv.Logger(t), Loc: routetest.Shanghai}
	if reqs != nil {
		d.Requests = reqs(pool, rg.clock)
	}
	if rg.r, err = New(cfg, d); err != nil {
		t.Fatal(err)
	}
	rg.tt = tester.New(t)
	// The batch worker produces through the tester's plain producer: the
	// flushing one waits for every processor to catch up, the router
	// included, which is waiting for the worker.
	rg.tt.RegisterEmitter(goka.Stream(cfg.FlightTopic), kafka.JSON[flight.Transition]{})
	rg.tt.RegisterEmitter(goka.Stream(cfg.RefdataTopic), kafka.JSON[refdata.Transition]{})
	rg.tt.RegisterEmitter(goka.Stream(Config{}.Table()), kafka.JSON[Entry]{})
	rg.flights = rg.tt.NewQueueTracker(cfg.FlightTopic)
	rg.refs = rg.tt.NewQueueTracker(cfg.RefdataTopic)
	rg.table = rg.tt.NewQueueTracker(string(Config{}.Table()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	proc, err := rg.r.Processor(nil, rg.tt.ProducerBuilder(), goka.WithTester(rg.tt))
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- proc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return rg
}

// entry is the router table's latest entry for id (nil: none).
func (rg *rig) entry(id int64) *Entry {
	for {
		k, v, ok := rg.table.Next()
		if !ok {
			break
		}
		rg.entries[k] = v.(*Entry)
	}
	return rg.entries[strconv.FormatInt(id, 10)]
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
	return routetest.Msg("FLOP", styp, seqn, "<FLOP><FLID>"+flid+"</FLID>"+body+"</FLOP>")
}

func TestRouterOutcomes(t *testing.T) {
	rg := newRig(t, nil)
	rg.consume(1, sample.XML(t, "INSERT_CMINMSGS_SCHD.sql", 0)) // DNLD: flights 15 and 16
	rg.consume(2, flop("10", "15", "ESTT", "<ESTT>23JAN210600</ESTT>"))
	rg.consume(3, flop("10", "15", "ESTT", "<ESTT>23JAN210610</ESTT>")) // same identity as 2
	rg.consume(4, routetest.Msg("LDM", "X", "1", "<LDM/>"))
	rg.consume(5, "not xml at all")
	rg.consume(6, flop("11", "404", "ESTT", "<ESTT>23JAN210600</ESTT>"))
	rg.consume(7, flop("12", "15", "BDPB", "<BDPB>1</BDPB>"))
	rg.consume(8, routetest.Dnld(2, routetest.Fltr("16", "24JAN210535", ""), routetest.Fltr("20", "23JAN210535", ""))) // 16 is on the 23rd
	rg.consume(9, sample.XML(t, "INSERT_CMINMSGS_AIRL.sql", 0))
	rg.consume(10, strings.Replace(routetest.Dnld(0), "<SEQN>77<", "<SEQN>78<", 1))

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
		{7, message.StateSkipped, "", "unsupported:FLOP-BDPB", 0},
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
		if e := rg.entry(tc.id); e == nil || e.State != tc.state {
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
	raw := sample.XML(t, "INSERT_CMINMSGS_SCHD.sql", 0)
	rg.consume(1, raw)
	first := rg.drainFlights()
	before := rg.row(1)
	// The same MSG_ID again (ingest duplicate or re-delivery after a crash).
	rg.consume(1, raw)
	again := rg.drainFlights()
	after := rg.row(1)
	if len(again) != 2 || !reflect.DeepEqual(again, first) {
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

// rejectFLID makes every flight_index insert of flid fail, a failure that
// belongs to the message that carries it (INFRA).
func (rg *rig) rejectFLID(flid string) {
	rg.t.Helper()
	if _, err := rg.pool.Exec(context.Background(), fmt.Sprintf(`CREATE FUNCTION reject_flid() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.flid = '%s' THEN RAISE EXCEPTION 'flight %s rejected by test trigger'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER reject_flid BEFORE INSERT ON flight_index FOR EACH ROW EXECUTE FUNCTION reject_flid()`, flid, flid)); err != nil {
		rg.t.Fatal(err)
	}
}

// consumeAll feeds the records in order from a goroutine and returns a
// channel closed when all of them were handled.
func (rg *rig) consumeAll(raws ...string) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, raw := range raws {
			if rg.t.Failed() {
				return // the rig is being torn down
			}
			rg.consume(int64(i+1), raw)
		}
	}()
	return done
}

// decidedWithoutWaiting fails the test if the records do not all get
// decided while the fake clock stands still (a backoff would wait forever).
func (rg *rig) decidedWithoutWaiting(done chan struct{}) {
	rg.t.Helper()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		rg.t.Fatalf("the router waits (%d clock waiters) instead of deciding", rg.clock.Waiters())
	}
}

func TestRouterRetriesHeadThenExhausts(t *testing.T) {
	rg := newRig(t, nil)
	rg.rejectFLID("666")
	head := routetest.Dnld(1, routetest.Fltr("666", "23JAN210535", ""))
	done := rg.consumeAll(head, routetest.Msg("LDM", "X", "1", "<LDM/>"))
	// Four waits (1s, 2s, 4s, 8s) between five attempts; message 2 must wait.
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		if err := rg.clock.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		m := rg.row(1)
		if m.State != message.StateFailed || m.Attempts != i+1 || str(m.ErrorClass) != message.ClassInfra {
			t.Fatalf("after failure %d: %+v", i+1, m)
		}
		if !m.NextAttempt.Equal(rg.clock.Now().Add(wait)) {
			t.Fatalf("next attempt %v, want now+%v", m.NextAttempt, wait)
		}
		// The identity is bound from the first failure on (000 §5.2 step 3).
		if str(m.IdentityKey) != "AODB|SCHD|DNLD|77" {
			t.Fatalf("failed head's identity %s", str(m.IdentityKey))
		}
		if _, ok, _ := rg.msgs.Get(context.Background(), 2); ok {
			t.Fatal("message 2 moved while the head was failing")
		}
		rg.clock.Advance(wait)
	}
	<-done
	m := rg.row(1)
	if m.State != message.StateDead || str(m.ErrorClass) != message.ClassExhausted || m.Attempts != 5 || str(m.LastError) == "<nil>" ||
		str(m.Reason) != "exhausted:INFRA" || str(m.IdentityKey) != "AODB|SCHD|DNLD|77" {
		t.Fatalf("exhausted head %+v", m)
	}
	if rg.row(2).State != message.StateSkipped {
		t.Fatal("message 2 not processed after the head became terminal")
	}
	// A resend of the exhausted message is its duplicate.
	rg.consume(3, head)
	if m := rg.row(3); m.State != message.StateSkipped || str(m.Reason) != "duplicate-of:1" {
		t.Fatalf("resend of an exhausted message: %+v", m)
	}
}

// A failure of a message whose identity another message holds binds
// nothing; the retry finds the duplicate.
func TestRouterFailureKeepsAnotherMessagesIdentity(t *testing.T) {
	rg := newRig(t, nil)
	ctx := context.Background()
	if _, err := rg.msgs.Touch(ctx, 1, nil, rg.t0, rg.t0); err != nil {
		t.Fatal(err)
	}
	if ok, err := rg.msgs.Record(ctx, sink.Decision{MsgID: 1, State: message.StateSucceeded, IdentityKey: "AODB|SCHD|DNLD|77", Now: rg.t0}); err != nil || !ok {
		t.Fatalf("record: %v %v", ok, err)
	}
	if _, err := rg.msgs.Touch(ctx, 2, nil, rg.t0, rg.t0); err != nil {
		t.Fatal(err)
	}
	if n, err := rg.msgs.Fail(ctx, 2, "AODB|SCHD|DNLD|77", message.ClassInfra, "boom", rg.t0.Add(time.Second), rg.t0); err != nil || n != 1 {
		t.Fatalf("fail: %d %v", n, err)
	}
	if m := rg.row(2); m.IdentityKey != nil || m.State != message.StateFailed {
		t.Fatalf("the failure took message 1's identity: %+v", m)
	}
	rg.clock.Advance(time.Second)
	rg.consume(2, routetest.Dnld(1, routetest.Fltr("1", "23JAN210535", "")))
	if m := rg.row(2); m.State != message.StateSkipped || str(m.Reason) != "duplicate-of:1" {
		t.Fatalf("retried message: %+v", m)
	}
}

// Bad values are decided at once: the same bytes through the same code
// cannot succeed, so none of these waits a backoff or emits anything.
func TestRouterDecidesBadValuesAtOnce(t *testing.T) {
	rg := newRig(t, func(c *Config) { c.IgnoreRules = "LDM-*,EROR-*,FLOP-FINT" })
	done := rg.consumeAll(
		strings.Replace(flop("1", "15", "ESTT", "<ESTT>23JAN210600</ESTT>"), "20261130080000", "2026-11-30", 1),                // 1: codec error
		routetest.Dnld(2, routetest.Fltr("1", "23JAN210535", ""), routetest.Fltr("2", "31NOV260800", "")),                      // 2: impossible SODT
		routetest.Rsta("ADD", routetest.RstaRec("GATE", "21", "X", "", "")),                                                    // 3: STAT neither E nor D
		routetest.Rsta("UPD", routetest.RstaRec("GATE", "21", "D", "30NOV261000", "30NOV260800")),                              // 4: window ends before it starts
		routetest.Rsta("RESP", routetest.RstaRec("GATE", "21", "D", "", ""), routetest.RstaRec("GATE", "22", "D", "soon", "")), // 5: window does not parse
		routetest.Msg("FLOP", "FINT", "9", "<FLOP><FINT/></FLOP>"),                                                             // 6: ignored, payload broken
		strings.Replace(routetest.Dnld(1, routetest.Fltr("1", "23JAN210535", "")), "<SEQN>77<", "<SEQN>78<", 1),                // 7: fine
	)
	rg.decidedWithoutWaiting(done)
	for _, tc := range []struct {
		id     int64
		state  string
		class  string
		reason string
	}{
		{1, message.StateDead, message.ClassCodecError, `META/DTTM "2026-11-30": unknown date format`},
		{2, message.StateDead, message.ClassProtocol, `FLTR 2 (FLID 2) SODT "31NOV260800": date or time out of range: the operation day cannot be derived`},
		{3, message.StateDead, message.ClassProtocol, `RSTA-ADD record 1: STAT "X" is not E or D`},
		{4, message.StateDead, message.ClassProtocol, "RSTA-UPD record 1: ENDT is not after STRT"},
		{5, message.StateDead, message.ClassProtocol, `RSTA-RESP record 2: STRT "soon" is not SIS time ddMMMyyHHmm`},
		{6, message.StateSkipped, "", "ignored:FLOP-FINT"},
		{7, message.StateRouted, "", ""},
	} {
		m := rg.row(tc.id)
		if m.State != tc.state || str(m.ErrorClass) != map[bool]string{true: "<nil>", false: tc.class}[tc.class == ""] ||
			(tc.reason != "" && str(m.Reason) != tc.reason) || m.Attempts != 0 {
			t.Errorf("message %d: %s/%s %q attempts %d, want %s/%s %q", tc.id, m.State, str(m.ErrorClass), str(m.Reason), m.Attempts, tc.state, tc.class, tc.reason)
		}
	}
	if _, v, ok := rg.refs.Next(); ok {
		t.Fatalf("a rejected resource status was emitted: %+v", v)
	}
	if got := rg.drainFlights(); len(got) != 1 || got[0].MsgID != 7 {
		t.Fatalf("flight transitions %+v", got)
	}
	var n int
	if err := rg.pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM flight_index WHERE flid = '2'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the package with an impossible SODT indexed flight 2: %d %v", n, err)
	}
}

// A FAILED CODEC_ERROR row left by an earlier version, which retried codec
// errors, is decided again at once: it does not sleep through its recorded
// backoff nor wait to be exhausted.
func TestRouterRedecidesLegacyCodecFailureAtOnce(t *testing.T) {
	rg := newRig(t, nil)
	ctx := context.Background()
	if _, err := rg.msgs.Touch(ctx, 1, nil, rg.t0, rg.t0); err != nil {
		t.Fatal(err)
	}
	if _, err := rg.pool.Exec(ctx, `UPDATE proc_state SET state = 'FAILED', error_class = 'CODEC_ERROR', attempts = 2,
		next_attempt_at = $1, last_error = 'old' WHERE msg_id = 1`, rg.t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(flop("1", "15", "ESTT", "<ESTT>23JAN210600</ESTT>"), "20261130080000", "2026-11-30", 1)
	rg.decidedWithoutWaiting(rg.consumeAll(bad, routetest.Msg("LDM", "X", "1", "<LDM/>")))
	if m := rg.row(1); m.State != message.StateDead || str(m.ErrorClass) != message.ClassCodecError || m.NextAttempt != nil {
		t.Fatalf("legacy codec failure: %+v", m)
	}
	if rg.row(2).State != message.StateSkipped {
		t.Fatal("the message behind was not decided")
	}
}

// The router keeps the key tag of each first-child category, so that an
// increment keyed otherwise is DEAD here instead of being rejected by
// refdata.Apply after it was routed.
func TestRouterRefdataKeyTagIndex(t *testing.T) {
	rg := newRig(t, nil)
	rg.decidedWithoutWaiting(rg.consumeAll(
		routetest.Abdg("DNLD", "ABCD"), // 1: keys the category by ABCD
		routetest.Abdg("UPD", "DESC"),  // 2: keyed otherwise
		routetest.Abdg("ADD", "ABCD"),  // 3: fine
		routetest.Abdg("RESP", "DESC"), // 4: a replace re-keys the category
		routetest.Abdg("DEL", "DESC"),  // 5: fine now
	))
	for id, want := range map[int64]string{1: message.StateRouted, 2: message.StateDead, 3: message.StateRouted, 4: message.StateRouted, 5: message.StateRouted} {
		if m := rg.row(id); m.State != want {
			t.Errorf("message %d: %s %s %q, want %s", id, m.State, str(m.ErrorClass), str(m.Reason), want)
		}
	}
	if m := rg.row(2); str(m.ErrorClass) != message.ClassProtocol || str(m.Reason) != "ABDG-UPD keyed by DESC but the stored records are keyed by ABCD" {
		t.Errorf("message 2: %s %q", str(m.ErrorClass), str(m.Reason))
	}
	var tag string
	var by int64
	if err := rg.pool.QueryRow(context.Background(), "SELECT key_tag, msg_id FROM refdata_key_index WHERE rtype = 'ABDG'").Scan(&tag, &by); err != nil || tag != "DESC" || by != 5 {
		t.Fatalf("index %q by %d: %v", tag, by, err)
	}
	for i := 0; i < 4; i++ {
		if _, _, ok := rg.refs.Next(); !ok {
			t.Fatalf("%d refdata transitions, want 4", i)
		}
	}
	// Re-delivered after a later re-keying, message 3 re-emits its decision.
	rg.consume(3, routetest.Abdg("ADD", "ABCD"))
	if _, _, ok := rg.refs.Next(); !ok || rg.row(3).State != message.StateRouted {
		t.Fatal("a re-delivered routed message was re-decided against the newer index")
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
	resp := strings.Replace(strings.Replace(routetest.Dnld(1, routetest.Fltr("1", "23JAN210535", "")), "<STYP>DNLD<", "<STYP>RESP<", 1), "<SEQN>77<", "<SEQN>81<", 1)
	ctx := context.Background()
	if _, err := rg.msgs.Touch(ctx, 1, nil, rg.t0, rg.t0); err != nil {
		t.Fatal(err)
	}
	if ok, err := rg.msgs.Record(ctx, sink.Decision{MsgID: 1, State: message.StateRouted, N: 1, Now: rg.t0,
		Index: []message.FlightDay{{FLID: "1", Day: routetest.Day("2021-01-23")}}}); err != nil || !ok {
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

// A message a replay reset is decided under a replay generation that every
// transition carries (docs/design.md#replay): the record's, where the replay
// put it on the topic, or, for a copy without one, the generation of the
// replay that reset the row; a re-routed message emits it again.
func TestRouterReplayGeneration(t *testing.T) {
	rg := newRig(t, nil)
	ctx := context.Background()
	sched := routetest.Dnld(1, routetest.Fltr("100", "23JAN210535", "<FLNO>CA100</FLNO>"))
	rg.consume(1, sched)
	if trs := rg.drainFlights(); len(trs) != 1 || trs[0].Replay != 0 || rg.row(1).ReplayGen != 0 {
		t.Fatalf("a new message: %+v, row gen %d", trs, rg.row(1).ReplayGen)
	}
	// resetAs leaves message id as a replay of generation gen does.
	resetAs := func(id, gen int64) {
		t.Helper()
		if _, err := rg.pool.Exec(ctx, `INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at, replay_gen)
			VALUES ($1, 'PENDING', $2, $2, $3)
			ON CONFLICT (msg_id) DO UPDATE SET state = 'PENDING', n_transitions = NULL, replay_gen = $3`, id, rg.t0, gen); err != nil {
			t.Fatal(err)
		}
	}
	consumeGen := func(id, gen int64, raw string) []*flight.Transition {
		t.Helper()
		rg.tt.Consume("msgx.inbox", strconv.FormatInt(id, 10), ingest.Record{MsgID: id, EnqueuedAt: rg.t0, Raw: raw, Replay: gen})
		return rg.drainFlights()
	}
	for _, tc := range []struct {
		name                   string
		id, resetGen, recGen   int64
		wantGen                int64
		thenDuplicateOfRecord0 bool
	}{
		{"the replayed record", 2, 7, 7, 7, true},
		{"an ingest duplicate read after the reset", 3, 9, 0, 9, false},
		{"an earlier replay's record read after a later reset", 4, 10, 8, 8, true},
	} {
		resetAs(tc.id, tc.resetGen)
		raw := flop(strconv.FormatInt(tc.id, 10), "100", "ESTT", "<ESTT>23JAN210600</ESTT>")
		trs := consumeGen(tc.id, tc.recGen, raw)
		if len(trs) != 1 || trs[0].Replay != tc.wantGen || trs[0].MsgID != tc.id {
			t.Fatalf("%s: transitions %+v, want generation %d", tc.name, trs, tc.wantGen)
		}
		if m := rg.row(tc.id); m.State != message.StateRouted || m.ReplayGen != tc.wantGen {
			t.Fatalf("%s: row %s gen %d", tc.name, m.State, m.ReplayGen)
		}
		if tc.thenDuplicateOfRecord0 {
			// Re-routed from a copy of another generation: identical.
			again := consumeGen(tc.id, 0, raw)
			if len(again) != 1 || !reflect.DeepEqual(again[0], trs[0]) {
				t.Fatalf("%s: re-routed %+v, want %+v", tc.name, again, trs[0])
			}
		}
	}
	// A decision made on a row a replay reset again meanwhile is not
	// recorded: the router decides the message again under the new
	// generation.
	resetAs(5, 11)
	d := sink.Decision{MsgID: 5, State: message.StateSkipped, Reason: "test", Now: rg.t0, LoadedGen: 0}
	if ok, err := rg.msgs.Record(ctx, d); err != nil || ok {
		t.Fatalf("a decision on a stale generation was recorded: %v %v", ok, err)
	}
	d.LoadedGen, d.ReplayGen = 11, 11
	if ok, err := rg.msgs.Record(ctx, d); err != nil || !ok || rg.row(5).ReplayGen != 11 {
		t.Fatalf("the decision on the current generation: %v %v", ok, err)
	}
}
