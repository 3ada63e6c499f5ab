// Command kafka starts and stops the Apache Kafka of `make kafka`, `make
// kafka-cluster` and `make kafka-stop`: the same nodes the tests start
// (testenv.StartKafka), on fixed ports and left running in the background.
//
//	go run ./internal/testenv/kafka start [-nodes 3]
//	go run ./internal/testenv/kafka stop
//
// The data lives under $MSGX_STATE_DIR/kafka-real/single (one node) or
// .../cluster (three): a second start keeps the topics and offsets of the
// first.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"msgx/internal/testenv"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	nodes := fs.Int("nodes", 1, "nodes: 1, or 3 (a cluster: replication 3, min.insync.replicas 2)")
	heap := fs.Int("heap", 512, "JVM heap of each node, MiB")
	_ = fs.Parse(os.Args[2:])
	root := filepath.Join(stateDir(), "kafka-real")
	var err error
	switch os.Args[1] {
	case "start":
		err = start(root, *nodes, *heap)
	case "stop":
		err = stop(root)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go run ./internal/testenv/kafka start [-nodes 1|3] [-heap MiB] | stop")
	os.Exit(2)
}

func stateDir() string {
	if d := os.Getenv("MSGX_STATE_DIR"); d != "" {
		return d
	}
	return ".state"
}

func layouts(root string) map[int]string {
	return map[int]string{1: filepath.Join(root, "single"), 3: filepath.Join(root, "cluster")}
}

func start(root string, nodes, heap int) error {
	if nodes != 1 && nodes != 3 {
		return fmt.Errorf("-nodes %d: want 1 or 3", nodes)
	}
	dir := layouts(root)[nodes]
	for n, d := range layouts(root) {
		if pids := running(d); len(pids) > 0 {
			if n == nodes {
				fmt.Printf("Apache Kafka already runs (%d node(s), pids %v): bootstrap %s\n", n, pids, bootstrap(nodes))
				return nil
			}
			return fmt.Errorf("the %d-node Kafka of %s runs on the same ports (pids %v): make kafka-stop first", n, d, pids)
		}
	}
	version, err := testenv.KafkaVersion()
	if err != nil {
		return err
	}
	ports := []int{19092, 19093, 19094}[:nodes]
	k, err := testenv.StartKafka(testenv.KafkaOptions{Nodes: nodes, Dir: dir, ClientPorts: ports, HeapMB: heap, Detach: true})
	if err != nil {
		return err
	}
	var logs []string
	for _, n := range k.Nodes {
		logs = append(logs, filepath.Join(n.Dir, "server.log"))
	}
	fmt.Printf("Apache Kafka %s (KRaft, %d node(s), cluster %s) runs: bootstrap %s\n", version, nodes, k.ClusterID, bootstrap(nodes))
	fmt.Printf("  SASL_SSL listeners on %s (CA %s)\n", strings.Join(k.SecureAddrs(), ","), k.CA.File)
	fmt.Printf("  logs: %s\n  stop: make kafka-stop\n", strings.Join(logs, " "))
	return nil
}

func bootstrap(nodes int) string {
	return strings.Join([]string{"127.0.0.1:19092", "127.0.0.1:19093", "127.0.0.1:19094"}[:nodes], ",")
}

// running returns the pids of the Kafka nodes under dir that still run.
func running(dir string) []int {
	files, _ := filepath.Glob(filepath.Join(dir, "node-*", "pid"))
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		// A pid file outlives its process; the pid may be another's now.
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), "kafka.Kafka") {
			out = append(out, pid)
		}
	}
	return out
}

func stop(root string) error {
	stopped := 0
	for _, d := range layouts(root) {
		pids := running(d)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGTERM) // controlled shutdown
		}
		deadline := time.Now().Add(60 * time.Second)
		for len(running(d)) > 0 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		for _, pid := range running(d) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		stopped += len(pids)
	}
	if stopped == 0 {
		fmt.Println("no Apache Kafka of make kafka runs")
		return nil
	}
	if left := len(running(layouts(root)[1])) + len(running(layouts(root)[3])); left > 0 {
		return errors.New("some Kafka nodes did not stop")
	}
	fmt.Printf("stopped %d Kafka node(s); the data stays under %s (make clean-state forgets it)\n", stopped, root)
	return nil
}
