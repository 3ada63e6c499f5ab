package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype/zeronull"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/kafka"
	"msgx/internal/need"
	"msgx/internal/retry"
	"msgx/sink"
	"msgx/sink/aodb"
	"msgx/tables/message"
)

// Report is the msgx status report. `msgx status --json` prints it as JSON;
// the field names below are a stable interface for scripts. Conventions:
// a count that could not be read is -1 and a map that could not be read is
// null, and the section's errors say why; a count that was read is never
// negative and a map that was read is never null ({} when empty). Times are
// RFC 3339; ages are whole seconds at GeneratedAt. The shape:
//
//	{"generatedAt", "alerts": [string],
//	 "inbox": {"seeded", "seedMode", "seededAt", "watermark", "cursorUpdatedAt", "maxId", "lag", "maxIdError", "zone",
//	           "oldestUnread": {"msgId", "receivedAt", "ageSeconds"} | null,
//	           "hole": {"from", "to", "since", "ageSeconds"} | null,
//	           "permanentHoles", "permanentHoleIds", "recentHoles": [{"from", "to", "releasedAt", "reason"}],
//	           "lateRows", "lateRowIds": [id], "errors": [string]},
//	 "messages": {"byState": {STATE: n}, "backlog",
//	              "oldestUnfinished": {"msgId", "state", "enqueuedAt", "ageSeconds", "attempts", "errorClass",
//	                                   "nextAttemptAt", "lastError"} | null,
//	              "deadByClass": {CLASS: n}, "deadRecent", "deadRecentWindowSeconds",
//	              "latestDead": {"msgId", "errorClass", "enqueuedAt", "lastError"} | null,
//	              "deadLatestByClass": {CLASS: [{"msgId", "errorClass", "enqueuedAt", "lastError"}]},
//	              "deadReplayable": {CLASS: bool},
//	              "skippedByReasonClass": {"duplicate"|"ignored"|"unsupported"|"no-match"|"other": n}, "errors"},
//	 "backfill": {"pending", "overdue", "overdueAfterSeconds", "oldestPendingAgeSeconds",
//	              "abandoned": {REASON: n}, "errors"},
//	 "requests": {"timeoutSeconds", "byKind": {KIND: {STATE: n}}, "open": [REQUEST],
//	              "latest": {KIND: REQUEST}, "lastClosed": {KIND: {STATE: REQUEST}},
//	              "unpairedErors", "latestUnpaired": {"msgId", "at", "detail", "code", "text"} | null, "errors"},
//	   REQUEST = {"id", "kind", "categories", "windowFrom", "windowTo", "seqn", "state", "createdAt", "ageSeconds",
//	              "sentAt", "outboxId", "closedAt", "closeReason", "answerMsgId", "erorCode", "erorText", "lastError"}
//	 "groups": [{"group", "topic", "state", "members", "partitions", "committed", "end", "lag", "error"}] | null,
//	 "groupsError",
//	 "components": [{"name", "state", "lastError", "lastErrorAt"}], "componentsError",
//	 "publisher": {"exactlyOnce", "transactionalId", "committed", "aborted", "fenced", "fencedAt", "position",
//	               "published", "reconciled", "deduplicated"} | absent}
type Report struct {
	// GeneratedAt is when the report was taken (the injected clock).
	GeneratedAt time.Time `json:"generatedAt"`
	// Alerts are the plain-language things a human must look at, most
	// urgent first; [] when all is well. See Alerts for the rules.
	Alerts []string `json:"alerts"`
	// Inbox is the ingest side: watermark, lag, holes, late rows.
	Inbox InboxStatus `json:"inbox"`
	// Messages is proc_state: where every message is.
	Messages MessageStatus `json:"messages"`
	// Backfill is the processed marks still owed to the inbox.
	Backfill BackfillStatus `json:"backfill"`
	// Requests is msgx's outbound requests to the AODB.
	Requests RequestStatus `json:"requests"`
	// Groups is the consumer lag of each goka group on each of its input
	// topics; null when Kafka could not be read (GroupsError says why).
	Groups []GroupLag `json:"groups"`
	// GroupsError is why Groups is missing or incomplete.
	GroupsError string `json:"groupsError,omitempty"`
	// Components are the daemon's components (ingest, router, flights,
	// refdata, backfill, …) with their last error. Collect leaves it
	// empty; the daemon fills it with Merge.
	Components []ComponentState `json:"components"`
	// ComponentsError is why Components is empty when no daemon reported
	// them (msgx status collecting directly: only a running daemon knows
	// its components).
	ComponentsError string `json:"componentsError,omitempty"`
	// Publisher is the event publisher of the daemon that runs it (the
	// process lock's holder); absent elsewhere. The daemon sets it.
	Publisher *PublisherStatus `json:"publisher,omitempty"`

	// th are the thresholds the alerts were computed with, kept so that
	// Merge can recompute them.
	th Config
}

