package refdata

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"msgx/internal/clock"
	"msgx/internal/sample"
	"msgx/internal/testenv"
	"msgx/processors/router"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/message"
	"msgx/tables/refdata"
	"msgx/tables/route"
)

// TestEverySampleReferenceFile routes every reference-data sample with the
// real router decisions and applies the transitions with this processor
// (under goka's tester) against a real PostgreSQL: each message completes,
// and ref_master always equals the table's state.
func TestEverySampleReferenceFile(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	pool, msgs := routedPool(t, t0)
	_, tt := testerProcessor(t, pool, t0)
	ctx := context.Background()

	samples, err := sample.Load(sample.Dir())
	if err != nil {
		t.Fatal(err)
	}
	rcfg := router.Config{IgnoreRules: "LDM-*,EROR-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}
	set := rcfg.Settings(testenv.Shanghai)
	applied := map[string]bool{}
	var id int64
	for _, s := range samples {
		id++
		plan := route.Prepare(id, s.XML, set)
		v := route.Decide(plan, message.Lookups{}, t0)
		if len(v.Refdata) == 0 {
			continue
		}
		if _, err := msgs.Touch(ctx, id, nil, t0, t0); err != nil {
			t.Fatal(err)
		}
		if ok, err := msgs.Record(ctx, sink.Decision{MsgID: id, State: v.State, N: v.N(), Now: t0}); err != nil || !ok {
			t.Fatalf("%s: record %v %v", s.Name(), ok, err)
		}
		tr := v.Refdata[0]
		tt.Consume("msgx.refdata-transitions", tr.RType, tr)
		if m, _, _ := msgs.Get(ctx, id); m.State != message.StateSucceeded {
			t.Fatalf("%s: message %s after its transition", s.Name(), m.State)
		}
		st, _ := tt.TableValue(Config{}.Table(), tr.RType).(*refdata.State)
		if st == nil {
			t.Fatalf("%s: no table value for %s", s.Name(), tr.RType)
		}
		var want []string
		for k := range st.Records {
			want = append(want, k)
		}
		sort.Strings(want)
		rows, err := sink.RefRecords(ctx, pool, 10*time.Second, tr.RType, t0, testenv.Shanghai)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.RKey)
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: ref_master keys %v, table keys %v", s.Name(), got, want)
		}
		applied[tr.RType] = true
	}
	for _, rt := range []string{"AIRC", "AIRL", "ARPT", "BLST", "CHLT", "CLST", "COUL", "FLTL", "GLST", "ORGN", "REGN", "SLST", "TLST", "ABDG", "CITY", "SCHS"} {
		if !applied[rt] {
			t.Errorf("no sample of %s was applied", rt)
		}
	}
	// AIRL: DNLD (UA, AA, CX), ADD (AB, ZZ), DEL (ZZ).
	rows, _ := sink.RefRecords(ctx, pool, 10*time.Second, "AIRL", t0, testenv.Shanghai)
	var keys []string
	for _, r := range rows {
		keys = append(keys, r.RKey)
	}
	if strings.Join(keys, ",") != "AA,AB,CX,UA" {
		t.Fatalf("AIRL keys %v", keys)
	}
	// SCHS: the DNLD and the RESP name the same season, Winter; the RESP
	// replaced it (its first FLTR starts on 14NOV20, the DNLD's on 14NOV21).
	season, ok, err := sink.RefRecord(ctx, pool, 10*time.Second, "SCHS", "Winter", t0, testenv.Shanghai)
	if err != nil || !ok {
		t.Fatalf("season Winter: %v %v", ok, err)
	}
	if !strings.Contains(string(season.Attributes), `"STDT": "14NOV20"`) || strings.Contains(string(season.Attributes), `"14NOV21"`) {
		t.Fatalf("season Winter = %s", season.Attributes)
	}
}

// New names what is missing: a nil collaborator is an error, not a panic.
func TestNewRefusesIncompleteDeps(t *testing.T) {
	_, err := New(Config{TransitionTopic: "msgx.refdata-transitions"}, Deps{})
	for _, want := range []string{"no PostgreSQL pool", "MSGX_DB_TIMEOUT", "no clock", "no logger"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with empty deps: %v, want it to name %q", err, want)
		}
	}
	if _, err := New(Config{}, Deps{}); err == nil || !strings.Contains(err.Error(), "MSGX_TOPIC_REFDATA_TRANSITIONS") {
		t.Errorf("New without an input topic: %v", err)
	}
}

// routedPool is a fresh PostgreSQL with the messages ids recorded ROUTED
// with one transition each, as the router leaves them.
func routedPool(t *testing.T, t0 time.Time, ids ...int64) (*pgxpool.Pool, *sink.Messages) {
	t.Helper()
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	msgs := sink.NewMessages(pool, 10*time.Second)
	for _, id := range ids {
		if _, err := msgs.Touch(ctx, id, nil, t0, t0); err != nil {
			t.Fatal(err)
		}
		if ok, err := msgs.Record(ctx, sink.Decision{MsgID: id, State: message.StateRouted, N: 1, Now: t0}); err != nil || !ok {
			t.Fatalf("record %d: %v %v", id, ok, err)
		}
	}
	return pool, msgs
}

// testerProcessor runs the processor on pool under goka's tester until the
// test ends.
func testerProcessor(t *testing.T, pool *pgxpool.Pool, t0 time.Time) (*Processor, *tester.Tester) {
	t.Helper()
	tt := tester.New(t)
	p, err := New(Config{TransitionTopic: "msgx.refdata-transitions"}, Deps{Pool: pool, Timeout: 10 * time.Second, Clock: clock.NewFake(t0), Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	gp, err := p.Processor(nil, goka.WithTester(tt))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.RunProcessor(ctx, gp) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, tt
}
