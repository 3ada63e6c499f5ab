package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeFiresWaitersInOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	a := f.After(2 * time.Second)
	b := f.After(time.Second)
	f.Advance(time.Second)
	select {
	case got := <-b:
		if !got.Equal(t0.Add(time.Second)) {
			t.Fatalf("b fired at %v", got)
		}
	default:
		t.Fatal("b did not fire after 1s")
	}
	select {
	case <-a:
		t.Fatal("a fired early")
	default:
	}
	f.Advance(time.Second)
	<-a
	if f.Waiters() != 0 {
		t.Fatalf("waiters left: %d", f.Waiters())
	}
}

func TestSleepIsCancellable(t *testing.T) {
	f := NewFake(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, f, time.Hour) }()
	if err := f.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Sleep returned %v, want context.Canceled", err)
	}
}

func TestSleepWakesOnAdvance(t *testing.T) {
	f := NewFake(time.Now())
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Minute) }()
	if err := f.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
