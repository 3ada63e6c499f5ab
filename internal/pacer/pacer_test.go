package pacer

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 128 * mib, maxPercent},       // start-up: nothing live yet
		{1 * mib, 128 * mib, maxPercent}, // bounded
		{32 * mib, 128 * mib, 400},       // grows by 128 MiB, not 32
		{60 * mib, 128 * mib, 214},       // rounded up
		{60 * mib, DefaultHeadroom, 160}, // the 50,000 backlog
		{128 * mib, 128 * mib, 100},      // Go's default from here on
		{1024 * mib, 128 * mib, 100},     // a large log: never more than Go's factor
		{3 * mib, 1 * mib, 100},          // a small headroom changes nothing
		{100 * mib, 128*mib + 1, 129},    // never less growth than the headroom
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.headroom/mib, got, c.want)
		}
	}
}

// TestStartFollowsCollections checks the pacer runs after collections and
// keeps the collector's target in its range (Percent is TestPercent's).
func TestStartFollowsCollections(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	seen := make(chan int, 100)
	// start, not Start: a second run of the test (-count) arms its own.
	start(DefaultHeadroom, func(p int) {
		select {
		case seen <- p:
		default:
		}
	})
	first := <-seen // Start's own adjustment
	if first < 100 || first > maxPercent {
		t.Fatalf("first target %d, want 100…%d", first, maxPercent)
	}
	// Each collection finds the previous sentinel unreachable; its
	// finalizer reports. Collect until two reports came (finalizers run
	// on their own goroutine, after the collection returns).
	for n := 0; n < 2; {
		runtime.GC()
		select {
		case p := <-seen:
			if p < 100 || p > maxPercent {
				t.Fatalf("target %d after a collection, want 100…%d", p, maxPercent)
			}
			// The collector's target is what the pacer set last (which
			// may already be a later collection's).
			if got := debug.SetGCPercent(p); got < 100 || got > maxPercent {
				t.Fatalf("collector's target %d, want 100…%d", got, maxPercent)
			}
			n++
		default:
			runtime.Gosched()
		}
	}
}
