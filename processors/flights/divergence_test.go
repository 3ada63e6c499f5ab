package flights

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
	"msgx/tables/message"
)

// kafkaRig runs the processor on the embedded Kafka with the daemon's topics.
type kafkaRig struct {
	*rig
	p       *Processor
	brokers []string
	cl      *kgo.Client
	stop    func() error
}

func newKafkaRig(t *testing.T) *kafkaRig {
	t.Helper()
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rg := &rig{t: t, pool: pool, msgs: sink.NewMessages(pool, 10*time.Second), t0: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	// Kafka is kfake, in-process: this package tests its own logic against a
	// broker, one per test in milliseconds; the Kafka claims run on Apache
	// Kafka (cmd/msgx, emitters/event; docs/design.md#kafka-divergences).
	brokers := testenv.NewBroker(t)
	kc := testenv.KafkaConfig(brokers)
	log := testenv.Logger(t)
	const input = "msgx.flight-transitions"
	cfg := Config{TransitionTopic: input, MsgTopic: "msgx.msg", ScheduleMissing: "keep", SchdTopic: "msgx.schd"}
	specs := append(cfg.TopicSpecs(1), kafka.TopicSpec{Name: input, Partitions: 1},
		kafka.TopicSpec{Name: string(goka.GroupTable(BaseGroup)), Partitions: 1, Compact: true, MaxMessageBytes: kafka.TableRecordBytes})
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
	stopped := false
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &kafkaRig{rig: rg, p: p, brokers: brokers, cl: cl, stop: stop}
}

func (k *kafkaRig) produce(tr flight.Transition) {
	k.t.Helper()
	tr.At = k.t0
	v, err := kafka.JSON[flight.Transition]{}.Encode(tr)
	if err != nil {
		k.t.Fatal(err)
	}
	if err := k.cl.ProduceSync(context.Background(), &kgo.Record{Topic: "msgx.flight-transitions", Key: []byte(tr.FLID), Value: v}).FirstErr(); err != nil {
		k.t.Fatal(err)
	}
}

// waitHalted waits (on the real clock: the processor runs on Kafka) until
// the processor reports a halt, and returns its reason.
func (k *kafkaRig) waitHalted() string {
	k.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if h := k.p.Stats().Halted; h != "" {
			return h
		}
		time.Sleep(50 * time.Millisecond)
	}
	k.t.Fatal("the processor did not halt")
	return ""
}

// A flight PostgreSQL knows but the table does not (the failover
// onto an empty Kafka): the FLOP is not applied, its message stays ROUTED,
// the processor halts naming the flight, and the transition is not
// committed, so it comes back after a restart.
func TestDivergenceHaltsInsteadOfNoMatch(t *testing.T) {
	k := newKafkaRig(t)
	ctx := context.Background()
	known := &flight.State{FLID: "1001", OperationDay: "2026-11-30", State: flight.StateActive, StateVersion: 3, LastMsgID: 4,
		UpdatedAt: k.t0, Fields: map[string]string{"FLNO": "MU5101", "ESTT": "30NOV260800"}}
	err := func() error {
		tx, err := k.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := sink.WriteFlight(ctx, tx, known); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}()
	if err != nil {
		t.Fatal(err)
	}
	k.routed(5, 1)
	k.produce(flight.Transition{MsgID: 5, Source: "FLOP-ESTT", Kind: flight.KindFLOP, STYP: "ESTT", FLID: "1001",
		Fields: map[string]string{"ESTT": "30NOV260930"}})
	reason := k.waitHalted()
	if !strings.Contains(reason, "1001") || !strings.Contains(reason, "divergence") || !strings.Contains(reason, "flight_schd") {
		t.Fatalf("halt reason %q does not name the flight and the cause", reason)
	}
	if st := k.state(5); st != message.StateRouted {
		t.Fatalf("message 5 is %s, want ROUTED (not applied)", st)
	}
	if v, _ := k.pgVersion("1001"); v != 3 {
		t.Fatalf("flight 1001 is at version %d, want 3 (unchanged)", v)
	}
	if s := k.p.Stats(); s.Diverged != 1 || s.Applied != 0 {
		t.Fatalf("stats %+v", s)
	}
	if err := k.stop(); err != nil {
		t.Fatalf("processor stopped with %v", err)
	}
	if h := k.p.Stats().Halted; h != "" {
		t.Fatalf("halt still reported after stop: %q", h)
	}
	// Not committed: the group has its transition still to read.
	lags, err := kafka.Lags(ctx, testenv.KafkaConfig(k.brokers), k.brokers, []kafka.Group{{Group: BaseGroup, Topics: []string{"msgx.flight-transitions"}}})
	if err != nil || len(lags) != 1 || lags[0].Lag != 1 {
		t.Fatalf("lags %+v %v: the halted transition must stay uncommitted", lags, err)
	}
}

