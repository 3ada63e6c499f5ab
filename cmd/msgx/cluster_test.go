package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"msgx/internal/testenv"
	"msgx/internal/workload"
)

// TestDisturbedCluster runs a codeshare-heavy backlog through msgx on a
// three-broker cluster (replication 3, four transition partitions) that is
// disturbed all along: leader elections, coordinator moves, a broker away
// and back, and retriable errors — a produce timed out after its records
// were appended, NOT_LEADER_FOR_PARTITION on produce and fetch,
// NOT_COORDINATOR on offset commits, REBALANCE_IN_PROGRESS on heartbeats.
// msgx must stay up and end where the serial reference does. It starts
// while topic creation answers INVALID_REPLICATION_FACTOR (a broker briefly
// away), which it retries instead of exiting.
func TestDisturbedCluster(t *testing.T) {
	t.Parallel() // a long run of the binary: beside the others
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	// kfake's cluster: elections and coordinator moves every few hundred
	// milliseconds, on demand, which a real cluster cannot give (its faults:
	// the fault campaign on Apache Kafka).
	c := testenv.NewCluster(t)
	s := newScenarioOn(t, bin, c.Addrs())
	s.env = append(s.env, "MSGX_KAFKA_REPLICATION=3", "MSGX_TRANSITION_PARTITIONS=4", "MSGX_LOG_LEVEL=info")
	msgs := workload.Day(workload.Options{Seed: 5, Flights: 300, Ops: 2500, Codeshare: true})

	refused := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Err: kerr.InvalidReplicationFactor, Count: 3})
	s.gateway = s.start("run")
	waitFor(t, "topic creation refused three times", time.Minute, func() bool { return refused.Hits() >= 3 })
	// One disturbance every so often, each kind in turn: as often as a
	// cluster under maintenance would, not so often that every rebalance
	// (goka waits 5 s before it rejoins) is interrupted by the next.
	disturbances := []struct {
		name string
		do   func()
	}{
		{"leader election", c.ShuffleLeaders},
		{"produce timed out after the append", func() { c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut}) }},
		{"coordinator move", c.MoveCoordinators},
		{"NOT_LEADER on produce", func() { c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotLeaderForPartition}) }},
		{"NOT_LEADER on fetch", func() { c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition}) }},
		{"a broker away and back", func() { c.Bounce(2, 500*time.Millisecond) }},
		{"NOT_COORDINATOR on an offset commit", func() { c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.NotCoordinator}) }},
		{"REBALANCE_IN_PROGRESS on a heartbeat", func() { c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Err: kerr.RebalanceInProgress}) }},
	}
	// The inbox fills while the cluster is disturbed: a part of it, a
	// disturbance, the next part, and so on, so that each meets messages
	// flowing.
	var did []string
	parts := 2 * len(disturbances)
	for i := range parts {
		loadInbox(t, s, msgs[i*len(msgs)/parts:(i+1)*len(msgs)/parts])
		time.Sleep(500 * time.Millisecond)
		d := disturbances[i%len(disturbances)]
		d.do()
		did = append(did, d.name)
	}
	s.waitTerminal(len(msgs), 4*time.Minute)
	if s.gateway.ProcessState != nil {
		t.Fatalf("msgx exited: %v", s.gateway.ProcessState)
	}
	assertSerial(t, s, msgs)
	if s.gateway.ProcessState != nil {
		t.Fatalf("msgx exited: %v", s.gateway.ProcessState)
	}
	logs, _ := os.ReadFile(s.logs.Name())
	t.Logf("%d disturbances (%s); %d components restarted", len(did), strings.Join(did[:min(len(did), len(disturbances))], ", "),
		strings.Count(string(logs), "restarting"))

}
