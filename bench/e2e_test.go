package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/internal/testenv"
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
// real binary (`msgx run`: embedded persistent Kafka, real PostgreSQL and
// MariaDB) from its start until every message is terminal and every msg
// event is published — the end as msgx recorded it (finishedAt), which the
// benchmark's polls only notice later. It prints:
//
//   - the end-to-end rate, and that rate divided by PostgreSQL's single-row
//     commit rate measured by pgbench (one client, one INSERT per
//     transaction) just before msgx starts and again just after it stops,
//     the mean of the two: the number of messages msgx finishes in the time
//     PostgreSQL commits one row. pgbench waits for the disk's flush, msgx
//     for the CPU: on a shared machine the two move apart (five-second
//     pgbench runs back to back on this project's machine ranged from
//     2,370 to 3,500/s), so both readings are printed, and runs compare
//     only under similar load;
//   - PostgreSQL commits per message: the delta of pg_stat_database
//     xact_commit of msgx's database over the run (start-up and the
//     backfill of the processed marks included; migrations are applied
//     before), less the benchmark's own progress queries, each one
//     transaction on one connection of its own;
//   - how long after the start the backfill sweeper had written every
//     processed mark;
//   - the peak RSS of the msgx process (VmHWM, read just before it stops);
//   - the CPU time per message of msgx (its /proc/pid/stat) and of
//     PostgreSQL (every postgres process's, and what the postmaster reaped
//     of exited backends) until every message was terminal;
//   - the rate of ingest and of the router on the way.
//
// It runs twice: with the exactly-once publisher (Kafka transactions, the
// default) and with MSGX_EXACTLY_ONCE=false.
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
	b.Logf("CPU and allocation profiles of the 10 s from %v after the start: %s", after, path)
}

// fetchProfile writes to path the 10-second profile kind (profile, allocs)
// of the msgx serving http://addr.
func fetchProfile(b *testing.B, addr, kind, path string) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/debug/pprof/"+kind+"?seconds=10", nil)
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

// BenchmarkEndToEndCodeshare is BenchmarkEndToEnd on the codeshare-heavy
// mix (codeshareDay): one flight in three shared, the router deriving their
// masters' and children's transitions; with the default exactly-once
// publisher only.
func BenchmarkEndToEndCodeshare(b *testing.B) {
	endToEnd(b, "codeshare-heavy ", codeshareDay(11, benchMessages(b)), publishModes[0])
}

