package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"
)

// millionMessages is the size of BenchmarkMillion's backlog:
// MSGX_BENCH_MILLION=1 is a million (`make bench-million`), a larger
// number that many messages (a quick check: MSGX_BENCH_MILLION=5000).
// Without it the benchmark is skipped: `make bench` does not run it.
func millionMessages(b *testing.B) int {
	b.Helper()
	v := os.Getenv("MSGX_BENCH_MILLION")
	if v == "" {
		b.Skip("MSGX_BENCH_MILLION is not set (make bench-million)")
	}
	n, err := strconv.Atoi(v)
	switch {
	case err == nil && n == 1:
		return 1_000_000
	case err == nil && n >= 100:
		return n
	}
	b.Fatalf("MSGX_BENCH_MILLION=%q: want 1 (a million messages) or a number of messages ≥ 100", v)
	return 0
}

// BenchmarkMillion runs a backlog of a million messages of the realistic
// mix on Apache Kafka (exactly once, this machine's PostgreSQL, whose
// autovacuum setting the rows name) and then `msgx rebuild --yes` of that
// very inbox, beside the 50,000-message backlog (MSGX_BENCH_MESSAGES) run
// just before it on the same node, MSGX_BENCH_RUNS times (the median).
// It prints the million's rate and its share of the 50,000 rate (the aim:
// at least 80 %), its ratio to the select-only yardstick, commits per
// message, msgx's peak RSS and the CPU per message of each process at
// 50,000 and at the million side by side, then the rebuild's wall time
// (the aim: at most 4 minutes), rate, peak RSS and CPU per message. Only on
// Apache Kafka: on kfake the log of a million messages lives in msgx's
// heap, which is what a real Kafka is for (docs/operations.md#capacity).
func BenchmarkMillion(b *testing.B) {
	n := millionMessages(b)
	autovacuum := pgSetting(b, "autovacuum")
	m := publishModes[0]
	bin := msgxBinary(b)
	ref := repeatBacklog(b, realisticDay(11, benchMessages(b)), m, []column{apache})[apache]
	if len(ref) < benchRuns(b) {
		b.Fatalf("the %s-message reference ran %d of %d times", thousands(benchMessages(b)), len(ref), benchRuns(b))
	}
	var big backlogRun
	var rb rebuildRun
	ok := b.Run(fmt.Sprintf("kafka-%d", n), func(b *testing.B) {
		big = runBacklog(b, bin, realisticDay(11, n), m, newCluster(b, apache))
		waited := big.k.waitGroupsEmpty(b, 2*time.Minute)
		b.Logf("msgx's static members left their groups %v after it stopped", waited.Round(time.Millisecond))
		rb = timeRebuild(b, bin, big.env, big.pgDSN, n, big.k)
	})
	if !ok {
		return
	}

	pick := func(f func(backlogRun) float64) float64 {
		xs := make([]float64, len(ref))
		for i, r := range ref {
			xs[i] = f(r)
		}
		return median(xs)
	}
	refRate := pick(func(r backlogRun) float64 { return r.rate })
	refWhat := thousands(ref[0].n)
	if len(ref) > 1 {
		refWhat = fmt.Sprintf("%s, median of %d", refWhat, len(ref))
	}
	cpus := make([]cpuUse, len(ref))
	for i, r := range ref {
		cpus[i] = r.cpu
	}
	refCPU := cpuMedian(cpus)
	what := fmt.Sprintf("million: %s-message realistic backlog (`BenchmarkMillion`, exactly-once, autovacuum %s)", thousands(n), autovacuum)
	printRow(what+": messages per second, start-up included", apache, fmt.Sprintf("%s msg/s = %.0f %% of the %s rate (%s msg/s)",
		thousands(int(math.Round(big.rate))), 100*big.rate/refRate, refWhat, thousands(int(math.Round(refRate)))))
	printRow(what+": "+selectHeading, apache, fmt.Sprintf("%.3f (%s: %.3f); %s",
		big.ratio(), refWhat, pick(backlogRun.ratio), selectFigure([]backlogRun{big})))
	printRow(what+": PostgreSQL commits per message", apache, fmt.Sprintf("%.3f (%s: %.3f)", big.commits, refWhat,
		pick(func(r backlogRun) float64 { return r.commits })))
	printRow(what+": peak RSS of msgx", apache, fmt.Sprintf("%.0f MB (%s: %.0f MB)", big.peakMB, refWhat,
		pick(func(r backlogRun) float64 { return r.peakMB })))
	arrow := func(a, z float64) string {
		if a != a || z != z {
			return "—"
		}
		return fmt.Sprintf("%.0f → %.0f", a, z)
	}
	printRow(fmt.Sprintf("%s: %s at %s → %s", what, cpuHeading, thousands(ref[0].n), thousands(n)), apache,
		fmt.Sprintf("%s / %s / %s / %s µs; cores busy %.2f → %.2f", arrow(refCPU.msgx, big.cpu.msgx), arrow(refCPU.pg, big.cpu.pg),
			arrow(refCPU.my, big.cpu.my), arrow(refCPU.jvm, big.cpu.jvm), pick(func(r backlogRun) float64 { return r.cores }), big.cores))
	printRebuild(fmt.Sprintf("million: `msgx rebuild --yes` of that %s-message inbox (`BenchmarkMillion`)", thousands(n)), apache, rb)
}

// pgSetting is the value of one of PostgreSQL's settings.
func pgSetting(b *testing.B, name string) string {
	b.Helper()
	c := pgAdmin(b)
	defer c.Close(context.Background())
	var v string
	if err := c.QueryRow(context.Background(), "SELECT current_setting($1)", name).Scan(&v); err != nil {
		b.Fatalf("reading PostgreSQL's %s: %v", name, err)
	}
	return v
}
