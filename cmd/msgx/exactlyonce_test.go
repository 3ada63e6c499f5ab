package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/emitters/event"
	"msgx/internal/testenv"
	"msgx/internal/workload"
)

// kill is one kill -9 of the gateway: at the at-th pass of a publisher
// crash point (the binary built with -tags crashpoints kills itself there,
// internal/crashpoint), or, with point "", from outside after a random
// moment of the backlog.
type kill struct {
	point string
	at    int
}

// killSchedule is the same for every run it is compared across: kills
// inside a publish batch (its records produced, not committed), between
// the Kafka commit and the PostgreSQL delete, during the start-up
// reconciliation that follows such a kill, and at random moments.
var killSchedule = []kill{
	{event.PointInBatch, 2}, {event.PointAfterCommit, 2}, {event.PointReconcile, 1},
	{"", 0}, {event.PointAfterCommit, 3}, {event.PointReconcile, 1},
	{event.PointInBatch, 1}, {"", 0}, {event.PointAfterCommit, 1}, {event.PointReconcile, 1},
}

// TestCrashExactlyOnce runs a backlog through the real binary, killed with
// SIGKILL ten times (killSchedule), and then reads msgx.msg as a consumer
// would. With MSGX_EXACTLY_ONCE (the default) a read_committed consumer
// reads every (FLID, version) exactly once, in version order per FLID,
// on Apache Kafka — read by franz-go, by kcat (librdkafka) and by Apache
// Kafka's own console consumer — and on kfake's three-broker cluster whose
// partition leaders and coordinators move during the backlog; a
// read_uncommitted consumer may read more, never less. The same kills with
// MSGX_EXACTLY_ONCE=false on the embedded broker give the at-least-once
// figures for comparison.
func TestCrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t, "crashpoints")
	msgs := workload.Day(workload.Options{Seed: 21, Flights: 300, Ops: 2500})
	for _, tc := range []struct {
		name        string
		exactlyOnce bool
		kafka       string
	}{
		{"exactly-once/apache-kafka", true, "apache"},
		{"exactly-once/3-brokers-disturbed", true, "kfake-cluster"},
		{"at-least-once/embedded", false, "embedded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s *scenario
			var disturb func() testenv.Disturbed
			var real *testenv.Kafka
			switch tc.kafka {
			case "apache":
				real = testenv.RealKafka(t)
				s = newRealScenario(t, bin, real)
			case "kfake-cluster":
				// kfake's elections and coordinator moves, every 700 ms:
				// faster and more often than a real cluster's (the fault
				// campaign kills real brokers).
				c := testenv.NewCluster(t)
				s = newScenarioOn(t, bin, c.Addrs())
				disturb = c.Disturb(testenv.Disturbance{Every: 700 * time.Millisecond, Leaders: true, Coordinators: true}).Stop
			default:
				s = newScenario(t, bin)
			}
			s.env = append(s.env, fmt.Sprintf("MSGX_EXACTLY_ONCE=%v", tc.exactlyOnce))
			loadInbox(t, s, msgs)
			fired := s.killAlong(killSchedule, rand.New(rand.NewPCG(21, 1)))
			if disturb != nil {
				t.Logf("cluster disturbed: %+v", disturb())
			}
			s.gateway = s.start("run")
			s.waitTerminal(len(msgs), 3*time.Minute)
			s.waitOutboxEmpty(time.Minute)
			final := s.finalVersions()

			committed := testenv.ReadToEnd(t, s.brokers, s.topic("msgx.msg"), true, time.Minute)
			uncommitted := testenv.ReadToEnd(t, s.brokers, s.topic("msgx.msg"), false, time.Minute)
			_, cdup := versionsRead(t, committed)
			uv, udup := versionsRead(t, uncommitted)
			want := 0
			for flid, v := range final {
				want += int(v)
				if !covers(uv[flid], v) {
					t.Errorf("read_uncommitted: flight %s has versions %v, want every one of 1..%d", flid, uv[flid], v)
				}
			}
			if tc.exactlyOnce {
				assertCommittedOnce(t, s, final)
			}
			if real != nil {
				// The same topic through the two reference clients.
				assertReadersAgree(t, real, s.topic("msgx.msg"), final)
			}
			t.Logf("%s: %d messages, %d kills (%s); %d (FLID, version); read_committed %d events (%d duplicates), read_uncommitted %d (%d duplicates)",
				tc.name, len(msgs), len(killSchedule), fired, want, len(committed), cdup, len(uncommitted), udup)
			if tc.exactlyOnce && len(committed) != want {
				t.Errorf("read_committed read %d events for %d versions", len(committed), want)
			}
		})
	}
}

