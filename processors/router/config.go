package router

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lovoo/goka"

	"msgx/internal/kafka"
	"msgx/internal/retry"
	"msgx/tables/flight"
	"msgx/tables/route"
)

// BaseGroup is the router's goka group name before MSGX_KAFKA_PREFIX:
// Config.Group is the group a deployment runs, Config.Table its table
// (keyed by MSG_ID), msgx-router-table without a prefix.
const BaseGroup = "msgx-router"

// Config configures the router.
type Config struct {
	// InboxTopic is the router's input, the single-partition source of
	// truth the ingest bridge writes (ingest.Config.Topic reads the same
	// variable).
	InboxTopic string `env:"MSGX_TOPIC_INBOX,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.inbox"`
	// FlightTopic carries one transition per flight (key FLID).
	FlightTopic string `env:"MSGX_TOPIC_FLIGHT_TRANSITIONS,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.flight-transitions"`
	// RefdataTopic carries one transition per reference type (key RTYPE).
	RefdataTopic string `env:"MSGX_TOPIC_REFDATA_TRANSITIONS,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.refdata-transitions"`
	// KafkaPrefix goes before the group's name (kafka.Config.Prefix reads
	// the same variable and validates it).
	KafkaPrefix string `env:"MSGX_KAFKA_PREFIX"`
	// Partitions is the number of partitions of the transition topics (1
	// keeps the pipeline globally FIFO); the flights and refdata
	// processors of several msgx process instances share them
	// (docs/operations.md#split-roles-and-hot-standby).
	Partitions int32 `env:"MSGX_TRANSITION_PARTITIONS" envDefault:"1"`
	// MaxAttempts is how often a message's own failure is tried before it is
	// DEAD(EXHAUSTED) (a count, at least 1).
	MaxAttempts int `env:"MSGX_MAX_ATTEMPTS" envDefault:"5"`
	// Backoff lists the waits after the 1st, 2nd, … failure (Go durations,
	// comma-separated); there must be exactly MaxAttempts-1 tiers (a tier
	// that never fires is a mistake).
	Backoff string `env:"MSGX_BACKOFF" envDefault:"1s,2s,4s,8s"`
	// BackoffCap bounds every wait (a Go duration).
	BackoffCap time.Duration `env:"MSGX_BACKOFF_CAP" envDefault:"60s"`
	// IgnoreRules are TYPE-STYP or TYPE-* patterns (case-insensitive) whose
	// messages are SKIPPED ignored:<rule>.
	IgnoreRules string `env:"MSGX_IGNORE_RULES" envDefault:"LDM-*,EROR-*"`
	// IdentityDayBoundary adds the message day (DTTM, airport time) to the
	// business identity SNDR|TYPE|STYP|SEQN, for upstreams that reset SEQN
	// daily. Changing it
	// after go-live changes which messages count as duplicates.
	IdentityDayBoundary bool `env:"MSGX_IDENTITY_DAY_BOUNDARY" envDefault:"false"`
	// OpdayCutover is the local time (HH:MM) at which an operation day
	// starts; a flight scheduled earlier belongs to the previous day.
	OpdayCutover string `env:"MSGX_OPDAY_CUTOVER" envDefault:"00:00"`
	// ScheduleAbsent decides what happens to flights of a package's
	// operation day that a DNLD/RESP does not carry: keep or delete.
	ScheduleAbsent string `env:"MSGX_SCHEDULE_ABSENT" envDefault:"keep"`
	// ScheduleMissing: a tag a DNLD/RESP record does not carry is kept
	// ("keep") or cleared ("clear"); docs/design.md#schedule-merge. The
	// flights processor applies it (flights.Config reads the same
	// variable); the router needs it to tell what a record does to a
	// flight's MAID and FLNO (flight.Expand).
	ScheduleMissing string `env:"MSGX_SCHEDULE_MISSING" envDefault:"keep"`
	// RespGuard makes a SCHD RESP that answers no open RQFD request (none
	// open, or older than the request) SKIPPED no-match: it changes nothing.
	RespGuard bool `env:"MSGX_RESP_GUARD" envDefault:"false"`
	// Batch is the most messages decided and recorded in one PostgreSQL
	// transaction (docs/design.md#router-batches), 1..10000; 0 means
	// DefaultBatch (500, the default). It also bounds the messages queued
	// ahead of the batch worker.
	Batch int `env:"MSGX_ROUTER_BATCH" envDefault:"500"`
	// Linger is how long a batch that found messages queued behind its
	// first one waits for more before it is decided (a Go duration, at
	// most 1s; 0: never wait). A message that finds the queue empty is
	// decided at once: an idle pipeline does not wait.
	Linger time.Duration `env:"MSGX_ROUTER_LINGER" envDefault:"2ms"`
}

// DefaultBatch is the batch size a Config without one uses.
const DefaultBatch = 500

