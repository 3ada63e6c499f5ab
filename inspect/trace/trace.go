package trace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/need"
	"msgx/sink"
	"msgx/sink/aodb"
	"msgx/tables/message"
)

// ErrNotFound: nothing anywhere knows the message or the flight.
var ErrNotFound = errors.New("not found")

// Deps are the reader's sources.
type Deps struct {
	// PG is msgx's PostgreSQL (required).
	PG *pgxpool.Pool
	// Inbox is the shared inbox; nil leaves the inbox row unknown.
	Inbox *aodb.Tables
	// Zone is the zone the inbox's DATETIMEs are read in (the one its
	// connection was opened with); the trace names it. Required with Inbox.
	Zone *sink.InboxZone
	// Timeout bounds each source's reads (MSGX_DB_TIMEOUT, positive).
	Timeout time.Duration
}

// Reader collects traces.
type Reader struct{ d Deps }

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error {
	return need.Check("trace", need.Pool(d.PG), need.Timeout(d.Timeout), need.Has(d.Inbox == nil || d.Zone != nil, "inbox time zone"))
}

// New checks d and returns the reader.
func New(d Deps) (*Reader, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Reader{d: d}, nil
}

// Message is one message's whole path (docs/design.md#trace). A nil part is
// a step that left no record: Where says what that means.
type Message struct {
	MsgID int64 `json:"msgId"`
	// Inbox is the MySQL inbox row; nil when it does not exist or MySQL
	// could not be read (InboxError).
	Inbox      *InboxRow `json:"inbox"`
	InboxError string    `json:"inboxError,omitempty"`
	// Ingest is the bridge's cursor and what it knows of the message's ID
	// (a released hole, a late row).
	Ingest *Ingest `json:"ingest"`
	// Decision is the proc_state row (proc_state_hst for an archived
	// message); nil when the router has not read the message.
	Decision *Decision `json:"decision"`
	// Transitions are the applied marks, in (kind, key) order.
	Transitions []Transition `json:"transitions"`
	// Versions are the flight versions the message made (derived links to
	// masters included), in (FLID, version) order.
	Versions []Version `json:"versions"`
	// Replays are the replays that reset the message, oldest first.
	Replays []Replay `json:"replays"`
	// Request is what an answer to msgx's requests (a RESP or an EROR)
	// did: the request it completed, answered in part or failed, or why
	// none (req_answer); absent when nothing was recorded.
	Request *Answer `json:"request,omitempty"`
	// Where lists, first to last, the steps that are missing or waiting and
	// why; empty when the path is complete.
	Where []Finding `json:"where"`
}

// InboxRow is the message's CMINMSGS row.
type InboxRow struct {
	// ReceivedAt and ProcessedAt are the row's DATETIMEs read in Zone.
	ReceivedAt *time.Time `json:"receivedAt"`
	// ProcessedAt is the processed mark (CMINMSGS_DATE_PROCESSED).
	ProcessedAt *time.Time `json:"processedAt"`
	Status      string     `json:"status,omitempty"`
	Bytes       int        `json:"bytes"`
	// Zone names the zone the DATETIMEs were read in and where it comes
	// from ("+08:00 (MySQL session time_zone SYSTEM, …)").
	Zone string `json:"zone"`
}

// Ingest is what the bridge's state says about the message's ID.
type Ingest struct {
	// Watermark is W: every ID up to it was produced to msgx.inbox.
	Watermark int64 `json:"watermark"`
	// HoleSince is when the gap right after W was first seen.
	HoleSince *time.Time `json:"holeSince,omitempty"`
	// Hole is the released hole that holds the ID, if any.
	Hole *Hole `json:"hole,omitempty"`
	// LateAt is when the ID appeared after its hole was released.
	LateAt *time.Time `json:"lateAt,omitempty"`
}

// Hole is a gap of IDs the bridge released without reading it.
type Hole struct {
	FirstID    int64     `json:"firstId"`
	LastID     int64     `json:"lastId"`
	ReleasedAt time.Time `json:"releasedAt"`
	Reason     string    `json:"reason"`
}

