package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/testenv"
	"msgx/internal/workload"
	"msgx/sink/sinktest"
)

// latencyDuration is how long the steady load of BenchmarkLatency lasts:
// MSGX_BENCH_LATENCY, 30s by default.
func latencyDuration(b *testing.B) time.Duration {
	b.Helper()
	v := os.Getenv("MSGX_BENCH_LATENCY")
	if v == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		b.Fatalf("MSGX_BENCH_LATENCY=%q: want a duration ≥ 1s", v)
	}
	return d
}

// latencyDurationOf is MSGX_BENCH_LATENCY for a row's label (latencyDuration
// has checked it).
func latencyDurationOf() time.Duration {
	d, err := time.ParseDuration(os.Getenv("MSGX_BENCH_LATENCY"))
	if err != nil {
		return 30 * time.Second
	}
	return d
}

// eventSeen is what the consumer of BenchmarkLatency saw of one message's
// msg events: when the last of them arrived and its record timestamp.
type eventSeen struct {
	received, stamped time.Time
}

// BenchmarkLatency measures what a consumer of the msg topic waits for at a
// steady 100 msg/s: `msgx run` (real PostgreSQL and MariaDB) first
// processes a schedule of 1,000 flights, then the benchmark inserts
// operations of the realistic mix one row at a time, one every 10 ms, for
// MSGX_BENCH_LATENCY (30s). A message's latency runs from the moment its
// INSERT committed (autocommit: when Exec returned) to the moment a
// consumer reading msgx.msg received the last event of that message (a
// message may change several flights). Messages without an event
// (duplicates, ignored, malformed, changes that change nothing) do not
// count. It prints p50, p99 and the maximum, and logs the same from the
// events' record timestamps (set when the publisher produced them). The
// consumer reads with isolation.level=read_committed, as the operations
// manual tells downstream to (docs/operations.md#consuming-msgxmsg-and-msgxschd):
// an event counts once its transaction
// committed. It runs with the exactly-once publisher (the default) on both
// columns' Kafka, and with MSGX_EXACTLY_ONCE=false on kfake;
// MSGX_BENCH_RUNS times each, the rows printing the medians.
func BenchmarkLatency(b *testing.B) {
	for _, m := range publishModes {
		b.Run(m.name, func(b *testing.B) {
			results := map[column][]latencies{}
		runs:
			for i := 1; i <= benchRuns(b); i++ {
				for _, col := range m.columns() {
					var l latencies
					if !b.Run(fmt.Sprintf("%s-%d", col.short(), i), func(b *testing.B) { l = latency(b, m, newCluster(b, col)) }) {
						break runs
					}
					results[col] = append(results[col], l)
				}
			}
			for _, col := range m.columns() {
				printLatency(m, col, results[col])
			}
		})
	}
}

// latencies are one run's percentiles of BenchmarkLatency.
type latencies struct {
	p50, p99, max time.Duration
}

const latencyRate = 100 // messages per second

func printLatency(m publishMode, col column, runs []latencies) {
	if len(runs) == 0 {
		return
	}
	pick := func(f func(latencies) time.Duration) []float64 {
		xs := make([]float64, len(runs))
		for i, l := range runs {
			xs[i] = float64(f(l))
		}
		return xs
	}
	msf := func(x float64) string { return ms(time.Duration(x)) }
	printRow(fmt.Sprintf("latency at a steady %d msg/s, inbox commit → msg event received by a read_committed consumer (`BenchmarkLatency`, %s, %v)",
		latencyRate, m.name, latencyDurationOf()),
		col, fmt.Sprintf("p50 %s, p99 %s, max %s", medianFigure(pick(func(l latencies) time.Duration { return l.p50 }), msf),
			medianFigure(pick(func(l latencies) time.Duration { return l.p99 }), msf), medianFigure(pick(func(l latencies) time.Duration { return l.max }), msf)))
}

