package commit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/testenv"
)

// rig is a Group writing ints into a table of a real PostgreSQL.
type rig struct {
	t    *testing.T
	pool *pgxpool.Pool
	clk  *clock.Fake
	g    *Group[int]
	// fail, while positive, fails that many transactions after their
	// inserts (they roll back).
	fail atomic.Int32
	// txs counts the committed transactions.
	txs atomic.Int32
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.NewEmptyPG(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE item (n int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, pool: pool, clk: clock.NewFake(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))}
	r.g, err = New(cfg, Deps[int]{Pool: pool, Timeout: 10 * time.Second, Clock: r.clk, Log: testenv.Logger(t),
		Write: func(ctx context.Context, tx pgx.Tx, items []int) error {
			if _, err := tx.Exec(ctx, `INSERT INTO item SELECT unnest($1::int[])`, items); err != nil {
				return err
			}
			if r.fail.Load() > 0 {
				r.fail.Add(-1)
				return errors.New("injected failure")
			}
			return nil
		},
		Committed: func([]int) { r.txs.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// stored reports whether item n is committed.
func (r *rig) stored(n int) bool {
	var ok bool
	if err := r.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM item WHERE n = $1)`, n).Scan(&ok); err != nil {
		r.t.Error(err)
	}
	return ok
}

// run starts the worker; the returned function stops it and waits.
func (r *rig) run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.g.Run(ctx) }()
	return func() { cancel(); r.g.drain(done); <-done }
}

// TestDoneOnlyAfterCommit: every input's done runs after the transaction
// holding its write committed, in the order the inputs were added, and a
// backlog shares transactions.
func TestDoneOnlyAfterCommit(t *testing.T) {
	r := newRig(t, Config{Size: 100})
	stop := r.run()
	defer stop()
	const n = 1000
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		i := i
		if err := r.g.Add(context.Background(), i, 10, func(err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("item %d: %v", i, err)
			}
			if !r.stored(i) {
				t.Errorf("item %d: done before its write was committed", i)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("done of item %d called in place %d", v, i)
		}
	}
	if txs := r.txs.Load(); txs >= n/2 {
		t.Errorf("%d transactions for %d queued inputs: the backlog did not share them", txs, n)
	}
	t.Logf("%d inputs in %d transactions", n, r.txs.Load())
}

// TestFailedTransactionIsRetriedWhole: a transaction that fails rolls back
// and is written again whole after the backoff (fake clock); no done runs
// before it commits.
func TestFailedTransactionIsRetriedWhole(t *testing.T) {
	r := newRig(t, Config{Size: 10})
	r.fail.Store(1)
	stop := r.run()
	defer stop()
	got := make(chan error, 1)
	if err := r.g.Add(context.Background(), 7, 1, func(err error) { got <- err }); err != nil {
		t.Fatal(err)
	}
	// The failed attempt sleeps on the fake clock before the retry.
	if err := r.clk.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("done ran (%v) before the retried transaction committed", err)
	default:
	}
	if r.stored(7) {
		t.Fatal("the failed transaction's insert was committed")
	}
	r.clk.Advance(time.Minute)
	if err := <-got; err != nil {
		t.Fatalf("done: %v", err)
	}
	if !r.stored(7) {
		t.Fatal("done ran but the write is not committed")
	}
}

// TestSyncWaitsForEarlierInputs: Sync returns once every input added before
// it is committed.
func TestSyncWaitsForEarlierInputs(t *testing.T) {
	r := newRig(t, Config{Size: 50})
	stop := r.run()
	defer stop()
	for i := 0; i < 200; i++ {
		if err := r.g.Add(context.Background(), i, 1, func(error) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.g.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM item`).Scan(&n); err != nil || n != 200 {
		t.Fatalf("after Sync %d of 200 items committed (%v)", n, err)
	}
}

// TestLingerWaitsOnlyBehindABacklog: a lone input is written at once; an
// input with another queued behind it waits for the linger (fake clock) to
// gather more.
func TestLingerWaitsOnlyBehindABacklog(t *testing.T) {
	r := newRig(t, Config{Size: 10, Linger: time.Second})
	got := make(chan int, 10)
	add := func(i int) {
		if err := r.g.Add(context.Background(), i, 1, func(err error) {
			if err != nil {
				t.Error(err)
			}
			got <- i
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Two inputs queued before the worker starts: the batch lingers.
	add(1)
	add(2)
	stop := r.run()
	defer stop()
	if err := r.clk.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	add(3) // joins the lingering batch
	r.clk.Advance(time.Second)
	for want := 1; want <= 3; want++ {
		if i := <-got; i != want {
			t.Fatalf("done of %d, want %d", i, want)
		}
	}
	if n := r.txs.Load(); n != 1 {
		t.Fatalf("%d transactions for the lingering batch, want 1", n)
	}
	add(4) // alone: no linger, no clock needed
	if i := <-got; i != 4 {
		t.Fatalf("done of %d, want 4", i)
	}
}

// TestStopWritesWhatIsQueued: when the worker stops, what is queued is
// written in one last transaction; inputs added afterwards fail with
// ErrStopping.
func TestStopWritesWhatIsQueued(t *testing.T) {
	r := newRig(t, Config{Size: 10, Linger: time.Second})
	results := make(chan error, 3)
	for i := 1; i <= 2; i++ {
		if err := r.g.Add(context.Background(), i, 1, func(err error) { results <- err }); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.g.Run(ctx) }()
	if err := r.clk.BlockUntil(context.Background(), 1); err != nil { // lingering
		t.Fatal(err)
	}
	cancel()
	<-done
	for i := 0; i < 2; i++ {
		if err := <-results; err != nil {
			t.Fatalf("queued input at stop: %v", err)
		}
	}
	if !r.stored(1) || !r.stored(2) {
		t.Fatal("the inputs queued at stop were not written")
	}
	procDone := make(chan struct{})
	close(procDone)
	go r.g.drain(procDone)
	<-r.g.stopped
	err := r.g.Add(context.Background(), 3, 1, func(err error) { results <- err })
	if !errors.Is(err, ErrStopping) || !errors.Is(<-results, ErrStopping) {
		t.Fatalf("Add after stop: %v", err)
	}
}
