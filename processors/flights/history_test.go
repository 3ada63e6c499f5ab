package flights

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/tables/flight"
)

func TestHistorySweep(t *testing.T) {
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: testenv.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i, day := range []string{"2026-09-30", "2026-10-30", "2026-10-31", "2026-11-29"} {
		r, err := flight.Apply(nil, flight.Transition{MsgID: int64(i + 1), Kind: flight.KindSchedule, FLID: string(rune('a' + i)), OperationDay: day}, flight.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return sink.WriteFlight(ctx, tx, r.State) }); err != nil {
			t.Fatal(err)
		}
	}
	brokers := testenv.NewBroker(t)
	kc := testenv.KafkaConfig(brokers)
	if err := kafka.EnsureTopics(brokers, kc, []kafka.TopicSpec{{Name: "msgx.flight-transitions", Partitions: 1}}, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	// 03:29 airport time on 30 November: one minute before the sweep.
	fake := clock.NewFake(time.Date(2026, 11, 30, 3, 29, 0, 0, testenv.Shanghai))
	h, err := NewHistory(HistoryConfig{TransitionTopic: "msgx.flight-transitions", SweepAt: "03:30", Retention: 30 * 24 * time.Hour, Batch: 100},
		HistoryDeps{Pool: pool, Timeout: 10 * time.Second, Brokers: brokers, Kafka: kc, Clock: fake, Location: testenv.Shanghai, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Run(runCtx) }()
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := testenv.EndOffset(t, brokers, "msgx.flight-transitions"); got != 0 {
		t.Fatalf("swept before 03:30: %d", got)
	}
	fake.Advance(time.Minute)
	var purged []string
	for _, r := range testenv.ReadTopic(t, brokers, "msgx.flight-transitions", 2, 10*time.Second) {
		var tr flight.Transition
		if err := json.Unmarshal(r.Value, &tr); err != nil {
			t.Fatal(err)
		}
		if tr.Kind != flight.KindPurge || tr.PurgeBefore != "2026-10-31" {
			t.Fatalf("transition %+v", tr)
		}
		purged = append(purged, tr.FLID)
	}
	sort.Strings(purged)
	// Retention 30 days on 30 Nov: operation days before 31 Oct go.
	if strings.Join(purged, ",") != "a,b" {
		t.Fatalf("purged %v, want a,b", purged)
	}
	// The next sweep is tomorrow at 03:30.
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if next := h.next(fake.Now()); !next.Equal(time.Date(2026, 12, 1, 3, 30, 0, 0, testenv.Shanghai)) {
		t.Fatalf("next sweep %v", next)
	}
	cancel()
	<-done
}
