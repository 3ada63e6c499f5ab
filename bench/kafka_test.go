package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/kafka"
	"msgx/internal/testenv"
)

// operatorBrokers are the brokers of MSGX_KAFKA_BROKERS when the benchmarks
// were started with it: the Apache Kafka column then runs against that
// Kafka (an operator's own, or `make kafka`'s on 127.0.0.1:19092) instead
// of a node the benchmark starts. Its plaintext listener: the benchmark's
// own clients (the latency consumer, the end offsets) use no TLS or SASL.
// Read once, before msgxEnv strips it from the embedded runs.
var operatorBrokers = splitBrokers(os.Getenv("MSGX_KAFKA_BROKERS"))

func splitBrokers(v string) []string {
	var out []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// apacheKafka is the Apache Kafka of the apache column: one node started
// by the first benchmark that needs it and kept until the end of the run
// (closeApacheKafka), or the operator's brokers.
var apacheKafka struct {
	once        sync.Once
	err         error
	node        *testenv.Kafka // nil with operatorBrokers
	brokers     []string
	replication int
}

// apacheBrokers returns the apache column's brokers and the replication
// msgx gives its topics there, starting the node at the first call.
func apacheBrokers(b *testing.B) ([]string, int) {
	b.Helper()
	apacheKafka.once.Do(func() {
		start := time.Now()
		if len(operatorBrokers) > 0 {
			apacheKafka.brokers, apacheKafka.replication = operatorBrokers, 1
			if v := os.Getenv("MSGX_KAFKA_REPLICATION"); v != "" {
				if apacheKafka.replication, apacheKafka.err = strconv.Atoi(v); apacheKafka.err != nil {
					apacheKafka.err = fmt.Errorf("MSGX_KAFKA_REPLICATION=%q: %w", v, apacheKafka.err)
					return
				}
			}
		} else {
			// One node, its default heap, no proxies: the broker as a
			// small production deployment runs it, msgx reaching it
			// directly.
			k, err := testenv.StartKafka(testenv.KafkaOptions{Nodes: 1})
			if err != nil {
				apacheKafka.err = fmt.Errorf("starting Apache Kafka for the apache column: %w", err)
				return
			}
			apacheKafka.node, apacheKafka.brokers, apacheKafka.replication = k, k.Addrs(), 1
			b.Logf("Apache Kafka: one node on %s, started in %v", strings.Join(k.Addrs(), ","), time.Since(start).Round(time.Millisecond))
		}
		// An operator's Kafka too: `make kafka` may have started it a
		// moment ago.
		if err := warmUp(apacheKafka.brokers, apacheKafka.replication); err != nil {
			apacheKafka.err = fmt.Errorf("warming up Apache Kafka on %s: %w", strings.Join(apacheKafka.brokers, ","), err)
			return
		}
		b.Logf("Apache Kafka on %s: ready and warmed up %v after the benchmarks needed it", strings.Join(apacheKafka.brokers, ","), time.Since(start).Round(time.Millisecond))
	})
	if apacheKafka.err != nil {
		b.Fatal(apacheKafka.err)
	}
	return apacheKafka.brokers, apacheKafka.replication
}

// jvmPid is the pid of the apache column's broker JVM, 0 when it is not
// the benchmark's own (an operator's Kafka: its CPU is not measured).
func jvmPid() int {
	if apacheKafka.node == nil {
		return 0
	}
	return apacheKafka.node.Nodes[0].Pid()
}

// closeApacheKafka stops the node the benchmarks started, if any.
func closeApacheKafka() {
	if apacheKafka.node != nil {
		apacheKafka.node.Close()
	}
}

// apacheColumnName is the apache column's heading.
func apacheColumnName() string {
	if len(operatorBrokers) > 0 {
		return "Apache Kafka (MSGX_KAFKA_BROKERS " + strings.Join(operatorBrokers, ",") + ")"
	}
	v, err := testenv.KafkaVersion()
	if err != nil {
		v = "?"
	}
	return "Apache Kafka " + v + " (one node, this machine)"
}

// warmUp runs a broker JVM just started through what msgx will ask of it —
// idempotent and transactional produces, a consumer group's fetches and
// offset commits — so that the first measured backlog does not pay for
// the JIT compiling the broker: a production broker runs warm. 200
// transactions of 500 records of 600 bytes, read back read_committed,
// take a few seconds; the topic is deleted afterwards.
func warmUp(brokers []string, replication int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	prefix := testenv.KafkaPrefix()
	topic := prefix + "warm-up"
	adm, closeAdm, err := admin(brokers)
	if err != nil {
		return err
	}
	defer closeAdm()
	if _, err := adm.CreateTopic(ctx, 1, int16(replication), nil, topic); err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	defer func() { _, _ = adm.DeleteTopics(context.Background(), topic) }()
	pr, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(prefix+"warm-up"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer pr.Close()
	value := []byte(strings.Repeat("x", 600))
	const txns, perTxn = 200, 500
	for i := 0; i < txns; i++ {
		if err := pr.BeginTransaction(); err != nil {
			return err
		}
		recs := make([]*kgo.Record, perTxn)
		for j := range recs {
			recs[j] = &kgo.Record{Key: []byte(strconv.Itoa(j)), Value: value}
		}
		if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
		if err := pr.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return err
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(prefix+"warm-up"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for read := 0; read < txns*perTxn; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		read += fs.NumRecords()
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return err
		}
	}
	return nil
}

func admin(brokers []string) (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// cluster is the Kafka of one run of a benchmark in one column, for msgx
// processes (env) and for the benchmark's own clients (brokers, topic).
type cluster struct {
	col column
	// brokers are what the benchmark's own clients bootstrap from: the
	// embedded broker's address msgx will listen on, or Apache Kafka's.
	brokers []string
	// prefix is the run's MSGX_KAFKA_PREFIX on Apache Kafka ("" on kfake):
	// runs on one node never meet.
	prefix string
	// replication is what msgx gives the topics it creates.
	replication int
	// env is what a msgx process of the run adds to its environment.
	env []string
	// jvm is the pid of the broker's JVM: 0 on kfake (the broker is inside
	// the process that uses it) or on an operator's Kafka.
	jvm int
}

// newCluster is the Kafka of one run of a msgx process in column col: on
// kfake an address for the embedded broker `msgx run` starts itself; on
// Apache Kafka the node, a prefix of the run's own, and the cleanup that
// deletes the run's topics when the benchmark ends.
func newCluster(b *testing.B, col column) *cluster {
	b.Helper()
	if col == kfake {
		addr := freeAddr(b)
		return &cluster{col: kfake, brokers: []string{addr}, replication: 1, env: []string{"MSGX_EMBEDDED_KAFKA_ADDR=" + addr}}
	}
	brokers, rf := apacheBrokers(b)
	k := &cluster{col: apache, brokers: brokers, prefix: testenv.KafkaPrefix(), replication: rf, jvm: jvmPid()}
	k.env = []string{"MSGX_KAFKA_BROKERS=" + strings.Join(brokers, ","), "MSGX_KAFKA_PREFIX=" + k.prefix,
		fmt.Sprintf("MSGX_KAFKA_REPLICATION=%d", rf)}
	b.Cleanup(func() { k.drop(b) })
	return k
}

// topic is the run's name of one of msgx's topics.
func (k *cluster) topic(name string) string { return k.prefix + name }

// inProcess is newCluster for a benchmark that runs msgx's parts in its own
// process: on kfake a persistent, synced embedded broker of its own (as
// `msgx run` starts it); the brokers and a Kafka configuration for them.
func inProcess(b *testing.B, col column) (*cluster, kafka.Config) {
	b.Helper()
	var k *cluster
	if col == kfake {
		broker, err := kafka.StartBroker("127.0.0.1:0", b.TempDir(), testenv.Logger(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(broker.Close)
		k = &cluster{col: kfake, brokers: broker.Addrs(), replication: 1}
	} else {
		k = newCluster(b, apache)
	}
	kc := testenv.KafkaConfig(k.brokers)
	kc.Prefix, kc.Replication = k.prefix, k.replication
	return k, kc
}

// drop deletes the run's topics from Apache Kafka: a finished run's
// compacted topics would otherwise keep the broker's log cleaner busy
// during the next run, and its CPU would be counted there.
func (k *cluster) drop(b *testing.B) {
	if k.col != apache || k.prefix == "" {
		return
	}
	adm, closeAdm, err := admin(k.brokers)
	if err != nil {
		b.Logf("deleting the topics of %s: %v", k.prefix, err)
		return
	}
	defer closeAdm()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		b.Logf("deleting the topics of %s: %v", k.prefix, err)
		return
	}
	var names []string
	for _, t := range topics.Names() {
		if strings.HasPrefix(t, k.prefix) {
			names = append(names, t)
		}
	}
	if len(names) == 0 {
		return
	}
	res, err := adm.DeleteTopics(ctx, names...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		b.Logf("deleting the topics of %s: %v", k.prefix, err)
	}
}

// waitGroupsEmpty waits until no consumer group of the run has a member:
// msgx's instances are static members (KIP-345), which stay in their groups
// until their session times out after the process stopped, and `msgx
// rebuild` refuses to start beside a member. What an operator waits for
// before a rebuild is not the rebuild's time.
func (k *cluster) waitGroupsEmpty(b *testing.B, limit time.Duration) time.Duration {
	b.Helper()
	adm, closeAdm, err := admin(k.brokers)
	if err != nil {
		b.Fatal(err)
	}
	defer closeAdm()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		groups, err := adm.ListGroups(ctx)
		var busy []string
		if err == nil {
			var names []string
			for _, g := range groups.Groups() {
				if strings.HasPrefix(g, k.prefix) {
					names = append(names, g)
				}
			}
			// By name only: DescribeGroups without names describes every
			// group of the cluster.
			if len(names) > 0 {
				var described kadm.DescribedGroups
				if described, err = adm.DescribeGroups(ctx, names...); err == nil {
					for _, g := range described.Sorted() {
						if len(g.Members) > 0 {
							busy = append(busy, g.Group)
						}
					}
				}
			}
		}
		cancel()
		if err == nil && len(busy) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			b.Fatalf("consumer groups still have members after %v: %v (%v)", limit, busy, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