// InboxStatus is the ingest side of the report: permanent holes and
// watermark lag must be observable (docs/design.md#holes).
type InboxStatus struct {
	// Seeded is false when the bridge has no cursor yet (first start
	// without MSGX_CUTOVER_WATERMARK): nothing is being read.
	Seeded bool `json:"seeded"`
	// SeedMode and SeededAt say how and when the cursor was seeded.
	SeedMode string     `json:"seedMode,omitempty"`
	SeededAt *time.Time `json:"seededAt,omitempty"`
	// Watermark is W: every inbox ID up to it has been produced to
	// msgx.inbox. -1 when unknown.
	Watermark int64 `json:"watermark"`
	// CursorUpdatedAt is the last time the bridge saved its cursor (W moved
	// or a hole timer started).
	CursorUpdatedAt *time.Time `json:"cursorUpdatedAt,omitempty"`
	// MaxID is MAX(CMINMSGS_ID) of the MySQL inbox (0 for an empty inbox,
	// -1 when unknown).
	MaxID int64 `json:"maxId"`
	// Lag is MaxID − W (never negative; -1 when unknown): IDs above the
	// watermark, holes included.
	Lag int64 `json:"lag"`
	// MaxIDError is why MaxID (and OldestUnread) could not be read: MySQL
	// unreachable or not configured.
	MaxIDError string `json:"maxIdError,omitempty"`
	// Zone names the zone the inbox's DATETIMEs (OldestUnread.ReceivedAt)
	// are read in and where it comes from, e.g. "+08:00 (MySQL session
	// time_zone +08:00)" (docs/design.md#inbox-zone).
	Zone string `json:"zone,omitempty"`
	// OldestUnread is the first inbox row above W — the next row ingest
	// has to produce — with its age by CMINMSGS_DATE_RECEIVED; nil when
	// ingest is caught up or MySQL could not be read.
	OldestUnread *UnreadRow `json:"oldestUnread"`
	// Hole is the gap right after W whose timer is running; nil when none.
	Hole *OpenHole `json:"hole"`
	// PermanentHoles is the number of gaps released without being read
	// (inbox_hole), PermanentHoleIDs the number of IDs they cover.
	PermanentHoles   int64 `json:"permanentHoles"`
	PermanentHoleIDs int64 `json:"permanentHoleIds"`
	// RecentHoles are the last released holes, newest first (at most 5).
	RecentHoles []ReleasedHole `json:"recentHoles"`
	// LateRows is the number of IDs that appeared after their hole had been
	// released (inbox_late_row): they were never enqueued and need a human.
	LateRows int64 `json:"lateRows"`
	// LateRowIDs are the newest late rows, ascending (at most 20).
	LateRowIDs []int64 `json:"lateRowIds"`
	// Errors are the PostgreSQL reads of this section that failed.
	Errors []string `json:"errors,omitempty"`
}

// UnreadRow is the first inbox row above the watermark.
type UnreadRow struct {
	MsgID int64 `json:"msgId"`
	// ReceivedAt is CMINMSGS_DATE_RECEIVED (AODB local time, may be NULL).
	ReceivedAt *time.Time `json:"receivedAt"`
	// AgeSeconds is GeneratedAt − ReceivedAt; -1 when ReceivedAt is NULL.
	AgeSeconds int64 `json:"ageSeconds"`
}

// OpenHole is the gap after the watermark that ingest is waiting on.
type OpenHole struct {
	// From and To are the first and last missing IDs (To as first
	// observed; rows inside may have arrived since).
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Since is when the gap was first seen (inbox_cursor.hole_since).
	Since      time.Time `json:"since"`
	AgeSeconds int64     `json:"ageSeconds"`
}

// ReleasedHole is one permanent hole.
type ReleasedHole struct {
	From       int64     `json:"from"`
	To         int64     `json:"to"`
	ReleasedAt time.Time `json:"releasedAt"`
	Reason     string    `json:"reason"`
}

// MessageStatus is proc_state (docs/design.md#outcomes).
type MessageStatus struct {
	// ByState counts messages by state; every state is present. null when
	// unknown; when only the terminal counts failed, the unfinished states
	// are present and the terminal ones missing.
	ByState map[string]int64 `json:"byState"`
	// Backlog is PENDING + FAILED + ROUTED: messages not finished yet.
	Backlog int64 `json:"backlog"`
	// OldestUnfinished is the queue's head (lowest unfinished MSG_ID); nil
	// when nothing is unfinished.
	OldestUnfinished *UnfinishedMessage `json:"oldestUnfinished"`
	// DeadByClass counts DEAD messages by error class (MALFORMED, PROTOCOL,
	// EXHAUSTED; UNKNOWN for a DEAD row without class).
	DeadByClass map[string]int64 `json:"deadByClass"`
	// DeadRecent is the number of DEAD messages enqueued within the last
	// DeadRecentWindowSeconds: a message goes DEAD within seconds to
	// minutes of its enqueue, so this is how fast DEAD is growing.
	DeadRecent              int64 `json:"deadRecent"`
	DeadRecentWindowSeconds int64 `json:"deadRecentWindowSeconds"`
	// LatestDead is the DEAD message with the highest MSG_ID; nil when none.
	LatestDead *DeadMessage `json:"latestDead"`
	// DeadLatestByClass holds, for each class of DeadByClass, its latest
	// DEAD messages (at most DeadLatestPerClass, highest MSG_ID first) with
	// their reasons: what the operator reads before deciding to replay or
	// accept a class. null when unknown.
	DeadLatestByClass map[string][]DeadMessage `json:"deadLatestByClass"`
	// DeadReplayable says, for each class of DeadByClass, whether `msgx
	// replay --class` can move its messages (message.ReplayableClass):
	// MALFORMED and PROTOCOL never can. null when DeadByClass is.
	DeadReplayable map[string]bool `json:"deadReplayable"`
	// SkippedByReasonClass counts SKIPPED messages by the class of their
	// reason: duplicate, ignored, unsupported, no-match (other for anything
	// else).
	SkippedByReasonClass map[string]int64 `json:"skippedByReasonClass"`
	// Errors are the reads of this section that failed.
	Errors []string `json:"errors,omitempty"`
}