// The router's index knowing the flight from an older message is a
// divergence too; a new flight's own creation (indexed by this very
// message) is not.
func TestDivergenceByRouterIndex(t *testing.T) {
	k := newKafkaRig(t)
	ctx := context.Background()
	if _, err := k.pool.Exec(ctx, `INSERT INTO flight_index (flid, operation_day, first_msg_id, created_at)
		VALUES ('2001', '2026-11-30', 1, now()), ('2002', '2026-11-30', 6, now())`); err != nil {
		t.Fatal(err)
	}
	k.routed(6, 1)
	k.routed(7, 1)
	k.produce(schedule(6, "2002", map[string]string{"FLNO": "CA2002"}))
	testenv.WaitCaughtUp(t, k.brokers, BaseGroup, []string{"msgx.flight-transitions"}, time.Minute)
	if st := k.state(6); st != message.StateSucceeded {
		t.Fatalf("new flight's message 6 is %s", st)
	}
	k.produce(flight.Transition{MsgID: 7, Source: "FDEL", Kind: flight.KindDelete, FLID: "2001"})
	if reason := k.waitHalted(); !strings.Contains(reason, "2001") || !strings.Contains(reason, "flight_index") {
		t.Fatalf("halt reason %q", reason)
	}
	if st := k.state(7); st != message.StateRouted {
		t.Fatalf("message 7 is %s, want ROUTED", st)
	}
}

// A transition Apply rejects halts the processor: it is never counted as
// consumed, so its message never ends SUCCEEDED without its effect.
func TestRejectedTransitionHalts(t *testing.T) {
	k := newKafkaRig(t)
	k.routed(8, 1)
	k.produce(flight.Transition{MsgID: 8, Source: "FLOP-XXXX", Kind: flight.KindFLOP, STYP: "XXXX", FLID: "3001"})
	if reason := k.waitHalted(); !strings.Contains(reason, "rejected") || !strings.Contains(reason, "3001") {
		t.Fatalf("halt reason %q", reason)
	}
	if st := k.state(8); st != message.StateRouted {
		t.Fatalf("message 8 is %s, want ROUTED", st)
	}
	if s := k.p.Stats(); s.Rejected != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A crash between the PostgreSQL commit and the table write's
// acknowledgement delivers the creating transition again to a table without
// the flight, while PostgreSQL holds what it wrote: that is the normal crash
// recovery (applied again, idempotent), not a divergence.
func TestRedeliveryAfterCrashIsNoDivergence(t *testing.T) {
	k := newKafkaRig(t)
	ctx := context.Background()
	tr := schedule(6, "4001", map[string]string{"FLNO": "MU4001"})
	tr.At = k.t0
	written, err := flight.Apply(nil, tr, flight.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := k.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.WriteFlight(ctx, tx, written.State); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO flight_index (flid, operation_day, first_msg_id, created_at) VALUES ('4001', NULL, 6, now())`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	k.routed(6, 1)
	k.produce(tr)
	testenv.WaitCaughtUp(t, k.brokers, BaseGroup, []string{"msgx.flight-transitions"}, time.Minute)
	if h := k.p.Stats().Halted; h != "" {
		t.Fatalf("halted on a redelivery: %s", h)
	}
	if st := k.state(6); st != message.StateSucceeded {
		t.Fatalf("message 6 is %s", st)
	}
	if v, _ := k.pgVersion("4001"); v != 1 {
		t.Fatalf("flight 4001 at v%d, want 1", v)
	}
	// The version is committed already (its event may be published): the
	// publisher looks it up before producing it again.
	if got := rechecks(t, k.pool); got != "4001 v1 recheck" {
		t.Fatalf("outbox %s", got)
	}
}
