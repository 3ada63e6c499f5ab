package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"msgx/internal/clock"
)

// schedule says when a job's next pass is due, given when its last pass
// ended (zero before the first) and now.
type schedule interface {
	next(last, now time.Time) time.Time
}

// every is a pass at once, then one a period after each pass ended.
type every time.Duration

func (e every) next(last, now time.Time) time.Time {
	if last.IsZero() {
		return now
	}
	return last.Add(time.Duration(e))
}

// daily is a pass every day at a wall-clock time of a zone, the first one
// at the next such time.
type daily struct {
	hour, minute int
	loc          *time.Location
}

// parseDaily parses at, HH:MM.
func parseDaily(at string, loc *time.Location) (daily, error) {
	t, err := time.Parse("15:04", at)
	if err != nil {
		return daily{}, err
	}
	return daily{hour: t.Hour(), minute: t.Minute(), loc: loc}, nil
}

// next is the next HH:MM strictly after now.
func (d daily) next(_, now time.Time) time.Time {
	local := now.In(d.loc)
	t := time.Date(local.Year(), local.Month(), local.Day(), d.hour, d.minute, 0, 0, d.loc)
	if !t.After(now) {
		t = t.AddDate(0, 0, 1)
	}
	return t
}

// Passes are a job's counters of its passes since start, for msgx status
// and the metrics.
type Passes struct {
	// Runs counts completed passes, FailedRuns those that stopped on an
	// error.
	Runs       int64 `json:"runs"`
	FailedRuns int64 `json:"failedRuns"`
	// LastRun is the start of the last pass (zero before); LastDuration
	// its length.
	LastRun      time.Time     `json:"lastRun"`
	LastDuration time.Duration `json:"lastDuration"`
	// LastError is the last failure, cleared by the next clean pass.
	LastError string `json:"lastError,omitempty"`
}

// job is what every maintenance job shares — the way river's maintenance
// services share a base: its logger (component=name), the clock, the
// schedule its passes run on, one pass at a time, and the counters of its
// passes. A job brings its pass (policy, on sink's statements) and the
// lines that say what a pass did.
type job struct {
	clk  clock.Clock
	log  *slog.Logger
	when schedule

	pass sync.Mutex // one pass at a time per process (Run and a pass on request)

	mu     sync.Mutex
	passes Passes
}

// newJob returns the base of job name (its constructor checked the clock
// and the logger).
func newJob(name string, clk clock.Clock, log *slog.Logger, when schedule) job {
	return job{clk: clk, log: log.With("component", name), when: when}
}

// run does a pass whenever the schedule says one is due, until ctx ends,
// then returns nil; the waits are on the injected clock. A failed pass is
// only reported (done reports every pass, failed or not): the next one is
// due as usual, and nothing here stops the daemon.
func (j *job) run(ctx context.Context, pass func(context.Context) error, done func(error)) error {
	var last time.Time
	for {
		now := j.clk.Now()
		if err := clock.Sleep(ctx, j.clk, j.when.next(last, now).Sub(now)); err != nil {
			return nil
		}
		err := j.once(ctx, pass)
		if ctx.Err() != nil {
			return nil
		}
		done(err)
		last = j.clk.Now()
	}
}

// once does one pass, alone, and counts it: a pass that fails, or is cut
// short by ctx, counts as failed.
func (j *job) once(ctx context.Context, pass func(context.Context) error) error {
	j.pass.Lock()
	defer j.pass.Unlock()
	start := time.Now()
	now := j.clk.Now()
	err := pass(ctx)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.passes.LastRun, j.passes.LastDuration = now, time.Since(start)
	if err != nil {
		j.passes.FailedRuns++
		j.passes.LastError = err.Error()
	} else {
		j.passes.Runs++
		j.passes.LastError = ""
	}
	return err
}
