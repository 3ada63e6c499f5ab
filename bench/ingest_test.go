package bench

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"msgx/ingest"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/sample"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
)

var seqnRE = regexp.MustCompile(`<SEQN>\s*\d+\s*</SEQN>`)

// loadBacklog inserts n SIS messages (the samples, cycled, each with its own
// SEQN) into the inbox.
func loadBacklog(b *testing.B, db *sql.DB, n int) {
	b.Helper()
	samples, err := sample.Load(sample.Dir())
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = seqnRE.ReplaceAllString(samples[i%len(samples)].XML, fmt.Sprintf("<SEQN>%d</SEQN>", i+1))
	}
	insertMessages(b, db, msgs)
}

// insertMessages inserts the messages into the inbox in order, with
// multi-row inserts.
func insertMessages(b *testing.B, db *sql.DB, msgs []string) {
	b.Helper()
	// At most 500 rows and 4 MB per statement: MariaDB refuses a packet
	// above max_allowed_packet (16 MB by default), and a million-message
	// day's schedule packages are large.
	const perStmt, maxBytes = 500, 4 << 20
	for done := 0; done < len(msgs); {
		end, size := done, 0
		for end < len(msgs) && end-done < perStmt && (end == done || size+len(msgs[end]) <= maxBytes) {
			size += len(msgs[end])
			end++
		}
		chunk := msgs[done:end]
		done = end
		var sb strings.Builder
		sb.WriteString("INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES ")
		args := make([]any, 0, len(chunk))
		for i, m := range chunk {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString("(?, NOW(), 'VALID')")
			args = append(args, m)
		}
		if _, err := db.Exec(sb.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
}

type ingestRig struct {
	cfg     ingest.Config
	deps    ingest.Deps
	brokers []string
}

// newIngestRig loads rows into a fresh inbox and readies a bridge of
// msgx.inbox on the Kafka of column col (its own persistent, synced
// embedded broker, as in production on the embedded Kafka, or Apache
// Kafka under a prefix of its own).
func newIngestRig(b *testing.B, rows int, col column) *ingestRig {
	b.Helper()
	pgDSN := sinktest.NewPG(b)
	myDSN := testenv.NewMySQL(b)
	my := sinktest.OpenMySQL(b, myDSN)
	loadBacklog(b, my, rows)
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	k, kc := inProcess(b, col)
	r := &ingestRig{brokers: k.brokers}
	r.cfg = ingest.Config{Topic: k.topic("msgx.inbox"), PollInterval: 500 * time.Millisecond, ClaimBatch: 1000,
		MaxCommitDelay: 5 * time.Minute, HoleGrace: time.Second, HoleProbeTimeout: 2 * time.Second, Cutover: "min",
		LateWatch: 24 * time.Hour, LateCheckInterval: 30 * time.Second}
	if err := kafka.EnsureTopics(r.brokers, kc, []kafka.TopicSpec{r.cfg.TopicSpec()}, testenv.Logger(b)); err != nil {
		b.Fatal(err)
	}
	r.deps = ingest.Deps{
		Inbox:   sinktest.Tables(b, my, nil, "cminmsgs", 30*time.Second),
		Cursors: sink.NewCursors(pool, 10*time.Second),
		PG:      sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second},
		Brokers: r.brokers, Kafka: kc, Clock: clock.Real{}, Log: testenv.Logger(b),
	}
	return r
}

// run ingests until the topic holds want records and returns the elapsed time.
func (r *ingestRig) run(b *testing.B, cfg ingest.Config, want int64, limit time.Duration) (int64, time.Duration) {
	b.Helper()
	br, err := ingest.New(cfg, r.deps)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- br.Run(ctx) }()
	var got int64
	for time.Since(start) < limit {
		if got = br.Stats().Produced; got >= want {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return got, elapsed
}

// BenchmarkIngest measures MySQL → msgx.inbox throughput over a backlog of
// 100k SIS messages (real MariaDB and PostgreSQL) on each column's Kafka
// (a persistent, synced embedded broker in the benchmark's process; Apache
// Kafka): msgx's defaults (claim-batch 1000, next poll at once while
// behind) and claim-batch 50 back to back, beside the original design's
// defaults (claim-batch 50 with one poll per second: at most 50 rows/s
// whatever a poll costs).
func BenchmarkIngest(b *testing.B) {
	const rows = 100_000
	for _, col := range both {
		b.Run(col.short(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ingestRates(b, rows, col)
			}
		})
	}
}

func ingestRates(b *testing.B, rows int, col column) {
	rates := map[int]float64{}
	for _, batch := range []int{1000, 50} {
		r := newIngestRig(b, rows, col)
		cfg := r.cfg
		cfg.ClaimBatch = batch
		n, elapsed := r.run(b, cfg, int64(rows), 20*time.Minute)
		if n < int64(rows) {
			b.Fatalf("only %d of %d rows ingested in %v", n, rows, elapsed)
		}
		if got := testenv.EndOffset(b, r.brokers, cfg.Topic); got < int64(rows) {
			b.Fatalf("topic has %d records", got)
		}
		rates[batch] = float64(n) / elapsed.Seconds()
		pollMS := elapsed.Seconds() * 1000 / float64(rows/batch)
		b.Logf("claim-batch %4d, next poll at once while behind: %d rows in %v = %.0f rows/s (%.2f ms per poll)",
			batch, n, elapsed.Round(time.Millisecond), rates[batch], pollMS)
		if batch == 50 {
			seeds := 50 / max(1, pollMS/1000)
			b.Logf("seeds' defaults (claim-batch 50, one poll every 1 s): %.0f rows/s; msgx defaults: %.0f rows/s (%.0fx)",
				seeds, rates[1000], rates[1000]/seeds)
			b.ReportMetric(seeds, "seed-rows/s")
		}
	}
	b.ReportMetric(rates[1000], "rows/s")
	b.ReportMetric(rates[50], "batch50-rows/s")
	printRow("ingest, 100,000-row backlog, MySQL → `msgx.inbox` (`BenchmarkIngest`)", col,
		fmt.Sprintf("%s rows/s (claim-batch 50 back to back: %s rows/s)", thousands(int(rates[1000])), thousands(int(rates[50]))))
}
