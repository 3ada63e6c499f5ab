package refdata

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
	"msgx/tables/message"
	"msgx/tables/refdata"
)

// A category ref_master holds from older messages but the table does not
// halts the processor
// (the message stays ROUTED, ref_master keeps its records), and so does a
// transition Apply rejects; neither is committed.
func TestRefdataHalts(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	pool, msgs := routedPool(t, t0, 5, 6)
	if _, err := pool.Exec(ctx, `INSERT INTO ref_master (rtype, rkey, attributes, updated_at, last_msg_id, version)
		VALUES ('AIRL', 'CA', '{"ITOP":"CA"}', now(), 1, 1), ('AIRL', 'MU', '{"ITOP":"MU"}', now(), 1, 1)`); err != nil {
		t.Fatal(err)
	}
	run := func() (*Processor, func(refdata.Transition), func()) {
		// Kafka is kfake, in-process: this package tests its own logic against a
		// broker, one per test in milliseconds; the Kafka claims run on Apache
		// Kafka (cmd/msgx, emitters/event; docs/design.md#kafka-divergences).
		brokers := testenv.NewBroker(t)
		kc := testenv.KafkaConfig(brokers)
		log := testenv.Logger(t)
		const input = "msgx.refdata-transitions"
		if err := kafka.EnsureTopics(brokers, kc, []kafka.TopicSpec{{Name: input, Partitions: 1},
			{Name: string(goka.GroupTable(BaseGroup)), Partitions: 1, Compact: true, MaxMessageBytes: kafka.TableRecordBytes}}, log); err != nil {
			t.Fatal(err)
		}
		p, err := New(Config{TransitionTopic: input}, Deps{Pool: pool, Timeout: 10 * time.Second, Clock: clock.NewFake(t0), Log: log})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx, brokers, kafka.GokaOptions(kc, storage.MemoryBuilder(), log)...) }()
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		produce := func(tr refdata.Transition) {
			v, err := kafka.JSON[refdata.Transition]{}.Encode(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: input, Key: []byte(tr.RType), Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		return p, produce, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("processor: %v", err)
			}
		}
	}
	waitHalted := func(p *Processor) string {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if h := p.Stats().Halted; h != "" {
				return h
			}
		}
		t.Fatal("the processor did not halt")
		return ""
	}
	state := func(id int64) string {
		m, _, err := msgs.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return m.State
	}

	// A DNLD of AIRL with MU only, applied to an empty table, would keep
	// CA in ref_master and complete the message.
	p, produce, stop := run()
	produce(refdata.Transition{MsgID: 5, RType: "AIRL", STYP: refdata.STYPDNLD, At: t0, Records: []refdata.Record{{"ITOP": "MU"}}})
	if h := waitHalted(p); !strings.Contains(h, "divergence: category AIRL") {
		t.Fatalf("halt %q", h)
	}
	stop()
	var n int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM ref_master WHERE rtype = 'AIRL'`).Scan(&n)
	if st := state(5); st != message.StateRouted || n != 2 {
		t.Fatalf("message 5 %s, %d AIRL records; want ROUTED and 2", st, n)
	}

	p, produce, stop = run()
	defer stop()
	produce(refdata.Transition{MsgID: 6, RType: "ARPT", STYP: "BOGUS", At: t0})
	if h := waitHalted(p); !strings.Contains(h, "rejected") || !strings.Contains(h, "ARPT") {
		t.Fatalf("halt %q", h)
	}
	if st := state(6); st != message.StateRouted {
		t.Fatalf("message 6 is %s, want ROUTED", st)
	}
}
