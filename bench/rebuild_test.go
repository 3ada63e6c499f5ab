package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/internal/testenv"
	"msgx/sink/sinktest"
)

var rebuildDoneRE = regexp.MustCompile(`rebuild: done, (\d+) messages in (\S+);`)

// BenchmarkRebuild times `msgx rebuild --yes` over an inbox topic of
// MSGX_BENCH_REBUILD_MESSAGES messages of the realistic mix (twice
// MSGX_BENCH_MESSAGES, 100,000, by default), on each column's Kafka, and
// prints its rate beside the select-only yardstick, its peak RSS and the
// CPU per message of each process. The million's rebuild is
// BenchmarkMillion's.
//
// The topic is filled the way production fills it, but without processing:
// `msgx ingest` reads the backlog from MariaDB into msgx.inbox — on kfake
// beside `msgx broker` (the embedded Kafka, persistent), which stops after
// it, and the rebuild then starts the embedded broker on the same data; on
// Apache Kafka under a prefix of the run's own. The rebuild resets the
// processors and reprocesses every record. Derived state left by an
// earlier run would only be truncated first, so starting without it
// changes little. The figure is the rebuild process's wall time, start-up
// included; the benchmark checks afterwards that every message is terminal
// in PostgreSQL.
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
		for _, col := range both {
			b.Run(col.short(), func(b *testing.B) {
				k := newCluster(b, col)
				myDSN := testenv.NewMySQL(b)
				pgDSN := sinktest.NewPG(b)
				insertMessages(b, sinktest.OpenMySQL(b, myDSN), msgs)
				stateDir := b.TempDir()
				env := msgxEnv(pgDSN, myDSN, stateDir, k)
				var broker *proc
				ingestEnv := env
				if col == kfake {
					addr := k.brokers[0]
					broker = startMsgx(b, bin, env, "broker")
					waitListening(b, broker, addr)
					ingestEnv = msgxEnv(pgDSN, myDSN, stateDir, k, "MSGX_KAFKA_BROKERS="+addr)
				}
				ingest := startMsgx(b, bin, ingestEnv, "ingest")
				loaded := time.Now()
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					end, err := endOffset(ctx, k.brokers, k.topic("msgx.inbox"))
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
				if broker != nil {
					broker.stop()
				}
				r := timeRebuild(b, bin, env, pgDSN, len(msgs), k)
				printRebuild(fmt.Sprintf("rebuild of %s messages (`BenchmarkRebuild`, `msgx rebuild --yes`)", thousands(len(msgs))), col, r)
			})
		}
	}
}

// rebuildRun is what one `msgx rebuild --yes` measured.
type rebuildRun struct {
	n       int
	elapsed time.Duration
	sel     selectPair
	peakMB  float64
	// cpu is each process's CPU per message (µs); msgx's as last read
	// while it ran (every 100 ms).
	cpu cpuUse
}

func (r rebuildRun) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// timeRebuild runs `msgx rebuild --yes` with env over an inbox of n
// messages on k, between two readings of the yardstick, and checks that
// every message is terminal afterwards.
func timeRebuild(b *testing.B, bin string, env []string, pgDSN string, n int, k *cluster) rebuildRun {
	f, err := os.CreateTemp(b.TempDir(), "rebuild-*.log")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	cmd := exec.Command(bin, "rebuild", "--yes")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &out, f
	var sel selectPair
	sel.before = selectRate(b)
	b.ResetTimer()
	before := readCPU(0, k.jvm)
	start := time.Now()
	// The peak RSS is read from /proc while the rebuild runs: the rusage
	// of a finished child counts the memory of the benchmark process it
	// was forked from (ru_maxrss is inherited across fork), which after
	// the in-process memory benchmarks is hundreds of MB.
	var peak, msgxCPU float64 // written by the reader until peakDone
	stopPeak := make(chan struct{})
	peakDone := make(chan struct{})
	err = cmd.Start()
	if err == nil {
		go func() {
			defer close(peakDone)
			for {
				if v, ok := vmHWM(cmd.Process.Pid); ok {
					peak = max(peak, v)
				}
				if v := cpuSeconds(cmd.Process.Pid); v == v { // not NaN: still running
					msgxCPU = v
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
	cpu := readCPU(0, k.jvm).since(before)
	cpu.msgx = msgxCPU
	b.StopTimer()
	if err != nil {
		log, _ := os.ReadFile(f.Name())
		b.Fatalf("msgx rebuild: %v\n%s\n%s", err, tail(out.String(), 2000), tail(string(log), 4000))
	}
	m := rebuildDoneRE.FindStringSubmatch(out.String())
	if m == nil || m[1] != fmt.Sprint(n) {
		b.Fatalf("msgx rebuild did not report %d messages done:\n%s", n, tail(out.String(), 2000))
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
	if terminal < n {
		b.Fatalf("after the rebuild %d of %d messages are terminal", terminal, n)
	}
	sel.after = selectRate(b)
	r := rebuildRun{n: n, elapsed: elapsed, sel: sel, peakMB: peak, cpu: cpu.perMessage(n)}
	b.ReportMetric(elapsed.Seconds(), "s")
	b.ReportMetric(r.rate(), "msg/s")
	b.ReportMetric(r.rate()/sel.mean(), "msg-per-select-tx")
	b.ReportMetric(peak, "peak-RSS-MB")
	b.Logf("msgx rebuild on %s: %d messages in %v (it says %s) = %.0f msg/s, %.3f× pgbench select-only (%.0f tps: %.0f before, %.0f after); peak RSS %.0f MB",
		k.col, n, elapsed.Round(time.Millisecond), m[2], r.rate(), r.rate()/sel.mean(), sel.mean(), sel.before, sel.after, peak)
	b.Logf("CPU: msgx at least %.1f s (read every 100 ms), PostgreSQL %.1f s, MariaDB %.1f s, Kafka's JVM %.1f s; %s: %s; the machine busy %.1f of %.1f s × %d cores",
		cpu.msgx, cpu.pg, cpu.my, cpu.jvm, cpuHeading, cpuFigure(r.cpu, k.col), cpu.busy, elapsed.Seconds(), runtime.NumCPU())
	b.Logf("load average at the end: %s", loadAverage())
	return r
}

// printRebuild prints the rows of one rebuild in column col.
func printRebuild(what string, col column, r rebuildRun) {
	printRow(what, col, fmt.Sprintf("%.0f s (%s msg/s)", r.elapsed.Seconds(), thousands(int(math.Round(r.rate())))))
	printRow(what+": "+selectHeading, col, fmt.Sprintf("%.3f; select-only %s tps (%s before, %s after)",
		r.rate()/r.sel.mean(), thousands(int(r.sel.mean())), thousands(int(r.sel.before)), thousands(int(r.sel.after))))
	printRow(what+": peak RSS of msgx", col, fmt.Sprintf("%.0f MB", r.peakMB))
	printRow(what+": "+cpuHeading, col, cpuFigure(r.cpu, col))
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
