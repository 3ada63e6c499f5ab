package testenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"msgx/internal/testenv"
)

// TestClusterDisturbed produces and reads records through a three-broker
// cluster while its leaders, coordinators and brokers move under the
// clients: nothing is lost, and the disturber says what it did.
func TestClusterDisturbed(t *testing.T) {
	c := testenv.NewCluster(t, kfake.SeedTopics(3, "t"))
	if n := len(c.Addrs()); n != 3 {
		t.Fatalf("%d brokers, want 3", n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	d := c.Disturb(testenv.Disturbance{Every: 400 * time.Millisecond, Leaders: true, Coordinators: true, Bounce: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 50
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		time.Sleep(15 * time.Millisecond) // a few rounds land between the records
	}
	got := d.Stop()
	if got.Rounds == 0 || got.Leaders != got.Rounds || got.Coordinators != got.Rounds || got.Bounces != got.Rounds {
		t.Fatalf("disturbed %+v", got)
	}
	if again := d.Stop(); again != got {
		t.Fatalf("second Stop %+v, first %+v", again, got)
	}
	seen := map[string]bool{}
	for _, r := range testenv.ReadTopic(t, c.Addrs(), "t", n, 15*time.Second) {
		seen[string(r.Value)] = true
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct records of %d", len(seen), n)
	}
	t.Logf("%d records through %+v", n, got)
}

// TestClusterFault fails exactly the requests a fault selects.
func TestClusterFault(t *testing.T) {
	c := testenv.NewCluster(t, kfake.SeedTopics(1, "t"))
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: "t", Err: kerr.UnknownTopicOrPartition, Count: 1})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ask := func() int16 {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := ask(); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("first ListOffsets answered %d, want the fault's error", code)
	}
	if code := ask(); code != 0 {
		t.Fatalf("second ListOffsets answered %d: the fault should have been used up", code)
	}
	_ = h
}
