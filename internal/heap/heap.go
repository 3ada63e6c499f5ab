package heap

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Config configures the pacer.
type Config struct {
	// HeadroomMiB is how far the heap may grow past its live size before a
	// collection, at least, in MiB (0: Go's pace alone, GOGC).
	HeadroomMiB int `env:"MSGX_GC_HEADROOM" envDefault:"64"`
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.HeadroomMiB < 0 {
		return errors.New("MSGX_GC_HEADROOM: must not be negative")
	}
	return nil
}

// Deps are the pacer's collaborators.
type Deps struct {
	// Log receives the pacer's lines (required; component=heap is added).
	Log *slog.Logger
}

// Pacer sets GOGC after every collection (Percent).
type Pacer struct {
	cfg Config
	log *slog.Logger
	// base is GOGC's value when the pacer started: the least percent it
	// sets, and what it restores when it stops.
	base int

	mu      sync.Mutex
	stopped bool
	percent int
	// adjusted, if set, is called after each adjustment (tests).
	adjusted func(percent int)
}

// New checks cfg and d and returns the pacer.
func New(cfg Config, d Deps) (*Pacer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Log == nil {
		return nil, errors.New("heap: no logger")
	}
	return &Pacer{cfg: cfg, log: d.Log.With("component", "heap")}, nil
}

// Percent is the GOGC that lets a heap whose collection found live bytes
// grow by headroom bytes at least, and by base percent of live at least.
func Percent(live, headroom uint64, base int) int {
	if live == 0 || headroom == 0 {
		return base
	}
	p := (headroom*100 + live - 1) / live
	if p > 1<<20 {
		p = 1 << 20
	}
	return max(base, int(p))
}

// Run paces the collector until ctx ends, then gives GOGC back its value.
// It does nothing when GOGC is set in the environment or the headroom is
// 0.
func (p *Pacer) Run(ctx context.Context) error {
	if _, set := os.LookupEnv("GOGC"); set || p.cfg.HeadroomMiB == 0 {
		<-ctx.Done()
		return nil
	}
	// The current value, read by setting it back.
	p.base = debug.SetGCPercent(100)
	debug.SetGCPercent(p.base)
	if p.base < 0 {
		// GOGC=off set by the program: nothing to pace.
		<-ctx.Done()
		return nil
	}
	p.log.Debug("pacing the garbage collector", "headroom_mib", p.cfg.HeadroomMiB, "gogc", p.base)
	p.arm()
	<-ctx.Done()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	debug.SetGCPercent(p.base)
	return nil
}

// arm runs adjust after the next collection: a cleanup runs once its
// object was found unreachable, and the object is unreachable from the
// start.
func (p *Pacer) arm() {
	sentinel := new([16]byte)
	runtime.AddCleanup(sentinel, func(p *Pacer) { p.adjust() }, p)
}

// adjust sets GOGC from the live heap the last collection found, and arms
// the next adjustment.
func (p *Pacer) adjust() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindUint64 {
		percent := Percent(sample[0].Value.Uint64(), uint64(p.cfg.HeadroomMiB)<<20, p.base)
		// Only a change of a tenth or more: SetGCPercent takes the heap
		// lock.
		if percent*10 < p.percent*9 || percent*10 > p.percent*11 {
			debug.SetGCPercent(percent)
			p.percent = percent
		}
	}
	if p.adjusted != nil {
		p.adjusted(p.percent)
	}
	p.arm()
}
