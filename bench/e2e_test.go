package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/internal/testenv"
	"msgx/sink/sinktest"
)

// progressSQL reads how far the backlog got: the first message not
// terminal yet, the first one the router has not decided, the last one
// ingested, and the oldest and newest events in the outbox. Each is an
// index probe (proc_state_open, the primary keys) that starts where the
// previous reading ended ($1–$3): counting proc_state's rows took most of a
// PostgreSQL core at a million rows, and even a probe from the start of
// proc_state_open walked an entry for every message ever ROUTED until a
// vacuum (160 ms a reading at a million messages) — the benchmark
// competing with what it measures, its cost counted as PostgreSQL's.
const progressSQL = `SELECT
	(SELECT min(msg_id) FROM proc_state WHERE state IN ('PENDING','FAILED','ROUTED') AND msg_id > $1),
	(SELECT min(msg_id) FROM proc_state WHERE state IN ('PENDING','FAILED') AND msg_id > $2),
	(SELECT max(msg_id) FROM proc_state),
	(SELECT min(id) FROM event_outbox WHERE id >= $3),
	(SELECT max(id) FROM event_outbox)`

// progress is one reading of progressSQL: terminal and decided count the
// messages before the first one that is not, which is exact because a
// benchmark's inbox is a fresh table (ids 1, 2, 3, …) and messages are
// decided in order; outbox is the span of outbox ids left (the rows left,
// but for rows deleted in the middle of it), 0 when it is empty. A
// message stays terminal and decided, and the publisher takes the oldest
// rows first: each reading starts from the last.
type progress struct {
	terminal, decided, outbox int
	firstOutbox               int64
}

func readProgress(b *testing.B, c *pgx.Conn, last progress) progress {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var open, undecided, newest, firstOut, lastOut *int64
	if err := c.QueryRow(ctx, progressSQL, last.terminal, last.decided, last.firstOutbox).
		Scan(&open, &undecided, &newest, &firstOut, &lastOut); err != nil {
		b.Fatalf("reading progress: %v", err)
	}
	upTo := func(first *int64) int {
		switch {
		case first != nil:
			return int(*first - 1)
		case newest != nil:
			return int(*newest)
		}
		return 0
	}
	p := progress{terminal: upTo(open), decided: upTo(undecided), firstOutbox: last.firstOutbox}
	if firstOut != nil && lastOut != nil {
		p.outbox, p.firstOutbox = int(*lastOut-*firstOut+1), *firstOut
	}
	return p
}

// BenchmarkEndToEnd loads a backlog of MSGX_BENCH_MESSAGES (50,000) SIS
// messages of the realistic mix (realisticDay) into the inbox and runs the
// real binary (`msgx run`, real PostgreSQL and MariaDB) from its start until
// every message is terminal and every msg event is published — the end as
// msgx recorded it (finishedAt), which the benchmark's polls only notice
// later. Each run is in two columns, one after the other: msgx on its
// embedded Kafka (kfake, persistent and synced, inside the process) and on
// Apache Kafka (one node on this machine, or MSGX_KAFKA_BROKERS), each on
// fresh databases and, on Apache Kafka, under a prefix of its own. With
// MSGX_BENCH_RUNS=n each column runs n times, alternately, and its rows
// print the median. It prints, per column:
//
//   - the end-to-end rate, and that rate divided by PostgreSQL's
//     select-only rate (selectRate: pgbench -S, two clients, five seconds
//     just before msgx starts and again just after it stops, their mean):
//     both bound by the CPU, so the ratio cancels the machine's speed;
//   - PostgreSQL commits per message: the delta of pg_stat_database
//     xact_commit of msgx's database over the run (start-up and the
//     backfill of the processed marks included; migrations are applied
//     before), less the benchmark's own progress queries, each one
//     transaction on one connection of its own;
//   - the peak RSS of the msgx process (VmHWM, read just before it stops);
//   - the CPU time per message, until every message was terminal, of msgx
//     (its /proc/pid/stat; the embedded Kafka is inside it), PostgreSQL
//     (every postgres process's, and what the postmaster reaped of exited
//     backends), MariaDB and Apache Kafka's JVM, and how many of the
//     machine's cores were busy meanwhile;
//
// and logs the rate of ingest and of the router on the way, and when the
// backfill sweeper had written every processed mark.
//
// It runs with the exactly-once publisher (Kafka transactions, the
// default) in both columns and with MSGX_EXACTLY_ONCE=false on kfake.
func BenchmarkEndToEnd(b *testing.B) {
	msgs := realisticDay(11, benchMessages(b))
	for _, m := range publishModes {
		b.Run(m.name, func(b *testing.B) { endToEnd(b, "", msgs, m) })
	}
}