// UnfinishedMessage is the oldest message that is not terminal.
type UnfinishedMessage struct {
	MsgID int64  `json:"msgId"`
	State string `json:"state"`
	// EnqueuedAt is its first delivery to the router; AgeSeconds is
	// measured from it.
	EnqueuedAt time.Time `json:"enqueuedAt"`
	AgeSeconds int64     `json:"ageSeconds"`
	Attempts   int       `json:"attempts"`
	ErrorClass string    `json:"errorClass,omitempty"`
	// NextAttemptAt is when a FAILED head is retried.
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	// LastError is the last failure (at most 200 characters).
	LastError string `json:"lastError,omitempty"`
}

// DeadMessage is the most recent DEAD message.
type DeadMessage struct {
	MsgID      int64     `json:"msgId"`
	ErrorClass string    `json:"errorClass,omitempty"`
	EnqueuedAt time.Time `json:"enqueuedAt"`
	// LastError is the reason it died (at most 200 characters).
	LastError string `json:"lastError,omitempty"`
}

// BackfillStatus is the processed marks still owed to the inbox
// (docs/design.md#backfill). It counts from proc_state, so it is right whether
// or not this process runs the sweeper.
type BackfillStatus struct {
	// Pending is the number of terminal messages whose mark is not written
	// and not abandoned — the sweeper's predicate.
	Pending int64 `json:"pending"`
	// Overdue is the part of Pending enqueued more than R
	// (MSGX_OVERDUE_BACKFILL) ago.
	Overdue int64 `json:"overdue"`
	// OverdueAfterSeconds is R.
	OverdueAfterSeconds int64 `json:"overdueAfterSeconds"`
	// OldestPendingAgeSeconds is the age of the oldest pending mark by
	// enqueue time; -1 when nothing is pending or unknown.
	OldestPendingAgeSeconds int64 `json:"oldestPendingAgeSeconds"`
	// Abandoned counts abandoned marks by reason (MISSING_ROW,
	// TRANSIENT_DEADLINE): they need reconciling by hand
	// (msgx backfill abandoned / reopen).
	Abandoned map[string]int64 `json:"abandoned"`
	// Errors are the reads of this section that failed.
	Errors []string `json:"errors,omitempty"`
}

// GroupLag is one goka group on one of its input topics (kafka.Lags).
type GroupLag = kafka.GroupLag

// Component states reported by the daemon in ComponentState.State.
const (
	// ComponentRunning: doing its work.
	ComponentRunning = "running"
	// ComponentStandby: waiting for the advisory lock held by another
	// instance (hot standby); normal.
	ComponentStandby = "standby"
	// ComponentPaused: waiting for a dependency (PostgreSQL, MySQL, Kafka)
	// and retrying; the pipeline is not moving.
	ComponentPaused = "paused"
	// ComponentStopped: not running (crashed or being restarted by its
	// supervisor).
	ComponentStopped = "stopped"
)

// ComponentState is one component of the daemon, filled by the daemon
// (Report.Merge).
type ComponentState struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// LastError is the component's last error and LastErrorAt when it
	// happened; empty when it has had none.
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
}

// PublisherStatus is the event publisher's running figures since the
// daemon started (docs/design.md#outbox). A fenced publisher is also the
// component "publisher", paused with the reason, among the alerts.
type PublisherStatus struct {
	// ExactlyOnce is MSGX_EXACTLY_ONCE: each batch a Kafka transaction
	// under TransactionalID.
	ExactlyOnce     bool   `json:"exactlyOnce"`
	TransactionalID string `json:"transactionalId,omitempty"`
	// Committed and Aborted count the transactions.
	Committed int64 `json:"committed"`
	Aborted   int64 `json:"aborted"`
	// Fenced is why the publisher stopped ("" while it publishes), FencedAt
	// since when.
	Fenced   string     `json:"fenced,omitempty"`
	FencedAt *time.Time `json:"fencedAt,omitempty"`
	// Position is the last event_outbox id committed with a transaction.
	Position int64 `json:"position"`
	// Published counts the events produced; Reconciled the outbox rows a
	// crashed session had committed, deleted at start-up without
	// publishing them again; Deduplicated the rows not published because
	// their (FLID, stateVersion) had been.
	Published    int64 `json:"published"`
	Reconciled   int64 `json:"reconciled"`
	Deduplicated int64 `json:"deduplicated"`
}

