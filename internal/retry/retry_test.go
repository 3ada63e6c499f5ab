package retry

import (
	"context"
	"errors"
	"fmt"
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
