package flights

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/tables/flight"
	"msgx/tables/message"
)

// faults wraps the processor's callback for the codeshare tests. It can hold
// LINKs back on the loop topic (still in flight while other records are
// processed) and make one delivery lose its loop emits, as a crash between
// the table write and the emits does; the test then delivers the record
// again, as goka does after the crash.
type faults struct {
	mu   sync.Mutex
	hold bool
	held []*flight.Transition
	lose func(t *flight.Transition) bool
}

func (f *faults) graph(p *Processor) *goka.GroupGraph {
	return goka.DefineGroup(p.cfg.Group(),
		goka.Input(goka.Stream("msgx.flight-transitions"), kafka.JSON[flight.Transition]{}, f.wrap(p, false)),
		goka.Loop(kafka.JSON[flight.Transition]{}, f.wrap(p, true)),
		goka.Persist(kafka.JSON[flight.State]{}),
	)
}

func (f *faults) wrap(p *Processor, loop bool) goka.ProcessCallback {
	return func(ctx goka.Context, msg any) {
		t := msg.(*flight.Transition)
		f.mu.Lock()
		hold := loop && f.hold && t.Kind == flight.KindLink
		if hold {
			f.held = append(f.held, t)
		}
		lose := !hold && f.lose != nil && f.lose(t)
		if lose {
			f.lose = nil
		}
		f.mu.Unlock()
		switch {
		case hold:
		case lose:
			p.handle(lostEmits{ctx}, msg)
		default:
			p.handle(ctx, msg)
		}
	}
}

func (f *faults) loseNext(match func(t *flight.Transition) bool) {
	f.mu.Lock()
	f.lose = match
	f.mu.Unlock()
}

func (f *faults) holdLinks(v bool) []*flight.Transition {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold = v
	held := f.held
	f.held = nil
	return held
}

// lostEmits drops the callback's loop emits. (The alias names the embedded
// field, which would otherwise clash with goka.Context's Context method.)
type lostEmits struct{ gokaContext }

type gokaContext = goka.Context

func (lostEmits) Loopback(string, any, ...goka.ContextOption) {}

func (rg *rig) loop(t *flight.Transition) { rg.tt.Consume(Config{}.LoopTopic(), t.FLID, t) }

func (rg *rig) rows(flid string) int {
	rg.t.Helper()
	var n int
	if err := rg.pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM flight_schd WHERE flid = $1", flid).Scan(&n); err != nil {
		rg.t.Fatal(err)
	}
	return n
}

func (rg *rig) table(flid string) *flight.State {
	s, _ := rg.tt.TableValue(Config{}.Table(), flid).(*flight.State)
	return s
}

func schedule(msg int64, flid string, fields map[string]string) flight.Transition {
	return flight.Transition{MsgID: msg, Source: "SCHD-DNLD", Kind: flight.KindSchedule, FLID: flid, OperationDay: "2026-11-30", Fields: fields}
}

// TestCodeshareChildFirst: a shared flight that arrives before its master
// is in the master's first version. Until then the master's table entry is a
// placeholder that PostgreSQL, the read endpoints and the msg topic never
// see, and the child's message is complete with the child alone.
func TestCodeshareChildFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose bool
	}{
		{"in order", false},
		{"the child's LINK lost in a crash, re-derived on redelivery", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &faults{}
			rg := newRigWith(t, f.graph)
			rg.routed(1, 1)
			rg.routed(2, 1)
			child := schedule(1, "20", map[string]string{"FLNO": "CA20", "MAID": "10"})
			if tc.lose {
				f.loseNext(func(t *flight.Transition) bool { return t.FLID == "20" })
				rg.apply(child)
				if rg.table("10") != nil {
					t.Fatal("the LINK was not lost")
				}
				rg.apply(child) // delivered again after the crash
			} else {
				rg.apply(child)
			}
			if st := rg.state(1); st != message.StateSucceeded {
				t.Fatalf("message 1 is %s", st)
			}
			p := rg.table("10")
			if !p.IsPlaceholder() || !p.Links["20"].Live {
				t.Fatalf("master's table entry %+v", p)
			}
			if n := rg.rows("10"); n != 0 {
				t.Fatalf("the placeholder has %d flight_schd rows", n)
			}
			w := httptest.NewRecorder()
			(&Handler{Pool: rg.pool}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/flights/10", nil))
			if w.Code != http.StatusNotFound {
				t.Fatalf("GET /flights/10 while only a placeholder: %d %s", w.Code, w.Body)
			}
			for _, e := range rg.events_() {
				if e.FLID != "20" {
					t.Fatalf("event for %s before the master exists: %+v", e.FLID, e)
				}
			}

			rg.apply(schedule(2, "10", map[string]string{"FLNO": "MU10"}))
			if st := rg.state(2); st != message.StateSucceeded {
				t.Fatalf("message 2 is %s", st)
			}
			ev := rg.events_()
			want := []flight.MAFLEntry{{FLID: "20", FLNO: "CA20"}}
			if len(ev) != 1 || ev[0].FLID != "10" || ev[0].StateVersion != 1 || !slices.Equal(ev[0].Flight.MAFL, want) || !slices.Contains(ev[0].Changed, flight.ChangedMAFL) {
				t.Fatalf("master's creation events %+v", ev)
			}
			if v, st := rg.pgVersion("10"); v != 1 || st != flight.StateActive {
				t.Fatalf("master in PG v%d %s", v, st)
			}
			var listed int
			_ = rg.pool.QueryRow(context.Background(), `SELECT COUNT(*) FROM flight_schd WHERE flid = '10' AND doc->'mafl' = '[{"FLID":"20","FLNO":"CA20"}]'`).Scan(&listed)
			if listed != 1 {
				t.Fatal("the master's row does not list its shared flight")
			}
		})
	}
}

