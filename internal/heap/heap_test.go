package heap

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, headroom uint64
		base, want     int
	}{
		{live: 32 * mib, headroom: 64 * mib, base: 100, want: 200},
		{live: 30 * mib, headroom: 64 * mib, base: 100, want: 214}, // rounded up
		{live: 64 * mib, headroom: 64 * mib, base: 100, want: 100},
		{live: 512 * mib, headroom: 64 * mib, base: 100, want: 100}, // GOGC's pace is more
		{live: 512 * mib, headroom: 64 * mib, base: 150, want: 150},
		{live: 1, headroom: 64 * mib, base: 100, want: 1 << 20}, // bounded
		{live: 0, headroom: 64 * mib, base: 100, want: 100},
		{live: 32 * mib, headroom: 0, base: 100, want: 100},
	} {
		if got := Percent(tc.live, tc.headroom, tc.base); got != tc.want {
			t.Errorf("Percent(%d MiB, %d MiB, %d) = %d, want %d", tc.live/mib, tc.headroom/mib, tc.base, got, tc.want)
		}
	}
}

// After a collection the pacer sets GOGC from the live heap; stopped, it
// gives GOGC back.
func TestPacerSetsGOGCAfterCollections(t *testing.T) {
	if _, err := New(Config{HeadroomMiB: -1}, Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}); err == nil {
		t.Fatal("a negative headroom was accepted")
	}
	p, err := New(Config{HeadroomMiB: 256}, Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Run does nothing while GOGC is set: unset for this test (t.Setenv
	// puts the value back after it).
	t.Setenv("GOGC", "")
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	adjusted := make(chan int, 16)
	p.adjusted = func(percent int) {
		select {
		case adjusted <- percent:
		default:
		}
	}
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	// The test binary's live heap is a few MiB: 256 MiB of headroom is
	// thousands of percent. Collections until the pacer has adjusted.
	collecting, stopCollecting := context.WithCancel(context.Background())
	defer stopCollecting()
	go func() {
		for collecting.Err() == nil {
			runtime.GC()
			runtime.Gosched()
		}
	}()
	var got int
	select {
	case got = <-adjusted:
	case <-time.After(time.Minute):
		t.Fatal("no adjustment after collections")
	}
	stopCollecting()
	if got <= 1000 {
		t.Fatalf("GOGC %d after a collection of a small heap, want thousands", got)
	}
	if cur := debug.SetGCPercent(got); cur != got {
		t.Fatalf("GOGC is %d, the pacer said %d", cur, got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if cur := debug.SetGCPercent(100); cur != 100 {
		t.Fatalf("GOGC after the pacer stopped: %d, want 100", cur)
	}
}
