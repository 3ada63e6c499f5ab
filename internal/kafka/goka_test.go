package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/kafka"
	"msgx/internal/testenv"
)

// TestGokaCallbackBlocksBeyondTheSession re-checks on Apache Kafka the
// goka fact msgx's head-of-line retries rest on (docs/design.md#goka-facts):
// a callback that blocks far longer than the consumer session timeout (15 s
// against 3 s) keeps its group membership — sarama heartbeats beside it —
// and the group does not rebalance; the next record follows once it
// returns, and the group's offsets were committed for both.
func TestGokaCallbackBlocksBeyondTheSession(t *testing.T) {
	t.Parallel()
	k := testenv.RealKafka(t)
	p := testenv.KafkaPrefix()
	c := testenv.KafkaConfig(k.Addrs())
	c.SessionTimeout, c.RebalanceTimeout, c.InstanceID = 3*time.Second, 5*time.Second, p+"member"
	topic, group := p+"in", goka.Group(p+"blocking")
	if err := kafka.EnsureTopics(k.Addrs(), c, []kafka.TopicSpec{{Name: topic, Partitions: 1}}, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	handled := make(chan string, 2)
	release := make(chan struct{})
	g := goka.DefineGroup(group, goka.Input(goka.Stream(topic), new(codec.String), func(ctx goka.Context, msg any) {
		if msg.(string) == "first" {
			select {
			case <-release:
			case <-ctx.Context().Done():
				kafka.Abort(ctx, ctx.Context().Err())
			}
		}
		handled <- msg.(string)
	}))
	proc, err := goka.NewProcessor(k.Addrs(), g, kafka.GokaOptions(c, kafka.MemoryStorage(), testenv.Logger(t))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range []string{"first", "second"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm, closeAdm, err := k.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	member := func() string {
		d, err := adm.DescribeGroups(ctx, string(group))
		if err != nil || len(d[string(group)].Members) != 1 {
			return "none"
		}
		return d[string(group)].State + " " + d[string(group)].Members[0].MemberID
	}
	deadline := time.Now().Add(time.Minute)
	before := member()
	for before == "none" || before[:6] != "Stable" {
		if time.Now().After(deadline) {
			t.Fatalf("the group never became stable: %s", before)
		}
		time.Sleep(200 * time.Millisecond)
		before = member()
	}
	time.Sleep(15 * time.Second) // the callback blocks: five session timeouts
	if during := member(); during != before {
		t.Fatalf("the group changed while the callback blocked: %s, then %s", before, during)
	}
	close(release)
	for _, want := range []string{"first", "second"} {
		select {
		case got := <-handled:
			if got != want {
				t.Fatalf("handled %q, want %q", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%q was not handled", want)
		}
	}
	testenv.WaitCaughtUp(t, k.Addrs(), string(group), []string{topic}, time.Minute)
	if after := member(); after != before {
		t.Fatalf("the group changed: %s, then %s", before, after)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("one member through a 15 s callback with a 3 s session: %s", before)
}
