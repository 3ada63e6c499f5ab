package event_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/emitters/event"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
)

func TestOutboxPublisher(t *testing.T) {
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: testenv.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	brokers := testenv.NewBroker(t)
	kc := testenv.KafkaConfig(brokers)
	if err := kafka.EnsureTopics(brokers, kc, []kafka.TopicSpec{{Name: "ev", Partitions: 1}}, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var latencies []time.Duration
	p, err := event.New(event.Config{Batch: 1000, Poll: time.Second}, event.Deps{Pool: pool, DBTimeout: 10 * time.Second,
		Brokers: brokers, Kafka: kc, Clock: clock.NewFake(t0.Add(time.Second)), Log: testenv.Logger(t),
		Observe: func(d time.Duration) { latencies = append(latencies, d) }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	queue := func(evs ...sink.Event) {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return sink.QueueEvents(ctx, tx, evs, t0) }); err != nil {
			t.Fatal(err)
		}
	}
	queue(sink.Event{Topic: "ev", Key: "a", Value: []byte("1"), OriginAt: t0, MsgID: 7, StateVersion: 1},
		sink.Event{Topic: "ev", Key: "b", Value: []byte("2"), MsgID: 7, StateVersion: 3})
	queue(sink.Event{Topic: "ev", Key: "a"}) // a tombstone, no flight version

	// A crash between produce and delete: the rows stay and go out again.
	event.SetAfterProduce(p, func() error { return errors.New("killed") })
	if _, err := p.Publish(ctx); err == nil {
		t.Fatal("no crash")
	}
	event.SetAfterProduce(p, nil)
	if n, err := p.Publish(ctx); err != nil || n != 3 {
		t.Fatalf("publish after the crash: %d %v", n, err)
	}
	recs := testenv.ReadTopic(t, brokers, "ev", 6, 10*time.Second)
	var got []string
	for _, r := range recs {
		v := "<nil>"
		if r.Value != nil {
			v = string(r.Value)
		}
		got = append(got, string(r.Key)+"="+v)
	}
	want := "a=1 b=2 a=<nil> a=1 b=2 a=<nil>"
	if s := joinSpace(got); s != want {
		t.Fatalf("topic %q, want %q (in order, at least once, tombstone kept)", s, want)
	}
	var left int
	_ = pool.QueryRow(ctx, "SELECT COUNT(*) FROM event_outbox").Scan(&left)
	if left != 0 || p.Stats().Published["ev"] != 3 || len(latencies) != 1 || latencies[0] != time.Second {
		t.Fatalf("outbox %d left, stats %+v, latencies %v", left, p.Stats(), latencies)
	}
	if n, err := p.Publish(ctx); n != 0 || err != nil {
		t.Fatalf("empty outbox published %d %v", n, err)
	}
	// Where each version's event landed (msgx trace): the produce that was
	// confirmed (the crashed batch's copies at 0 and 1 are on the topic,
	// unrecorded); nothing for the tombstone.
	rows, err := pool.Query(ctx, `SELECT flid || ' v' || state_version || ' m' || msg_id || ' ' || topic || ' ' || kafka_partition || '@' || kafka_offset,
		produced_at FROM msg_event ORDER BY flid`)
	if err != nil {
		t.Fatal(err)
	}
	var index []string
	for rows.Next() {
		var s string
		var at time.Time
		if err := rows.Scan(&s, &at); err != nil {
			t.Fatal(err)
		}
		if !at.Equal(t0.Add(time.Second)) {
			t.Errorf("%s produced at %s, want the publisher's clock", s, at)
		}
		index = append(index, s)
	}
	if got, want := joinSpace(index), "a v1 m7 ev 0@3 b v3 m7 ev 0@4"; got != want {
		t.Fatalf("msg_event %q, want %q", got, want)
	}
}

func TestOutboxPublisherKafkaDown(t *testing.T) {
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: testenv.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	kc := testenv.KafkaConfig([]string{"127.0.0.1:1"})
	kc.Timeout = time.Second
	p, err := event.New(event.Config{Batch: 1000, Poll: time.Second}, event.Deps{Pool: pool, DBTimeout: 10 * time.Second,
		Brokers: []string{"127.0.0.1:1"}, Kafka: kc, Clock: clock.Real{}, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return sink.QueueEvents(ctx, tx, []sink.Event{{Topic: "ev", Key: "a", Value: []byte("1")}}, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(ctx); err == nil {
		t.Fatal("published without Kafka")
	}
	var left int
	_ = pool.QueryRow(ctx, "SELECT COUNT(*) FROM event_outbox").Scan(&left)
	if left != 1 {
		t.Fatalf("the event left the outbox without being produced: %d", left)
	}
}

func joinSpace(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}
