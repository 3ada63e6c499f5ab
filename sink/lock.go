package sink

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/retry"
)

// LockKey is a PostgreSQL advisory lock key. Every key msgx uses is listed
// here, so two can never collide.
type LockKey int64

// The advisory locks of msgx (docs/design.md#locks).
const (
	// LockIngest is the session lock of the ingest bridge (one reader of
	// the inbox; a second instance waits as a hot standby).
	LockIngest LockKey = 0x6d73_6778_0001
	// LockProcess is the session lock of the processing role of one
	// deployment (processors and maintenance jobs).
	LockProcess LockKey = 0x6d73_6778_0002
	// LockPartitioned is held shared by every instance running the
	// partitioned processors (msgx-flights, msgx-refdata), which share the
	// transition topics' partitions through their consumer groups instead
	// of waiting for one another; msgx rebuild takes it exclusively, so it
	// never runs beside any of them.
	LockPartitioned LockKey = 0x6d73_6778_0003
	// LockRequests is the session lock held while a process writes to the
	// outbound mailbox (a new request, or recovery), so two processes never
	// send the same PENDING request.
	LockRequests LockKey = 0x6d73_6778_0101
	// LockBackfill is the transaction lock a backfill pass holds. Replay
	// and reopen (anything that moves a terminal row away from its terminal
	// state or resets its backfill columns) take it in the same transaction
	// before reading and changing the rows: a row is then never re-opened
	// while a pass that scanned it is writing its mark, and a pass that
	// starts after the replay committed no longer sees the row as terminal.
	//
	// Why an advisory lock and not FOR UPDATE on the claimed rows: a pass
	// holds its lock across the MySQL write (up to MSGX_DB_TIMEOUT when
	// MySQL is down). Row locks held that long would stall the router,
	// whose upserts lock the row of a re-delivered message: the FIFO must
	// never wait for backfill. Nothing on the message path takes this lock.
	// The sweeper only tries it, so it never waits behind a replay either;
	// a replay waits for at most one pass in flight.
	LockBackfill LockKey = 0x6d73_6778_bf01
	// LockSchdFlush is the transaction lock a schd flush holds while it
	// reads due rows and produces them; a flight purge takes it too, so a
	// flush never publishes a flight after the purge's tombstone.
	LockSchdFlush LockKey = 0x6d73_6778_5cd1
	// LockReplay is the session lock a replay holds from its first batch to
	// its last re-injection: replays are serialised, so replay generations
	// (replay_audit ids) grow in the order their records reach msgx.inbox,
	// which is what tells a replayed transition from its redelivery
	// (docs/design.md#replay). A second replay fails at once.
	LockReplay LockKey = 0x6d73_6778_7e01
)

// XactLock waits for the transaction-scoped advisory lock key and holds it
// until tx ends. The wait is bounded by ctx (or the session's lock_timeout).
// Being transaction-scoped, the lock dies with the transaction or the
// session, so a crash cannot leak it.
func XactLock(ctx context.Context, tx pgx.Tx, key LockKey) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(key)); err != nil {
		return fmt.Errorf("waiting for %s: %w", key, err)
	}
	return nil
}

// TryXactLock takes the transaction-scoped advisory lock key if it is free;
// ok is false when another transaction holds it.
func TryXactLock(ctx context.Context, tx pgx.Tx, key LockKey) (ok bool, err error) {
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(key)).Scan(&ok); err != nil {
		return false, fmt.Errorf("taking %s: %w", key, err)
	}
	return ok, nil
}

// String names the lock for errors and logs.
func (k LockKey) String() string {
	switch k {
	case LockIngest:
		return "the ingest lock"
	case LockProcess:
		return "the process lock"
	case LockPartitioned:
		return "the partitioned processors' lock"
	case LockRequests:
		return "the outbound request lock"
	case LockBackfill:
		return "the backfill lock"
	case LockSchdFlush:
		return "the schd flush lock"
	case LockReplay:
		return "the replay lock"
	}
	return fmt.Sprintf("advisory lock %#x", int64(k))
}

// Lock is a held PostgreSQL session advisory lock. It lives on its own
// connection: when the process dies, the server ends the session and the
// lock passes to a waiting standby. Its methods may be called concurrently
// (the holder's watchdog and the components asking Alive).
type Lock struct {
	mu      sync.Mutex // serialises the connection's use
	conn    *pgx.Conn
	key     LockKey
	shared  bool
	timeout time.Duration
}

