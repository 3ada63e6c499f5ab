package bench

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/workload"
)

// benchMessages is the size of the end-to-end and router backlogs:
// MSGX_BENCH_MESSAGES, 50,000 by default (the rebuild uses twice as many).
// A small value makes a quick run to check that the benchmarks work.
func benchMessages(b *testing.B) int {
	b.Helper()
	v := os.Getenv("MSGX_BENCH_MESSAGES")
	if v == "" {
		return 50_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 {
		b.Fatalf("MSGX_BENCH_MESSAGES=%q: want a number of messages ≥ 100", v)
	}
	return n
}

// realisticDay is a generated day of about n messages in inbox order: the
// schedule of n/10 flights in packages of 100, then operations on them
// (updates, new flights, deletions, duplicates, ignored and malformed
// messages; one flight in 20 a shared flight), as internal/workload makes it.
func realisticDay(seed uint64, n int) []string {
	flights := max(100, n/10)
	return workload.Day(workload.Options{Seed: seed, Flights: flights, Ops: n - (flights+99)/100, SharedEvery: 20})
}

// codeshareDay is a codeshare-heavy day of about n messages
// (workload.Options.Codeshare): a third of the flights shared, children
// before masters, re-links, unlinks, renames, child and master deletions,
// masters sent again, packages mixing masters and children, reference data.
func codeshareDay(seed uint64, n int) []string {
	flights := max(100, n/10)
	return workload.Day(workload.Options{Seed: seed, Flights: flights, Ops: n - (flights+99)/100, Codeshare: true})
}

var (
	rowsMu sync.Mutex
	rows   []string
)

// printRow prints one line of the "Measured" table (docs/benchmarks.md) on the
// benchmark's standard output, and again with the others when every
// benchmark has run, so that `make bench` ends with the figures.
func printRow(what, figure string) {
	row := fmt.Sprintf("| %s | %s |", what, figure)
	fmt.Println(row)
	rowsMu.Lock()
	rows = append(rows, row)
	rowsMu.Unlock()
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// msgxBinary builds cmd/msgx once per run of the package, or takes the
// binary MSGX_BENCH_BIN names (to measure two builds in turns, one run
// after the other).
func msgxBinary(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("MSGX_BENCH_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "msgx-bench-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "msgx")
		if out, err := exec.Command("go", "build", "-o", binPath, "../cmd/msgx").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building msgx: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if len(rows) > 0 {
		fmt.Printf("\n| measured | figure |\n|---|---|\n%s\n", strings.Join(rows, "\n"))
	}
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// msgxEnv is the environment of a msgx process of a benchmark: its own
// databases, state directory and embedded Kafka address, warnings only.
func msgxEnv(pgDSN, myDSN, stateDir, kafkaAddr string, extra ...string) []string {
	return append(append(os.Environ(), "MSGX_PG_DSN="+pgDSN, "MSGX_MYSQL_DSN="+myDSN, "MSGX_STATE_DIR="+stateDir,
		"MSGX_EMBEDDED_KAFKA_ADDR="+kafkaAddr, "MSGX_HTTP_ADDR=127.0.0.1:0", "MSGX_CUTOVER_WATERMARK=min",
		"MSGX_LOG_LEVEL=warn"), extra...)
}

// proc is a msgx process a benchmark started; its output goes to a log file
// that is printed when the benchmark fails.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startMsgx(b *testing.B, bin string, env []string, args ...string) *proc {
	b.Helper()
	f, err := os.CreateTemp(b.TempDir(), "msgx-"+args[0]+"-*.log")
	if err != nil {
		b.Fatal(err)
	}
	p := &proc{cmd: exec.Command(bin, args...), log: f.Name(), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		b.Fatalf("starting msgx %s: %v", args[0], err)
	}
	go func() { p.err = p.cmd.Wait(); f.Close(); close(p.done) }()
	b.Cleanup(func() {
		p.stop()
		if b.Failed() {
			out, _ := os.ReadFile(p.log)
			b.Logf("msgx %s output:\n%s", args[0], tail(string(out), 4000))
		}
	})
	return p
}

// exited says whether the process ended (a benchmark waiting on it fails
// at once rather than at its deadline).
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process with SIGTERM (SIGKILL after a minute) and waits.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// peakRSSOf returns the peak resident set (VmHWM) of a running process in MB.
func peakRSSOf(b *testing.B, pid int) float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Logf("no peak RSS: %v", err)
		return math.NaN()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb / 1000
		}
	}
	b.Logf("no VmHWM in /proc/%d/status", pid)
	return math.NaN()
}