// Decision is the router's record of the message and its completion.
type Decision struct {
	State       string `json:"state"`
	ErrorClass  string `json:"errorClass,omitempty"`
	Reason      string `json:"reason,omitempty"`
	LastError   string `json:"lastError,omitempty"`
	IdentityKey string `json:"identityKey,omitempty"`
	Type        string `json:"type,omitempty"`
	STYP        string `json:"styp,omitempty"`
	Attempts    int    `json:"attempts"`
	// NextAttemptAt is when a FAILED message is retried.
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	ReceivedAt    *time.Time `json:"receivedAt"`
	// EnqueuedAt is when the bridge produced the row to msgx.inbox.
	EnqueuedAt time.Time `json:"enqueuedAt"`
	// Inbox is the msgx.inbox record the router first read it from (nil
	// for a row of an earlier version).
	Inbox *sink.InboxPosition `json:"inbox"`
	// DecidedAt is when the router recorded its decision (nil: not
	// decided, or decided before migration 0026).
	DecidedAt *time.Time `json:"decidedAt,omitempty"`
	// RoutedAt is when the router recorded it ROUTED.
	RoutedAt *time.Time `json:"routedAt,omitempty"`
	// UpdatedAt is the row's last change (the decision, the completion).
	UpdatedAt    time.Time  `json:"updatedAt"`
	NTransitions *int       `json:"nTransitions,omitempty"`
	NApplied     int        `json:"nApplied"`
	ReplayGen    int64      `json:"replayGen,omitempty"`
	ArchivedAt   *time.Time `json:"archivedAt,omitempty"`
	Backfill     Backfill   `json:"backfill"`
}

// Backfill is the processed mark's progress (docs/design.md#backfill).
type Backfill struct {
	// DueAt is when the sweeper may write the mark (set with the terminal
	// state).
	DueAt *time.Time `json:"dueAt,omitempty"`
	// Confirmed says the mark is written (or was found written): the
	// message owes nothing more (terminal, not in the sweeper's queue
	// backfill_owed, not abandoned).
	Confirmed bool `json:"confirmed"`
	// MarkedAt is when the mark was written (or found written): recorded
	// in proc_state before migration 0033, the inbox row's mark
	// (CMINMSGS_DATE_PROCESSED) since; nil when neither is known.
	MarkedAt        *time.Time `json:"markedAt,omitempty"`
	Attempts        int        `json:"attempts"`
	Error           string     `json:"error,omitempty"`
	AbandonedAt     *time.Time `json:"abandonedAt,omitempty"`
	AbandonedReason string     `json:"abandonedReason,omitempty"`
}

// Transition is one applied mark: a flight (key FLID) or reference
// (key RTYPE) transition of the message that its processor applied.
type Transition struct {
	Kind      string    `json:"kind"`
	Key       string    `json:"key"`
	AppliedAt time.Time `json:"appliedAt"`
	// Outcome is what it did ("applied", "no-change", "no-match",
	// "replay", …); empty for a mark of an earlier version.
	Outcome string `json:"outcome,omitempty"`
	// StateVersion is the version it produced; 0 when it changed nothing.
	StateVersion int64 `json:"stateVersion,omitempty"`
}

// Version is one flight version (a flight_change row), where its msg event
// landed and whether the schd topic carries it.
type Version struct {
	FLID         string    `json:"flid"`
	StateVersion int64     `json:"stateVersion"`
	MsgID        int64     `json:"msgId"`
	Replay       int64     `json:"replay,omitempty"`
	Source       string    `json:"source"`
	State        string    `json:"state"`
	Changed      []string  `json:"changed"`
	At           time.Time `json:"at"`
	// Event is where its msg event was produced; nil when no position is
	// recorded (InOutbox says whether it still waits to be produced).
	Event    *Event `json:"event,omitempty"`
	InOutbox bool   `json:"inOutbox,omitempty"`
	// SchdSent is the flight's schd_sent_version (nil: the flight is not in
	// the read model any more). The schd topic carries the latest state, so
	// the version is published once SchdSent >= StateVersion.
	SchdSent *int64 `json:"schdSent,omitempty"`
}

// SchdPublished reports whether the schd topic carries this version or a
// later one; known is false when the flight left the read model.
func (v Version) SchdPublished() (published, known bool) {
	if v.SchdSent == nil {
		return false, false
	}
	return *v.SchdSent >= v.StateVersion, true
}

