package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/tables/message"
)

// Message is one proc_state row.
type Message struct {
	MsgID        int64      `json:"msgId"`
	State        string     `json:"state"`
	IdentityKey  *string    `json:"identityKey"`
	SNDR         *string    `json:"sndr"`
	Type         *string    `json:"type"`
	STYP         *string    `json:"styp"`
	SEQN         *string    `json:"seqn"`
	Attempts     int        `json:"attempts"`
	NextAttempt  *time.Time `json:"nextAttemptAt"`
	ErrorClass   *string    `json:"errorClass"`
	Reason       *string    `json:"reason"`
	LastError    *string    `json:"lastError"`
	ReceivedAt   *time.Time `json:"receivedAt"`
	EnqueuedAt   time.Time  `json:"enqueuedAt"`
	UpdatedAt    time.Time  `json:"updatedAt"`
	RoutedAt     *time.Time `json:"routedAt"`
	NTransitions *int       `json:"nTransitions"`
	NApplied     int        `json:"nApplied"`
	BackfillAt   *time.Time `json:"backfillAt"`
	// ReplayGen is the replay generation of the message (replay_gen,
	// docs/design.md#replay): the replay that reset it last, until it is
	// decided; then the generation it was decided under. 0: never replayed.
	ReplayGen int64 `json:"replayGen,omitempty"`
	// Inbox is the msgx.inbox record the router first read the message
	// from (migration 0026); nil for a row of an earlier version.
	Inbox *InboxPosition `json:"inbox,omitempty"`
	// FlightPlan is what re-routing a ROUTED message needs beyond its own
	// records (router.FlightPlan, migration 0028); nil for most messages,
	// and once the message is SUCCEEDED.
	FlightPlan []byte `json:"-"`
}

// InboxPosition is a record's place in msgx.inbox.
type InboxPosition struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

const messageColumns = `msg_id, state, identity_key, sndr, msg_type, msg_styp, seqn, attempts, next_attempt_at,
	error_class, reason, last_error, received_at, enqueued_at, updated_at, routed_at, n_transitions, n_applied, backfill_at,
	replay_gen, inbox_partition, inbox_offset, flight_plan`

func scanMessage(row pgx.Row) (Message, error) {
	var m Message
	var part *int32
	var off *int64
	err := row.Scan(&m.MsgID, &m.State, &m.IdentityKey, &m.SNDR, &m.Type, &m.STYP, &m.SEQN, &m.Attempts, &m.NextAttempt,
		&m.ErrorClass, &m.Reason, &m.LastError, &m.ReceivedAt, &m.EnqueuedAt, &m.UpdatedAt, &m.RoutedAt, &m.NTransitions,
		&m.NApplied, &m.BackfillAt, &m.ReplayGen, &part, &off, &m.FlightPlan)
	if part != nil && off != nil {
		m.Inbox = &InboxPosition{Partition: *part, Offset: *off}
	}
	return m, err
}

// The backfill predicates on proc_state (docs/design.md#backfill-predicate), for the sweeper, the
// operator's commands and the status report (a message owing its mark is a
// row of backfill_owed). The states and IS NULL tests are literals so that
// the planner matches the partial index proc_state_abandoned (migration
// 0009); ARCHIVED rows are excluded by the explicit list of terminal states.
const (
	// BackfillAbandoned holds for a terminal message whose mark the sweeper
	// gave up on (not written, abandoned): reconciled by hand.
	BackfillAbandoned = `state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NULL AND backfill_abandoned_at IS NOT NULL`
	// BackfillStillOwed holds for the proc_state row of a message the
	// sweeper took from backfill_owed while it still owes its mark:
	// terminal and not abandoned (the advisory lock keeps replay and
	// reopen out meanwhile; this is defence in depth), written so that no
	// index can answer it (IS TRUE): the rows are looked up by their key.
	BackfillStillOwed = `(state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_abandoned_at IS NULL) IS TRUE`
)