// pgAdmin connects to PostgreSQL's administrative database, as
// internal/testenv does (MSGX_TEST_PG_ADMIN_DSN).
func pgAdmin(b *testing.B) *pgx.Conn {
	b.Helper()
	dsn := os.Getenv("MSGX_TEST_PG_ADMIN_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatalf("connecting to PostgreSQL: %v", err)
	}
	return c
}

// xactCommits returns pg_stat_database.xact_commit of the database of dsn,
// once no client session is connected to it any more (an autovacuum worker
// may stay longer, and commits nothing of msgx's). A backend publishes its
// counts at the latest when it exits, so waiting for the sessions to end
// makes the figure complete; it is read from the administrative database,
// so the reading is not counted.
func xactCommits(b *testing.B, dsn string) int64 {
	b.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	admin := pgAdmin(b)
	defer admin.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var sessions int
		if err := admin.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, cfg.Database).Scan(&sessions); err != nil {
			b.Fatalf("counting the sessions of %s: %v", cfg.Database, err)
		}
		if sessions == 0 {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("%d sessions still connected to %s", sessions, cfg.Database)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A new snapshot: the previous reading of this session is not reused.
	if _, err := admin.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		b.Fatal(err)
	}
	var n int64
	if err := admin.QueryRow(ctx, `SELECT COALESCE(xact_commit, 0) FROM pg_stat_database WHERE datname = $1`, cfg.Database).Scan(&n); err != nil {
		b.Fatalf("reading xact_commit of %s: %v", cfg.Database, err)
	}
	return n
}

var tpsRE = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)

// pgbenchCommitRate measures PostgreSQL's single-row commit rate: pgbench,
// one client, one INSERT per transaction, for five seconds, into a table of
// a scratch database (created by the first measurement in it). It is the
// yardstick of the end-to-end rate: msgx should beat one commit per message.
func pgbenchCommitRate(b *testing.B, scratchDSN string) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, scratchDSN)
	if err != nil {
		b.Fatal(err)
	}
	_, err = c.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_insert (id bigserial PRIMARY KEY, v text NOT NULL, at timestamptz NOT NULL DEFAULT now())`)
	c.Close(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(b.TempDir(), "insert.sql")
	if err := os.WriteFile(script, []byte("INSERT INTO bench_insert (v) VALUES ('a message of about this size');\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	// libpq takes the URI as the database name.
	out, err := exec.Command("pgbench", "-n", "-c1", "-T5", "-f", script, scratchDSN).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench (installed with PostgreSQL's client tools): %v\n%s", err, out)
	}
	m := tpsRE.FindSubmatch(out)
	if m == nil {
		b.Fatalf("no tps in the output of pgbench:\n%s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		b.Fatal(err)
	}
	return tps
}

// waitListening waits until addr accepts connections (a broker that starts).
func waitListening(b *testing.B, p *proc, addr string) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		if p.exited() || time.Now().After(deadline) {
			b.Fatalf("nothing listens on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endOffset is the high watermark of partition 0 of a topic; an error while
// the topic does not exist yet.
func endOffset(ctx context.Context, brokers []string, topic string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok {
		return 0, fmt.Errorf("topic %s has no partition 0", topic)
	}
	return o.Offset, o.Err
}

// percentile returns the p-th percentile (0 < p ≤ 100, nearest rank) of
// sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

func sortDurations(d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// thousands formats n with thousands separators, as the manual writes figures.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures: the benchmarks
// share the machine, and the figures mean more beside the load.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// quietLogger logs errors only, to standard error: a benchmark's backlog
// holds malformed messages by design, and a warning for each would bury the
// figures.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}