// killAlong runs the gateway once per kill of the schedule: with
// MSGX_CRASHPOINT set, it waits for the process to kill itself there; a
// point not reached in time (there is no reconciliation after a clean
// delete, nor at all without exactly-once) and the "" kills are a kill -9
// from outside. It returns how many of each it did.
func (s *scenario) killAlong(schedule []kill, rng *rand.Rand) string {
	s.t.Helper()
	counts := map[string]int{}
	for i, k := range schedule {
		if k.point == "" {
			s.gateway = s.start("run")
			time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
			s.kill()
			counts["random"]++
			continue
		}
		s.gateway = s.startWith([]string{fmt.Sprintf("MSGX_CRASHPOINT=%s@%d", k.point, k.at)}, "run")
		exited := make(chan struct{})
		go func() { _ = s.gateway.Wait(); close(exited) }()
		wait := 12 * time.Second
		if k.point == event.PointReconcile {
			wait = 3 * time.Second // at the start, or not at all
		}
		select {
		case <-exited:
			ws, _ := s.gateway.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				s.t.Fatalf("kill %d: the gateway ended with %v, not at its crash point", i+1, s.gateway.ProcessState)
			}
			counts[k.point]++
		case <-time.After(wait):
			_ = s.gateway.Process.Kill()
			<-exited
			counts[k.point+" not reached, killed from outside"]++
		}
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	return strings.Join(parts, ", ")
}

func (s *scenario) waitOutboxEmpty(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var n int
		if err := s.pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM event_outbox").Scan(&n); err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.logs.Name())
			s.t.Fatalf("%d events still in the outbox after %v; log tail:\n%s", n, timeout, tail(string(b), 60))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// finalVersions is every flight's last state_version: its events must be
// versions 1..that.
func (s *scenario) finalVersions() map[string]int64 {
	s.t.Helper()
	rows, err := s.pool.Query(context.Background(), "SELECT flid, state_version FROM flight_schd")
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var flid string
		var v int64
		if err := rows.Scan(&flid, &v); err != nil {
			s.t.Fatal(err)
		}
		out[flid] = v
	}
	return out
}

// versionsRead is, per FLID, the versions of its events in the order a
// consumer read them, and how many events repeated a (FLID, version).
func versionsRead(t *testing.T, rs []*kgo.Record) (map[string][]int64, int) {
	t.Helper()
	values := make([][]byte, len(rs))
	for i, r := range rs {
		values[i] = r.Value
	}
	return versionsOf(t, values)
}

// versionsOf is versionsRead of the records' values.
func versionsOf(t *testing.T, values [][]byte) (map[string][]int64, int) {
	t.Helper()
	out := map[string][]int64{}
	seen := map[string]bool{}
	dups := 0
	for i, v := range values {
		var e struct {
			FLID         string `json:"flid"`
			StateVersion int64  `json:"stateVersion"`
		}
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatalf("msgx.msg record %d: %v", i, err)
		}
		k := fmt.Sprintf("%s@%d", e.FLID, e.StateVersion)
		if seen[k] {
			dups++
		}
		seen[k] = true
		out[e.FLID] = append(out[e.FLID], e.StateVersion)
	}
	return out, dups
}

// assertReadersAgree reads topic of Apache Kafka k read_committed with
// kcat (librdkafka) and with Apache Kafka's console consumer (Java): each
// must read the versions 1..final[FLID] of every flight exactly once, in
// order, like the project's own reader (franz-go, assertCommittedOnce).
func assertReadersAgree(t *testing.T, k *testenv.Kafka, topic string, final map[string]int64) {
	t.Helper()
	out, err := exec.Command("kcat", "-C", "-b", strings.Join(k.Addrs(), ","), "-t", topic, "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%s\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	java, err := k.ConsoleConsume(topic, true, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var javaValues [][]byte
	for _, l := range java {
		_, v, _ := strings.Cut(l, "\t")
		javaValues = append(javaValues, []byte(v))
	}
	for _, r := range []struct {
		name   string
		values [][]byte
	}{{"kcat", bytes.Split(bytes.TrimSpace(out), []byte("\n"))}, {"kafka-console-consumer", javaValues}} {
		read, dups := versionsOf(t, r.values)
		bad := 0
		for flid, v := range final {
			if got := read[flid]; !exactly(got, v) {
				if bad++; bad <= 5 {
					t.Errorf("%s read_committed: flight %s read as versions %s, want 1..%d once each in order", r.name, flid, short(got), v)
				}
			}
		}
		if bad > 0 || dups > 0 || len(read) != len(final) {
			t.Errorf("%s read_committed: %d flights not exactly once, %d duplicate events, %d flights of %d", r.name, bad, dups, len(read), len(final))
		}
		t.Logf("%s read_committed: %d events of %d flights, exactly once in order", r.name, len(r.values), len(read))
	}
}

// exactly: vs is 1, 2, …, last.
func exactly(vs []int64, last int64) bool {
	if int64(len(vs)) != last {
		return false
	}
	for i, v := range vs {
		if v != int64(i+1) {
			return false
		}
	}
	return true
}

// covers: every version 1..last is in vs.
func covers(vs []int64, last int64) bool {
	have := map[int64]bool{}
	for _, v := range vs {
		have[v] = true
	}
	for v := int64(1); v <= last; v++ {
		if !have[v] {
			return false
		}
	}
	return true
}

func short(vs []int64) string {
	if len(vs) > 20 {
		return fmt.Sprint(vs[:20]) + "…"
	}
	return fmt.Sprint(vs)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