func latency(b *testing.B, m publishMode, k *cluster) latencies {
	steady := latencyDuration(b)
	ops := int(steady.Seconds() * latencyRate)
	day := workload.Day(workload.Options{Seed: 17, Flights: 1000, Ops: ops, SharedEvery: 20})
	schedule, stream := day[:10], day[10:] // 1,000 flights in packages of 100
	bin := msgxBinary(b)
	myDSN := testenv.NewMySQL(b)
	pgDSN := sinktest.NewPG(b)
	my := sinktest.OpenMySQL(b, myDSN)
	p := startMsgx(b, bin, msgxEnv(pgDSN, myDSN, b.TempDir(), k, m.env), "run")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, err := pgx.Connect(ctx, pgDSN)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	waitDrained := func(n int) {
		b.Helper()
		deadline := time.Now().Add(5 * time.Minute)
		var pr progress
		for {
			pr = readProgress(b, conn, pr)
			if pr.terminal >= n && pr.outbox == 0 {
				return
			}
			if p.exited() || time.Now().After(deadline) {
				b.Fatalf("%d of %d messages terminal, %d events unpublished (msgx exited: %v)", pr.terminal, n, pr.outbox, p.exited())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The consumer reads msgx.msg from its start (kgo waits for the
	// topic that msgx creates at start-up).
	msgTopic := k.topic("msgx.msg")
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.ConsumeTopics(msgTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// The transactions' markers too, so that the offset read
		// reaches the end offset (waitConsumed).
		kgo.KeepControlRecords())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	seen := map[int64]eventSeen{}
	var consumed int64 // offset after the last record read
	go func() {
		for {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			if ctx.Err() != nil {
				return
			}
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				consumed = r.Offset + 1
				if r.Attrs.IsControl() {
					return
				}
				var e struct {
					MsgID int64 `json:"msgId"`
				}
				if json.Unmarshal(r.Value, &e) == nil && e.MsgID > 0 {
					seen[e.MsgID] = eventSeen{received: now, stamped: r.Timestamp}
				}
			})
			mu.Unlock()
		}
	}()

	insertMessages(b, my, schedule)
	waitDrained(len(schedule))
	// The consumer has read the schedule's events before the stream
	// starts: its start-up is not the pipeline's latency.
	waitConsumed := func() {
		b.Helper()
		end, err := endOffset(ctx, k.brokers, msgTopic)
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			mu.Lock()
			c := consumed
			mu.Unlock()
			if c >= end {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("the consumer read %d of %d msg events", c, end)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitConsumed()

	committed := make(map[int64]time.Time, len(stream))
	start := time.Now()
	for j, msg := range stream {
		time.Sleep(time.Until(start.Add(time.Duration(j) * time.Second / latencyRate)))
		id := testenv.InsertInbox(b, my, msg)
		committed[id] = time.Now()
	}
	offered := time.Since(start)
	waitDrained(len(day))
	waitConsumed()
	cancel()

	var recv, stamp []time.Duration
	mu.Lock()
	for id, at := range committed {
		if s, ok := seen[id]; ok {
			recv = append(recv, s.received.Sub(at))
			stamp = append(stamp, s.stamped.Sub(at))
		}
	}
	mu.Unlock()
	if len(recv) < len(stream)/2 {
		b.Fatalf("only %d of %d messages had a msg event", len(recv), len(stream))
	}
	sortDurations(recv)
	sortDurations(stamp)
	l := latencies{p50: percentile(recv, 50), p99: percentile(recv, 99), max: recv[len(recv)-1]}
	b.ReportMetric(float64(l.p50)/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(l.p99)/float64(time.Millisecond), "p99-ms")
	b.ReportMetric(float64(l.max)/float64(time.Millisecond), "max-ms")
	b.Logf("%d messages in %v (%.0f msg/s offered) on %s, %d with a msg event", len(stream), offered.Round(time.Millisecond),
		float64(len(stream))/offered.Seconds(), k.col, len(recv))
	b.Logf("inbox commit → msg event received: p50 %v, p99 %v, max %v", ms(l.p50), ms(l.p99), ms(l.max))
	b.Logf("inbox commit → msg event record timestamp: p50 %v, p99 %v, max %v",
		ms(percentile(stamp, 50)), ms(percentile(stamp, 99)), ms(stamp[len(stamp)-1]))
	b.Logf("load average at the end: %s", loadAverage())
	return l
}
