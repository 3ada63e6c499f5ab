package maintenance

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/internal/clock"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
)

func TestHistorySweep(t *testing.T) {
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
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
	// 03:29 airport time on 30 November: one minute before the sweep.
	fake := clock.NewFake(time.Date(2026, 11, 30, 3, 29, 0, 0, testenv.Shanghai))
	handed := make(chan string, 10)
	purge := func(_ context.Context, flids []string, before time.Time) error {
		sort.Strings(flids)
		handed <- strings.Join(flids, ",") + " before " + before.Format(time.DateOnly)
		return nil
	}
	h, err := NewHistory(HistoryConfig{SweepAt: "03:30", Retention: 30 * 24 * time.Hour, Batch: 100},
		HistoryDeps{Pool: pool, Timeout: 10 * time.Second, Purge: purge, Clock: fake, Location: testenv.Shanghai, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Run(runCtx) }()
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-handed:
		t.Fatalf("swept before 03:30: %s", got)
	default:
	}
	fake.Advance(time.Minute)
	// Retention 30 days on 30 Nov: operation days before 31 Oct go.
	if got := <-handed; got != "a,b before 2026-10-31" {
		t.Fatalf("handed over %q, want a,b before 2026-10-31", got)
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

// NewHistory names what is missing: a nil collaborator is an error, not a
// panic.
func TestNewHistoryRefusesIncompleteDeps(t *testing.T) {
	hcfg := HistoryConfig{SweepAt: "03:30", Retention: 720 * time.Hour, Batch: 10}
	_, err := NewHistory(hcfg, HistoryDeps{})
	for _, want := range []string{"history: no PostgreSQL pool", "MSGX_DB_TIMEOUT", "no router to hand the purges to", "no clock", "no logger", "no airport time zone"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewHistory with empty deps: %v, want it to name %q", err, want)
		}
	}
}