// Config decides when a figure becomes an alert. Durations are Go
// durations ("5m", "720h").
type Config struct {
	// MaxCommitDelay is ingest's MSGX_MAX_COMMIT_DELAY (read here too): the
	// bridge releases a hole after it at the latest, so a hole open for
	// twice as long (HoleAge) means the bridge is not running.
	MaxCommitDelay time.Duration `env:"MSGX_MAX_COMMIT_DELAY" envDefault:"5m"`
	// OldestUnfinishedAge: an unfinished message older than this is an
	// alert (a FAILED head blocks everything behind it; a ROUTED one waits
	// for a processor). Retries take 15s by default. (An open hole alerts
	// at twice MSGX_MAX_COMMIT_DELAY instead.)
	OldestUnfinishedAge time.Duration `env:"MSGX_STATUS_UNFINISHED_AGE" envDefault:"5m"`
	// InboxLag: more IDs than this above the watermark is an alert (a
	// count of inbox IDs).
	InboxLag int64 `env:"MSGX_STATUS_INBOX_LAG" envDefault:"10000"`
	// UnreadAge: the next inbox row waiting longer than this for ingest is
	// an alert (ingest not keeping up).
	UnreadAge time.Duration `env:"MSGX_STATUS_UNREAD_AGE" envDefault:"5m"`
	// GroupLag: a consumer group more records than this behind on a topic
	// is an alert (a count of records).
	GroupLag int64 `env:"MSGX_STATUS_GROUP_LAG" envDefault:"1000"`
	// DeadWindow is the window of the report's "DEAD recently" count
	// (Messages.DeadRecent).
	DeadWindow time.Duration `env:"MSGX_STATUS_DEAD_WINDOW" envDefault:"1h"`
	// BackfillOverdue is the sweeper's R (MSGX_OVERDUE_BACKFILL, read here
	// too): a pending mark older than it is overdue.
	BackfillOverdue time.Duration `env:"MSGX_OVERDUE_BACKFILL" envDefault:"720h"`
	// RequestTimeout is the requests' MSGX_REQUEST_TIMEOUT (read here too):
	// a request open longer than it is an alert (expiry should have closed
	// it).
	RequestTimeout time.Duration `env:"MSGX_REQUEST_TIMEOUT" envDefault:"10m"`
}

// HoleAge is the age at which an open hole is an alert: twice
// MaxCommitDelay.
func (c Config) HoleAge() time.Duration { return 2 * c.MaxCommitDelay }

// Validate checks every value; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"MSGX_MAX_COMMIT_DELAY", c.MaxCommitDelay}, {"MSGX_STATUS_UNFINISHED_AGE", c.OldestUnfinishedAge},
		{"MSGX_STATUS_UNREAD_AGE", c.UnreadAge}, {"MSGX_STATUS_DEAD_WINDOW", c.DeadWindow},
		{"MSGX_OVERDUE_BACKFILL", c.BackfillOverdue}, {"MSGX_REQUEST_TIMEOUT", c.RequestTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", d.name))
		}
	}
	if c.InboxLag < 0 {
		errs = append(errs, errors.New("MSGX_STATUS_INBOX_LAG: must not be negative"))
	}
	if c.GroupLag < 0 {
		errs = append(errs, errors.New("MSGX_STATUS_GROUP_LAG: must not be negative"))
	}
	return errors.Join(errs...)
}

// Deps is what Collect reads.
type Deps struct {
	// PG is msgx's PostgreSQL (required).
	PG *pgxpool.Pool
	// Inbox is the shared inbox; nil leaves MaxID unknown ("not
	// configured").
	Inbox *aodb.Tables
	// Zone is the zone MySQL's DATETIMEs are read in (the one MySQL was
	// opened with); the report names it (Inbox.Zone). Optional.
	Zone *sink.InboxZone
	// Brokers are the Kafka bootstrap addresses; empty falls back to
	// Kafka.Brokers, and when both are empty the groups are not reported.
	// (With the embedded broker, pass its address.)
	Brokers []string
	// Kafka gives the admin round-trip timeout (Kafka.Timeout) and the
	// TLS and SASL settings.
	Kafka kafka.Config
	// Groups are the consumer groups to report with their input topics
	// (required: the processors know them).
	Groups []kafka.Group
	// Timeout bounds every single database call and, when Kafka.Timeout is
	// zero, every Kafka call (MSGX_DB_TIMEOUT, positive).
	Timeout time.Duration
}

// unknownClass is the class DeadByClass gives DEAD rows without one
// (sqlDeadByClass).
const unknownClass = "UNKNOWN"

// DeadLatestPerClass is how many of the latest DEAD messages of each class
// the report lists (MessageStatus.DeadLatestByClass).
const DeadLatestPerClass = 3

// errorChars caps the error texts quoted in the report (one line
// each on a screen).
const errorChars = 200