// endToEnd runs BenchmarkEndToEnd on the messages msgs of the mix named
// mix ("" for the realistic one) with publish mode m.
func endToEnd(b *testing.B, mix string, msgs []string, m publishMode) {
	bin := msgxBinary(b)
	for i := 0; i < b.N; i++ {
		scratch := testenv.NewEmptyPG(b)
		before := pgbenchCommitRate(b, scratch)

		myDSN := testenv.NewMySQL(b)
		pgDSN := testenv.NewPG(b)
		insertMessages(b, testenv.OpenMySQL(b, myDSN), msgs)
		commitsBefore := xactCommits(b, pgDSN)

		ctx := context.Background()
		pgCPU, myCPU, busyCPU := postgresCPUSeconds(), processCPUSeconds("mariadbd"), machineBusySeconds()
		env := msgxEnv(pgDSN, myDSN, b.TempDir(), freeAddr(b), m.env)
		profile := os.Getenv("MSGX_BENCH_PPROF")
		var httpAddr string
		if profile != "" {
			httpAddr = freeAddr(b)
			env = append(env, "MSGX_PPROF=true", "MSGX_HTTP_READ_TOKEN="+pprofToken, "MSGX_HTTP_ADDR="+httpAddr)
		}
		start := time.Now()
		p := startMsgx(b, bin, env, "run")
		if profile != "" {
			go cpuProfile(b, httpAddr, filepath.Join(profile, fmt.Sprintf("%s%s-%d.pprof", strings.ReplaceAll(mix, " ", ""), m.name, len(msgs))))
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
		msgxCPU, pgCPU := cpuSeconds(p.cmd.Process.Pid), postgresCPUSeconds()-pgCPU
		myCPU, busyCPU = processCPUSeconds("mariadbd")-myCPU, machineBusySeconds()-busyCPU
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
		after := pgbenchCommitRate(b, scratch)
		commitRate := (before + after) / 2

		rate := float64(len(msgs)) / total.Seconds()
		perMsg := float64(commits) / float64(len(msgs))
		b.ReportMetric(rate, "msg/s")
		b.ReportMetric(rate/commitRate, "msg-per-pg-commit-time")
		b.ReportMetric(commitRate, "pgbench-commits/s")
		b.ReportMetric(perMsg, "pg-commits/msg")
		b.ReportMetric(peak, "peak-RSS-MB")
		b.ReportMetric(msgxCPU/float64(len(msgs))*1e6, "msgx-cpu-µs/msg")
		b.ReportMetric(pgCPU/float64(len(msgs))*1e6, "pg-cpu-µs/msg")
		b.Logf("%d messages, %d flight/refdata transitions applied", len(msgs), applied)
		b.Logf("ingest: every row enqueued in %v = %.0f rows/s", last.Sub(first).Round(time.Millisecond), float64(len(msgs))/max(last.Sub(first).Seconds(), 0.001))
		b.Logf("start-up: the first message enqueued %v after start, decided %v after start",
			first.Sub(start).Round(time.Millisecond), firstDecided.Sub(start).Round(time.Millisecond))
		b.Logf("router: every message decided %v after start = %.0f msg/s", routed.Round(time.Millisecond), float64(len(msgs))/routed.Seconds())
		b.Logf("end to end: every message terminal and every event published %v after start (start-up included) = %.0f msg/s, %.0f transitions/s",
			total.Round(time.Millisecond), rate, float64(applied)/total.Seconds())
		b.Logf("backfill: every processed mark written %v after start (%v after the last message was terminal)",
			marked.Round(time.Millisecond), (marked - total).Round(time.Millisecond))
		b.Logf("load average at the end: %s", loadAverage())
		b.Logf("CPU until every message was terminal: msgx %.1f s = %s per message, PostgreSQL %.1f s = %s per message, MariaDB %.1f s = %s, the rest (the benchmark, the kernel) %.1f s = %s; the machine busy %.1f of %.1f s × %d cores",
			msgxCPU, perMessage(msgxCPU, len(msgs)), pgCPU, perMessage(pgCPU, len(msgs)), myCPU, perMessage(myCPU, len(msgs)),
			busyCPU-msgxCPU-pgCPU-myCPU, perMessage(busyCPU-msgxCPU-pgCPU-myCPU, len(msgs)), busyCPU, detected.Seconds(), runtime.NumCPU())
		b.Logf("PostgreSQL: pgbench single-row commits %.0f/s (%.0f before msgx, %.0f after); msgx %.2f× that; %d commits = %.3f per message; msgx peak RSS %.0f MB",
			commitRate, before, after, rate/commitRate, commits, perMsg, peak)
		bench := "BenchmarkEndToEnd"
		if mix != "" {
			bench = "BenchmarkEndToEndCodeshare"
		}
		what := fmt.Sprintf("end to end, %s-message %sbacklog (`%s`, %s)", thousands(len(msgs)), mix, bench, m.name)
		printRow(what+": messages per second", fmt.Sprintf("%.0f msg/s", rate))
		printRow(what+": ÷ pgbench single-row commit rate", fmt.Sprintf("%.2f (pgbench %.0f commits/s: %.0f before, %.0f after)", rate/commitRate, commitRate, before, after))
		printRow(what+": PostgreSQL commits per message", fmt.Sprintf("%.3f", perMsg))
		printRow(what+": peak RSS of msgx", fmt.Sprintf("%.0f MB", peak))
		printRow(what+": CPU per message, msgx / PostgreSQL", fmt.Sprintf("%s / %s", perMessage(msgxCPU, len(msgs)), perMessage(pgCPU, len(msgs))))
	}
}