// batch is the configured batch size.
func (c Config) batch() int {
	if c.Batch == 0 {
		return DefaultBatch
	}
	return c.Batch
}

// Validate checks the configuration; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.InboxTopic) == "" {
		errs = append(errs, errors.New("MSGX_TOPIC_INBOX: empty"))
	}
	if c.FlightTopic == "" || c.RefdataTopic == "" {
		errs = append(errs, errors.New("MSGX_TOPIC_FLIGHT_TRANSITIONS and MSGX_TOPIC_REFDATA_TRANSITIONS must be set"))
	}
	if c.Partitions < 1 {
		errs = append(errs, errors.New("MSGX_TRANSITION_PARTITIONS: must be at least 1"))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, errors.New("MSGX_MAX_ATTEMPTS: must be at least 1"))
	}
	if tiers, err := retry.ParseTiers(c.Backoff); err != nil {
		if c.MaxAttempts != 1 || strings.TrimSpace(c.Backoff) != "" {
			errs = append(errs, fmt.Errorf("MSGX_BACKOFF: %w", err))
		}
	} else if len(tiers) != c.MaxAttempts-1 {
		errs = append(errs, fmt.Errorf("MSGX_BACKOFF has %s but MSGX_MAX_ATTEMPTS=%d allows %s: every tier must be able to fire",
			plural(len(tiers), "tier"), c.MaxAttempts, plural(c.MaxAttempts-1, "wait")))
	}
	if c.Batch < 0 || c.Batch > 10000 {
		errs = append(errs, fmt.Errorf("MSGX_ROUTER_BATCH=%d: must be 1..10000", c.Batch))
	}
	if c.Linger < 0 || c.Linger > time.Second {
		errs = append(errs, fmt.Errorf("MSGX_ROUTER_LINGER=%s: must be 0..1s", c.Linger))
	}
	if c.BackoffCap <= 0 {
		errs = append(errs, errors.New("MSGX_BACKOFF_CAP: must be positive"))
	}
	if _, err := route.ParseRules(c.IgnoreRules); err != nil {
		errs = append(errs, fmt.Errorf("MSGX_IGNORE_RULES: %w", err))
	}
	if _, err := parseCutover(c.OpdayCutover); err != nil {
		errs = append(errs, fmt.Errorf("MSGX_OPDAY_CUTOVER: %w", err))
	}
	switch c.ScheduleAbsent {
	case flight.ScheduleMissingKeep, "delete":
	default:
		errs = append(errs, fmt.Errorf("MSGX_SCHEDULE_ABSENT=%q: want keep or delete", c.ScheduleAbsent))
	}
	switch c.ScheduleMissing {
	case "", flight.ScheduleMissingKeep, flight.ScheduleMissingClear:
	default:
		errs = append(errs, fmt.Errorf("MSGX_SCHEDULE_MISSING=%q: want keep or clear", c.ScheduleMissing))
	}
	return errors.Join(errs...)
}

// Group is the router's goka group: MSGX_KAFKA_PREFIX + BaseGroup.
func (c Config) Group() goka.Group { return goka.Group(c.KafkaPrefix + BaseGroup) }

// Table is the router's goka table topic, named after the group.
func (c Config) Table() goka.Table { return goka.GroupTable(c.Group()) }

// backoff returns the parsed retry schedule.
func (c Config) backoff() retry.Backoff {
	tiers, _ := retry.ParseTiers(c.Backoff)
	return retry.Backoff{Tiers: tiers, Cap: c.BackoffCap}
}

// TopicSpecs are the router's output topics (created at start-up: goka does
// not create outputs, and an emit to a missing topic stops the processor).
func (c Config) TopicSpecs() []kafka.TopicSpec {
	return []kafka.TopicSpec{
		{Name: c.FlightTopic, Partitions: c.Partitions},
		{Name: c.RefdataTopic, Partitions: c.Partitions},
	}
}

// TableSpec is the router table's topic (compacted, keyed by MSG_ID, the
// single partition of msgx.inbox), which the batch worker writes: it must
// exist before the router starts.
func (c Config) TableSpec() kafka.TopicSpec {
	return kafka.TopicSpec{Name: string(c.Table()), Partitions: 1, Compact: true, MaxMessageBytes: kafka.TableRecordBytes}
}

func parseCutover(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q: want HH:MM", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// Settings parses the configuration into what the decisions depend on
// (call Validate first).
func (c Config) Settings(loc *time.Location) route.Settings {
	rules, _ := route.ParseRules(c.IgnoreRules)
	cut, _ := parseCutover(c.OpdayCutover)
	return route.Settings{Rules: rules, DayBoundary: c.IdentityDayBoundary, Loc: loc, Cutover: cut,
		AbsentDelete: c.ScheduleAbsent == "delete", RespGuard: c.RespGuard, Flight: flight.Options{ScheduleMissing: c.ScheduleMissing}}
}

// plural is "1 tier", "4 tiers".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