// Collector takes status reports.
type Collector struct {
	cfg  Config
	deps Deps
}

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error {
	return need.Check("status", need.Pool(d.PG), need.Timeout(d.Timeout), need.Has(len(d.Groups) > 0, "consumer groups to report"))
}

// New checks cfg and deps and returns the collector.
func New(cfg Config, deps Deps) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.Validate(); err != nil {
		return nil, err
	}
	return &Collector{cfg: cfg, deps: deps}, nil
}

// Collect takes the status report at now. Every source is read under
// its own timeouts, concurrently; a failing source degrades its section
// (see Report).
func (c *Collector) Collect(ctx context.Context, now time.Time) Report {
	th, deps := c.cfg, c.deps
	r := Report{
		GeneratedAt: now,
		Inbox: InboxStatus{
			Watermark: -1, MaxID: -1, Lag: -1, PermanentHoles: -1, PermanentHoleIDs: -1, LateRows: -1,
			RecentHoles: []ReleasedHole{}, LateRowIDs: []int64{},
		},
		Messages: MessageStatus{
			Backlog: -1, DeadRecent: -1, DeadRecentWindowSeconds: seconds(th.DeadWindow),
		},
		Backfill: BackfillStatus{
			Pending: -1, Overdue: -1, OverdueAfterSeconds: seconds(th.BackfillOverdue), OldestPendingAgeSeconds: -1,
		},
		Requests: RequestStatus{
			TimeoutSeconds: seconds(th.RequestTimeout), Open: []RequestSummary{}, Latest: map[string]RequestSummary{}, LastClosed: map[string]map[string]RequestSummary{},
		},
		Components: []ComponentState{},
		th:         th,
	}
	s := &collection{deps: deps, now: now, th: th}

	// The cursor is read first because the MySQL side needs W to find the
	// next unread row; everything else runs at once, so an unreachable
	// source costs one timeout, not one per source.
	var wg sync.WaitGroup
	cursorRead := make(chan int64, 1) // W, or -1 when it is unknown
	var inboxMy InboxStatus
	wg.Add(3)
	go func() {
		defer wg.Done()
		s.inboxPG(ctx, &r.Inbox, cursorRead)
		s.messages(ctx, &r.Messages)
		s.backfill(ctx, &r.Backfill)
		s.requests(ctx, &r.Requests)
	}()
	go func() {
		defer wg.Done()
		inboxMy = s.inboxMySQL(ctx, cursorRead)
	}()
	go func() {
		defer wg.Done()
		r.Groups, r.GroupsError = s.groups(ctx)
	}()
	wg.Wait()

	r.Inbox.MaxID, r.Inbox.MaxIDError, r.Inbox.OldestUnread = inboxMy.MaxID, inboxMy.MaxIDError, inboxMy.OldestUnread
	if deps.Zone != nil {
		r.Inbox.Zone = deps.Zone.String()
	}
	if r.Inbox.MaxID >= 0 && r.Inbox.Watermark >= 0 {
		r.Inbox.Lag = max(0, r.Inbox.MaxID-r.Inbox.Watermark)
	}
	r.Alerts = Alerts(r, th)
	return r
}

// Merge adds the daemon's component states (replacing those of the same
// name) and recomputes the alerts, so that a paused or stopped component
// appears among them.
func (r *Report) Merge(components []ComponentState) {
	for _, c := range components {
		i := slices.IndexFunc(r.Components, func(o ComponentState) bool { return o.Name == c.Name })
		if i < 0 {
			r.Components = append(r.Components, c)
		} else {
			r.Components[i] = c
		}
	}
	// By name, so that the table and the JSON keep their order between
	// calls whatever order the daemon reports in.
	sort.SliceStable(r.Components, func(i, j int) bool { return r.Components[i].Name < r.Components[j].Name })
	r.Alerts = Alerts(*r, r.th)
}

// collection is one Collect call.
type collection struct {
	deps Deps
	now  time.Time
	th   Config
	// pgDown is the first PostgreSQL outage seen (see pg).
	pgDown error
}

// call runs one database call under its own timeout.
func (s *collection) call(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.deps.Timeout)
	defer cancel()
	return fn(ctx)
}

// pg runs one PostgreSQL call under its own timeout. Once a call finds
// PostgreSQL unreachable, the remaining ones are not tried: a hanging
// server would otherwise cost one timeout per query, a dozen in all, when
// the operator needs the report fast. A timeout of a linear query (a big
// count) is not taken for an outage — it may just be slow on a large table.
// The PostgreSQL calls run on one goroutine, so pgDown needs no lock.
func (s *collection) pg(ctx context.Context, linear bool, fn func(ctx context.Context) error) error {
	if s.pgDown != nil {
		return fmt.Errorf("not tried, PostgreSQL unreachable: %w", s.pgDown)
	}
	err := s.call(ctx, fn)
	if retry.IsOutage(err) && !(linear && errors.Is(err, context.DeadlineExceeded)) {
		s.pgDown = err
	}
	return err
}

