package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/internal/testenv"
)

var rebuildDoneRE = regexp.MustCompile(`rebuild: done, (\d+) messages in (\S+);`)

// BenchmarkRebuild times `msgx rebuild --yes` over an inbox topic of
// MSGX_BENCH_REBUILD_MESSAGES messages of the realistic mix (twice
// MSGX_BENCH_MESSAGES, 100,000, by default; 1000000 for the million-message
// figure of docs/benchmarks.md), and prints its peak RSS and its CPU per
// message beside PostgreSQL's.
//
// The topic is filled the way production fills it, but without processing:
// `msgx broker` (the embedded Kafka, persistent) and `msgx ingest` read the
// backlog from MariaDB into msgx.inbox; both stop; then the rebuild starts
// the embedded broker on the same data, resets the processors and
// reprocesses every record. Derived state left by an earlier run would only
// be truncated first, so starting without it changes little. The figure is
// the rebuild process's wall time, start-up included; the benchmark checks
// afterwards that every message is terminal in PostgreSQL.
func BenchmarkRebuild(b *testing.B) {
	n := 2 * benchMessages(b)
	if v := os.Getenv("MSGX_BENCH_REBUILD_MESSAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			b.Fatalf("MSGX_BENCH_REBUILD_MESSAGES=%q: want a number of messages ≥ 100", v)
		}
	}
	msgs := realisticDay(13, n)
	bin := msgxBinary(b)
	for i := 0; i < b.N; i++ {
		myDSN := testenv.NewMySQL(b)
		pgDSN := testenv.NewPG(b)
		insertMessages(b, testenv.OpenMySQL(b, myDSN), msgs)
		stateDir, addr := b.TempDir(), freeAddr(b)

		broker := startMsgx(b, bin, msgxEnv(pgDSN, myDSN, stateDir, addr), "broker")
		waitListening(b, broker, addr)
		ingest := startMsgx(b, bin, msgxEnv(pgDSN, myDSN, stateDir, addr, "MSGX_KAFKA_BROKERS="+addr), "ingest")
		loaded := time.Now()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			end, err := endOffset(ctx, []string{addr}, "msgx.inbox")
			cancel()
			if err == nil && end >= int64(len(msgs)) {
				break
			}
			if ingest.exited() || time.Since(loaded) > 10*time.Minute {
				b.Fatalf("msgx.inbox holds %d of %d records (%v)", end, len(msgs), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		b.Logf("msgx.inbox: %d records ingested in %v", len(msgs), time.Since(loaded).Round(time.Millisecond))
		ingest.stop()
		broker.stop()

		f, err := os.CreateTemp(b.TempDir(), "rebuild-*.log")
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		var out strings.Builder
		cmd := exec.Command(bin, "rebuild", "--yes")
		cmd.Env = msgxEnv(pgDSN, myDSN, stateDir, addr)
		cmd.Stdout, cmd.Stderr = &out, f
		b.ResetTimer()
		start := time.Now()
		// The peak RSS is read from /proc while the rebuild runs: the rusage
		// of a finished child counts the memory of the benchmark process it
		// was forked from (ru_maxrss is inherited across fork), which after
		// the in-process memory benchmarks is hundreds of MB.
		var peak, cpu float64 // written by the reader until peakDone
		stopPeak := make(chan struct{})
		peakDone := make(chan struct{})
		pgCPU := postgresCPUSeconds()
		err = cmd.Start()
		if err == nil {
			go func() {
				defer close(peakDone)
				for {
					if v, ok := vmHWM(cmd.Process.Pid); ok {
						peak = max(peak, v)
					}
					if v := cpuSeconds(cmd.Process.Pid); v == v { // not NaN: still running
						cpu = v
					}
					select {
					case <-stopPeak:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
			err = cmd.Wait()
			close(stopPeak)
			<-peakDone
		}
		elapsed := time.Since(start)
		pgCPU = postgresCPUSeconds() - pgCPU
		b.StopTimer()
		if err != nil {
			log, _ := os.ReadFile(f.Name())
			b.Fatalf("msgx rebuild: %v\n%s\n%s", err, tail(out.String(), 2000), tail(string(log), 4000))
		}
		m := rebuildDoneRE.FindStringSubmatch(out.String())
		if m == nil || m[1] != fmt.Sprint(len(msgs)) {
			b.Fatalf("msgx rebuild did not report %d messages done:\n%s", len(msgs), tail(out.String(), 2000))
		}
		var terminal int
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, pgDSN)
		if err != nil {
			b.Fatal(err)
		}
		err = conn.QueryRow(ctx, `SELECT COUNT(*) FROM proc_state WHERE state IN ('SUCCEEDED','SKIPPED','DEAD','ARCHIVED')`).Scan(&terminal)
		conn.Close(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if terminal < len(msgs) {
			b.Fatalf("after the rebuild %d of %d messages are terminal", terminal, len(msgs))
		}
		b.ReportMetric(elapsed.Seconds(), "s")
		b.ReportMetric(float64(len(msgs))/elapsed.Seconds(), "msg/s")
		b.Logf("msgx rebuild: %d messages in %v (it says %s) = %.0f msg/s; peak RSS %.0f MB",
			len(msgs), elapsed.Round(time.Millisecond), m[2], float64(len(msgs))/elapsed.Seconds(), peak)
		b.Logf("CPU: msgx at least %.1f s = %s per message (read every 100 ms), PostgreSQL %.1f s = %s per message",
			cpu, perMessage(cpu, len(msgs)), pgCPU, perMessage(pgCPU, len(msgs)))
		b.Logf("load average at the end: %s", loadAverage())
		what := fmt.Sprintf("rebuild of %s messages (`BenchmarkRebuild`, `msgx rebuild --yes`)", thousands(len(msgs)))
		printRow(what, fmt.Sprintf("%.0f s (%.0f msg/s)", elapsed.Seconds(), float64(len(msgs))/elapsed.Seconds()))
		printRow(what+": peak RSS", fmt.Sprintf("%.0f MB", peak))
		printRow(what+": CPU per message, msgx / PostgreSQL", fmt.Sprintf("%s / %s", perMessage(cpu, len(msgs)), perMessage(pgCPU, len(msgs))))
	}
}

// vmHWM is the peak RSS of a running process in MB (VmHWM of
// /proc/pid/status); false once the process is gone.
func vmHWM(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1000, err == nil
		}
	}
	return 0, false
}