// TestCodeshareMasterDeletedWithLinkInFlight: master 10 has child 21 on
// record and child 22's LINK still on the loop topic when it is deleted.
// Both children end DELETED with a TOMBSTONE, also when a crash loses the
// cascade of the deletion or of the late LINK.
func TestCodeshareMasterDeletedWithLinkInFlight(t *testing.T) {
	isFDEL := func(t *flight.Transition) bool { return t.Kind == flight.KindDelete && t.FLID == "10" && !t.Cascade }
	isLate := func(t *flight.Transition) bool { return t.Kind == flight.KindLink && t.Link.Child == "22" }
	for _, tc := range []struct {
		name string
		lose func(t *flight.Transition) bool
	}{
		{"no crash", nil},
		{"the deletion's cascade lost in a crash", isFDEL},
		{"the late LINK's cascade lost in a crash", isLate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &faults{}
			rg := newRigWith(t, f.graph)
			for id := int64(1); id <= 4; id++ {
				rg.routed(id, 1)
			}
			rg.apply(schedule(1, "10", map[string]string{"FLNO": "MU10"}))
			rg.apply(schedule(2, "21", map[string]string{"FLNO": "CA21", "MAID": "10"}))
			f.holdLinks(true)
			rg.apply(schedule(3, "22", map[string]string{"FLNO": "CA22", "MAID": "10"}))
			held := f.holdLinks(false)
			if len(held) != 1 || !isLate(held[0]) {
				t.Fatalf("held %+v", held)
			}
			rg.events_()

			fdel := flight.Transition{MsgID: 4, Source: "FDEL", Kind: flight.KindDelete, FLID: "10"}
			if tc.lose != nil && tc.lose(&fdel) {
				f.loseNext(tc.lose)
				rg.apply(fdel)
				if _, st := rg.pgVersion("21"); st != flight.StateActive {
					t.Fatal("the cascade was not lost")
				}
			}
			rg.apply(fdel)
			if _, st := rg.pgVersion("21"); st != flight.StateDeleted || rg.state(4) != message.StateSucceeded {
				t.Fatalf("recorded child %s, message 4 %s", st, rg.state(4))
			}
			if _, st := rg.pgVersion("22"); st != flight.StateActive {
				t.Fatalf("child 22 is %s before its LINK arrived", st)
			}

			late := held[0]
			if tc.lose != nil && tc.lose(late) {
				f.loseNext(tc.lose)
				rg.loop(late)
				if _, st := rg.pgVersion("22"); st != flight.StateActive || !rg.table("10").Links["22"].Live {
					t.Fatal("the late LINK was not applied or its cascade not lost")
				}
			}
			rg.loop(late)
			if _, st := rg.pgVersion("22"); st != flight.StateDeleted {
				t.Fatalf("child 22 linked before the deletion is %s", st)
			}
			tombstones := map[string]bool{}
			for _, e := range rg.events_() {
				if e.EventType == flight.EventTombstone && e.Source == flight.SourceCascade && e.MsgID == 4 {
					tombstones[e.FLID] = true
				}
			}
			if !tombstones["21"] || !tombstones["22"] {
				t.Fatalf("cascade tombstones %v", tombstones)
			}
			if m := rg.table("10"); m.State != flight.StateDeleted || m.Links["21"].Live || m.Links["22"].Live {
				t.Fatalf("master %+v", m)
			}
			for id := int64(1); id <= 4; id++ {
				if st := rg.state(id); st != message.StateSucceeded {
					t.Fatalf("message %d is %s", id, st)
				}
			}
		})
	}
}

