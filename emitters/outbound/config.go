package outbound

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config configures outbound requests. Every field is a MSGX_* variable.
type Config struct {
	// Timeout is how long a SENT request waits for its answer before Run
	// closes it as EXPIRED (Go duration, default 10m).
	Timeout time.Duration `env:"MSGX_REQUEST_TIMEOUT" envDefault:"10m"`
	// RefdataAt is the optional daily time, HH:MM in the airport time zone,
	// at which Run requests, in one RQRD, every reference category not
	// requested since. Empty: no schedule.
	RefdataAt string `env:"MSGX_REQUEST_REFDATA_AT"`
	// Shadow forbids every write to MySQL (docs/design.md#shadow): requests are
	// refused with ErrShadow.
	Shadow bool `env:"MSGX_SHADOW" envDefault:"false"`
	// ClockSkew is the tolerated difference between the AODB's clock (a
	// response's META DTTM) and ours (the request's SentAt): a RESP dated up
	// to this much before SentAt still completes the request (Go duration,
	// default 2m, at most 1h); docs/design.md#requests.
	ClockSkew time.Duration `env:"MSGX_REQUEST_CLOCK_SKEW" envDefault:"2m"`
	// CheckInterval is the pause between Run's rounds of recovery, expiry and
	// schedule (Go duration, default 30s). An expiry is late by at most this.
	CheckInterval time.Duration `env:"MSGX_REQUEST_CHECK_INTERVAL" envDefault:"30s"`
	// RoutingID is written into COUTMSGS.ROUTINGID (VARCHAR(23), NOT NULL):
	// the outbox reader routes the row to the AODB by it. Default "AODB".
	RoutingID string `env:"MSGX_REQUEST_ROUTINGID" envDefault:"AODB"`
}

// DefaultConfig returns the documented defaults (what the environment
// parser produces with no MSGX_REQUEST_* variable set).
func DefaultConfig() Config {
	return Config{
		Timeout:       10 * time.Minute,
		ClockSkew:     2 * time.Minute,
		CheckInterval: 30 * time.Second,
		RoutingID:     "AODB",
	}
}

// maxRoutingID is the width of COUTMSGS.ROUTINGID.
const maxRoutingID = 23

// Validate checks every value; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("MSGX_REQUEST_TIMEOUT: must be positive"))
	}
	if _, _, _, err := parseDaily(c.RefdataAt); err != nil {
		errs = append(errs, fmt.Errorf("MSGX_REQUEST_REFDATA_AT: %w", err))
	}
	if c.ClockSkew < 0 || c.ClockSkew > time.Hour {
		errs = append(errs, fmt.Errorf("MSGX_REQUEST_CLOCK_SKEW=%s: must be between 0 and 1h", c.ClockSkew))
	}
	if c.CheckInterval <= 0 {
		errs = append(errs, errors.New("MSGX_REQUEST_CHECK_INTERVAL: must be positive"))
	}
	if id := strings.TrimSpace(c.RoutingID); id == "" || len(id) > maxRoutingID {
		errs = append(errs, fmt.Errorf("MSGX_REQUEST_ROUTINGID=%q: must be 1..%d characters", c.RoutingID, maxRoutingID))
	}
	return errors.Join(errs...)
}

// parseDaily parses "" (no schedule) or HH:MM.
func parseDaily(s string) (hour, minute int, ok bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, 0, false, nil
	}
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, 0, false, fmt.Errorf("%q: want HH:MM (airport time) or empty", s)
	}
	return t.Hour(), t.Minute(), true, nil
}

// lastDaily returns the latest instant at or before now that is hour:minute
// on the wall clock of loc.
func lastDaily(now time.Time, loc *time.Location, hour, minute int) time.Time {
	l := now.In(loc)
	at := time.Date(l.Year(), l.Month(), l.Day(), hour, minute, 0, 0, loc)
	if at.After(now) {
		at = time.Date(l.Year(), l.Month(), l.Day()-1, hour, minute, 0, 0, loc)
	}
	return at
}
