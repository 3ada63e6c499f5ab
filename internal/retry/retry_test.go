package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"msgx/internal/clock"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Tiers: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 2 * time.Minute}, Cap: time.Minute}
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{{0, 0}, {1, time.Second}, {2, 2 * time.Second}, {5, 16 * time.Second}, {6, time.Minute}, {60, time.Minute}} {
		if got := b.Delay(tc.failures); got != tc.want {
			t.Errorf("Delay(%d) = %v, want %v", tc.failures, got, tc.want)
		}
	}
}

func TestExponential(t *testing.T) {
	base, cap := 30*time.Second, 15*time.Minute
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{1, 30 * time.Second}, {2, time.Minute}, {5, 8 * time.Minute}, {6, 15 * time.Minute}, {40, 15 * time.Minute}} {
		if got := Exponential(base, cap, tc.n); got != tc.want {
			t.Errorf("Exponential(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestParseTiers(t *testing.T) {
	got, err := ParseTiers("1s, 2s,4s")
	if err != nil || len(got) != 3 || got[2] != 4*time.Second {
		t.Fatalf("ParseTiers = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1s,x", "-1s"} {
		if _, err := ParseTiers(bad); err == nil {
			t.Errorf("ParseTiers(%q) accepted", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		outage bool
	}{
		{"nil", nil, false},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"marked", Outage("postgres", errors.New("boom")), true},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"pg connection exception", &pgconn.PgError{Code: "08006"}, true},
		{"pg unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"mysql gone", fmt.Errorf("q: %w", mysql.ErrInvalidConn), true},
		{"mysql syntax", &mysql.MySQLError{Number: 1064}, false},
		{"plain", errors.New("bad message"), false},
	} {
		if got := IsOutage(tc.err); got != tc.outage {
			t.Errorf("%s: IsOutage = %v, want %v", tc.name, got, tc.outage)
		}
	}
	if !IsPermanent(fmt.Errorf("w: %w", Permanent(errors.New("p")))) {
		t.Error("Permanent not detected through wrapping")
	}
}

func TestUntilAvailableRetriesOutagesOnly(t *testing.T) {
	f := clock.NewFake(time.Now())
	b := Backoff{Tiers: []time.Duration{time.Second}}
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- UntilAvailable(context.Background(), f, b, nil, func(context.Context) error {
			calls++
			if calls < 3 {
				return Outage("kafka", errors.New("down"))
			}
			return errors.New("message failure")
		})
	}()
	for i := 0; i < 2; i++ {
		if err := f.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		f.Advance(time.Second)
	}
	err := <-done
	if err == nil || err.Error() != "message failure" || calls != 3 {
		t.Fatalf("err=%v calls=%d", err, calls)
	}
}

// A failure repeated on every 200 ms poll for a minute logs its first
// occurrence, a summary every 30 s and the recovery: 4 lines, not 300.
func TestOutageLogThrottles(t *testing.T) {
	var buf bytes.Buffer
	f := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	o := &OutageLog{Log: slog.New(slog.NewJSONHandler(&buf, nil)), Clock: f}
	for i := 0; i <= 300; i++ { // t = 0 … 60 s
		o.Failed("poll failed", errors.New("connection refused"), "watermark", 7)
		f.Advance(200 * time.Millisecond)
	}
	o.Recovered("poll recovered")
	o.Recovered("poll recovered") // nothing to report the second time
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 {
		t.Fatalf("%d lines for a minute of failures:\n%s", len(lines), buf.String())
	}
	want := []string{"poll failed", "poll failed (still failing)", "poll failed (still failing)", "poll recovered"}
	for i, m := range lines {
		if m["msg"] != want[i] {
			t.Errorf("line %d: %v, want %q", i, m["msg"], want[i])
		}
	}
	if lines[1]["failures"] != float64(151) || lines[2]["failures"] != float64(301) || lines[2]["failing_for"] != "1m0s" {
		t.Errorf("summaries %v and %v, want 151 and 301 failures", lines[1], lines[2])
	}
	if lines[3]["failures"] != float64(301) || lines[3]["level"] != "INFO" || lines[0]["err"] != "connection refused" {
		t.Errorf("recovery line %v, first line %v", lines[3], lines[0])
	}
	// A new outage starts over with a first line.
	buf.Reset()
	o.Failed("poll failed", errors.New("again"))
	if !strings.Contains(buf.String(), `"msg":"poll failed"`) {
		t.Fatalf("second outage: %s", buf.String())
	}
}

// A write that was paused by an outage and is given up (shutdown, restart,
// lost lock) reports the pause as over: the component is no longer waiting.
func TestForeverEndsThePauseWhenCancelled(t *testing.T) {
	f := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var states []bool
	done := make(chan error, 1)
	go func() {
		done <- Forever(ctx, f, slog.New(slog.NewTextHandler(io.Discard, nil)), func(p bool, _ error) {
			mu.Lock()
			states = append(states, p)
			mu.Unlock()
		}, func(context.Context) error { return Outage("postgres", errors.New("connection refused")) })
	}()
	if err := f.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Forever = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) != 2 || !states[0] || states[1] {
		t.Fatalf("pause reports %v, want [true false]", states)
	}
}
