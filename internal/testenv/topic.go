package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadTopic reads a topic from its beginning with franz-go, a Kafka client
// independent of the sarama producers under test, until it has n records or
// timeout passes. It returns what it read, as a consumer with the default
// isolation.level=read_uncommitted sees it: records of open and aborted
// transactions included.
func ReadTopic(t testing.TB, brokers []string, topic string, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	return readTopic(t, brokers, topic, n, timeout)
}

// ReadCommitted is ReadTopic with isolation.level=read_committed: only
// records of committed transactions (and non-transactional ones), and
// nothing at or after the first still open transaction.
func ReadCommitted(t testing.TB, brokers []string, topic string, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	return readTopic(t, brokers, topic, n, timeout, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
}

func readTopic(t testing.TB, brokers []string, topic string, n int, timeout time.Duration, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// EndOffset returns the high watermark of partition 0 of a topic: how many
// records were ever written to it.
func EndOffset(t testing.TB, brokers []string, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok {
		t.Fatalf("topic %s has no partition 0", topic)
	}
	return o.Offset
}

// WaitCaughtUp waits until consumer group has committed offsets up to the end
// of every partition-0 topic listed: everything it read was fully processed
// (goka commits only after a message's emits were acknowledged).
func WaitCaughtUp(t testing.TB, brokers []string, group string, topics []string, timeout time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends, err1 := adm.ListEndOffsets(ctx, topics...)
		committed, err2 := adm.FetchOffsets(ctx, group)
		cancel()
		done := err1 == nil && err2 == nil
		if done {
			for _, tp := range topics {
				end, _ := ends.Lookup(tp, 0)
				c, ok := committed.Lookup(tp, 0)
				if end.Offset > 0 && (!ok || c.At < end.Offset) {
					done = false
				}
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not catch up with %v (%v %v)", group, topics, err1, err2)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ReadAll reads every record of a topic, all partitions, up to the end
// offsets it has when called: ReadToEnd as a read_uncommitted consumer
// (records of aborted transactions included).
func ReadAll(t testing.TB, brokers []string, topic string, timeout time.Duration) []*kgo.Record {
	t.Helper()
	return ReadToEnd(t, brokers, topic, false, timeout)
}

// ReadToEnd reads every partition of topic from its start to its end as
// of the call — the last stable offset with committed (isolation.level=
// read_committed), the high watermark without — and returns the data
// records in partition order, offset order within one. Unlike ReadTopic it
// needs no expected count and waits for no timeout: control records
// (transaction markers) are read too, so the reader knows when it reached
// the end even when the log ends with one, and left out of the result.
func ReadToEnd(t testing.TB, brokers []string, topic string, committed bool, timeout time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(admin)
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	admin.Close()
	if err != nil {
		t.Fatalf("listing the end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords()}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	byPart := map[int32][]*kgo.Record{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s to its end: %v (partitions left %v)", topic, ctx.Err(), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
			if r.Offset >= end-1 {
				delete(want, r.Partition)
			}
		})
	}
	var out []*kgo.Record
	for p := int32(0); len(byPart) > 0; p++ {
		out = append(out, byPart[p]...)
		delete(byPart, p)
	}
	return out
}