// The SQL of the report, named for the plan test (export_test.go); the
// ingest state (inbox_cursor, inbox_hole, inbox_late_row) is read through
// its store, sink.Cursors. States and IS NULL conditions are literals so
// that the planner matches the partial indexes of migration 0002.
const (
	// proc_state_open.
	sqlOpenByState = `SELECT state, count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED', 'ROUTED') GROUP BY state`
	sqlHead        = `SELECT msg_id, state, enqueued_at, attempts, error_class, next_attempt_at, last_error FROM proc_state
		WHERE state IN ('PENDING', 'FAILED', 'ROUTED') ORDER BY msg_id LIMIT 1`
	// proc_state_state, index-only.
	sqlTerminalByState = `SELECT state, count(*) FROM proc_state
		WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED') GROUP BY state`
	sqlDeadByClass = `SELECT COALESCE(error_class, 'UNKNOWN'), count(*) FROM proc_state WHERE state = 'DEAD' GROUP BY 1`
	// proc_state_state, then the DEAD rows' heap pages.
	sqlDeadRecent = `SELECT count(*) FILTER (WHERE enqueued_at >= $1), max(msg_id) FROM proc_state WHERE state = 'DEAD'`
	sqlDeadOne    = `SELECT msg_id, error_class, enqueued_at, last_error FROM proc_state WHERE msg_id = $1`
	// proc_state_dead (0025): a few entries per class ($1, the classes of
	// DEAD by class), newest first.
	sqlDeadLatest = `SELECT c.class, d.msg_id, d.error_class, d.enqueued_at, d.last_error
		FROM unnest($1::text[]) AS c(class) CROSS JOIN LATERAL (
			SELECT msg_id, error_class, enqueued_at, last_error FROM proc_state p
			WHERE p.state = 'DEAD' AND p.error_class = c.class ORDER BY p.msg_id DESC LIMIT $2) d
		ORDER BY 1, 2 DESC`
	// DEAD rows without a class (none in normal operation): proc_state_state.
	sqlDeadLatestUnknown = `SELECT 'UNKNOWN', msg_id, error_class, enqueued_at, last_error FROM proc_state
		WHERE state = 'DEAD' AND error_class IS NULL ORDER BY error_class, msg_id DESC LIMIT $1`
	// proc_state_state, then the SKIPPED rows' heap pages. The classes are
	// the reason prefixes the router writes (README, router outcomes).
	sqlSkippedByReason = `SELECT CASE
			WHEN reason LIKE 'duplicate-of:%' THEN 'duplicate'
			WHEN reason LIKE 'ignored:%' THEN 'ignored'
			WHEN reason LIKE 'unsupported:%' THEN 'unsupported'
			WHEN reason = 'no-match' THEN 'no-match'
			ELSE 'other' END, count(*)
		FROM proc_state WHERE state = 'SKIPPED' GROUP BY 1`
	// backfill_owed: exactly the sweeper's queue
	// (docs/design.md#backfill-predicate).
	sqlBackfillPending = `SELECT count(*), count(*) FILTER (WHERE enqueued_at < $1), min(enqueued_at) FROM backfill_owed`
	// No index: a sequential scan (see the package comment).
	sqlAbandoned = `SELECT COALESCE(backfill_abandoned_reason, 'UNKNOWN'), count(*) FROM proc_state
		WHERE ` + sink.BackfillAbandoned + ` GROUP BY 1`
)

// inboxPG reads the cursor, holes and late rows; W (-1 when unknown) goes
// to cursorRead as soon as the cursor has been read.
func (s *collection) inboxPG(ctx context.Context, in *InboxStatus, cursorRead chan<- int64) {
	fail := func(what string, err error) {
		in.Errors = append(in.Errors, fmt.Sprintf("%s: %v", what, err))
	}

	cursors := sink.NewCursors(s.deps.PG, s.deps.Timeout)
	var c sink.CursorRow
	var seeded bool
	err := s.pg(ctx, false, func(ctx context.Context) (err error) {
		c, seeded, err = cursors.Row(ctx)
		return err
	})
	switch {
	case err != nil:
		fail("reading inbox_cursor", err)
	case !seeded:
		// Not seeded: nothing has been read; W is 0 in the sense that no ID
		// has been produced.
		in.Watermark = 0
	default:
		in.Seeded, in.Watermark, in.SeededAt, in.CursorUpdatedAt, in.SeedMode = true, c.Watermark, c.SeededAt, c.UpdatedAt, c.SeedMode
		if c.HasHole() {
			in.Hole = &OpenHole{From: c.Watermark + 1, To: c.HoleEnd, Since: c.HoleSince, AgeSeconds: ageSeconds(s.now, c.HoleSince)}
		}
	}
	cursorRead <- in.Watermark // buffered; -1 when unknown

	err = s.pg(ctx, false, func(ctx context.Context) (err error) {
		in.PermanentHoles, in.PermanentHoleIDs, err = cursors.HoleCount(ctx)
		return err
	})
	if err != nil {
		in.PermanentHoles, in.PermanentHoleIDs = -1, -1
		fail("counting inbox_hole", err)
	}
	var recent []sink.Hole
	err = s.pg(ctx, false, func(ctx context.Context) (err error) {
		recent, err = cursors.RecentHoles(ctx)
		return err
	})
	if err != nil {
		in.RecentHoles = nil
		fail("listing inbox_hole", err)
	} else {
		in.RecentHoles = make([]ReleasedHole, len(recent))
		for i, h := range recent {
			in.RecentHoles[i] = ReleasedHole{From: h.From, To: h.To, ReleasedAt: h.ReleasedAt, Reason: h.Reason}
		}
	}
	err = s.pg(ctx, false, func(ctx context.Context) (err error) {
		in.LateRows, in.LateRowIDs, err = cursors.LateRows(ctx)
		return err
	})
	if err != nil {
		in.LateRows, in.LateRowIDs = -1, nil
		fail("reading inbox_late_row", err)
	} else if in.LateRowIDs == nil {
		in.LateRowIDs = []int64{} // read: [] not null
	}
}

