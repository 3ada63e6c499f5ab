package retry

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"msgx/internal/clock"
	"msgx/internal/health"
)

// Backoff is a list of delay tiers: the n-th consecutive failure waits
// Tiers[n-1] (the last tier repeats), never longer than Cap.
type Backoff struct {
	Tiers []time.Duration
	Cap   time.Duration
}

// Delay returns the wait after the given number of consecutive failures
// (failures >= 1).
func (b Backoff) Delay(failures int) time.Duration {
	if len(b.Tiers) == 0 || failures < 1 {
		return 0
	}
	i := failures - 1
	if i >= len(b.Tiers) {
		i = len(b.Tiers) - 1
	}
	d := b.Tiers[i]
	if b.Cap > 0 && d > b.Cap {
		d = b.Cap
	}
	return d
}

// Exponential returns Base·2^(failures-1) capped at Cap; the backfill sweeper
// uses it (30s doubling to 15m).
func Exponential(base, cap time.Duration, failures int) time.Duration {
	if failures < 1 {
		return 0
	}
	d := base
	for i := 1; i < failures && d < cap; i++ {
		d *= 2
	}
	if d > cap {
		d = cap
	}
	return d
}

// ParseTiers parses a comma-separated list of Go durations ("1s,2s,4s").
func ParseTiers(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, err := time.ParseDuration(part)
		if err != nil {
			return nil, fmt.Errorf("backoff tier %q: %w", part, err)
		}
		if d <= 0 {
			return nil, fmt.Errorf("backoff tier %q: must be positive", part)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("no backoff tiers")
	}
	return out, nil
}

// ErrOutage marks an error as a dependency outage. Wrap it with Outage.
var ErrOutage = errors.New("dependency unavailable")

type outageError struct {
	dep string
	err error
}

func (e *outageError) Error() string { return e.dep + " unavailable: " + e.err.Error() }
func (e *outageError) Unwrap() []error {
	return []error{ErrOutage, e.err}
}

// Outage wraps err as an outage of the named dependency ("postgres", "mysql",
// "kafka"). A nil err stays nil.
func Outage(dep string, err error) error {
	if err == nil {
		return nil
	}
	return &outageError{dep: dep, err: err}
}

// Dependency names the dependency of an Outage error ("postgres",
// "mysql", "kafka"), "" for any other error.
func Dependency(err error) string {
	var o *outageError
	if errors.As(err, &o) {
		return o.dep
	}
	return ""
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that no retry can fix.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// IsOutage reports whether err means a dependency could not be reached or
// stopped answering, as opposed to rejecting what we asked of it. Shutdown
// (context.Canceled) is neither.
func IsOutage(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrOutage) {
		return true
	}
	// A per-call timeout means the dependency did not answer in time.
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// PostgreSQL: failure to connect, or the server going away.
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.Timeout(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, cannot connect now
			pgErr.Code == "53300": // too many connections
			return true
		}
		return false
	}
	// MySQL: a dropped or refused connection.
	if errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1040, 1053, 2002, 2003, 2006, 2013: // too many connections, shutdown, gone away, lost
			return true
		}
		return false
	}
	// Kafka: no broker reachable.
	if errors.Is(err, sarama.ErrOutOfBrokers) || errors.Is(err, sarama.ErrNotConnected) ||
		errors.Is(err, sarama.ErrClosedClient) || errors.Is(err, sarama.ErrBrokerNotAvailable) ||
		errors.Is(err, sarama.ErrLeaderNotAvailable) || errors.Is(err, sarama.ErrNotLeaderForPartition) ||
		errors.Is(err, sarama.ErrRequestTimedOut) {
		return true
	}
	return false
}