// Messages is the proc_state store. The router is its writer for message
// decisions; the applying processors complete messages through MarkApplied.
type Messages struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

// NewMessages returns the store on pool; every call is bounded by timeout.
func NewMessages(pool *pgxpool.Pool, timeout time.Duration) *Messages {
	return &Messages{pool: pool, timeout: timeout}
}

// Pool exposes the pool for callers composing their own transactions.
func (s *Messages) Pool() *pgxpool.Pool { return s.pool }

// Timeout is the bound of every call, for callers composing their own
// transactions.
func (s *Messages) Timeout() time.Duration { return s.timeout }

// Touch returns the message's row, creating it as PENDING on its first
// delivery. enqueued_at keeps the first delivery's time, so re-deliveries
// (ingest duplicates) see the same row.
func (s *Messages) Touch(ctx context.Context, msgID int64, receivedAt *time.Time, enqueuedAt, now time.Time) (Message, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := scanMessage(s.pool.QueryRow(ctx, `INSERT INTO proc_state (msg_id, state, received_at, enqueued_at, updated_at)
		VALUES ($1, 'PENDING', $2, $3, $4)
		ON CONFLICT (msg_id) DO UPDATE SET msg_id = proc_state.msg_id
		RETURNING `+messageColumns, msgID, receivedAt, enqueuedAt, now))
	if err != nil {
		return Message{}, fmt.Errorf("recording message %d: %w", msgID, err)
	}
	return m, nil
}