// finishedAt reads from msgx's own records when the work of a backlog
// ended: last, when the last message became terminal (its last transition
// marked applied, or the router's decision for one that ended there) or the
// last msg event was produced, whichever came later; decided, when the
// router decided the last message. ok is false when there is no record.
func finishedAt(b *testing.B, conn *pgx.Conn) (last, decided time.Time, ok bool) {
	var l, d *time.Time
	err := conn.QueryRow(context.Background(), `SELECT GREATEST(
			(SELECT max(applied_at) FROM transition_applied),
			(SELECT max(decided_at) FROM proc_state),
			(SELECT max(produced_at) FROM msg_event)),
		(SELECT max(decided_at) FROM proc_state)`).Scan(&l, &d)
	if err != nil {
		b.Fatal(err)
	}
	if l == nil || d == nil {
		return time.Time{}, time.Time{}, false
	}
	return *l, *d, true
}

// pprofToken is the read token of a profiled run (MSGX_BENCH_PPROF).
const pprofToken = "bench-profile-token"

// cpuProfile writes to path a 10-second CPU profile of the msgx serving
// http://addr, taken MSGX_BENCH_PPROF_AFTER (a duration, 3s by default)
// after its start, the backlog flowing, for MSGX_BENCH_PPROF=dir: `go tool
// pprof` reads it.
func cpuProfile(b *testing.B, addr, path string) {
	after := 3 * time.Second
	if v := os.Getenv("MSGX_BENCH_PPROF_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Logf("MSGX_BENCH_PPROF_AFTER=%q: %v", v, err)
			return
		}
		after = d
	}
	time.Sleep(after)
	// The allocations of the same 10 s, beside the CPU profile (-sample_index=alloc_space).
	go fetchProfile(b, addr, "allocs", strings.TrimSuffix(path, ".pprof")+".allocs.pprof")
	fetchProfile(b, addr, "profile", path)
	// What is live at the end of those 10 s, whatever allocated it (-sample_index=inuse_space).
	fetchProfile(b, addr, "heap", strings.TrimSuffix(path, ".pprof")+".heap.pprof")
	b.Logf("CPU and allocation profiles of the 10 s from %v after the start, and the live heap at their end: %s", after, path)
}

