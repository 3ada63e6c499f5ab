package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"msgx/cmd/msgx/metric"
	"msgx/internal/clock"
	"msgx/internal/retry"
	"msgx/sink"
)

// The advisory locks the processing components run under
// (docs/design.md#locks): one instance holds the process lock and runs the
// single roles, every instance shares the partitioned processors' lock; a
// lost session stops what ran under it until the lock is taken again.

// errLockLost stops the processors of an instance whose lock session
// ended.
var errLockLost = errors.New("lock lost")

// lockSpec names the advisory lock a group of processing components runs
// under.
type lockSpec struct {
	key    sink.LockKey
	shared bool
	role   string // for logs: what the lock lets this instance run
}

// startFunc starts a group of components under a held lock: supervise runs
// one, alive checks that the lock's session still exists.
type startFunc func(supervise func(string, func(context.Context) error), m *metric.Metrics, alive func(context.Context) error) error

// whileLocked runs start's components each time this instance holds the
// lock, until ctx ends. An instance whose lock session is lost (PostgreSQL
// restarted) stops those components and waits for the lock again.
func whileLocked(ctx context.Context, cfg Config, d *deps, log *slog.Logger, m *metric.Metrics, l lockSpec, start startFunc) error {
	for {
		err := runLocked(ctx, cfg, d, log, m, l, start)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, errLockLost) {
			return err
		}
		log.Warn(l.key.String()+" lost: "+l.role+" stopped, waiting for it again", "component", "main", "err", err)
	}
}

// runLocked waits for the lock, then runs start's components (each
// supervised) until ctx ends or the lock's session is lost.
func runLocked(ctx context.Context, cfg Config, d *deps, log *slog.Logger, m *metric.Metrics, l lockSpec, start startFunc) error {
	// The lock is retried every MSGX_LOCK_RETRY, through outages too: the
	// components start at most that long after PostgreSQL is back.
	outage := &retry.OutageLog{Log: log.With("component", "main"), Clock: d.clock}
	acquire := sink.AcquireLock
	if l.shared {
		acquire = sink.AcquireSharedLock
	}
	lock, err := acquire(ctx, cfg.DB, d.clock, l.key, cfg.DB.LockRetry, func() {
		log.Info("standby: waiting for "+l.key.String()+" to run "+l.role, "component", "main")
	}, func(err error) {
		outage.Failed(l.key.String()+": PostgreSQL unavailable, waiting", err, "retry_every", cfg.DB.LockRetry.String())
	})
	if err != nil {
		return err
	}
	defer lock.Release()
	outage.Recovered(l.key.String() + ": PostgreSQL reachable again")
	log.Info(l.key.String()+" acquired: this instance runs "+l.role, "component", "main")
	// Checked again under the lock: the database may have been re-bound to
	// another cluster while this instance waited as a standby.
	if err := retry.UntilAvailable(ctx, d.clock, restartBackoff, func(err error, wait time.Duration) {
		outage.Failed("checking the kafka binding: dependency unavailable, waiting", err, "retry_in", wait.String())
	}, func(ctx context.Context) error { return verifyBinding(ctx, cfg, d) }); err != nil {
		return err
	}
	pg, pctx := errgroup.WithContext(ctx)
	supervise := func(name string, run func(context.Context) error) {
		pg.Go(func() error { return retry.Supervise(pctx, d.clock, restartBackoff, log, d.health, name, run) })
	}
	if err := start(supervise, m, lock.Alive); err != nil {
		return err
	}
	pg.Go(func() error {
		for {
			if err := clock.Sleep(pctx, d.clock, 5*time.Second); err != nil {
				return nil
			}
			if err := lock.Alive(pctx); err != nil && pctx.Err() == nil {
				return fmt.Errorf("%w: %w", errLockLost, err)
			}
		}
	})
	return pg.Wait()
}
