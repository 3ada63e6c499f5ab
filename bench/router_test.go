package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/ingest"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/processors/router"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// BenchmarkRouter measures the router alone: a backlog of
// MSGX_BENCH_MESSAGES (50,000) messages of the realistic mix already on
// msgx.inbox, real PostgreSQL, until every message is decided; on each
// column's Kafka (a persistent, synced embedded broker in the benchmark's
// process; Apache Kafka).
func BenchmarkRouter(b *testing.B) {
	msgs := realisticDay(5, benchMessages(b))
	for _, col := range both {
		b.Run(col.short(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				routerAlone(b, msgs, col)
			}
		})
	}
}

func routerAlone(b *testing.B, msgs []string, col column) {
	dsn := sinktest.NewPG(b)
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: dsn, Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		b.Fatal(err)
	}
	k, kc := inProcess(b, col)
	brokers := k.brokers
	inbox := k.topic("msgx.inbox")
	cfg := router.Config{InboxTopic: inbox, FlightTopic: k.topic("msgx.flight-transitions"), RefdataTopic: k.topic("msgx.refdata-transitions"),
		KafkaPrefix: k.prefix, Partitions: 1, MaxAttempts: 5,
		Backoff: "1s,2s,4s,8s", BackoffCap: time.Minute, IgnoreRules: "LDM-*,EROR-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}
	if err := kafka.EnsureTopics(brokers, kc, append(cfg.TopicSpecs(), kafka.TopicSpec{Name: inbox, Partitions: 1}, cfg.TableSpec()), testenv.Logger(b)); err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	var recs []*kgo.Record
	for j, m := range msgs {
		v, _ := json.Marshal(ingest.Record{MsgID: int64(j + 1), EnqueuedAt: time.Now(), Raw: m})
		recs = append(recs, &kgo.Record{Topic: inbox, Key: []byte(strconv.Itoa(j + 1)), Value: v})
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
	pb, err := kafka.ProducerBuilder(kc)
	if err != nil {
		b.Fatal(err)
	}
	before := xactCommitsSettled(b, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() {
		done <- rt.Run(ctx, brokers, pb, kafka.GokaOptions(kc, storage.MemoryBuilder(), testenv.Logger(b))...)
	}()
	polls := 0
	var first time.Duration // until the first batch was decided: the processor's start-up
	for {
		var n int
		polls++
		_ = pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM proc_state WHERE state NOT IN ('PENDING','FAILED')").Scan(&n)
		if n >= len(msgs) {
			break
		}
		if n > 0 && first == 0 {
			first = time.Since(start)
		}
		// Each reading scans proc_state: read seldom, not to slow the
		// router, but often until it has started.
		if first == 0 {
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(500 * time.Millisecond)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-done
	pool.Close()
	// Each poll above is one transaction of its own.
	commits := float64(xactCommitsSettled(b, dsn)-before-int64(polls)) / float64(len(msgs))
	b.ReportMetric(float64(len(msgs))/elapsed.Seconds(), "msg/s")
	b.ReportMetric(commits, "commits/msg")
	st := rt.Stats()
	b.Logf("router: %d messages decided in %v = %.0f msg/s, %.3f PostgreSQL commits per message, %d batches of %.0f on average",
		len(msgs), elapsed.Round(time.Millisecond), float64(len(msgs))/elapsed.Seconds(), commits, st.Batches, float64(st.Batched)/float64(max(st.Batches, 1)))
	// The rate once it runs: the start-up (joining the consumer group,
	// recovering the table) is not deciding.
	steady := float64(len(msgs)) / max(elapsed-first, time.Millisecond).Seconds()
	b.ReportMetric(steady, "msg/s-after-start-up")
	b.Logf("router: first batch decided %v after the start; %.0f msg/s from then on", first.Round(time.Millisecond), steady)
	b.Logf("load average at the end: %s", loadAverage())
	printRow(fmt.Sprintf("router alone, %s messages already on `msgx.inbox` (`BenchmarkRouter`)", thousands(len(msgs))), col,
		fmt.Sprintf("%s decisions/s from its start (%s/s after its %v start-up), %.3f PostgreSQL commits per message",
			thousands(int(float64(len(msgs))/elapsed.Seconds())), thousands(int(steady)), first.Round(100*time.Millisecond), commits))
}

// xactCommitsSettled is the number of transactions committed in the database of
// dsn (pg_stat_database.xact_commit), read from another database so that the
// reading is not counted. A backend reports its counts when it ends or has
// been idle for a second, so the figure is read until it settles.
func xactCommitsSettled(b *testing.B, dsn string) int64 {
	b.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	db := cfg.Database
	cfg.Database = "postgres"
	last := int64(-1)
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		err = conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", db).Scan(&n)
		conn.Close(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n == last {
			return n
		}
		last = n
		time.Sleep(1200 * time.Millisecond)
	}
}
