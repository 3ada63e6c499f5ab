package schd

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"msgx/internal/kafka"
)

// Config configures the schd publisher. Every field is a MSGX_* variable.
type Config struct {
	// Topic is the latest-state topic (compacted, key FLID).
	Topic string `env:"MSGX_TOPIC_SCHD,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.schd"`
	// FlushPeriod is the pause between flushes, the aggregation window (Go
	// duration, default 3s): the versions of a flight written within one
	// period are published once, with the newest.
	FlushPeriod time.Duration `env:"MSGX_SCHD_FLUSH_PERIOD" envDefault:"3s"`
	// FlushLimit is the largest number of records one flush produces
	// (default 500, at most MaxFlushLimit, 10000). A full flush is followed
	// at once by the next.
	FlushLimit int `env:"MSGX_SCHD_FLUSH_LIMIT" envDefault:"500"`
}

// MaxFlushLimit bounds FlushLimit: one flush is one produce request batch
// and one PostgreSQL transaction.
const MaxFlushLimit = 10000

// DefaultConfig returns the documented defaults (what the environment parser
// produces with no MSGX_TOPIC_SCHD / MSGX_SCHD_* variable set).
func DefaultConfig() Config {
	return Config{Topic: "msgx.schd", FlushPeriod: 3 * time.Second, FlushLimit: 500}
}

// Validate checks every value; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Topic) == "" {
		errs = append(errs, errors.New("MSGX_TOPIC_SCHD: empty"))
	}
	if c.FlushPeriod <= 0 {
		errs = append(errs, fmt.Errorf("MSGX_SCHD_FLUSH_PERIOD=%s: must be positive", c.FlushPeriod))
	}
	if c.FlushLimit < 1 || c.FlushLimit > MaxFlushLimit {
		errs = append(errs, fmt.Errorf("MSGX_SCHD_FLUSH_LIMIT=%d: must be 1..%d", c.FlushLimit, MaxFlushLimit))
	}
	return errors.Join(errs...)
}

// TopicSpec is how the schd topic must look: compacted (latest state per
// FLID, tombstones remove deleted flights) with the given number of
// partitions (records are keyed by FLID, so one flight stays in one
// partition); partitions < 1 means 1.
func (c Config) TopicSpec(partitions int32) kafka.TopicSpec {
	if partitions < 1 {
		partitions = 1
	}
	return kafka.TopicSpec{Name: c.Topic, Partitions: partitions, Compact: true}
}