// Event is a produced msg event's place.
type Event struct {
	Topic      string    `json:"topic"`
	Partition  int32     `json:"partition"`
	Offset     int64     `json:"offset"`
	ProducedAt time.Time `json:"producedAt"`
}

// Replay is one replay that reset the message, with the message's state
// before it (replay_audit, replay_audit_msg).
type Replay struct {
	AuditID  int64     `json:"auditId"`
	At       time.Time `json:"at"`
	Who      string    `json:"who"`
	Selector string    `json:"selector"`
	// Before is the message's state when the replay reset it.
	Before struct {
		State      string `json:"state"`
		ErrorClass string `json:"errorClass,omitempty"`
		Reason     string `json:"reason,omitempty"`
		LastError  string `json:"lastError,omitempty"`
		Attempts   int    `json:"attempts"`
	} `json:"before"`
	// Produced: the message was re-injected into msgx.inbox, at Inbox
	// (nil for a replay of an earlier version).
	Produced bool                `json:"produced"`
	Inbox    *sink.InboxPosition `json:"inbox,omitempty"`
}

// Answer is the recorded outcome of an answer to a request
// (docs/design.md#requests).
type Answer struct {
	// Type is RESP or EROR.
	Type string `json:"type"`
	// Kind is the kind of request it answers, when known.
	Kind string `json:"kind,omitempty"`
	// RequestID, SEQN and RequestState name the request it paired with and
	// where that request is now (0 and "": none).
	RequestID    int64  `json:"requestId,omitempty"`
	SEQN         int64  `json:"seqn,omitempty"`
	RequestState string `json:"requestState,omitempty"`
	// Outcome is DONE, ANSWERED, FAILED, LATE or UNPAIRED.
	Outcome string `json:"outcome"`
	// PairedBy is how an EROR found its request: SEQN or TYPE.
	PairedBy string `json:"pairedBy,omitempty"`
	// Detail says what it did, or why it paired with nothing.
	Detail string `json:"detail"`
	// Code and Text are an EROR's error code and text.
	Code string    `json:"code,omitempty"`
	Text string    `json:"text,omitempty"`
	At   time.Time `json:"at"`
}

// Finding is a step that is missing or waiting, and why.
type Finding struct {
	// Step is "inbox", "ingest", "replay", "router", "flights", "refdata",
	// "publisher", "schd" or "backfill".
	Step string `json:"step"`
	Why  string `json:"why"`
}

// Message collects the trace of msgID. Every PostgreSQL read is by key or
// index (one round trip), the inbox row by primary key: the cost does not
// grow with the history (docs/design.md#trace). MySQL being unreachable
// leaves the inbox part empty with InboxError; PostgreSQL failing fails the
// trace. ErrNotFound: neither the inbox nor msgx knows the message.
func (r *Reader) Message(ctx context.Context, msgID int64) (Message, error) {
	m := Message{MsgID: msgID, Transitions: []Transition{}, Versions: []Version{}, Replays: []Replay{}}
	// The two databases are read at once; the inbox row comes back on its
	// own channel, so nothing writes m concurrently.
	type inboxResult struct {
		row *InboxRow
		err error
	}
	inbox := make(chan inboxResult, 1)
	go func() {
		row, err := r.inboxRow(ctx, msgID)
		inbox <- inboxResult{row, err}
	}()
	pgErr := r.pgMessage(ctx, &m)
	in := <-inbox
	m.Inbox = in.row
	if in.err != nil {
		m.InboxError = in.err.Error()
	}
	if pgErr != nil {
		return Message{}, pgErr
	}
	if d := m.Decision; d != nil && d.Backfill.Confirmed && d.Backfill.MarkedAt == nil && m.Inbox != nil {
		// Since migration 0033 PostgreSQL records that the mark is
		// confirmed, not when: the inbox row holds it.
		d.Backfill.MarkedAt = m.Inbox.ProcessedAt
	}
	if m.Inbox == nil && m.InboxError == "" && m.Decision == nil && len(m.Replays) == 0 &&
		(m.Ingest == nil || (m.Ingest.Hole == nil && m.Ingest.LateAt == nil)) {
		return Message{}, fmt.Errorf("message %d: %w (no inbox row, no record in msgx)", msgID, ErrNotFound)
	}
	m.Where = Diagnose(m)
	return m, nil
}

