package ingest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config configures the ingest bridge.
type Config struct {
	// Topic is the internal source-of-truth topic (one partition): ingest
	// writes it, the router reads it.
	Topic string `env:"MSGX_TOPIC_INBOX,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.inbox"`
	// Retention is the inbox topic's retention; 0 (the default) keeps its
	// records forever, which rebuild needs: it is only as complete as this
	// retention.
	Retention time.Duration `env:"MSGX_INBOX_RETENTION" envDefault:"0"`
	// PollInterval is the pause between reads once the bridge has caught up
	// (a Go duration). At 100ms a message waits 50 ms for its read on
	// average, which keeps the p99 from inbox commit to msg event under
	// 250 ms at a steady load (BenchmarkLatency); an idle bridge costs one
	// indexed MySQL read per interval.
	PollInterval time.Duration `env:"MSGX_POLL_INTERVAL" envDefault:"100ms"`
	// ClaimBatch is the number of rows read per poll.
	ClaimBatch int `env:"MSGX_CLAIM_BATCH" envDefault:"1000"`
	// ClaimMaxBytes bounds the message text one poll reads, in bytes: a poll
	// stops before the row that would take it over this bound, but always
	// reads at least one row (however large). It also bounds a replay's
	// batch. 0: DefaultClaimMaxBytes (4 MiB, the default).
	ClaimMaxBytes int `env:"MSGX_CLAIM_MAX_BYTES" envDefault:"4194304"`
	// MaxCommitDelay is how long a hole may stay open before it is released
	// as permanent (the aging fallback when the probe cannot decide).
	MaxCommitDelay time.Duration `env:"MSGX_MAX_COMMIT_DELAY" envDefault:"5m"`
	// HoleProbe enables the locking probe that waits for in-flight inserts.
	HoleProbe bool `env:"MSGX_HOLE_PROBE" envDefault:"true"`
	// HoleGrace is the wait between a probe that found a hole empty and the
	// second probe that releases it (covers an ID allocated, not yet inserted).
	HoleGrace time.Duration `env:"MSGX_HOLE_GRACE" envDefault:"1s"`
	// HoleProbeTimeout is the probe's lock wait (innodb_lock_wait_timeout,
	// whole seconds, at least 1s).
	HoleProbeTimeout time.Duration `env:"MSGX_HOLE_PROBE_TIMEOUT" envDefault:"2s"`
	// Cutover seeds the watermark of a new instance: min (read every existing
	// row), zero (start at 0, holes age as usual), max (skip the rows visible
	// now) or an explicit ID. Empty (the default; make run sets min): a new
	// instance refuses to start. An instance that has a cursor ignores it.
	Cutover string `env:"MSGX_CUTOVER_WATERMARK"`
	// LateWatch is how long released holes are watched for late rows.
	LateWatch time.Duration `env:"MSGX_LATE_WATCH" envDefault:"24h"`
	// LateCheckInterval is how often watched holes are checked.
	LateCheckInterval time.Duration `env:"MSGX_LATE_CHECK_INTERVAL" envDefault:"30s"`
}

// Validate checks every value; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Topic) == "" {
		errs = append(errs, errors.New("MSGX_TOPIC_INBOX: empty"))
	}
	if c.Retention < 0 {
		errs = append(errs, errors.New("MSGX_INBOX_RETENTION: must be 0 (forever) or positive"))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, errors.New("MSGX_POLL_INTERVAL: must be positive"))
	}
	if c.ClaimBatch < 1 || c.ClaimBatch > 100000 {
		errs = append(errs, fmt.Errorf("MSGX_CLAIM_BATCH=%d: must be 1..100000", c.ClaimBatch))
	}
	if c.ClaimMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("MSGX_CLAIM_MAX_BYTES=%d: must not be negative", c.ClaimMaxBytes))
	}
	if c.MaxCommitDelay <= 0 {
		errs = append(errs, errors.New("MSGX_MAX_COMMIT_DELAY: must be positive"))
	}
	if c.HoleGrace < 0 {
		errs = append(errs, errors.New("MSGX_HOLE_GRACE: must not be negative"))
	}
	if c.HoleProbeTimeout < time.Second || c.HoleProbeTimeout%time.Second != 0 {
		errs = append(errs, errors.New("MSGX_HOLE_PROBE_TIMEOUT: must be whole seconds, at least 1s"))
	}
	if _, _, err := ParseCutover(c.Cutover); err != nil {
		errs = append(errs, fmt.Errorf("MSGX_CUTOVER_WATERMARK: %w", err))
	}
	if c.LateWatch < 0 || c.LateCheckInterval <= 0 {
		errs = append(errs, errors.New("MSGX_LATE_WATCH must not be negative and MSGX_LATE_CHECK_INTERVAL must be positive"))
	}
	return errors.Join(errs...)
}

// DefaultClaimMaxBytes is the byte bound of a poll when ClaimMaxBytes is 0
// (4 MiB: a few thousand typical SIS messages, or one of the largest rows
// the inbox column can hold).
const DefaultClaimMaxBytes = 4 << 20

// claimMaxBytes is ClaimMaxBytes with 0 read as the default.
func (c Config) claimMaxBytes() int {
	if c.ClaimMaxBytes <= 0 {
		return DefaultClaimMaxBytes
	}
	return c.ClaimMaxBytes
}

// Seeding modes of MSGX_CUTOVER_WATERMARK.
const (
	SeedNone = ""
	SeedMin  = "min"
	SeedZero = "zero"
	SeedMax  = "max"
	SeedID   = "id"
)

// ParseCutover parses MSGX_CUTOVER_WATERMARK into a mode and, for an explicit
// ID, the watermark.
func ParseCutover(s string) (mode string, id int64, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return SeedNone, 0, nil
	case SeedMin:
		return SeedMin, 0, nil
	case SeedZero:
		return SeedZero, 0, nil
	case SeedMax:
		return SeedMax, 0, nil
	}
	id, err = strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || id < 0 {
		return "", 0, fmt.Errorf("%q: want min, zero, max or a non-negative ID", s)
	}
	return SeedID, id, nil
}
