package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/ingest"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/processors/router"
	"msgx/sink"
)

// BenchmarkRouter measures the router alone: a backlog of
// MSGX_BENCH_MESSAGES (50,000) messages of the realistic mix already on
// msgx.inbox (persistent, synced embedded Kafka), real PostgreSQL, until
// every message is decided.
func BenchmarkRouter(b *testing.B) {
	msgs := realisticDay(5, benchMessages(b))
	for i := 0; i < b.N; i++ {
		pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: testenv.NewPG(b), Timeout: 10 * time.Second, PGMaxConns: 4})
		if err != nil {
			b.Fatal(err)
		}
		broker, err := kafka.StartBroker("127.0.0.1:0", b.TempDir(), testenv.Logger(b))
		if err != nil {
			b.Fatal(err)
		}
		brokers := broker.Addrs()
		kc := testenv.KafkaConfig(brokers)
		cfg := router.Config{InboxTopic: "msgx.inbox", FlightTopic: "msgx.flight-transitions", RefdataTopic: "msgx.refdata-transitions", Partitions: 1, MaxAttempts: 5,
			Backoff: "1s,2s,4s,8s", BackoffCap: time.Minute, IgnoreRules: "LDM-*,EROR-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}
		if err := kafka.EnsureTopics(brokers, kc, append(cfg.TopicSpecs(), kafka.TopicSpec{Name: "msgx.inbox", Partitions: 1}), testenv.Logger(b)); err != nil {
			b.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			b.Fatal(err)
		}
		var recs []*kgo.Record
		for j, m := range msgs {
			v, _ := json.Marshal(ingest.Record{MsgID: int64(j + 1), EnqueuedAt: time.Now(), Raw: m})
			recs = append(recs, &kgo.Record{Topic: "msgx.inbox", Key: []byte(strconv.Itoa(j + 1)), Value: v})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		cl.Close()
		rt, err := router.New(cfg, router.Deps{Messages: sink.NewMessages(pool, 10*time.Second), Clock: clock.Real{},
			Log: quietLogger(), Loc: testenv.Shanghai})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.ResetTimer()
		start := time.Now()
		go func() {
			done <- rt.Run(ctx, brokers, kafka.GokaOptions(kc, storage.MemoryBuilder(), testenv.Logger(b))...)
		}()
		for {
			var n int
			_ = pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM proc_state WHERE state NOT IN ('PENDING','FAILED')").Scan(&n)
			if n >= len(msgs) {
				break
			}
			// Each reading scans proc_state: read seldom, not to slow the router.
			time.Sleep(500 * time.Millisecond)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		cancel()
		<-done
		broker.Close()
		pool.Close()
		b.ReportMetric(float64(len(msgs))/elapsed.Seconds(), "msg/s")
		b.Logf("router: %d messages decided in %v = %.0f msg/s", len(msgs), elapsed.Round(time.Millisecond), float64(len(msgs))/elapsed.Seconds())
		b.Logf("load average at the end: %s", loadAverage())
		printRow(fmt.Sprintf("router alone, %s messages already on `msgx.inbox` (`BenchmarkRouter`)", thousands(len(msgs))),
			fmt.Sprintf("%.0f decisions/s", float64(len(msgs))/elapsed.Seconds()))
	}
}
