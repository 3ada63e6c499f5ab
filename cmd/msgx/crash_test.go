package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/testenv"
	"msgx/internal/workload"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// buildBinary compiles msgx once for the tests that run it as a child
// process, with the given build tags (crashpoints: internal/crashpoint).
func buildBinary(t *testing.T, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "msgx")
	cmd := exec.Command("go", "build", "-tags", strings.Join(tags, ","), "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building msgx: %v\n%s", err, out)
	}
	return bin
}

// scenario is one gateway deployment on fresh databases: a broker process
// that lives for the whole scenario and a gateway process the test may kill.
type scenario struct {
	t       *testing.T
	bin     string
	env     []string
	broker  *exec.Cmd
	gateway *exec.Cmd
	logs    *os.File
	pool    *pgxpool.Pool
	brokers []string
	// prefix is the scenario's MSGX_KAFKA_PREFIX on a shared Kafka ("" on
	// a broker of its own).
	prefix string
}

func newScenario(t *testing.T, bin string) *scenario {
	t.Helper()
	return newScenarioOn(t, bin, nil)
}

// newRealScenario is newScenario on Apache Kafka k, shared with other
// tests: its topics, groups and transactional ID carry a prefix of its own.
func newRealScenario(t *testing.T, bin string, k *testenv.Kafka) *scenario {
	t.Helper()
	s := newScenarioOn(t, bin, k.Addrs())
	s.prefix = testenv.KafkaPrefix()
	s.env = append(s.env, "MSGX_KAFKA_PREFIX="+s.prefix, fmt.Sprintf("MSGX_KAFKA_REPLICATION=%d", len(k.Nodes)))
	return s
}

// topic is the scenario's name of topic (or group) name.
func (s *scenario) topic(name string) string { return s.prefix + name }