// Load is Touch and Lookup in one round trip: the message's row (created
// PENDING on its first delivery) and what routing needs to know. pos is the
// msgx.inbox record being handled: a row created now records it, an
// existing row keeps what it has (msgx trace shows where the message was
// first read; docs/design.md#trace).
func (s *Messages) Load(ctx context.Context, msgID int64, pos InboxPosition, receivedAt *time.Time, enqueuedAt, now time.Time,
	q message.Query) (Message, message.Lookups, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var m Message
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO proc_state (msg_id, state, received_at, enqueued_at, updated_at, inbox_partition, inbox_offset)
		VALUES ($1, 'PENDING', $2, $3, $4, $5, $6)
		ON CONFLICT (msg_id) DO UPDATE SET msg_id = proc_state.msg_id
		RETURNING `+messageColumns, msgID, receivedAt, enqueuedAt, now, pos.Partition, pos.Offset).QueryRow(func(row pgx.Row) error {
		var err error
		m, err = scanMessage(row)
		return err
	})
	l := queueLookups(b, msgID, q)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return Message{}, message.Lookups{}, fmt.Errorf("loading message %d: %w", msgID, err)
	}
	return m, *l, nil
}

// Get returns one message; ok is false when it is unknown.
func (s *Messages) Get(ctx context.Context, msgID int64) (Message, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := scanMessage(s.pool.QueryRow(ctx, `SELECT `+messageColumns+` FROM proc_state WHERE msg_id = $1`, msgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Message{}, false, nil
	}
	if err != nil {
		return Message{}, false, fmt.Errorf("reading message %d: %w", msgID, err)
	}
	return m, true, nil
}

// Lookup reads the identity owner, the index entries of flids and, when
// days is not empty, the flights indexed on those days before msgID — in one
// round trip.
func (s *Messages) Lookup(ctx context.Context, msgID int64, identityKey string, flids []string, days []time.Time) (message.Lookups, error) {
	return s.Lookups(ctx, msgID, message.Query{IdentityKey: identityKey, FLIDs: flids, Days: days})
}

// QueueLookups queues on b the reads a routing decision on message msgID
// asks for (q); the result is filled once the batch has run. It writes
// nothing: the replay dry run decides a message as the router would (Load
// is the router's own read, which creates the row).
func QueueLookups(b *pgx.Batch, msgID int64, q message.Query) *message.Lookups {
	return queueLookups(b, msgID, q)
}

// Lookups is QueueLookups in one round trip of its own.
func (s *Messages) Lookups(ctx context.Context, msgID int64, q message.Query) (message.Lookups, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b := &pgx.Batch{}
	l := queueLookups(b, msgID, q)
	if b.Len() == 0 {
		return *l, nil
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return message.Lookups{}, fmt.Errorf("routing lookups for message %d: %w", msgID, err)
	}
	return *l, nil
}

// queueLookups queues the routing lookups on b; the result is filled when
// the batch has run.
func queueLookups(b *pgx.Batch, msgID int64, q message.Query) *message.Lookups {
	out := &message.Lookups{Days: map[string]message.FlightDay{}, Earlier: map[string][]string{}}
	if q.IdentityKey != "" {
		b.Queue(`SELECT msg_id FROM proc_state WHERE identity_key = $1`, q.IdentityKey).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&out.Owner)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
	}
	if q.RefType != "" {
		b.Queue(`SELECT key_tag FROM refdata_key_index WHERE rtype = $1`, q.RefType).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&out.KeyTag)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
	}
	if len(q.FLIDs) > 0 || len(q.Days) > 0 || len(q.Cascade) > 0 {
		b.Queue(indexLookupSQL, orEmpty(q.FLIDs), orEmpty(q.Days), orEmpty(q.Cascade)).Query(func(rows pgx.Rows) error {
			return scanIndex(rows, func(d message.FlightDay) {
				// The flights of the days that are newer than the message
				// are not candidates of its absent-flight deletion, nor
				// their descendants; an entry read without need is harmless.
				out.Days[d.FLID] = d
			})
		})
	}
	if days := q.Days; len(days) > 0 {
		b.Queue(`SELECT flid, operation_day FROM flight_index WHERE operation_day = ANY($1) AND first_msg_id < $2 ORDER BY flid`, days, msgID).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var flid string
				var day time.Time
				if err := rows.Scan(&flid, &day); err != nil {
					return err
				}
				k := day.Format(time.DateOnly)
				out.Earlier[k] = append(out.Earlier[k], flid)
			}
			return rows.Err()
		})
	}
	return out
}

// Decision is the router's verdict on a message, written in one transaction.
type Decision struct {
	MsgID int64
	// State is ROUTED (transitions emitted next) or a terminal state.
	State       string
	IdentityKey string // bound now; empty for ignored, duplicate, malformed
	SNDR        string
	Type        string
	STYP        string
	SEQN        string
	ErrorClass  string
	Reason      string
	LastError   string
	// N is the number of transitions the router emits (ROUTED only).
	N int
	// Index are the flight_index entries the decision writes, whole: an
	// entry that exists keeps its first message and its day (once set).
	Index []message.FlightDay
	// RefKey is the refdata_key_index entry to set (nil: none).
	RefKey *message.RefKey
	// FlightPlan is stored with a ROUTED decision (router.FlightPlan; nil:
	// none).
	FlightPlan []byte
	// ReplayGen is the replay generation the message was decided under
	// (route.Plan.Replay), stored so that a re-routed message emits the
	// same transitions. LoadedGen is the message's replay_gen when the
	// router read it: a replay that reset the message again meanwhile
	// changed it, and the decision is not recorded (it is made again).
	ReplayGen, LoadedGen int64
	Now                  time.Time
}

// Record stores a decision: the message's state, its identity, the number of
// transitions and the index entries (flights, reference key tag),
// atomically, in one statement (one round trip). A terminal state carries
// its backfill intent (backfill_next_at) in the same statement. Only a PENDING or FAILED message
// whose replay_gen is still d.LoadedGen is decided; deciding it again, or
// after a replay reset it meanwhile, is a no-op (false).
func (s *Messages) Record(ctx context.Context, d Decision) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b := &pgx.Batch{}
	q := QueueDecision(b, d)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("recording decision %s for message %d: %w", d.State, d.MsgID, err)
	}
	return q.Recorded(), nil
}

// QueuedDecision is a decision queued on a batch (QueueDecision).
type QueuedDecision struct {
	recorded bool
}

// Recorded reports, once the batch has run, whether the decision was
// recorded (false: the message was no longer PENDING or FAILED).
func (q *QueuedDecision) Recorded() bool { return q.recorded }

// QueueDecision queues Record's statement on b: the router's write seam,
// so that several decisions can share a round trip and a transaction.
func QueueDecision(b *pgx.Batch, d Decision) *QueuedDecision {
	var backfill, routedAt *time.Time
	if message.IsTerminal(d.State) {
		backfill = &d.Now
	}
	if d.State == message.StateRouted {
		routedAt = &d.Now
	}
	ix := indexColumnsOf(d.Index)
	var refType, keyTag string
	if d.RefKey != nil {
		refType, keyTag = d.RefKey.RType, d.RefKey.KeyTag
	}
	// The index entries are written only if the decision was: the INSERTs
	// read the UPDATE's result. A flight entry that exists keeps its first
	// message and its day unless it had none (an ADFT without SODT), as the
	// router only ever adds a day, and takes the decision's link; a key-tag
	// entry takes the latest routed message's tag.
	q := &QueuedDecision{}
	b.Queue(`WITH u AS (
			UPDATE proc_state SET state = $2, identity_key = COALESCE(identity_key, NULLIF($3, '')),
				sndr = NULLIF($4, ''), msg_type = NULLIF($5, ''), msg_styp = NULLIF($6, ''), seqn = NULLIF($7, ''),
				error_class = NULLIF($8, ''), reason = NULLIF($9, ''), last_error = COALESCE(NULLIF($10, ''), last_error),
				n_transitions = $11, next_attempt_at = NULL, updated_at = $12, routed_at = $13, backfill_next_at = $14,
				replay_gen = $19, decided_at = $12, flight_plan = $25
			WHERE msg_id = $1 AND state IN ('PENDING', 'FAILED') AND replay_gen = $20
			RETURNING msg_id, state, enqueued_at, backfill_next_at),
		`+owedFromU+`,
		ix AS (
			INSERT INTO flight_index (flid, operation_day, first_msg_id, created_at, state, maid, flno)
			SELECT f.flid, f.day, f.first_msg_id, $12, NULLIF(f.state, ''), NULLIF(f.maid, ''), NULLIF(f.flno, '')
			FROM unnest($15::text[], $16::date[], $21::bigint[], $22::text[], $23::text[], $24::text[])
				AS f(flid, day, first_msg_id, state, maid, flno)
			WHERE EXISTS (SELECT 1 FROM u)
			ON CONFLICT (flid) DO UPDATE SET `+indexUpdateSet+`),
		rk AS (
			INSERT INTO refdata_key_index (rtype, key_tag, msg_id)
			SELECT $17, $18, $1 WHERE $17 <> '' AND EXISTS (SELECT 1 FROM u)
			ON CONFLICT (rtype) DO UPDATE SET key_tag = EXCLUDED.key_tag, msg_id = EXCLUDED.msg_id)
		SELECT COUNT(*) FROM u`,
		d.MsgID, d.State, d.IdentityKey, d.SNDR, d.Type, d.STYP, d.SEQN, d.ErrorClass, d.Reason, d.LastError,
		d.N, d.Now, routedAt, backfill, ix.flids, ix.days, refType, keyTag, d.ReplayGen, d.LoadedGen, ix.firsts, ix.states, ix.maids, ix.flnos,
		d.FlightPlan).QueryRow(func(row pgx.Row) error {
		var decided int
		err := row.Scan(&decided)
		q.recorded = decided == 1
		return err
	})
	return q
}

// Fail records a failure that belongs to the message and returns its attempt
// count: the message stays FAILED, at the head, until nextAt. The message's
// identity (identityKey, "" when none was computed) is bound in the same
// statement if no other message holds it, and stays bound when the message
// is exhausted (docs/design.md#identity): a resend of a failed or exhausted message
// is its duplicate. When another message holds it, the decision after the
// retry says duplicate-of.
func (s *Messages) Fail(ctx context.Context, msgID int64, identityKey, class, lastError string, nextAt, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var attempts int
	// The router is the only writer of identity keys, so the NOT EXISTS
	// guard cannot race another binding of the same key.
	err := s.pool.QueryRow(ctx, `UPDATE proc_state SET state = 'FAILED', attempts = attempts + 1, error_class = $2,
			last_error = $3, next_attempt_at = $4, updated_at = $5,
			identity_key = COALESCE(identity_key,
				(SELECT NULLIF($6, '') WHERE NOT EXISTS (SELECT 1 FROM proc_state o WHERE o.identity_key = $6)))
		WHERE msg_id = $1 AND state IN ('PENDING', 'FAILED') RETURNING attempts`,
		msgID, class, message.Clip(lastError, 1000), nextAt, now, identityKey).Scan(&attempts)
	if err != nil {
		return 0, fmt.Errorf("recording failure of message %d: %w", msgID, err)
	}
	return attempts, nil
}

// Exhaust makes a message whose attempts are used up DEAD(EXHAUSTED): the
// class is overwritten, last_error and the identity bound by Fail are kept,
// and the backfill intent is set in the same statement.
func (s *Messages) Exhaust(ctx context.Context, msgID int64, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.pool.Exec(ctx, `WITH u AS (
			UPDATE proc_state SET state = 'DEAD', error_class = 'EXHAUSTED',
				reason = 'exhausted:' || COALESCE(error_class, 'unknown'), next_attempt_at = NULL, updated_at = $2, backfill_next_at = $2,
				decided_at = $2
			WHERE msg_id = $1 AND state IN ('PENDING', 'FAILED')
			RETURNING msg_id, state, enqueued_at, backfill_next_at),
		`+owedFromU+`
		SELECT 1`, msgID, now)
	if err != nil {
		return fmt.Errorf("exhausting message %d: %w", msgID, err)
	}
	return nil
}

// markAppliedSQL marks one transition applied and completes its message
// when it is the last one (see MarkApplied).
const markAppliedSQL = `WITH ins AS (
		INSERT INTO transition_applied (msg_id, kind, key, applied_at, outcome, state_version)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, 0))
		ON CONFLICT DO NOTHING RETURNING 1),
	u AS (
		UPDATE proc_state SET n_applied = n_applied + 1,
			state = CASE WHEN n_applied + 1 >= n_transitions THEN 'SUCCEEDED' ELSE state END,
			backfill_next_at = CASE WHEN n_applied + 1 >= n_transitions THEN $4 ELSE backfill_next_at END,
			flight_plan = CASE WHEN n_applied + 1 >= n_transitions THEN NULL ELSE flight_plan END,
			updated_at = $4
		WHERE msg_id = $1 AND state = 'ROUTED' AND EXISTS (SELECT 1 FROM ins)
		RETURNING msg_id, state, enqueued_at, backfill_next_at),
	` + owedFromU + `
	SELECT state FROM u`

// Applied is what one transition did, recorded with its applied mark for
// msgx trace (migration 0026): Outcome (e.g. "applied", "no-change",
// "no-match", "replay") and the version it produced (0: none).
type Applied struct {
	Outcome      string
	StateVersion int64
}

// MarkApplied records, inside the caller's transaction, that the transition
// of msgID for (kind, key) was applied, and what it did (a). Marking twice is
// a no-op that keeps the first record. When the last of the message's n
// transitions is marked, the message becomes SUCCEEDED with its backfill
// intent in the same statement; completed reports that.
func MarkApplied(ctx context.Context, tx pgx.Tx, msgID int64, kind, key string, a Applied, now time.Time) (completed bool, err error) {
	var state string
	err = tx.QueryRow(ctx, markAppliedSQL, msgID, kind, key, now, a.Outcome, a.StateVersion).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("marking %s %s of message %d applied: %w", kind, key, msgID, err)
	}
	return state == message.StateSucceeded, nil
}

// Mark is one transition's applied mark for QueueMarksApplied.
type Mark struct {
	MsgID     int64
	Kind, Key string
	Applied
}

// marksAppliedSQL is markAppliedSQL for many marks: every new mark counts
// once towards its message, however many of its marks the statement holds.
//
// The messages are found by their key: the state test is written so that no
// index can answer it (IS TRUE). Without autovacuum, or between its runs,
// proc_state_state holds an entry for every version of every message that
// was ever ROUTED, and PostgreSQL planned the join as a scan of all of them
// (15 ms per group after 50,000 messages, growing with the work) instead of
// a lookup per message.
const marksAppliedSQL = `WITH v AS (
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[])
			AS v(msg_id, kind, key, outcome, state_version)),
	ins AS (
		INSERT INTO transition_applied (msg_id, kind, key, applied_at, outcome, state_version)
		SELECT msg_id, kind, key, $6, NULLIF(outcome, ''), NULLIF(state_version, 0) FROM v
		ON CONFLICT DO NOTHING RETURNING msg_id),
	n AS (SELECT msg_id, count(*) AS n FROM ins GROUP BY msg_id),
	u AS (
		UPDATE proc_state p SET n_applied = p.n_applied + n.n,
			state = CASE WHEN p.n_applied + n.n >= p.n_transitions THEN 'SUCCEEDED' ELSE p.state END,
			backfill_next_at = CASE WHEN p.n_applied + n.n >= p.n_transitions THEN $6 ELSE p.backfill_next_at END,
			flight_plan = CASE WHEN p.n_applied + n.n >= p.n_transitions THEN NULL ELSE p.flight_plan END,
			updated_at = $6
		FROM n WHERE p.msg_id = n.msg_id AND (p.state = 'ROUTED') IS TRUE
		RETURNING p.msg_id, p.state, p.enqueued_at, p.backfill_next_at),
	` + owedFromU + `
	SELECT msg_id, state FROM u`

// QueuedMarks are marks queued on a batch (QueueMarksApplied).
type QueuedMarks struct {
	completed map[int64]bool
}

// Completed reports, once the batch has run, whether the marks completed
// message msgID (made it SUCCEEDED).
func (q *QueuedMarks) Completed(msgID int64) bool { return q.completed[msgID] }

// QueueMarksApplied queues MarkApplied of every mark, in one statement, on b
// (to run in the batch's transaction): marking a transition twice is a
// no-op, also within marks, and a message whose last transition is marked
// becomes SUCCEEDED with its backfill intent.
func QueueMarksApplied(b *pgx.Batch, marks []Mark, now time.Time) *QueuedMarks {
	q := &QueuedMarks{completed: map[int64]bool{}}
	if len(marks) == 0 {
		return q
	}
	ids := make([]int64, len(marks))
	kinds := make([]string, len(marks))
	keys := make([]string, len(marks))
	outcomes := make([]string, len(marks))
	versions := make([]int64, len(marks))
	for i, m := range marks {
		ids[i], kinds[i], keys[i], outcomes[i], versions[i] = m.MsgID, m.Kind, m.Key, m.Outcome, m.StateVersion
	}
	b.Queue(marksAppliedSQL, ids, kinds, keys, outcomes, versions, now).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id int64
			var state string
			if err := rows.Scan(&id, &state); err != nil {
				return fmt.Errorf("marking %d transitions applied: %w", len(marks), err)
			}
			q.completed[id] = state == message.StateSucceeded
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("marking %d transitions applied: %w", len(marks), err)
		}
		return nil
	})
	return q
}

// indexLookupSQL reads the flight_index entries of the FLIDs $1, of the
// flights of the operation days $2 and of the live descendants (children,
// their children, …) of the FLIDs $3, of those flights and — when there is
// a deletion — of $1: everything the decisions of messages that name $1,
// delete flights absent from packages of the days $2 and delete $3 may
// touch (flight.Expand). A flight of $1 may be linked under a flight the
// same messages delete, and take its descendants along in the cascade.
//
// The walk starts from the FLIDs given, not from their entries: a master
// may have no entry yet while its children have one (a child indexed before
// its master), and a batch that creates the master and then deletes it
// must find those children (sink.LoadBatch reads the index before any of
// the batch's decisions). UNION ends the walk on a cycle of masters.
//
// The entries are read by one array of keys, not by "flid = ANY($1) OR flid
// IN (the walk)": PostgreSQL plans that OR as a scan of the whole table,
// 11 ms per batch at 100,000 flights and growing with them, where the
// array is probed through the primary key in 1 ms.
const indexLookupSQL = `WITH RECURSIVE d(flid) AS (
		SELECT f FROM unnest($3::text[]) AS f
		UNION
		SELECT f FROM unnest($1::text[]) AS f WHERE cardinality($3::text[]) > 0 OR cardinality($2::date[]) > 0
		UNION
		SELECT flid FROM flight_index WHERE operation_day = ANY($2::date[])
		UNION
		SELECT c.flid FROM flight_index c JOIN d ON c.maid = d.flid WHERE c.state = 'ACTIVE' AND c.maid IS NOT NULL
	)
	SELECT flid, operation_day, first_msg_id, COALESCE(state, ''), COALESCE(maid, ''), COALESCE(flno, '')
	FROM flight_index WHERE flid = ANY(ARRAY(SELECT f FROM unnest($1::text[]) AS f UNION SELECT flid FROM d))`

// indexUpdateSet is how an index entry that exists takes a decision's:
// its first message stays, its day once set, the link is the decision's.
const indexUpdateSet = `operation_day = COALESCE(flight_index.operation_day, EXCLUDED.operation_day),
	state = EXCLUDED.state, maid = EXCLUDED.maid, flno = EXCLUDED.flno`

// scanIndex scans indexLookupSQL's rows into fn.
func scanIndex(rows pgx.Rows, fn func(message.FlightDay)) error {
	for rows.Next() {
		var d message.FlightDay
		if err := rows.Scan(&d.FLID, &d.Day, &d.FirstMsgID, &d.Link.State, &d.Link.MAID, &d.Link.FLNO); err != nil {
			return err
		}
		fn(d)
	}
	return rows.Err()
}

// orEmpty is s, or an empty slice for nil: unnest and ANY take an empty
// array, not NULL.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// indexColumns are index entries as one array per column, for unnest.
type indexColumns struct {
	flids, states, maids, flnos []string
	days                        []*time.Time
	firsts                      []int64
}

func indexColumnsOf(index []message.FlightDay) indexColumns {
	n := len(index)
	c := indexColumns{flids: make([]string, n), states: make([]string, n), maids: make([]string, n), flnos: make([]string, n),
		days: make([]*time.Time, n), firsts: make([]int64, n)}
	for i, f := range index {
		c.flids[i], c.days[i], c.firsts[i] = f.FLID, f.Day, f.FirstMsgID
		c.states[i], c.maids[i], c.flnos[i] = f.Link.State, f.Link.MAID, f.Link.FLNO
	}
	return c
}

// owedFromU is the CTE, named owed, that records the backfill intent of
// the rows the data-modifying CTE u returned (msg_id, state, enqueued_at,
// backfill_next_at): each it made terminal owes its processed mark from
// then on, in the same statement (backfill_owed, docs/design.md#backfill).
const owedFromU = `owed AS (
		INSERT INTO backfill_owed (msg_id, next_at, enqueued_at)
		SELECT msg_id, backfill_next_at, enqueued_at FROM u WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
		ON CONFLICT (msg_id) DO NOTHING)`