// fetchProfile writes to path the profile kind of the msgx serving
// http://addr: profile and allocs over 10 seconds, heap as it is now.
func fetchProfile(b *testing.B, addr, kind, path string) {
	q := "?seconds=10"
	if kind == "heap" {
		q = ""
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/debug/pprof/"+kind+q, nil)
	if err != nil {
		b.Log(err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+pprofToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Logf("profile: %v", err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Logf("profile: %v %s", err, resp.Status)
		return
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		b.Log(err)
	}
}

// publishMode is one setting of MSGX_EXACTLY_ONCE the benchmarks compare.
type publishMode struct {
	name string
	env  string
}

var publishModes = []publishMode{
	{"exactly-once", "MSGX_EXACTLY_ONCE=true"},
	{"at-least-once", "MSGX_EXACTLY_ONCE=false"},
}

// columns are the columns a mode runs in: exactly once (what production
// runs) in both; at least once, kept for comparison with the figures
// before, on kfake only.
func (m publishMode) columns() []column {
	if m.name == "exactly-once" {
		return both
	}
	return []column{kfake}
}

// BenchmarkEndToEndCodeshare is BenchmarkEndToEnd on the codeshare-heavy
// mix (codeshareDay): one flight in three shared, the router deriving their
// masters' and children's transitions; with the default exactly-once
// publisher only.
func BenchmarkEndToEndCodeshare(b *testing.B) {
	endToEnd(b, "codeshare-heavy ", codeshareDay(11, benchMessages(b)), publishModes[0])
}

// endToEnd runs BenchmarkEndToEnd on the messages msgs of the mix named
// mix ("" for the realistic one) with publish mode m, MSGX_BENCH_RUNS
// times in each of the mode's columns, and prints the rows.
func endToEnd(b *testing.B, mix string, msgs []string, m publishMode) {
	bench := "BenchmarkEndToEnd"
	if mix != "" {
		bench = "BenchmarkEndToEndCodeshare"
	}
	what := fmt.Sprintf("end to end, %s-message %sbacklog (`%s`, %s)", thousands(len(msgs)), mix, bench, m.name)
	results := repeatBacklog(b, msgs, m, m.columns())
	for _, col := range m.columns() {
		printBacklog(what, col, results[col])
	}
}

// repeatBacklog runs the backlog msgs MSGX_BENCH_RUNS times in each of
// cols, alternately, each run a sub-benchmark of its own: its databases
// are dropped and its topics deleted before the next run starts, so that
// no vacuum or log cleaner of an earlier run is counted in a later one. A
// failed run ends the repetitions; the runs before it are returned.
func repeatBacklog(b *testing.B, msgs []string, m publishMode, cols []column) map[column][]backlogRun {
	bin := msgxBinary(b)
	results := map[column][]backlogRun{}
	for i := 1; i <= benchRuns(b); i++ {
		for _, col := range cols {
			var r backlogRun
			ok := b.Run(fmt.Sprintf("%s-%d", col.short(), i), func(b *testing.B) {
				r = runBacklog(b, bin, msgs, m, newCluster(b, col))
			})
			if !ok {
				return results
			}
			results[col] = append(results[col], r)
		}
	}
	return results
}

// backlogRun is what one run of a backlog measured.
type backlogRun struct {
	n    int
	rate float64 // messages per second, start-up included
	sel  selectPair
	// commits is PostgreSQL commits per message.
	commits float64
	peakMB  float64
	// cpu is each process's CPU per message (µs), the machine's busy
	// cores over the run in cores.
	cpu   cpuUse
	cores float64
	// startUp is how long after its start msgx decided its first message.
	startUp time.Duration
	// The run's deployment, for a rebuild of its inbox (the million).
	k     *cluster
	env   []string
	pgDSN string
}

func (r backlogRun) ratio() float64 { return r.rate / r.sel.mean() }

// runBacklog loads msgs into a fresh inbox, runs `msgx run` on k with
// publish mode m until every message is terminal and every event
// published, and measures it (BenchmarkEndToEnd).
func runBacklog(b *testing.B, bin string, msgs []string, m publishMode, k *cluster) backlogRun {
	myDSN := testenv.NewMySQL(b)
	pgDSN := sinktest.NewPG(b)
	insertMessages(b, sinktest.OpenMySQL(b, myDSN), msgs)
	commitsBefore := xactCommits(b, pgDSN)

	ctx := context.Background()
	env := msgxEnv(pgDSN, myDSN, b.TempDir(), k, m.env)
	profile := os.Getenv("MSGX_BENCH_PPROF")
	var httpAddr string
	if profile != "" {
		httpAddr = freeAddr(b)
		env = append(env, "MSGX_PPROF=true", "MSGX_HTTP_READ_TOKEN="+pprofToken, "MSGX_HTTP_ADDR="+httpAddr)
	}
	var sel selectPair
	sel.before = selectRate(b)
	cpuBefore := readCPU(0, k.jvm)
	start := time.Now()
	p := startMsgx(b, bin, env, "run")
	if profile != "" {
		go cpuProfile(b, httpAddr, filepath.Join(profile, fmt.Sprintf("%s-%d.pprof", strings.ReplaceAll(b.Name(), "/", "-"), len(msgs))))
	}
	conn, err := pgx.Connect(ctx, pgDSN)
	if err != nil {
		b.Fatal(err)
	}
	polls := 0
	deadline := time.Now().Add(90 * time.Minute)
	var routed time.Duration // until the router had decided every message
	var pr progress
	for {
		// Every 500 ms, or 1 % of the time so far, whichever is longer:
		// even an index probe costs PostgreSQL ~0.1 s a reading at a
		// million rows (the dead entries of the open-messages index).
		time.Sleep(max(500*time.Millisecond, time.Since(start)/100))
		// The tables exist before msgx starts, so the first reading works.
		pr = readProgress(b, conn, pr)
		polls++
		if testing.Verbose() {
			b.Logf("%6.1fs: %d decided, %d terminal, %d events in the outbox", time.Since(start).Seconds(), pr.decided, pr.terminal, pr.outbox)
		}
		if pr.decided >= len(msgs) && routed == 0 {
			routed = time.Since(start)
		}
		if pr.terminal >= len(msgs) && pr.outbox == 0 {
			break
		}
		if p.exited() {
			b.Fatalf("msgx run exited (%v) with %d of %d messages terminal", p.err, pr.terminal, len(msgs))
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d messages terminal (%d events unpublished) after 90 min", pr.terminal, len(msgs), pr.outbox)
		}
	}
	detected := time.Since(start)
	peak := peakRSSOf(b, p.cmd.Process.Pid)
	cpu := readCPU(p.cmd.Process.Pid, k.jvm).since(cpuBefore)
	// The polls only notice the end, up to a poll's interval (500 ms
	// or more) after it: the rates are taken at the end msgx itself
	// recorded (finishedAt), the poll's time only when those records
	// are missing.
	total, routedAt := detected, routed
	if last, decided, ok := finishedAt(b, conn); ok && last.After(start) && last.Sub(start) <= detected {
		total, routedAt = last.Sub(start), min(routed, decided.Sub(start))
	}
	polls++
	routed = routedAt
	// The backfill sweeper writes the processed marks behind: it must
	// keep up, not trail the backlog by minutes.
	for {
		var owed int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM backfill_owed`).Scan(&owed); err != nil {
			b.Fatal(err)
		}
		polls++
		if owed == 0 {
			break
		}
		if p.exited() || time.Now().After(deadline) {
			b.Fatalf("%d processed marks still owed (msgx exited: %v)", owed, p.exited())
		}
		time.Sleep(200 * time.Millisecond)
	}
	marked := time.Since(start)
	var first, last, firstDecided time.Time
	var applied int
	if err := conn.QueryRow(ctx, `SELECT MIN(enqueued_at), MAX(enqueued_at), MIN(decided_at), (SELECT COUNT(*) FROM transition_applied)
		FROM proc_state`).Scan(&first, &last, &firstDecided, &applied); err != nil {
		b.Fatal(err)
	}
	polls++
	conn.Close(ctx)
	p.stop()
	if p.err != nil {
		b.Errorf("msgx run did not stop cleanly: %v", p.err)
	}
	commits := xactCommits(b, pgDSN) - commitsBefore - int64(polls)
	sel.after = selectRate(b)

	r := backlogRun{n: len(msgs), rate: float64(len(msgs)) / total.Seconds(), sel: sel,
		commits: float64(commits) / float64(len(msgs)), peakMB: peak, cpu: cpu.perMessage(len(msgs)),
		cores: cpu.busy / detected.Seconds(), startUp: firstDecided.Sub(start), k: k, env: env, pgDSN: pgDSN}
	b.ReportMetric(r.rate, "msg/s")
	b.ReportMetric(r.ratio(), "msg-per-select-tx")
	b.ReportMetric(sel.mean(), "select-tps")
	b.ReportMetric(r.commits, "pg-commits/msg")
	b.ReportMetric(peak, "peak-RSS-MB")
	b.ReportMetric(r.cpu.msgx, "msgx-cpu-µs/msg")
	b.ReportMetric(r.cpu.pg, "pg-cpu-µs/msg")
	if r.cpu.jvm == r.cpu.jvm {
		b.ReportMetric(r.cpu.jvm, "kafka-cpu-µs/msg")
	}
	b.Logf("%d messages on %s, %d flight/refdata transitions applied", len(msgs), k.col, applied)
	b.Logf("ingest: every row enqueued in %v = %.0f rows/s", last.Sub(first).Round(time.Millisecond), float64(len(msgs))/max(last.Sub(first).Seconds(), 0.001))
	b.Logf("start-up: the first message enqueued %v after start, decided %v after start",
		first.Sub(start).Round(time.Millisecond), firstDecided.Sub(start).Round(time.Millisecond))
	b.Logf("router: every message decided %v after start = %.0f msg/s", routed.Round(time.Millisecond), float64(len(msgs))/routed.Seconds())
	b.Logf("end to end: every message terminal and every event published %v after start (start-up included) = %.0f msg/s, %.0f transitions/s",
		total.Round(time.Millisecond), r.rate, float64(applied)/total.Seconds())
	b.Logf("backfill: every processed mark written %v after start (%v after the last message was terminal)",
		marked.Round(time.Millisecond), (marked - total).Round(time.Millisecond))
	b.Logf("load average at the end: %s", loadAverage())
	b.Logf("CPU until every message was terminal: msgx %.1f s, PostgreSQL %.1f s, MariaDB %.1f s, Kafka's JVM %.1f s; %s: %s; the rest (the benchmark, the kernel, anything else) %.1f s; the machine busy %.1f of %.1f s × %d cores",
		cpu.msgx, cpu.pg, cpu.my, cpu.jvm, cpuHeading, cpuFigure(r.cpu, k.col), cpu.busy-cpu.msgx-cpu.pg-cpu.my-zeroNaN(cpu.jvm),
		cpu.busy, detected.Seconds(), runtime.NumCPU())
	b.Logf("PostgreSQL: pgbench select-only %.0f tps (%.0f before msgx, %.0f after); msgx %.3f× that; %d commits = %.3f per message; msgx peak RSS %.0f MB",
		sel.mean(), sel.before, sel.after, r.ratio(), commits, r.commits, peak)
	return r
}

// zeroNaN is x, or 0 when x is NaN (a figure not measured).
func zeroNaN(x float64) float64 {
	if x != x {
		return 0
	}
	return x
}

// printBacklog prints the rows of a backlog's runs in column col: the
// median of each figure over the runs, every run's figure beside it.
func printBacklog(what string, col column, runs []backlogRun) {
	if len(runs) == 0 {
		return
	}
	pick := func(f func(backlogRun) float64) []float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return xs
	}
	printRow(what+": messages per second, start-up included", col,
		medianFigure(pick(func(r backlogRun) float64 { return r.rate }), func(x float64) string { return thousands(int(math.Round(x))) + " msg/s" })+
			fmt.Sprintf("; first message decided %.1f s after the start", median(pick(func(r backlogRun) float64 { return r.startUp.Seconds() }))))
	printRow(what+": "+selectHeading, col,
		medianFigure(pick(backlogRun.ratio), func(x float64) string { return fmt.Sprintf("%.3f", x) })+"; "+selectFigure(runs))
	printRow(what+": PostgreSQL commits per message", col,
		medianFigure(pick(func(r backlogRun) float64 { return r.commits }), func(x float64) string { return fmt.Sprintf("%.3f", x) }))
	printRow(what+": peak RSS of msgx", col,
		medianFigure(pick(func(r backlogRun) float64 { return r.peakMB }), func(x float64) string { return fmt.Sprintf("%.0f MB", x) }))
	cpus := make([]cpuUse, len(runs))
	for i, r := range runs {
		cpus[i] = r.cpu
	}
	printRow(what+": "+cpuHeading, col, fmt.Sprintf("%s; cores busy %.2f of %d", cpuFigure(cpuMedian(cpus), col),
		median(pick(func(r backlogRun) float64 { return r.cores })), runtime.NumCPU()))
}

// selectHeading names the ratio of a backlog's rate to the yardstick.
const selectHeading = "÷ pgbench select-only tps"

// selectFigure says what the yardstick read in runs: before and after one
// run, the range over several.
func selectFigure(runs []backlogRun) string {
	if len(runs) == 1 {
		return fmt.Sprintf("select-only %s tps (%s before, %s after)", thousands(int(runs[0].sel.mean())),
			thousands(int(runs[0].sel.before)), thousands(int(runs[0].sel.after)))
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		lo, hi = min(lo, r.sel.before, r.sel.after), max(hi, r.sel.before, r.sel.after)
	}
	return fmt.Sprintf("select-only %s–%s tps", thousands(int(lo)), thousands(int(hi)))
}