// inboxRow reads the CMINMSGS row of msgID; nil when there is none.
func (r *Reader) inboxRow(ctx context.Context, msgID int64) (*InboxRow, error) {
	if r.d.Inbox == nil {
		return nil, errors.New("MySQL not configured")
	}
	ctx, cancel := context.WithTimeout(ctx, r.d.Timeout)
	defer cancel()
	info, err := r.d.Inbox.Info(ctx, msgID)
	if info == nil || err != nil {
		return nil, err
	}
	return &InboxRow{ReceivedAt: info.ReceivedAt, ProcessedAt: info.ProcessedAt, Status: info.Status, Bytes: info.Bytes,
		Zone: r.d.Zone.String()}, nil
}

// decisionColumns are read from proc_state and proc_state_hst alike.
const decisionColumns = `state, COALESCE(error_class, ''), COALESCE(reason, ''), COALESCE(last_error, ''),
	COALESCE(identity_key, ''), COALESCE(msg_type, ''), COALESCE(msg_styp, ''), attempts, next_attempt_at,
	received_at, enqueued_at, inbox_partition, inbox_offset, decided_at, routed_at, updated_at, n_transitions, n_applied, replay_gen,
	backfill_next_at, backfill_at, backfill_attempts, COALESCE(backfill_error, ''), backfill_abandoned_at,
	COALESCE(backfill_abandoned_reason, '')`

func (r *Reader) pgMessage(ctx context.Context, m *Message) error {
	ctx, cancel := context.WithTimeout(ctx, r.d.Timeout)
	defer cancel()
	id := m.MsgID
	b := &pgx.Batch{}
	// An archived message keeps an ARCHIVED shadow row here and its
	// columns in proc_state_hst.
	b.Queue(`SELECT `+decisionColumns+`, NULL::timestamptz,
			EXISTS (SELECT 1 FROM backfill_owed o WHERE o.msg_id = $1) FROM proc_state WHERE msg_id = $1 AND state <> 'ARCHIVED'
		UNION ALL SELECT `+decisionColumns+`, archived_at, false FROM proc_state_hst WHERE msg_id = $1`, id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var d Decision
			var part *int32
			var off *int64
			var owed bool
			bf := &d.Backfill
			if err := rows.Scan(&d.State, &d.ErrorClass, &d.Reason, &d.LastError, &d.IdentityKey, &d.Type, &d.STYP, &d.Attempts,
				&d.NextAttemptAt, &d.ReceivedAt, &d.EnqueuedAt, &part, &off, &d.DecidedAt, &d.RoutedAt, &d.UpdatedAt, &d.NTransitions, &d.NApplied,
				&d.ReplayGen, &bf.DueAt, &bf.MarkedAt, &bf.Attempts, &bf.Error, &bf.AbandonedAt, &bf.AbandonedReason, &d.ArchivedAt,
				&owed); err != nil {
				return err
			}
			bf.Confirmed = bf.MarkedAt != nil || message.IsTerminal(d.State) && !owed && bf.AbandonedAt == nil
			if part != nil && off != nil {
				d.Inbox = &sink.InboxPosition{Partition: *part, Offset: *off}
			}
			m.Decision = &d
		}
		return rows.Err()
	})
	b.Queue(`SELECT kind, key, applied_at, COALESCE(outcome, ''), COALESCE(state_version, 0)
		FROM transition_applied WHERE msg_id = $1 ORDER BY kind, key`, id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var t Transition
			if err := rows.Scan(&t.Kind, &t.Key, &t.AppliedAt, &t.Outcome, &t.StateVersion); err != nil {
				return err
			}
			m.Transitions = append(m.Transitions, t)
		}
		return rows.Err()
	})
	b.Queue(versionsSQL+` WHERE c.msg_id = $1 ORDER BY c.flid, c.state_version`, id).Query(func(rows pgx.Rows) error {
		var err error
		m.Versions, err = scanVersions(rows, m.Versions)
		return err
	})
	b.Queue(`SELECT a.id, a.at, a.who, a.selector, i.state, COALESCE(i.error_class, ''), COALESCE(i.reason, ''),
			COALESCE(i.last_error, ''), i.attempts, i.produced, i.inbox_partition, i.inbox_offset
		FROM replay_audit_msg i JOIN replay_audit a ON a.id = i.audit_id
		WHERE i.msg_id = $1 ORDER BY a.id`, id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var rp Replay
			var part *int32
			var off *int64
			if err := rows.Scan(&rp.AuditID, &rp.At, &rp.Who, &rp.Selector, &rp.Before.State, &rp.Before.ErrorClass,
				&rp.Before.Reason, &rp.Before.LastError, &rp.Before.Attempts, &rp.Produced, &part, &off); err != nil {
				return err
			}
			if part != nil && off != nil {
				rp.Inbox = &sink.InboxPosition{Partition: *part, Offset: *off}
			}
			m.Replays = append(m.Replays, rp)
		}
		return rows.Err()
	})
	b.Queue(`SELECT a.type, COALESCE(a.kind, ''), COALESCE(a.request_id, 0), COALESCE(r.seqn, 0), COALESCE(r.state, ''), a.outcome,
			COALESCE(a.paired_by, ''), a.detail, COALESCE(a.code, ''), COALESCE(a.text, ''), a.at
		FROM req_answer a LEFT JOIN req_track r ON r.id = a.request_id WHERE a.msg_id = $1`, id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var a Answer
			if err := rows.Scan(&a.Type, &a.Kind, &a.RequestID, &a.SEQN, &a.RequestState, &a.Outcome, &a.PairedBy, &a.Detail,
				&a.Code, &a.Text, &a.At); err != nil {
				return err
			}
			m.Request = &a
		}
		return rows.Err()
	})
	ingest := sink.QueueIngestOf(b, id)
	if err := r.d.PG.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("reading the trace of message %d: %w", id, err)
	}
	if ingest.Seeded {
		in := &Ingest{Watermark: ingest.Watermark, HoleSince: ingest.HoleSince, LateAt: ingest.LateAt}
		if h := ingest.Hole; h != nil {
			in.Hole = &Hole{FirstID: h.From, LastID: h.To, ReleasedAt: h.ReleasedAt, Reason: h.Reason}
		}
		m.Ingest = in
	}
	return r.outboxed(ctx, m.Versions)
}

