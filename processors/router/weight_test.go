package router

import (
	"runtime"
	"sort"
	"testing"
	"time"

	"msgx/internal/workload"
	"msgx/tables/route"
)

// TestPlanFactor holds planFactor to what queued records take: the text of
// the largest messages of a realistic and of a codeshare-heavy day (SCHD
// DNLD packages) and the plans Prepare decodes from it, live together, must
// weigh no more than planFactor times the text, or the router's queue holds
// more than queueBytes.
func TestPlanFactor(t *testing.T) {
	settings := Config{}.Settings(time.UTC)
	for _, o := range []workload.Options{
		{Seed: 11, Flights: 5000, Ops: 200, SharedEvery: 20},
		{Seed: 12, Flights: 5000, Ops: 200, Codeshare: true},
	} {
		day := workload.Day(o)
		sort.Slice(day, func(i, j int) bool { return len(day[i]) > len(day[j]) })
		big := day[:40]
		raw := 0
		for _, m := range big {
			raw += len(m)
		}
		// The least of three measures: goroutines other tests left behind
		// may allocate meanwhile, never free what the plans hold.
		held := 0.0
		for range 3 {
			plans := make([]route.Plan, 0, len(big))
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i, m := range big {
				plans = append(plans, route.Prepare(int64(i+1), m, settings))
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(plans)
			h := float64(raw) + float64(after.HeapAlloc) - float64(before.HeapAlloc)
			if held == 0 || h < held {
				held = h
			}
		}
		runtime.KeepAlive(day)
		t.Logf("codeshare %v: %d messages of %d KB text (largest %d B): text and plans %.0f KB = %.1f × the text",
			o.Codeshare, len(big), raw/1024, len(big[0]), held/1024, held/float64(raw))
		if held > float64(raw)*planFactor {
			t.Errorf("queued records take %.1f × their text, more than planFactor (%d): the queue would hold more than queueBytes", held/float64(raw), planFactor)
		}
	}
	if w := weight(64 << 20); w != queueBytes {
		t.Errorf("a 64 MiB record weighs %d, want all of queueBytes (%d), so that it passes alone", w, queueBytes)
	}
	if w := weight(0); w != 1 {
		t.Errorf("an empty record weighs %d, want 1", w)
	}
}
