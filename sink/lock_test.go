package sink_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"msgx/internal/clock"
	"msgx/internal/testenv"
	"msgx/sink"
)

// After a PostgreSQL outage of any length the lock is taken one retry
// interval after the server accepts connections again: the wait between
// attempts never grows (a backoff growing to 30 s made the roles resume up
// to 30 s late). The interval is MSGX_LOCK_RETRY (2 s) for the process lock
// and MSGX_POLL_INTERVAL for the ingest lock, both well under the 5 s the
// manual promises; the fake clock makes the assertion exact.
func TestAcquireLockRetriesOutagesEveryInterval(t *testing.T) {
	dsn := testenv.NewEmptyPG(t)
	proxy := testenv.NewProxy(t, "127.0.0.1:5432")
	cfg := sink.Config{PGDSN: strings.Replace(dsn, "127.0.0.1:5432", proxy.Addr(), 1), Timeout: 5 * time.Second}
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	const interval = 2 * time.Second
	proxy.Down()

	var outages atomic.Int64
	type result struct {
		l   *sink.Lock
		err error
	}
	done := make(chan result, 1)
	ctx := context.Background()
	go func() {
		l, err := sink.AcquireLock(ctx, cfg, fake, sink.LockProcess, interval, nil, func(error) { outages.Add(1) })
		done <- result{l, err}
	}()
	// A 60 s outage: one attempt per interval, every one an outage.
	for i := 1; i <= 30; i++ {
		if err := fake.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if got := outages.Load(); got != int64(i) {
			t.Fatalf("%d attempts after %v of outage, want %d", got, time.Duration(i-1)*interval, i)
		}
		fake.Advance(interval)
	}
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL accepts connections again: the next attempt, one interval
	// later, takes the lock.
	proxy.Up()
	fake.Advance(interval)
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second): // only a stuck test waits this long
		t.Fatal("lock not taken one interval after PostgreSQL came back")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Release()
	if _, ok, err := sink.TryLock(ctx, sink.Config{PGDSN: dsn, Timeout: 5 * time.Second}, sink.LockProcess); err != nil || ok {
		t.Fatalf("lock not held after AcquireLock: free=%v %v", ok, err)
	}
}

// A standby polls every interval while another session holds the lock and
// takes it on the first attempt after it was released.
func TestAcquireLockStandby(t *testing.T) {
	dsn := testenv.NewEmptyPG(t)
	cfg := sink.Config{PGDSN: dsn, Timeout: 5 * time.Second}
	ctx := context.Background()
	held, ok, err := sink.TryLock(ctx, cfg, sink.LockIngest)
	if err != nil || !ok {
		t.Fatalf("first holder: %v %v", ok, err)
	}
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	var waits atomic.Int64
	done := make(chan error, 1)
	go func() {
		l, err := sink.AcquireLock(ctx, cfg, fake, sink.LockIngest, time.Second, func() { waits.Add(1) }, nil)
		if err == nil {
			l.Release()
		}
		done <- err
	}()
	for i := 0; i < 3; i++ {
		if err := fake.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		fake.Advance(time.Second)
	}
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	held.Release()
	fake.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waits.Load() != 1 {
		t.Fatalf("onWait called %d times, want once", waits.Load())
	}
}

// Shared holders of LockPartitioned hold it together; an exclusive taker
// (msgx rebuild) is refused while any of them holds it, and a shared taker
// waits while the exclusive one holds it.
func TestSharedLock(t *testing.T) {
	dsn := testenv.NewEmptyPG(t)
	cfg := sink.Config{PGDSN: dsn, Timeout: 5 * time.Second}
	ctx := context.Background()
	clk := clock.Real{}
	a, err := sink.AcquireSharedLock(ctx, cfg, clk, sink.LockPartitioned, time.Millisecond, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sink.AcquireSharedLock(ctx, cfg, clk, sink.LockPartitioned, time.Millisecond, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := sink.TryLock(ctx, cfg, sink.LockPartitioned); err != nil || ok {
		t.Fatalf("exclusive lock taken beside two shared holders: %v %v", ok, err)
	}
	a.Release()
	if _, ok, err := sink.TryLock(ctx, cfg, sink.LockPartitioned); err != nil || ok {
		t.Fatalf("exclusive lock taken beside one shared holder: %v %v", ok, err)
	}
	b.Release()
	x, ok, err := sink.TryLock(ctx, cfg, sink.LockPartitioned)
	if err != nil || !ok {
		t.Fatalf("exclusive lock refused once the shared holders left: %v %v", ok, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	waited := false
	if _, err := sink.AcquireSharedLock(wctx, cfg, clk, sink.LockPartitioned, 10*time.Millisecond, func() { waited = true }, nil); err == nil || !waited {
		t.Fatalf("shared lock taken beside the exclusive holder (waited=%v, err=%v)", waited, err)
	}
	x.Release()
}
