package bench

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"msgx/ingest"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// bigRow is the size of each row of the large-row backlog: 16 MB, just
// under what a MEDIUMTEXT column holds (16 MiB − 1) and what MariaDB's
// default max_allowed_packet (16 MiB) lets a statement or a result row
// carry.
const bigRow = 16_000_000

// BenchmarkLargeRowBacklogMemory ingests a backlog of 30 rows of 16 MB and
// prints the process's peak RSS while the bridge drains it: with msgx's
// default MSGX_CLAIM_MAX_BYTES (4 MiB: each poll reads one such row) and,
// for comparison, with the byte bound lifted, which is how every poll read
// rows before the bound existed (MSGX_CLAIM_BATCH whole rows). The rows
// exceed MSGX_KAFKA_MAX_MESSAGE_BYTES, so they travel as oversize markers:
// what is measured is what the bridge holds while reading.
//
// The peak is VmHWM of /proc/self/status, reset (clear_refs 5) after the
// backlog was inserted, so the inserts do not count. The benchmark fails
// when the bounded peak reaches 300 MB.
func BenchmarkLargeRowBacklogMemory(b *testing.B) {
	const rows = 30
	myDSN := testenv.NewMySQL(b)
	my := sinktest.OpenMySQL(b, myDSN)
	text := "<MSG>" + strings.Repeat("x", bigRow-11) + "</MSG>"
	for i := 0; i < rows; i++ {
		if _, err := my.Exec("INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, NOW(), 'VALID')", text); err != nil {
			b.Fatalf("inserting a %d-byte row (MariaDB max_allowed_packet must exceed it): %v", bigRow, err)
		}
	}
	text = ""
	for i := 0; i < b.N; i++ {
		for _, col := range both {
			b.Run(col.short(), func(b *testing.B) {
				bounded := drainPeak(b, my, rows, 0, col)
				unbounded := drainPeak(b, my, rows, 1<<40, col)
				b.Logf("30 rows of 16 MB on %s: peak RSS %.0f MB with MSGX_CLAIM_MAX_BYTES=%d (one row per poll); %.0f MB without the byte bound (%d rows per poll)",
					col, bounded, ingest.DefaultClaimMaxBytes, unbounded, rows)
				b.ReportMetric(bounded, "peak-RSS-MB")
				b.ReportMetric(unbounded, "unbounded-peak-RSS-MB")
				printRow("ingest memory, 30 inbox rows of 16 MB (`BenchmarkLargeRowBacklogMemory`)", col,
					fmt.Sprintf("peak RSS %.0f MB (%.0f MB without the byte bound)", bounded, unbounded))
				if bounded >= 300 {
					b.Errorf("peak RSS %.0f MB with the default byte bound, want below 300 MB", bounded)
				}
			})
		}
	}
}

// drainPeak runs a bridge with the given MSGX_CLAIM_MAX_BYTES (0: the
// default) over the inbox until it produced want rows, on a fresh cursor and
// on column col's Kafka (on kfake a fresh in-memory broker in this process,
// whose records — markers of a few hundred bytes, the rows being larger
// than MSGX_KAFKA_MAX_MESSAGE_BYTES — count in the figure), and returns the
// peak RSS in MB meanwhile.
func drainPeak(b *testing.B, my *sql.DB, want int, maxBytes int, col column) float64 {
	b.Helper()
	pgDSN := sinktest.NewPG(b)
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	var k *cluster
	var kc kafka.Config
	if col == kfake {
		k = &cluster{col: kfake, brokers: testenv.NewBroker(b), replication: 1}
		kc = testenv.KafkaConfig(k.brokers)
	} else {
		k, kc = inProcess(b, apache)
	}
	brokers := k.brokers
	cfg := ingest.Config{Topic: k.topic("msgx.inbox"), PollInterval: 500 * time.Millisecond, ClaimBatch: 1000,
		ClaimMaxBytes: maxBytes, MaxCommitDelay: 5 * time.Minute, HoleGrace: time.Second, HoleProbeTimeout: 2 * time.Second,
		Cutover: "min", LateWatch: 24 * time.Hour, LateCheckInterval: 30 * time.Second}
	if err := kafka.EnsureTopics(brokers, kc, []kafka.TopicSpec{cfg.TopicSpec()}, testenv.Logger(b)); err != nil {
		b.Fatal(err)
	}
	br, err := ingest.New(cfg, ingest.Deps{
		Inbox:   sinktest.Tables(b, my, nil, "cminmsgs", time.Minute),
		Cursors: sink.NewCursors(pool, 10*time.Second),
		PG:      sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second},
		Brokers: brokers, Kafka: kc, Clock: clock.Real{}, Log: testenv.Logger(b),
	})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- br.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Minute)
	for br.Stats().Produced < int64(want) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	peak := peakRSS(b)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if n := br.Stats().Produced; n < int64(want) {
		b.Fatalf("only %d of %d rows ingested", n, want)
	}
	return peak
}

// resetPeakRSS sets VmHWM back to the current RSS (Linux ≥ 4.0).
func resetPeakRSS(b *testing.B) {
	b.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// peakRSS returns VmHWM in MB.
func peakRSS(b *testing.B) float64 {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(fmt.Errorf("VmHWM %q: %w", rest, err))
			}
			return kb / 1000
		}
	}
	b.Skip("no VmHWM in /proc/self/status")
	return 0
}