// inboxMySQL reads MAX(CMINMSGS_ID) and the first row above W.
func (s *collection) inboxMySQL(ctx context.Context, cursorRead <-chan int64) InboxStatus {
	out := InboxStatus{MaxID: -1}
	if s.deps.Inbox == nil {
		out.MaxIDError = "MySQL not configured"
		return out
	}
	// W first, MAX(CMINMSGS_ID) second: the inbox only grows and W only
	// follows it, so MAX read after W is at least W. Read the other way
	// round (or at once, as before), rows inserted and ingested between
	// the two reads made W look beyond the inbox — the fault campaign's
	// trickle raised that false alert.
	w := <-cursorRead
	var maxID int64
	err := s.call(ctx, func(ctx context.Context) (err error) {
		maxID, err = s.deps.Inbox.MaxID(ctx)
		return err
	})
	if err != nil {
		out.MaxIDError = err.Error()
		return out
	}
	out.MaxID = maxID // 0 for an empty inbox: IDs start at 1
	if w < 0 || out.MaxID <= w {
		return out
	}
	var row aodb.Row
	var found bool
	err = s.call(ctx, func(ctx context.Context) (err error) {
		row, found, err = s.deps.Inbox.FirstAfter(ctx, w)
		return err
	})
	switch {
	case err != nil:
		out.MaxIDError = err.Error()
	case !found:
		// Deleted between the two reads: nothing unread after all.
	default:
		u := UnreadRow{MsgID: row.ID, AgeSeconds: -1}
		// A legacy zero date (0000-00-00) says as little as NULL.
		if row.ReceivedAt != nil && !row.ReceivedAt.IsZero() {
			u.ReceivedAt, u.AgeSeconds = row.ReceivedAt, ageSeconds(s.now, *row.ReceivedAt)
		}
		out.OldestUnread = &u
	}
	return out
}