// newScenarioOn is newScenario on the Kafka cluster brokers (nil: a `msgx
// broker` child of its own).
func newScenarioOn(t *testing.T, bin string, brokers []string) *scenario {
	t.Helper()
	s := &scenario{t: t, bin: bin}
	myDSN := testenv.NewMySQL(t)
	pgDSN := testenv.NewEmptyPG(t)
	state := t.TempDir()
	addr := freeAddr(t)
	s.brokers = []string{addr}
	s.env = append(os.Environ(),
		"MSGX_PG_DSN="+pgDSN, "MSGX_MYSQL_DSN="+myDSN, "MSGX_STATE_DIR="+state,
		"MSGX_EMBEDDED_KAFKA_ADDR="+addr, "MSGX_HTTP_ADDR=127.0.0.1:0", "MSGX_CUTOVER_WATERMARK=zero",
		"MSGX_POLL_INTERVAL=50ms", "MSGX_KAFKA_SESSION_TIMEOUT=3s", "MSGX_KAFKA_REBALANCE_TIMEOUT=5s", "MSGX_LOG_LEVEL=warn",
		// The binary runs on the real clock and the workloads' flights are
		// of 2021: a run that spans the daily sweep (03:30 airport time)
		// would purge them half way and differ from the serial reference.
		"MSGX_HISTORY_RETENTION=0")
	logs, err := os.Create(filepath.Join(state, "children.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.logs = logs
	if brokers == nil {
		s.broker = s.start("broker")
	} else {
		s.brokers = brokers
	}
	t.Cleanup(s.stop)
	s.env = append(s.env, "MSGX_KAFKA_BROKERS="+strings.Join(s.brokers, ","))
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second, PGMaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s.pool = pool
	return s
}

func (s *scenario) start(args ...string) *exec.Cmd { return s.startWith(nil, args...) }

// startWith starts the binary with extra environment variables.
func (s *scenario) startWith(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(append([]string(nil), s.env...), env...)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	return cmd
}

func (s *scenario) stop() {
	for _, c := range []*exec.Cmd{s.gateway, s.broker} {
		stopChild(c)
	}
	if s.t.Failed() {
		b, _ := os.ReadFile(s.logs.Name())
		lines := strings.Split(string(b), "\n")
		s.t.Logf("last child log lines:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// kill stops the gateway with SIGKILL: no cleanup, no commit, no goodbye.
func (s *scenario) kill() {
	_ = s.gateway.Process.Kill()
	_ = s.gateway.Wait()
}

func (s *scenario) terminal() int {
	var n int
	if err := s.pool.QueryRow(context.Background(),
		"SELECT COUNT(*) FROM proc_state WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')").Scan(&n); err != nil {
		return -1
	}
	return n
}

func (s *scenario) waitTerminal(n int, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for s.terminal() < n {
		if time.Now().After(deadline) {
			rows, _ := s.pool.Query(context.Background(), `SELECT msg_id, state, COALESCE(msg_type,''), COALESCE(msg_styp,''),
				COALESCE(n_transitions, -1), n_applied, attempts FROM proc_state WHERE state NOT IN ('SUCCEEDED','SKIPPED','DEAD') ORDER BY msg_id LIMIT 20`)
			for rows.Next() {
				var id int64
				var st, typ, styp string
				var n, applied, attempts int
				_ = rows.Scan(&id, &st, &typ, &styp, &n, &applied, &attempts)
				s.t.Logf("open: msg %d %s %s-%s n=%d applied=%d attempts=%d", id, st, typ, styp, n, applied, attempts)
			}
			rows.Close()
			s.t.Fatalf("only %d of %d messages terminal after %v", s.terminal(), n, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// afterRouterCommit returns as soon as the router committed a batch of
// decisions (the proc_state rows grow), or after timeout.
func (s *scenario) afterRouterCommit(timeout time.Duration) {
	s.afterGrowth("SELECT COUNT(*) FROM proc_state WHERE state <> 'PENDING'", timeout)
}

// afterFlightsCommit returns as soon as the flights processor committed a
// group of transitions (transition_applied grows), or after timeout: the
// kill then falls between a group's commit and its offsets' commit, or
// inside the next group, whose table writes are ahead of PostgreSQL.
func (s *scenario) afterFlightsCommit(timeout time.Duration) {
	s.afterGrowth("SELECT COUNT(*) FROM transition_applied WHERE kind = 'flight'", timeout)
}

// afterGrowth polls the count query every few milliseconds and returns as
// soon as it grows, or after timeout.
func (s *scenario) afterGrowth(query string, timeout time.Duration) {
	count := func() int {
		var n int
		if err := s.pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	first := -1
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		// Until the gateway has migrated a fresh database, count fails.
		switch n := count(); {
		case first < 0:
			first = n
		case n > first:
			return
		}
	}
}

// history is the flight change history, (FLID, version) → the change, without
// the wall-clock columns.
func (s *scenario) history() map[string]string {
	rows, err := s.pool.Query(context.Background(),
		"SELECT flid, state_version, msg_id, source, state, changed::text FROM flight_change")
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var flid, source, state, changed string
		var v, msg int64
		if err := rows.Scan(&flid, &v, &msg, &source, &state, &changed); err != nil {
			s.t.Fatal(err)
		}
		out[fmt.Sprintf("%s@%d", flid, v)] = fmt.Sprintf("msg %d %s %s %s", msg, source, state, changed)
	}
	return out
}

// flights is the PG flight state without the wall-clock updatedAt.
func (s *scenario) flights() map[string]string {
	rows, err := s.pool.Query(context.Background(),
		"SELECT flid, state_version, (doc - 'updatedAt')::text FROM flight_schd ORDER BY flid")
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var flid, doc string
		var v int64
		if err := rows.Scan(&flid, &v, &doc); err != nil {
			s.t.Fatal(err)
		}
		out[flid] = fmt.Sprintf("v%d %s", v, doc)
	}
	rows.Close()
	// The collections' rows too: the doc says what they should be, the
	// detail tables are written separately (incrementally).
	for _, table := range sink.FlightTables[1:] {
		rows, err := s.pool.Query(context.Background(), fmt.Sprintf(
			"SELECT flid, string_agg((to_jsonb(t) - 'flid')::text, ' ' ORDER BY (to_jsonb(t) - 'flid')::text) FROM %s t GROUP BY flid", table))
		if err != nil {
			s.t.Fatal(err)
		}
		for rows.Next() {
			var flid, detail string
			if err := rows.Scan(&flid, &detail); err != nil {
				s.t.Fatal(err)
			}
			out[flid] += " " + table + ": " + detail
		}
		rows.Close()
	}
	return out
}

func loadInbox(t *testing.T, s *scenario, msgs []string) {
	t.Helper()
	dsn := ""
	for _, e := range s.env {
		if v, ok := strings.CutPrefix(e, "MSGX_MYSQL_DSN="); ok {
			dsn = v
		}
	}
	my := sinktest.OpenMySQL(t, dsn)
	for _, m := range msgs {
		testenv.InsertInbox(t, my, m)
	}
}

// TestCrashRecovery runs a codeshare-heavy day of messages through the real
// binary on Apache Kafka with the gateway killed (SIGKILL) at random points
// while messages flow: right after a router batch's commit, right after a flights group
// commit (while the next group's table writes are ahead of PostgreSQL), at
// random times. After the last restart everything must equal the serial
// reference (assertSerial): every decision, flight, placeholder and
// version history line — no hole — and every (FLID, version) on the msg
// topic, in order.
func TestCrashRecovery(t *testing.T) {
	t.Parallel() // a long run of the binary: beside the others
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	// Large enough that the kills land while the backlog flows (each after
	// a twelfth of it is terminal): with group commits an undisturbed run
	// takes a few seconds.
	msgs := workload.Day(workload.Options{Seed: 42, Flights: 800, Ops: 8000, Codeshare: true})

	crash := newRealScenario(t, bin, testenv.RealKafka(t))
	loadInbox(t, crash, msgs)
	rng := rand.New(rand.NewPCG(1, 2))
	kills := 0
	crash.gateway = crash.start("run")
	for kills < 9 && crash.terminal() < len(msgs) {
		// Spread the kills over the backlog: each after some progress.
		crash.waitTerminal(min(len(msgs), (kills+1)*len(msgs)/12), 3*time.Minute)
		switch kills % 3 {
		case 0:
			// Inside a router batch: right after a batch's decisions were
			// committed to PostgreSQL, while its transitions are produced
			// and before its offsets are committed.
			crash.afterRouterCommit(10 * time.Second)
		case 1:
			// Inside the flights processor's group commits: right after a
			// group committed, before its offsets are, while the next
			// group's table writes are ahead of PostgreSQL.
			crash.afterFlightsCommit(10 * time.Second)
		default:
			time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		}
		crash.kill()
		kills++
		t.Logf("kill -9 #%d with %d/%d messages terminal", kills, crash.terminal(), len(msgs))
		crash.gateway = crash.start("run")
	}
	crash.waitTerminal(len(msgs), 3*time.Minute)
	assertSerial(t, crash, msgs)
	t.Logf("%d kills", kills)
}

// TestSigtermDuringLoad stops the gateway with SIGTERM while messages flow:
// it must exit 0 within MSGX_SHUTDOWN_TIMEOUT, and after a restart every
// message ends terminal with every flight version announced — nothing lost.
func TestSigtermDuringLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	msgs := workload.Day(workload.Options{Seed: 9, Flights: 200, Ops: 1500})
	s := newScenario(t, bin)
	s.env = append(s.env, "MSGX_SHUTDOWN_TIMEOUT=15s")
	loadInbox(t, s, msgs)
	for round := 0; round < 3 && s.terminal() < len(msgs); round++ {
		s.gateway = s.start("run")
		time.Sleep(time.Duration(800+400*round) * time.Millisecond)
		began := time.Now()
		if err := s.gateway.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := s.gateway.Wait()
		took := time.Since(began)
		if err != nil || s.gateway.ProcessState.ExitCode() != 0 {
			t.Fatalf("SIGTERM: exit %v (%v)", s.gateway.ProcessState, err)
		}
		if took > 15*time.Second {
			t.Fatalf("SIGTERM took %v", took)
		}
		t.Logf("SIGTERM #%d: exit 0 after %v with %d/%d messages terminal", round+1, took.Round(time.Millisecond), s.terminal(), len(msgs))
	}
	s.gateway = s.start("run")
	s.waitTerminal(len(msgs), 90*time.Second)
	var open int
	if err := s.pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM proc_state WHERE state NOT IN ('SUCCEEDED','SKIPPED','DEAD')").Scan(&open); err != nil || open != 0 {
		t.Fatalf("%d messages not terminal (%v)", open, err)
	}
}

// assertEqualRun checks that s ends with the reference run's flight state
// want (what says how s differs from that run) and that every (FLID,
// version) of it reached msgx.msg at least once. It returns how many
// distinct (FLID, version) events it saw.
func assertEqualRun(t *testing.T, s *scenario, want map[string]string, what string) int {
	t.Helper()
	assertIndexFollowsTable(t, s.pool, s.brokers, s.prefix)
	got := s.flights()
	if len(got) != len(want) {
		t.Fatalf("%d flights %s, %d in the reference run", len(got), what, len(want))
	}
	for flid, w := range want {
		if got[flid] != w {
			t.Fatalf("flight %s differs %s:\n got %s\nwant %s", flid, what, got[flid], w)
		}
	}
	seen := announcedVersions(t, s)
	missing := 0
	final := map[string]int64{}
	for flid, w := range want {
		var v int64
		fmt.Sscanf(w, "v%d", &v)
		final[flid] = v
		for i := int64(1); i <= v; i++ {
			if !seen[fmt.Sprintf("%s@%d", flid, i)] {
				if missing++; missing < 5 {
					t.Errorf("flight %s version %d never reached the msg topic", flid, i)
				}
			}
		}
	}
	assertCommittedOnce(t, s, final)
	return len(seen)
}

// assertCommittedOnce checks that a read_committed consumer of msgx.msg
// reads the versions 1..final[FLID] of every flight exactly once, in
// order (MSGX_EXACTLY_ONCE, the default; docs/design.md#delivery).
func assertCommittedOnce(t *testing.T, s *scenario, final map[string]int64) {
	t.Helper()
	read, dups := versionsRead(t, testenv.ReadToEnd(t, s.brokers, s.topic("msgx.msg"), true, time.Minute))
	bad := 0
	for flid, v := range final {
		if got := read[flid]; !exactly(got, v) {
			if bad++; bad <= 5 {
				t.Errorf("read_committed: flight %s read as versions %s, want 1..%d once each in order", flid, short(got), v)
			}
		}
	}
	if bad > 0 || dups > 0 {
		t.Errorf("read_committed: %d flights not exactly once, %d duplicate events", bad, dups)
	}
}