// UntilAvailable calls fn until it succeeds, returns an error that is not an
// outage, or ctx ends. Outages are retried with backoff and reported through
// onOutage (for logs and readiness); they never count as failures of the work
// itself (docs/design.md#i7-outage-is-not-poison).
func UntilAvailable(ctx context.Context, c clock.Clock, b Backoff, onOutage func(err error, wait time.Duration), fn func(context.Context) error) error {
	for failures := 1; ; failures++ {
		err := fn(ctx)
		if err == nil || !IsOutage(err) || ctx.Err() != nil {
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		wait := b.Delay(failures)
		if onOutage != nil {
			onOutage(err, wait)
		}
		if serr := clock.Sleep(ctx, c, wait); serr != nil {
			return serr
		}
	}
}

// Supervise runs a long-running component until ctx ends. When it stops with
// an error that is not Permanent (a Kafka outage, a failed commit, a lost
// lock), it is logged and restarted after a backoff instead of taking the
// whole daemon down; readiness reports it meanwhile through onState. A
// Permanent error is returned: the component cannot work with this
// configuration.
//
// One ERROR line per cause, not one per restart: a restart that fails
// the same way as the one before is logged at DEBUG (readiness and msgx
// status keep showing it), so that a cause that lasts — a missing ACL, a
// long outage — does not flood the log.
func Supervise(ctx context.Context, c clock.Clock, b Backoff, log *slog.Logger, reg *health.Registry, name string, run func(context.Context) error) error {
	defer reg.Set(name, health.Stopped)
	last := ""
	for failures := 0; ; {
		start := c.Now()
		reg.Set(name, health.Running)
		err := run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if IsPermanent(err) {
			reg.Failed(name, err)
			return fmt.Errorf("%s: %w", name, err)
		}
		// A component that ran for a while before failing starts its
		// backoff over: the failure is new, not a crash loop.
		if c.Now().Sub(start) > time.Minute {
			failures, last = 0, ""
		}
		failures++
		wait := b.Delay(failures)
		if err == nil {
			err = errors.New("stopped unexpectedly")
		}
		reg.Failed(name, err)
		if msg := err.Error(); msg != last {
			log.Error("component stopped; restarting", "component", name, "err", err, "restart_in", wait.String())
			last = msg
		} else {
			log.Debug("component stopped again, the same way; restarting", "component", name, "restart_in", wait.String(), "restarts", failures)
		}
		if err := clock.Sleep(ctx, c, wait); err != nil {
			return nil
		}
	}
}

// WriteBackoff paces retries of a write that must eventually succeed.
var WriteBackoff = Backoff{Tiers: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}}

// Forever runs fn until it succeeds or ctx ends, for a write a processor
// cannot skip (skipping would lose it, failing the message would be wrong
// for a dependency's fault). Outages are reported through onPause(true, err)
// and the end of a pause through onPause(false, nil); any other error is
// logged and retried with the same backoff. It returns nil or ctx's error.
func Forever(ctx context.Context, c clock.Clock, log *slog.Logger, onPause func(paused bool, err error), fn func(context.Context) error) error {
	paused := false
	for failures := 1; ; failures++ {
		err := fn(ctx)
		if err == nil {
			if paused && onPause != nil {
				onPause(false, nil)
			}
			return nil
		}
		if ctx.Err() != nil {
			// Nothing waits for the dependency any more (shutdown, a
			// restart, a lost lock): the pause is over, whatever comes next.
			if paused && onPause != nil {
				onPause(false, nil)
			}
			return ctx.Err()
		}
		wait := WriteBackoff.Delay(failures)
		if IsOutage(err) {
			if !paused {
				log.Warn("paused: a dependency is unavailable; the work waits, nothing is skipped", "err", err)
			}
			paused = true
			if onPause != nil {
				onPause(true, err)
			}
		} else {
			log.Error("write failed; retrying", "err", err, "retry_in", wait.String())
		}
		if err := clock.Sleep(ctx, c, wait); err != nil {
			if paused && onPause != nil {
				onPause(false, nil)
			}
			return err
		}
	}
}

// OutageLog logs a failure that repeats on every poll of a loop while a
// dependency is down, without a line per poll: the first failure at WARN,
// then at most one summary every Every (default 30s) while it lasts, with
// the number of failures, how long and the latest error, and the recovery
// at INFO. Times come from Clock. It is not safe for concurrent use; each
// loop has its own.
type OutageLog struct {
	Log   *slog.Logger
	Clock clock.Clock
	// Every is the longest silence while the failure lasts (0: 30s).
	Every time.Duration

	since, logged time.Time
	failures      int
}

// Failed records one failed attempt; msg describes it ("ingest poll
// failed; watermark kept, retrying").
func (o *OutageLog) Failed(msg string, err error, attrs ...any) {
	now := o.Clock.Now()
	o.failures++
	every := o.Every
	if every <= 0 {
		every = 30 * time.Second
	}
	switch {
	case o.failures == 1:
		o.since, o.logged = now, now
		o.Log.Warn(msg, append(attrs, "err", err)...)
	case now.Sub(o.logged) >= every:
		o.logged = now
		o.Log.Warn(msg+" (still failing)", append(attrs, "err", err, "failures", o.failures,
			"failing_for", now.Sub(o.since).String())...)
	}
}

// Recovered records a success; after failures it logs msg at INFO with how
// many there were and how long they lasted.
func (o *OutageLog) Recovered(msg string, attrs ...any) {
	if o.failures == 0 {
		return
	}
	o.Log.Info(msg, append(attrs, "failures", o.failures, "failed_for", o.Clock.Now().Sub(o.since).String())...)
	o.failures = 0
}
