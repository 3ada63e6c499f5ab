package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"msgx/internal/kafka"
	"msgx/internal/retry"
	"msgx/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestTopicCheck(t *testing.T) {
	inbox := kafka.TopicSpec{Name: "msgx.inbox", Partitions: 1, Retention: -1}
	table := kafka.TopicSpec{Name: "msgx-flights-table", Partitions: 4, Compact: true}
	week := kafka.TopicSpec{Name: "msgx.inbox", Partitions: 1, Retention: 7 * 24 * time.Hour}
	for _, tc := range []struct {
		spec       kafka.TopicSpec
		partitions int32
		configs    map[string]string
		want       string
	}{
		{inbox, 1, map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"}, ""},
		{inbox, 3, map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"}, "has 3 partitions, msgx needs 1"},
		{inbox, 1, map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}, "has cleanup.policy=compact, msgx needs delete"},
		{inbox, 1, map[string]string{"cleanup.policy": "delete", "retention.ms": "604800000"}, "has retention.ms=604800000, msgx needs -1"},
		{week, 1, map[string]string{"cleanup.policy": "delete", "retention.ms": "86400000"}, "shorter than the 604800000"},
		{week, 1, map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"}, ""},
		{table, 4, map[string]string{"cleanup.policy": "compact"}, ""},
		{table, 4, map[string]string{"cleanup.policy": "delete"}, "has cleanup.policy=delete, msgx needs compact"},
		{table, 4, map[string]string{"cleanup.policy": "compact,delete"}, "has cleanup.policy=compact,delete, msgx needs compact"},
		{table, 4, nil, ""}, // kfake reports nothing: not judged
	} {
		got := strings.Join(tc.spec.Check(tc.partitions, tc.configs), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s with %d partitions %v: %q, want %q", tc.spec.Name, tc.partitions, tc.configs, got, tc.want)
		}
	}
}

// TestEnsureTopicsOnApacheKafka creates msgx's kinds of topics on the
// three-node cluster and reads back what Kafka made of them: replication
// 3, compaction for the tables and msgx.schd, retention.ms=-1 for the
// inbox. An existing topic with the wrong partition count or cleanup
// policy is refused with one line naming it; one with the right settings
// is taken as it is.
func TestEnsureTopicsOnApacheKafka(t *testing.T) {
	t.Parallel()
	k := testenv.RealKafkaCluster(t)
	p := testenv.KafkaPrefix()
	c := testenv.KafkaConfig(k.Addrs())
	c.Replication = 3
	specs := []kafka.TopicSpec{
		{Name: p + "msgx.inbox", Partitions: 1, Retention: -1},
		{Name: p + "msgx.flight-transitions", Partitions: 4},
		{Name: p + "msgx.schd", Partitions: 4, Compact: true},
		{Name: p + "msgx-flights-table", Partitions: 4, Compact: true, MaxMessageBytes: kafka.TableRecordBytes},
	}
	ensure := func(specs ...kafka.TopicSpec) error {
		// As the daemon does (waitFor): a topic just created reaches the
		// brokers a moment later, which is an outage to wait out.
		for {
			err := kafka.EnsureTopics(k.Addrs(), c, specs, testenv.Logger(t))
			if !retry.IsOutage(err) {
				return err
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := ensure(specs...); err != nil {
		t.Fatal(err)
	}
	adm, done, err := k.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	td, err := adm.ListTopics(ctx, names...)
	for err == nil && td.Error() != nil { // not on every broker yet
		time.Sleep(200 * time.Millisecond)
		td, err = adm.ListTopics(ctx, names...)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rc := range cfgs {
		for _, e := range rc.Configs {
			if e.Source == 1 { // DYNAMIC_TOPIC_CONFIG: set on the topic
				got[rc.Name] += fmt.Sprintf(" %s=%s", e.Key, e.MaybeValue())
			}
		}
	}
	for _, s := range specs {
		d := td[s.Name]
		if len(d.Partitions) != int(s.Partitions) || d.Partitions.NumReplicas() != 3 {
			t.Errorf("%s: %d partitions of %d replicas, want %d of 3", s.Name, len(d.Partitions), d.Partitions.NumReplicas(), s.Partitions)
		}
		t.Logf("%s:%s", s.Name, got[s.Name])
	}
	for name, want := range map[string]string{
		p + "msgx.inbox": "cleanup.policy=delete", p + "msgx.schd": "cleanup.policy=compact",
		p + "msgx-flights-table": "cleanup.policy=compact",
	} {
		if !strings.Contains(got[name], want) {
			t.Errorf("%s has%s, want %s", name, got[name], want)
		}
	}
	if !strings.Contains(got[p+"msgx.inbox"], "retention.ms=-1") || !strings.Contains(got[p+"msgx-flights-table"], "max.message.bytes=16777216") {
		t.Errorf("inbox%s, table%s", got[p+"msgx.inbox"], got[p+"msgx-flights-table"])
	}

	// Topics made by someone else: the right ones are taken, wrong ones
	// refused by name.
	mk := func(name string, partitions int32, policy string) {
		t.Helper()
		v := policy
		if _, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"cleanup.policy": &v}, name); err != nil {
			t.Fatal(err)
		}
	}
	mk(p+"ok.schd", 4, "compact")
	mk(p+"few.schd", 2, "compact")
	mk(p+"deleting.schd", 4, "delete")
	mk(p+"compacted.inbox", 1, "compact")
	for _, tc := range []struct {
		spec kafka.TopicSpec
		want string
	}{
		{kafka.TopicSpec{Name: p + "ok.schd", Partitions: 4, Compact: true}, ""},
		{kafka.TopicSpec{Name: p + "few.schd", Partitions: 4, Compact: true}, "kafka topic " + p + "few.schd has 2 partitions, msgx needs 4"},
		{kafka.TopicSpec{Name: p + "deleting.schd", Partitions: 4, Compact: true}, "kafka topic " + p + "deleting.schd has cleanup.policy=delete, msgx needs compact"},
		{kafka.TopicSpec{Name: p + "compacted.inbox", Partitions: 1, Retention: -1}, "kafka topic " + p + "compacted.inbox has cleanup.policy=compact, msgx needs delete"},
	} {
		err := ensure(tc.spec)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("%s: %v, want %q in one line", tc.spec.Name, err, tc.want)
		}
	}
}
