package kafka_test

import (
	"context"
	"testing"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
)

func TestIdentityMismatch(t *testing.T) {
	bound := kafka.Identity{ClusterID: "A", InboxTopic: "msgx.inbox", InboxTopicID: "t1"}
	for _, tc := range []struct {
		name string
		seen kafka.Identity
		want string
	}{
		{"same", bound, ""},
		{"other cluster", kafka.Identity{ClusterID: "B", InboxTopic: "msgx.inbox", InboxTopicID: "t2"}, "another Kafka cluster"},
		{"other cluster ID only", kafka.Identity{ClusterID: "B", InboxTopic: "msgx.inbox", InboxTopicID: "t1"}, "another Kafka cluster ID"},
		{"inbox missing", kafka.Identity{ClusterID: "A", InboxTopic: "msgx.inbox"}, "the inbox topic is missing (a wiped or another cluster)"},
		{"inbox created again", kafka.Identity{ClusterID: "A", InboxTopic: "msgx.inbox", InboxTopicID: "t9"}, "the inbox topic was created again (a wiped or another cluster)"},
		{"other topic name", kafka.Identity{ClusterID: "A", InboxTopic: "other.inbox", InboxTopicID: "t1"}, "another inbox topic name"},
	} {
		if got := bound.Mismatch(tc.seen); got != tc.want {
			t.Errorf("%s: Mismatch = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Every embedded broker is its own cluster (kfake's default ID is one for
// all), and one started again on its data directory is the same cluster
// with the same msgx.inbox.
func TestEmbeddedBrokerIdentity(t *testing.T) {
	ctx := context.Background()
	log := testenv.Logger(t)
	dir := t.TempDir()
	a, err := kafka.StartBroker("127.0.0.1:0", dir, log)
	if err != nil {
		t.Fatal(err)
	}
	kc := testenv.KafkaConfig(a.Addrs())
	inbox := []kafka.TopicSpec{{Name: "msgx.inbox", Partitions: 1}}
	if id, err := kafka.ReadIdentity(ctx, kc, a.Addrs(), "msgx.inbox"); err != nil || id.InboxTopicID != "" || id.ClusterID == "" {
		t.Fatalf("before the topic: %+v %v", id, err)
	}
	if err := kafka.EnsureTopics(a.Addrs(), kc, inbox, log); err != nil {
		t.Fatal(err)
	}
	first, err := kafka.ReadIdentity(ctx, kc, a.Addrs(), "msgx.inbox")
	if err != nil || first.InboxTopicID == "" {
		t.Fatalf("identity %+v %v", first, err)
	}
	a.Close()

	b := testenv.NewBroker(t)
	other, err := kafka.ReadIdentity(ctx, testenv.KafkaConfig(b), b, "msgx.inbox")
	if err != nil {
		t.Fatal(err)
	}
	if other.ClusterID == first.ClusterID {
		t.Fatalf("two embedded brokers share the cluster ID %s", other.ClusterID)
	}

	again, err := kafka.StartBroker("127.0.0.1:0", dir, log)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	kc = testenv.KafkaConfig(again.Addrs())
	got, err := kafka.ReadIdentity(ctx, kc, again.Addrs(), "msgx.inbox")
	if err != nil || got != first {
		t.Fatalf("after a restart: %+v %v, want %+v", got, err, first)
	}
	// A topic created again is recognised.
	if err := kafka.RecreateTopics(ctx, clock.Real{}, again.Addrs(), kc, inbox, log); err != nil {
		t.Fatal(err)
	}
	recreated, err := kafka.ReadIdentity(ctx, kc, again.Addrs(), "msgx.inbox")
	if err != nil {
		t.Fatal(err)
	}
	if why := first.Mismatch(recreated); why == "" {
		t.Fatalf("a re-created msgx.inbox (%s) passes for the bound one (%s)", recreated.InboxTopicID, first.InboxTopicID)
	}
}
