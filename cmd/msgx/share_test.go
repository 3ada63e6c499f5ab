package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/testenv"
	"msgx/internal/workload"
	"msgx/processors/flights"
)

// TestTwoInstancesShareTheFlights runs a day of messages through two `msgx
// run` instances on one cluster with four transition partitions: both run
// the flights processor and split its partitions between them (the single
// roles run in one of them). One instance is killed half-way; the other
// takes its partitions over. The PostgreSQL flight state must equal a
// single-instance run's, and every (FLID, version) must reach msgx.msg.
func TestTwoInstancesShareTheFlights(t *testing.T) {
	t.Parallel() // a long run of the binary: beside the others
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	msgs := workload.Day(workload.Options{Seed: 7, Flights: 300, Ops: 2500})
	const partitions = "MSGX_TRANSITION_PARTITIONS=4"

	ref := newScenario(t, bin)
	ref.env = append(ref.env, partitions)
	loadInbox(t, ref, msgs)
	ref.gateway = ref.start("run")
	ref.waitTerminal(len(msgs), 3*time.Minute)
	want := ref.flights()
	ref.stop()

	s := newScenario(t, bin)
	// A member joining makes the others stop their partition processors
	// and rejoin, which takes them a few seconds; meanwhile the waiting
	// member sends no heartbeats. The scenario's 3 s session and 5 s
	// rebalance timeouts would drop one of the two from every generation
	// (docs/operations.md#split-roles-and-hot-standby): use the defaults.
	s.env = append(s.env, partitions, "MSGX_KAFKA_SESSION_TIMEOUT=10s", "MSGX_KAFKA_REBALANCE_TIMEOUT=20s", "MSGX_LOG_LEVEL=info")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("grep", "-v", "message decided", s.logs.Name()).Output()
			t.Logf("logs:\n%s", out)
		}
	})
	instance := func(id string) *exec.Cmd {
		saved := s.env
		s.env = append(append([]string(nil), s.env...), "MSGX_KAFKA_INSTANCE_ID="+id, "MSGX_STATE_DIR="+t.TempDir())
		defer func() { s.env = saved }()
		return s.start("run")
	}
	a, b := instance("a"), instance("b")
	s.gateway = a // stopped by the scenario's cleanup
	t.Cleanup(func() { stopChild(b) })
	owners := waitForSharing(t, s.brokers, 2, time.Minute)
	t.Logf("flights partitions while both run: %v", owners)
	loadInbox(t, s, msgs)
	s.waitTerminal(len(msgs)/2, 3*time.Minute)
	// Kill instance a mid-way through the load: it runs flights
	// partitions, and the single roles too when it took the process lock
	// first (then b takes those over as well).
	s.kill()
	t.Logf("instance a killed with %d/%d messages terminal", s.terminal(), len(msgs))
	s.gateway = b
	s.waitTerminal(len(msgs), 3*time.Minute)
	if owners := waitForSharing(t, s.brokers, 1, time.Minute); len(owners["b"]) != 4 {
		t.Fatalf("after the kill instance b holds partitions %v, want all 4", owners)
	}

	seen := assertEqualRun(t, s, want, "with two instances")
	t.Logf("%d flights equal to the single-instance run; %d (FLID, version) events seen", len(want), seen)
}

// waitForSharing waits until the msgx-flights group is stable with n members
// that each own at least one partition of the flight transitions, and
// returns the partitions per instance ID.
func waitForSharing(t *testing.T, brokers []string, n int, timeout time.Duration) map[string][]int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	var last map[string][]int32
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		groups, err := adm.DescribeGroups(ctx, flights.BaseGroup)
		cancel()
		if g, ok := groups[flights.BaseGroup]; err == nil && ok && g.Err == nil && g.State == "Stable" {
			last = map[string][]int32{}
			for _, m := range g.Members {
				id := m.MemberID
				if m.InstanceID != nil {
					id = *m.InstanceID
				}
				if c, ok := m.Assigned.AsConsumer(); ok {
					for _, tp := range c.Topics {
						if tp.Topic == "msgx.flight-transitions" {
							last[id] = append(last[id], tp.Partitions...)
						}
					}
				}
			}
			sharing := len(last) == n
			for _, ps := range last {
				sharing = sharing && len(ps) > 0
			}
			if sharing {
				return last
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the flights group never had %d members sharing the partitions (last seen %v)", n, last)
	return nil
}

// announcedVersions reads msgx.msg whole, once the publisher has emptied
// the outbox: the set of FLID@version seen by a read_uncommitted consumer.
func announcedVersions(t *testing.T, s *scenario) map[string]bool {
	t.Helper()
	testenv.WaitCaughtUp(t, s.brokers, flights.BaseGroup, []string{"msgx.flight-transitions"}, time.Minute)
	s.waitOutboxEmpty(time.Minute)
	seen := map[string]bool{}
	for _, r := range testenv.ReadToEnd(t, s.brokers, "msgx.msg", false, time.Minute) {
		var ev struct {
			FLID         string `json:"flid"`
			StateVersion int64  `json:"stateVersion"`
		}
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatal(err)
		}
		seen[fmt.Sprintf("%s@%d", ev.FLID, ev.StateVersion)] = true
	}
	return seen
}

// stopChild stops a child process with SIGTERM unless it already ended.
func stopChild(c *exec.Cmd) {
	if c != nil && c.ProcessState == nil {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	}
}
