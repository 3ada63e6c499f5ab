package testenv_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestRealKafkaNode drives the Apache Kafka fixture as the fault tests do:
// records survive a kill -9 and a restart of the node, a SIGSTOPped node
// answers again after SIGCONT, a cut proxy refuses clients until restored,
// and a SCRAM user logs in over TLS on the SECURE listener. The three
// readers of the exactly-once tests (franz-go, kcat, Apache Kafka's
// console consumer) read the same records.
func TestRealKafkaNode(t *testing.T) {
	k, err := testenv.StartKafka(testenv.KafkaOptions{Proxies: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm, done, err := k.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	produce := func(from, to int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...), kgo.DefaultProduceTopic("t"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
	}
	produce(0, 10)

	n := k.Node(1)
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() {
		t.Fatal("node runs after kill -9")
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := k.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	produce(10, 20)
	if got := testenv.ReadTopic(t, k.Addrs(), "t", 20, 30*time.Second); len(got) != 20 {
		t.Fatalf("read %d records after kill -9 and restart, want 20", len(got))
	}

	// A new client each time: franz-go answers a metadata request from
	// its cache for a while.
	answers := func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...), kgo.DialTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		defer ccancel()
		_, err = kadm.NewClient(cl).BrokerMetadata(cctx)
		return err == nil
	}
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	if answers() {
		t.Fatal("a SIGSTOPped node answered")
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := k.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	n.Cut()
	if answers() {
		t.Fatal("a cut node answered through its proxy")
	}
	if err := n.Restore(); err != nil {
		t.Fatal(err)
	}

	if err := k.AddSCRAMUser(ctx, "SCRAM-SHA-512", "alice", "s3cret"); err != nil {
		t.Fatal(err)
	}
	sc, err := kgo.NewClient(append(testenv.SCRAMOpts(k.CA, "SCRAM-SHA-512", "alice", "wrong"), kgo.SeedBrokers(k.SecureAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = kadm.NewClient(sc).BrokerMetadata(sctx)
	scancel()
	sc.Close()
	if err == nil {
		t.Fatal("a wrong SCRAM password was accepted")
	}

	// The idle time also covers the consumer's first poll (joining its
	// group, fetching metadata): 3 s were too short for it on a loaded CI
	// machine, which then read nothing.
	java, err := k.ConsoleConsume("t", true, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("kcat", "-C", "-b", strings.Join(k.Addrs(), ","), "-t", "t", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%k\t%s\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	kc := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := func(l []string) string {
		if len(l) == 0 {
			return ""
		}
		return l[len(l)-1]
	}
	if len(java) != 20 || len(kc) != 20 || last(java) != "19\t19" || last(kc) != "19\t19" {
		t.Fatalf("console consumer read %d records (last %q), kcat %d (last %q); want 20, the last 19\t19", len(java), last(java), len(kc), last(kc))
	}
}
