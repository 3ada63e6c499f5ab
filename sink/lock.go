package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/internal/clock"
)

// Advisory lock keys, one per role that must have a single active instance.
const (
	// LockIngest guards the ingest bridge (one reader of the inbox).
	LockIngest int64 = 0x6d73_6778_0001
	// LockProcess guards the processors and maintenance jobs of one deployment.
	LockProcess int64 = 0x6d73_6778_0002
	// LockSchdFlush is the transaction lock a schd flush holds while it
	// reads due rows and produces them; a flight purge takes it too, so a
	// flush never publishes a flight after the purge's tombstone.
	LockSchdFlush int64 = 0x6d73_6778_5cd1
)

// Lock is a held PostgreSQL session advisory lock. It lives on its own
// connection: when the process dies, the server ends the session and the
// lock passes to a waiting standby.
type Lock struct {
	conn    *pgx.Conn
	key     int64
	timeout time.Duration
}

// AcquireLock takes the advisory lock key, waiting as a hot standby (polling
// every interval) while another instance holds it. onWait is called once when
// the lock is found taken. It returns when the lock is held or ctx ends.
func AcquireLock(ctx context.Context, c Config, clk clock.Clock, key int64, interval time.Duration, onWait func()) (*Lock, error) {
	waited := false
	for {
		l, ok, err := tryLock(ctx, c, key)
		if err != nil {
			return nil, err
		}
		if ok {
			return l, nil
		}
		if !waited && onWait != nil {
			onWait()
		}
		waited = true
		if err := clock.Sleep(ctx, clk, interval); err != nil {
			return nil, err
		}
	}
}

// TryLock takes the advisory lock key if it is free; ok is false when
// another session holds it.
func TryLock(ctx context.Context, c Config, key int64) (l *Lock, ok bool, err error) {
	return tryLock(ctx, c, key)
}

func tryLock(ctx context.Context, c Config, key int64) (*Lock, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.PGDSN)
	if err != nil {
		return nil, false, fmt.Errorf("connecting for advisory lock: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(cctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		conn.Close(context.Background())
		return nil, false, fmt.Errorf("taking advisory lock: %w", err)
	}
	if !ok {
		conn.Close(context.Background())
		return nil, false, nil
	}
	return &Lock{conn: conn, key: key, timeout: c.Timeout}, true, nil
}

// Alive checks the lock's session still exists. A broken session means the
// lock may already belong to another instance: the holder must stop.
func (l *Lock) Alive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.conn.Ping(ctx); err != nil {
		return fmt.Errorf("advisory lock session lost: %w", err)
	}
	return nil
}

// Release gives the lock up and closes its session.
func (l *Lock) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	_, _ = l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", l.key)
	_ = l.conn.Close(ctx)
}