// versionsSQL reads flight_change rows c with their event's place and the
// flight's schd_sent_version; the caller adds WHERE and ORDER BY.
const versionsSQL = `SELECT c.flid, c.state_version, c.msg_id, c.replay_gen, c.source, c.state, c.changed, c.at,
		e.topic, e.kafka_partition, e.kafka_offset, e.produced_at, f.schd_sent_version
	FROM flight_change c
	LEFT JOIN msg_event e ON e.flid = c.flid AND e.state_version = c.state_version AND e.msg_id = c.msg_id
	LEFT JOIN flight_schd f ON f.flid = c.flid`

func scanVersions(rows pgx.Rows, out []Version) ([]Version, error) {
	for rows.Next() {
		var v Version
		var topic *string
		var part *int32
		var off *int64
		var produced *time.Time
		if err := rows.Scan(&v.FLID, &v.StateVersion, &v.MsgID, &v.Replay, &v.Source, &v.State, &v.Changed, &v.At,
			&topic, &part, &off, &produced, &v.SchdSent); err != nil {
			return out, err
		}
		if topic != nil && part != nil && off != nil && produced != nil {
			v.Event = &Event{Topic: *topic, Partition: *part, Offset: *off, ProducedAt: *produced}
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// outboxed marks the versions whose event still waits in the outbox. The
// outbox holds only what the publisher has not produced yet (a backlog,
// not a history), so reading it is bounded by that.
func (r *Reader) outboxed(ctx context.Context, vs []Version) error {
	var flids []string
	var msgIDs, versions []int64
	for _, v := range vs {
		if v.Event == nil {
			flids, msgIDs, versions = append(flids, v.FLID), append(msgIDs, v.MsgID), append(versions, v.StateVersion)
		}
	}
	if len(flids) == 0 {
		return nil
	}
	rows, err := r.d.PG.Query(ctx, `SELECT DISTINCT o.key, o.msg_id, o.state_version FROM event_outbox o
		JOIN unnest($1::text[], $2::bigint[], $3::bigint[]) AS w(f, m, v) ON o.key = w.f AND o.msg_id = w.m AND o.state_version = w.v`,
		flids, msgIDs, versions)
	if err != nil {
		return fmt.Errorf("reading the outbox: %w", err)
	}
	type key struct {
		flid    string
		msg, sv int64
	}
	waiting := map[key]bool{}
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.flid, &k.msg, &k.sv); err != nil {
			return fmt.Errorf("reading the outbox: %w", err)
		}
		waiting[k] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the outbox: %w", err)
	}
	for i := range vs {
		vs[i].InOutbox = waiting[key{vs[i].FLID, vs[i].MsgID, vs[i].StateVersion}]
	}
	return nil
}

// Flight is one flight's history, version by version (docs/design.md#trace).
type Flight struct {
	FLID string `json:"flid"`
	// Current is the read model's row; nil when the flight is not (or no
	// longer) in it.
	Current *FlightNow `json:"current"`
	// Purged are the history sweep's archives of the FLID (flight_hist).
	Purged []Purged `json:"purged"`
	// Versions are the newest recorded versions, oldest first: at most the
	// limit asked for, of Total.
	Versions []Version `json:"versions"`
	Total    int       `json:"total"`
}

// FlightNow is the flight's flight_schd row.
type FlightNow struct {
	State           string     `json:"state"`
	StateVersion    int64      `json:"stateVersion"`
	LastMsgID       int64      `json:"lastMsgId"`
	OperationDay    *time.Time `json:"operationDay"`
	UpdatedAt       time.Time  `json:"updatedAt"`
	SchdSentVersion int64      `json:"schdSentVersion"`
}

// Purged is one flight_hist row of the FLID.
type Purged struct {
	StateVersion int64     `json:"stateVersion"`
	LastMsgID    int64     `json:"lastMsgId"`
	PurgedAt     time.Time `json:"purgedAt"`
}

// Flight collects the history of flid: its newest limit versions (from
// flight_change, by its primary key), each with its message, source,
// changed tags, event position and schd status. ErrNotFound: no row, no
// archive and no recorded version.
func (r *Reader) Flight(ctx context.Context, flid string, limit int) (Flight, error) {
	if limit <= 0 {
		return Flight{}, fmt.Errorf("trace of flight %s: the limit must be positive", flid)
	}
	ctx, cancel := context.WithTimeout(ctx, r.d.Timeout)
	defer cancel()
	f := Flight{FLID: flid, Purged: []Purged{}, Versions: []Version{}}
	b := &pgx.Batch{}
	b.Queue(`SELECT state, state_version, last_msg_id, operation_day, updated_at, schd_sent_version FROM flight_schd WHERE flid = $1`, flid).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var n FlightNow
				if err := rows.Scan(&n.State, &n.StateVersion, &n.LastMsgID, &n.OperationDay, &n.UpdatedAt, &n.SchdSentVersion); err != nil {
					return err
				}
				f.Current = &n
			}
			return rows.Err()
		})
	b.Queue(`SELECT state_version, last_msg_id, purged_at FROM flight_hist WHERE flid = $1 ORDER BY id`, flid).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var p Purged
			if err := rows.Scan(&p.StateVersion, &p.LastMsgID, &p.PurgedAt); err != nil {
				return err
			}
			f.Purged = append(f.Purged, p)
		}
		return rows.Err()
	})
	b.Queue(`SELECT count(*) FROM flight_change WHERE flid = $1`, flid).QueryRow(func(row pgx.Row) error { return row.Scan(&f.Total) })
	b.Queue(versionsSQL+` WHERE c.flid = $1 ORDER BY c.state_version DESC, c.msg_id DESC LIMIT $2`, flid, limit).Query(func(rows pgx.Rows) error {
		var err error
		f.Versions, err = scanVersions(rows, f.Versions)
		return err
	})
	if err := r.d.PG.SendBatch(ctx, b).Close(); err != nil {
		return Flight{}, fmt.Errorf("reading the history of flight %s: %w", flid, err)
	}
	slices.Reverse(f.Versions)
	if f.Current == nil && len(f.Purged) == 0 && f.Total == 0 {
		return Flight{}, fmt.Errorf("flight %s: %w", flid, ErrNotFound)
	}
	if err := r.outboxed(ctx, f.Versions); err != nil {
		return Flight{}, err
	}
	return f, nil
}