// messages fills the proc_state section.
func (s *collection) messages(ctx context.Context, m *MessageStatus) {
	pg := s.deps.PG
	fail := func(what string, err error) {
		m.Errors = append(m.Errors, fmt.Sprintf("%s: %v", what, err))
	}

	open, err := s.countBy(ctx, false, sqlOpenByState)
	if err != nil {
		fail("counting unfinished messages", err)
	} else {
		m.Backlog = open[message.StatePending] + open[message.StateFailed] + open[message.StateRouted]
		m.ByState = map[string]int64{message.StatePending: open[message.StatePending], message.StateFailed: open[message.StateFailed], message.StateRouted: open[message.StateRouted]}
	}

	var h UnfinishedMessage
	// NULL error_class and last_error scan as "" (zeronull.Text).
	err = s.pg(ctx, false, func(ctx context.Context) error {
		return pg.QueryRow(ctx, sqlHead).Scan(&h.MsgID, &h.State, &h.EnqueuedAt, &h.Attempts, (*zeronull.Text)(&h.ErrorClass),
			&h.NextAttemptAt, (*zeronull.Text)(&h.LastError))
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		fail("reading the oldest unfinished message", err)
	default:
		h.AgeSeconds, h.LastError = ageSeconds(s.now, h.EnqueuedAt), clip(h.LastError, errorChars)
		m.OldestUnfinished = &h
	}

	terminal, err := s.countBy(ctx, true, sqlTerminalByState)
	if err != nil {
		fail("counting terminal messages", err)
	} else if m.ByState != nil {
		for _, st := range []string{message.StateSucceeded, message.StateSkipped, message.StateDead, message.StateArchived} {
			m.ByState[st] = terminal[st]
		}
	}

	if m.DeadByClass, err = s.countBy(ctx, false, sqlDeadByClass); err != nil {
		fail("counting DEAD messages by class", err)
	} else {
		m.DeadReplayable = make(map[string]bool, len(m.DeadByClass))
		for c := range m.DeadByClass {
			m.DeadReplayable[c] = message.ReplayableClass(c)
		}
	}

	var latest *int64
	// O(DEAD) heap pages: a timeout may mean a large DEAD set, not an outage.
	err = s.pg(ctx, true, func(ctx context.Context) error {
		return pg.QueryRow(ctx, sqlDeadRecent, s.now.Add(-s.th.DeadWindow)).Scan(&m.DeadRecent, &latest)
	})
	if err != nil {
		m.DeadRecent = -1
		fail("counting recent DEAD messages", err)
	} else if latest != nil {
		var d DeadMessage
		err = s.pg(ctx, false, func(ctx context.Context) error {
			return pg.QueryRow(ctx, sqlDeadOne, *latest).Scan(&d.MsgID, (*zeronull.Text)(&d.ErrorClass), &d.EnqueuedAt, (*zeronull.Text)(&d.LastError))
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Replayed between the two reads.
		case err != nil:
			fail("reading the latest DEAD message", err)
		default:
			d.LastError = clip(withoutClass(d.ErrorClass, d.LastError), errorChars)
			m.LatestDead = &d
		}
	}

	if m.DeadByClass != nil {
		if m.DeadLatestByClass, err = s.deadLatest(ctx, m.DeadByClass); err != nil {
			fail("listing the latest DEAD messages by class", err)
		}
	}

	if m.SkippedByReasonClass, err = s.countBy(ctx, true, sqlSkippedByReason); err != nil {
		fail("counting SKIPPED messages by reason", err)
	}
}

// withoutClass drops the "CLASS: " a decoder error starts with
// ("MALFORMED: not XML…"): the report shows the class beside it already.
func withoutClass(class, lastError string) string {
	if class != "" {
		if rest, ok := strings.CutPrefix(lastError, class+": "); ok {
			return rest
		}
	}
	return lastError
}

// deadLatest reads the latest DeadLatestPerClass DEAD messages of each class
// of byClass.
func (s *collection) deadLatest(ctx context.Context, byClass map[string]int64) (map[string][]DeadMessage, error) {
	out := map[string][]DeadMessage{}
	var classes []string
	for c := range byClass {
		if c != unknownClass {
			classes = append(classes, c)
		}
	}
	read := func(q string, args ...any) error {
		return s.pg(ctx, false, func(ctx context.Context) error {
			rows, err := s.deps.PG.Query(ctx, q, args...)
			if err != nil {
				return err
			}
			var class string
			var d DeadMessage
			_, err = pgx.ForEachRow(rows, []any{&class, &d.MsgID, (*zeronull.Text)(&d.ErrorClass), &d.EnqueuedAt, (*zeronull.Text)(&d.LastError)}, func() error {
				d.LastError = clip(withoutClass(d.ErrorClass, d.LastError), errorChars)
				out[class] = append(out[class], d)
				return nil
			})
			return err
		})
	}
	if len(classes) > 0 {
		if err := read(sqlDeadLatest, classes, DeadLatestPerClass); err != nil {
			return nil, err
		}
	}
	if byClass[unknownClass] > 0 {
		if err := read(sqlDeadLatestUnknown, DeadLatestPerClass); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// backfill fills the backfill section.
func (s *collection) backfill(ctx context.Context, b *BackfillStatus) {
	var oldest *time.Time
	err := s.pg(ctx, false, func(ctx context.Context) error {
		return s.deps.PG.QueryRow(ctx, sqlBackfillPending, s.now.Add(-s.th.BackfillOverdue)).Scan(&b.Pending, &b.Overdue, &oldest)
	})
	if err != nil {
		b.Pending, b.Overdue = -1, -1
		b.Errors = append(b.Errors, fmt.Sprintf("counting pending backfills: %v", err))
	} else if oldest != nil {
		b.OldestPendingAgeSeconds = ageSeconds(s.now, *oldest)
	}
	if b.Abandoned, err = s.countBy(ctx, true, sqlAbandoned); err != nil {
		b.Errors = append(b.Errors, fmt.Sprintf("counting abandoned backfills: %v", err))
	}
}

// countBy runs a "key, count" query into a map (never nil on success);
// linear as for pg.
func (s *collection) countBy(ctx context.Context, linear bool, q string) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.pg(ctx, linear, func(ctx context.Context) error {
		rows, err := s.deps.PG.Query(ctx, q)
		if err != nil {
			return err
		}
		var k string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&k, &n}, func() error {
			out[k] = n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// groups reads the consumer lag of every group on its topics.
func (s *collection) groups(ctx context.Context) ([]GroupLag, string) {
	brokers := s.deps.Brokers
	if len(brokers) == 0 {
		brokers = s.deps.Kafka.Brokers
	}
	if len(brokers) == 0 {
		return nil, "Kafka brokers not configured"
	}
	kc := s.deps.Kafka
	if kc.Timeout <= 0 {
		kc.Timeout = s.deps.Timeout
	}
	lags, err := kafka.Lags(ctx, kc, brokers, s.deps.Groups)
	if err != nil {
		return nil, err.Error()
	}
	return lags, ""
}

// clip shortens s to at most n characters without splitting one (errors
// may carry Chinese text from the inbox).
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func seconds(d time.Duration) int64 { return int64(d / time.Second) }

// ageSeconds is now − t in whole seconds, never negative (clocks of other
// hosts, such as the AODB's receive time, may be ahead).
func ageSeconds(now, t time.Time) int64 { return max(0, seconds(now.Sub(t))) }
