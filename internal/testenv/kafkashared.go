package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
)

// shared are the Apache Kafkas of one test package: started at first use,
// stopped by Main after the package's last test.
var shared struct {
	mu    sync.Mutex
	kafka map[int]*Kafka
	err   map[int]error
}

// RealKafka returns the test package's one-node Apache Kafka (clients
// through proxies), started at the first call and shared by every test of
// the package: tests keep apart by their own KafkaPrefix. A test that
// kills, pauses or cuts a node starts a Kafka of its own (StartKafka). A
// package that calls it runs its tests through Main.
func RealKafka(t testing.TB) *Kafka { return sharedKafka(t, 1) }

// RealKafkaCluster is RealKafka's three-node cluster (replication 3,
// min.insync.replicas 2).
func RealKafkaCluster(t testing.TB) *Kafka { return sharedKafka(t, 3) }

func sharedKafka(t testing.TB, nodes int) *Kafka {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.kafka == nil {
		shared.kafka, shared.err = map[int]*Kafka{}, map[int]error{}
	}
	if k := shared.kafka[nodes]; k != nil {
		return k
	}
	if err := shared.err[nodes]; err != nil {
		t.Fatalf("Apache Kafka (%d nodes) did not start for this package: %v", nodes, err)
	}
	k, err := StartKafka(KafkaOptions{Nodes: nodes, Proxies: true})
	if err != nil {
		shared.err[nodes] = err
		t.Fatalf("starting Apache Kafka (%d nodes): %v", nodes, err)
	}
	shared.kafka[nodes] = k
	return k
}

// Main runs a test package that uses RealKafka or RealKafkaCluster and
// stops them at its end:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	for _, k := range shared.kafka {
		k.Close()
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// KafkaPrefix is an MSGX_KAFKA_PREFIX of the test's own ("t" and random hex
// and "."), for a test on a shared Kafka: its topics, groups and
// transactional IDs meet no other test's.
func KafkaPrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("t%s.", hex.EncodeToString(b))
}