// TestCodeshareOverKafka plays both orders through the processor on the
// embedded Kafka, with the topics the daemon creates: a child whose LINK is
// processed before its master exists, and a master deleted in the same
// batch as its child's creation, before the child's LINK comes back on the
// loop topic.
func TestCodeshareOverKafka(t *testing.T) {
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: testenv.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rg := &rig{t: t, pool: pool, msgs: sink.NewMessages(pool, 10*time.Second), t0: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	brokers := testenv.NewBroker(t)
	kc := testenv.KafkaConfig(brokers)
	log := testenv.Logger(t)
	const input = "msgx.flight-transitions"
	cfg := Config{TransitionTopic: input, MsgTopic: "msgx.msg", ScheduleMissing: "keep", SchdTopic: "msgx.schd"}
	specs := append(cfg.TopicSpecs(1), kafka.TopicSpec{Name: input, Partitions: 1},
		kafka.TopicSpec{Name: string(cfg.Table()), Partitions: 1, Compact: true, MaxMessageBytes: kafka.TableRecordBytes})
	if err := kafka.EnsureTopics(brokers, kc, specs, log); err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, Deps{Pool: pool, Timeout: 10 * time.Second, Clock: clock.NewFake(rg.t0), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx, brokers, kafka.GokaOptions(kc, storage.MemoryBuilder(), log)...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("processor: %v", err)
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(ts ...flight.Transition) {
		t.Helper()
		for _, tr := range ts {
			tr.At = rg.t0
			v, err := kafka.JSON[flight.Transition]{}.Encode(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: input, Key: []byte(tr.FLID), Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	caughtUp := func() {
		testenv.WaitCaughtUp(t, brokers, string(cfg.Group()), []string{input, cfg.LoopTopic()}, time.Minute)
	}
	for id := int64(1); id <= 5; id++ {
		rg.routed(id, 1)
	}

	produce(schedule(1, "20", map[string]string{"FLNO": "CA20", "MAID": "10"}))
	caughtUp()
	if n := rg.rows("10"); n != 0 {
		t.Fatalf("the placeholder has %d flight_schd rows", n)
	}
	produce(schedule(2, "10", map[string]string{"FLNO": "MU10"}))
	produce(schedule(3, "30", map[string]string{"FLNO": "MU30"}), schedule(4, "31", map[string]string{"FLNO": "CA31", "MAID": "30"}),
		flight.Transition{MsgID: 5, Source: "FDEL", Kind: flight.KindDelete, FLID: "30"})
	caughtUp()
	for id := int64(1); id <= 5; id++ {
		if st := rg.state(id); st != message.StateSucceeded {
			t.Fatalf("message %d is %s", id, st)
		}
	}
	var listed int
	_ = pool.QueryRow(ctx, `SELECT COUNT(*) FROM flight_schd WHERE flid = '10' AND doc->'mafl' = '[{"FLID":"20","FLNO":"CA20"}]'`).Scan(&listed)
	if listed != 1 {
		t.Error("master 10 does not list its shared flight 20, which came first")
	}
	for flid, want := range map[string]string{"20": flight.StateActive, "30": flight.StateDeleted, "31": flight.StateDeleted} {
		if _, st := rg.pgVersion(flid); st != want {
			t.Errorf("flight %s is %s, want %s", flid, st, want)
		}
	}
	var tombstones int
	_ = pool.QueryRow(ctx, `SELECT COUNT(*) FROM event_outbox WHERE topic = 'msgx.msg' AND key = '31' AND convert_from(value, 'UTF8')::jsonb->>'eventType' = 'TOMBSTONE'`).Scan(&tombstones)
	if tombstones != 1 {
		t.Errorf("%d TOMBSTONE events for the cascaded child 31", tombstones)
	}
}
