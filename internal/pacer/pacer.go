package pacer

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultHeadroom is the heap growth (bytes) allowed between two
// collections while the live heap is smaller: 96 MiB.
const DefaultHeadroom = 96 << 20

// maxPercent bounds the target for a nearly empty heap (at start-up).
const maxPercent = 1000

// Percent is the GOGC value that lets a heap of live bytes grow by
// max(live, headroom) before the next collection: 100 (Go's default) once
// live ≥ headroom, more below, at most maxPercent.
func Percent(live, headroom uint64) int {
	if live == 0 {
		return maxPercent
	}
	if live >= headroom {
		return 100
	}
	// Rounded up, so that the growth is never less than the headroom.
	p := (headroom*100 + live - 1) / live
	return int(min(p, maxPercent))
}

var once sync.Once

// Start arms the pacer with headroom bytes and sets the first target; after
// every collection it sets GOGC to Percent of the live heap that collection
// found. Only the first call arms it.
func Start(headroom uint64) {
	once.Do(func() { start(headroom, nil) })
}

// start arms a pacer that also calls observe (when not nil) with each
// target it sets: Start's, once per process; a test's, each run.
func start(headroom uint64, observe func(percent int)) {
	p := &pacer{headroom: headroom, observe: observe, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	p.adjust()
	p.arm()
}

type pacer struct {
	headroom uint64
	observe  func(int)
	sample   []metrics.Sample
	percent  int
}

// sentinel is allocated for its finalizer: large enough and with a
// pointer, so that the tiny allocator never batches it with live objects
// (which would keep it, and the pacer, from ever being finalized).
type sentinel struct {
	p   *pacer
	pad [32]byte
}

// arm allocates a sentinel that nothing references: the next collection
// finds it unreachable and queues its finalizer, which adjusts the target
// and arms the next one.
func (p *pacer) arm() {
	s := &sentinel{p: p}
	runtime.SetFinalizer(s, func(s *sentinel) {
		s.p.adjust()
		s.p.arm()
	})
}

func (p *pacer) adjust() {
	metrics.Read(p.sample)
	var live uint64
	if p.sample[0].Value.Kind() == metrics.KindUint64 {
		live = p.sample[0].Value.Uint64()
	}
	if pc := Percent(live, p.headroom); pc != p.percent {
		debug.SetGCPercent(pc) // no stop of the world: the heap lock only
		p.percent = pc
	}
	if p.observe != nil {
		p.observe(p.percent)
	}
}