// AcquireLock takes the advisory lock key, waiting as a hot standby while
// another instance holds it and riding out PostgreSQL outages: it tries
// every interval in both cases, so after an outage of any length the lock
// is taken at most interval after PostgreSQL accepts connections again
// (a growing backoff here would delay the whole role by up to its last
// tier). onWait is called once when the lock is found taken; onOutage, if
// not nil, after each attempt that failed for an outage (callers throttle
// their logs, retry.OutageLog). Any other error is returned, as is ctx's
// when it ends.
func AcquireLock(ctx context.Context, c Config, clk clock.Clock, key LockKey, interval time.Duration, onWait func(), onOutage func(error)) (*Lock, error) {
	return acquireLock(ctx, c, clk, key, false, interval, onWait, onOutage)
}

// AcquireSharedLock is AcquireLock for a shared hold of key: any number of
// sessions hold it together, and it waits only while a session holds key
// exclusively (msgx rebuild holding LockPartitioned).
func AcquireSharedLock(ctx context.Context, c Config, clk clock.Clock, key LockKey, interval time.Duration, onWait func(), onOutage func(error)) (*Lock, error) {
	return acquireLock(ctx, c, clk, key, true, interval, onWait, onOutage)
}

func acquireLock(ctx context.Context, c Config, clk clock.Clock, key LockKey, shared bool, interval time.Duration, onWait func(), onOutage func(error)) (*Lock, error) {
	waited := false
	for {
		l, ok, err := tryLock(ctx, c, key, shared)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil && !retry.IsOutage(err):
			return nil, err
		case err != nil:
			if onOutage != nil {
				onOutage(err)
			}
		case ok:
			return l, nil
		case !waited:
			if onWait != nil {
				onWait()
			}
			waited = true
		}
		if err := clock.Sleep(ctx, clk, interval); err != nil {
			return nil, err
		}
	}
}

// TryLock takes the advisory lock key if it is free; ok is false when
// another session holds it.
func TryLock(ctx context.Context, c Config, key LockKey) (l *Lock, ok bool, err error) {
	return tryLock(ctx, c, key, false)
}

func tryLock(ctx context.Context, c Config, key LockKey, shared bool) (*Lock, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.PGDSN)
	if err != nil {
		return nil, false, fmt.Errorf("connecting for advisory lock: %w", err)
	}
	q := "SELECT pg_try_advisory_lock($1)"
	if shared {
		q = "SELECT pg_try_advisory_lock_shared($1)"
	}
	var ok bool
	if err := conn.QueryRow(cctx, q, int64(key)).Scan(&ok); err != nil {
		conn.Close(context.Background())
		return nil, false, fmt.Errorf("taking advisory lock: %w", err)
	}
	if !ok {
		conn.Close(context.Background())
		return nil, false, nil
	}
	return &Lock{conn: conn, key: key, shared: shared, timeout: c.Timeout}, true, nil
}

// TryPoolLock takes the session advisory lock key on a connection of pool,
// if it is free (ok false: another session holds it). The connection stays
// out of the pool until release, which unlocks and closes it: a session that
// might still hold the lock must never serve anyone else. timeout bounds
// each call.
func TryPoolLock(ctx context.Context, pool *pgxpool.Pool, key LockKey, timeout time.Duration) (release func(), ok bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := pool.Acquire(cctx)
	if err != nil {
		return nil, false, fmt.Errorf("taking %s: %w", key, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		// Unlocked at once; closing alone would free it only once the
		// server has noticed, which a caller taking it next may beat.
		_, _ = c.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(key))
		_ = c.Conn().Close(ctx)
		c.Release()
	}
	if err := c.QueryRow(cctx, "SELECT pg_try_advisory_lock($1)", int64(key)).Scan(&ok); err != nil {
		drop()
		return nil, false, fmt.Errorf("taking %s: %w", key, err)
	}
	if !ok {
		c.Release()
		return nil, false, nil
	}
	return drop, true, nil
}

// Alive checks the lock's session still exists. A broken session means the
// lock may already belong to another instance: the holder must stop.
func (l *Lock) Alive(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.conn.Ping(ctx); err != nil {
		return fmt.Errorf("advisory lock session lost: %w", err)
	}
	return nil
}

// Release gives the lock up and closes its session.
func (l *Lock) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	q := "SELECT pg_advisory_unlock($1)"
	if l.shared {
		q = "SELECT pg_advisory_unlock_shared($1)"
	}
	_, _ = l.conn.Exec(ctx, q, int64(l.key))
	_ = l.conn.Close(ctx)
}
