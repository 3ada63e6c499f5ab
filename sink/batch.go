package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/tables/message"
)

// The router's group commit (docs/design.md#router-batches): a batch of
// messages is loaded, decided and recorded in one transaction, with a
// handful of multi-row statements instead of two transactions per message.

// Delivery is one inbox record, as RecordBatch creates its row on its
// first delivery.
type Delivery struct {
	MsgID      int64
	ReceivedAt *time.Time
	EnqueuedAt time.Time
	// Inbox is the msgx.inbox record's place (msgx trace).
	Inbox InboxPosition
}

// BatchQuery is what the decisions of a batch must look up: the union of
// the messages' queries (route.Plan.Query).
type BatchQuery struct {
	IdentityKeys []string
	FLIDs        []string
	Days         []time.Time
	// Cascade are the FLIDs the batch's messages delete (message.Query).
	Cascade  []string
	RefTypes []string
}

// BatchPlanning is the first statement of a router batch's or a group
// commit's transaction. It plans the transaction's statements for each
// run's arguments (LoadBatch) and without JIT compilation: the estimates
// of a batch's array joins and of the router's walk of the children can
// pass jit_above_cost, and compiling took 0.65 s of one router batch
// during a million-message backlog to run a statement of ~20 ms.
const BatchPlanning = `SELECT set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true)`

// LoadBatch is Load for a batch, inside tx, in one round trip: the rows of
// the messages of ds and the lookups of q. A message without a row yet (its
// first delivery) comes back as the PENDING row Load would create, and in
// fresh: RecordBatch inserts its row with its decision, rather than
// creating it PENDING and updating it in the same transaction (one row
// version per message instead of two). The rows come back by MSG_ID.
func LoadBatch(ctx context.Context, tx pgx.Tx, ds []Delivery, now time.Time, q BatchQuery) (rows map[int64]Message, fresh map[int64]Delivery, _ message.BatchLookups, _ error) {
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.MsgID
	}
	rows = make(map[int64]Message, len(ds))
	l := message.BatchLookups{Owners: map[string]int64{}, Index: map[string]message.FlightDay{}, KeyTags: map[string]string{}}
	b := &pgx.Batch{}
	// pgx prepares each statement once per connection, and PostgreSQL turns
	// a prepared statement into a generic plan after five runs. A generic
	// plan of these array lookups and joins made while proc_state was nearly
	// empty (a fresh database, a rebuild after its TRUNCATE) scans the whole
	// table ever after: the router's batches slowed from 15 ms to 400 ms over
	// 50,000 messages (BenchmarkRouter). The batch's transaction plans its
	// statements for their arguments and the tables' size at each run.
	b.Queue(BatchPlanning)
	b.Queue(`SELECT `+messageColumns+` FROM proc_state WHERE msg_id = ANY($1)`, ids).Query(func(r pgx.Rows) error {
		for r.Next() {
			m, err := scanMessage(r)
			if err != nil {
				return err
			}
			rows[m.MsgID] = m
		}
		return r.Err()
	})
	if len(q.IdentityKeys) > 0 {
		b.Queue(`SELECT identity_key, msg_id FROM proc_state WHERE identity_key = ANY($1)`, q.IdentityKeys).Query(func(r pgx.Rows) error {
			for r.Next() {
				var k string
				var id int64
				if err := r.Scan(&k, &id); err != nil {
					return err
				}
				l.Owners[k] = id
			}
			return r.Err()
		})
	}
	if len(q.RefTypes) > 0 {
		b.Queue(`SELECT rtype, key_tag FROM refdata_key_index WHERE rtype = ANY($1)`, q.RefTypes).Query(func(r pgx.Rows) error {
			for r.Next() {
				var rtype, tag string
				if err := r.Scan(&rtype, &tag); err != nil {
					return err
				}
				l.KeyTags[rtype] = tag
			}
			return r.Err()
		})
	}
	if len(q.FLIDs) > 0 || len(q.Days) > 0 || len(q.Cascade) > 0 {
		b.Queue(indexLookupSQL, orEmpty(q.FLIDs), orEmpty(q.Days), orEmpty(q.Cascade)).Query(func(r pgx.Rows) error {
			return scanIndex(r, func(d message.FlightDay) { l.Index[d.FLID] = d })
		})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, message.BatchLookups{}, fmt.Errorf("loading a batch of %d messages: %w", len(ds), err)
	}
	fresh = map[int64]Delivery{}
	for _, d := range ds {
		if _, ok := rows[d.MsgID]; !ok {
			fresh[d.MsgID] = d
			// The times as PostgreSQL will store them (microseconds): a
			// decision made again on the stored row must carry the same.
			rows[d.MsgID] = Message{MsgID: d.MsgID, State: message.StatePending, ReceivedAt: truncated(d.ReceivedAt),
				EnqueuedAt: d.EnqueuedAt.Truncate(time.Microsecond), UpdatedAt: now.Truncate(time.Microsecond)}
		}
	}
	return rows, fresh, l, nil
}

// ErrNotRecorded is RecordBatch's answer when a message of the batch was no
// longer PENDING or FAILED under its loaded replay generation (a replay
// reset it meanwhile): the caller rolls the batch back and decides its
// messages one by one.
var ErrNotRecorded = errors.New("a message of the batch changed state while it was being decided")

// RecordBatch is Record for a batch of decisions, inside tx: the rows of
// the fresh messages (LoadBatch) inserted with their decisions in one
// multi-row INSERT, the others updated in one multi-row UPDATE, then the
// index entries the batch leaves (index: at most one per FLID, as the
// batch's decisions merged them; keys: at most one per reference type, the
// last routed tag) in one statement each. Either every decision is recorded
// or the error is ErrNotRecorded and the caller must roll tx back: the index
// entries were derived from all of them. A fresh row that exists by now
// (created by another writer meanwhile) fails the INSERT: the caller
// decides the batch again.
func RecordBatch(ctx context.Context, tx pgx.Tx, ds []Decision, fresh map[int64]Delivery, index []message.FlightDay, keys []message.KeyIndex, now time.Time) error {
	var updates, creates []Decision
	for _, d := range ds {
		if _, ok := fresh[d.MsgID]; ok {
			creates = append(creates, d)
		} else {
			updates = append(updates, d)
		}
	}
	b := &pgx.Batch{}
	var recorded int
	if len(updates) > 0 {
		c := columnsOf(updates, nil)
		// As QueueDecision: only a PENDING or FAILED message still under
		// the replay generation it was loaded with is decided.
		b.Queue(`WITH d AS (
				SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
					$8::text[], $9::text[], $10::text[], $11::int[], $12::timestamptz[], $13::timestamptz[], $14::timestamptz[],
					$15::bigint[], $16::bigint[], $17::jsonb[])
					AS d(msg_id, state, identity_key, sndr, msg_type, msg_styp, seqn, error_class, reason, last_error, n,
						updated_at, routed_at, backfill_next_at, replay_gen, loaded_gen, flight_plan)),
			u AS (
				UPDATE proc_state p SET state = d.state, identity_key = COALESCE(p.identity_key, NULLIF(d.identity_key, '')),
					sndr = NULLIF(d.sndr, ''), msg_type = NULLIF(d.msg_type, ''), msg_styp = NULLIF(d.msg_styp, ''), seqn = NULLIF(d.seqn, ''),
					error_class = NULLIF(d.error_class, ''), reason = NULLIF(d.reason, ''), last_error = COALESCE(NULLIF(d.last_error, ''), p.last_error),
					n_transitions = d.n, next_attempt_at = NULL, updated_at = d.updated_at, routed_at = d.routed_at,
					backfill_next_at = d.backfill_next_at, replay_gen = d.replay_gen, decided_at = d.updated_at,
					flight_plan = d.flight_plan
				FROM d
				WHERE p.msg_id = d.msg_id AND p.state IN ('PENDING', 'FAILED') AND p.replay_gen = d.loaded_gen
				RETURNING p.msg_id, p.state, p.enqueued_at, p.backfill_next_at),
			`+owedFromU+`
			SELECT COUNT(*) FROM u`,
			c.ids, c.states, c.idents, c.sndrs, c.types, c.styps, c.seqns, c.classes, c.reasons, c.lastErrs, c.ns, c.updated,
			c.routedAt, c.backfill, c.gens, c.loaded, c.plans).QueryRow(func(row pgx.Row) error { return row.Scan(&recorded) })
	}
	if len(creates) > 0 {
		// The row Load would have created PENDING, with the columns the
		// UPDATE above would then have set.
		c := columnsOf(creates, fresh)
		b.Queue(`WITH u AS (INSERT INTO proc_state (msg_id, state, identity_key, sndr, msg_type, msg_styp, seqn, error_class, reason, last_error,
				n_transitions, updated_at, routed_at, backfill_next_at, replay_gen, received_at, enqueued_at, decided_at,
				inbox_partition, inbox_offset, flight_plan)
			SELECT d.msg_id, d.state, NULLIF(d.identity_key, ''), NULLIF(d.sndr, ''), NULLIF(d.msg_type, ''), NULLIF(d.msg_styp, ''),
				NULLIF(d.seqn, ''), NULLIF(d.error_class, ''), NULLIF(d.reason, ''), NULLIF(d.last_error, ''), d.n, d.updated_at,
				d.routed_at, d.backfill_next_at, d.replay_gen, d.received_at, d.enqueued_at, d.updated_at, d.inbox_partition, d.inbox_offset,
				d.flight_plan
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
				$10::text[], $11::int[], $12::timestamptz[], $13::timestamptz[], $14::timestamptz[], $15::bigint[],
				$16::timestamptz[], $17::timestamptz[], $18::int[], $19::bigint[], $20::jsonb[])
				AS d(msg_id, state, identity_key, sndr, msg_type, msg_styp, seqn, error_class, reason, last_error, n,
					updated_at, routed_at, backfill_next_at, replay_gen, received_at, enqueued_at, inbox_partition, inbox_offset,
					flight_plan)
			RETURNING msg_id, state, enqueued_at, backfill_next_at),
			`+owedFromU+`
			SELECT 1`,
			c.ids, c.states, c.idents, c.sndrs, c.types, c.styps, c.seqns, c.classes, c.reasons, c.lastErrs, c.ns, c.updated,
			c.routedAt, c.backfill, c.gens, c.received, c.enqueued, c.parts, c.offs, c.plans)
	}
	if len(index) > 0 {
		ix := indexColumnsOf(index)
		// An entry that exists keeps its first message, and its day unless
		// it had none, as QueueDecision does; it takes the batch's link.
		b.Queue(`INSERT INTO flight_index (flid, operation_day, first_msg_id, created_at, state, maid, flno)
			SELECT f.flid, f.day, f.first_msg_id, $4, NULLIF(f.state, ''), NULLIF(f.maid, ''), NULLIF(f.flno, '')
			FROM unnest($1::text[], $2::date[], $3::bigint[], $5::text[], $6::text[], $7::text[]) AS f(flid, day, first_msg_id, state, maid, flno)
			ON CONFLICT (flid) DO UPDATE SET `+indexUpdateSet,
			ix.flids, ix.days, ix.firsts, now, ix.states, ix.maids, ix.flnos)
	}
	if len(keys) > 0 {
		rtypes, tags, msgs := make([]string, len(keys)), make([]string, len(keys)), make([]int64, len(keys))
		for i, k := range keys {
			rtypes[i], tags[i], msgs[i] = k.RType, k.KeyTag, k.MsgID
		}
		b.Queue(`INSERT INTO refdata_key_index (rtype, key_tag, msg_id)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
			ON CONFLICT (rtype) DO UPDATE SET key_tag = EXCLUDED.key_tag, msg_id = EXCLUDED.msg_id`, rtypes, tags, msgs)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("recording a batch of %d decisions: %w", len(ds), err)
	}
	if recorded != len(updates) {
		return fmt.Errorf("%w (%d of %d recorded)", ErrNotRecorded, recorded, len(updates))
	}
	return nil
}

// decisionColumns are decisions as one array per column, for unnest.
type decisionColumns struct {
	ids, gens, loaded, offs                                                []int64
	ns, parts                                                              []int32
	states, idents, sndrs, types, styps, seqns, classes, reasons, lastErrs []string
	updated, enqueued                                                      []time.Time
	routedAt, backfill, received                                           []*time.Time
	plans                                                                  [][]byte
}

// columnsOf lays ds out by column; fresh, when given, supplies the
// deliveries of rows to create.
func columnsOf(ds []Decision, fresh map[int64]Delivery) decisionColumns {
	n := len(ds)
	c := decisionColumns{ids: make([]int64, n), gens: make([]int64, n), loaded: make([]int64, n), ns: make([]int32, n),
		states: make([]string, n), idents: make([]string, n), sndrs: make([]string, n), types: make([]string, n),
		styps: make([]string, n), seqns: make([]string, n), classes: make([]string, n), reasons: make([]string, n),
		lastErrs: make([]string, n), updated: make([]time.Time, n), enqueued: make([]time.Time, n),
		routedAt: make([]*time.Time, n), backfill: make([]*time.Time, n), received: make([]*time.Time, n),
		parts: make([]int32, n), offs: make([]int64, n), plans: make([][]byte, n)}
	for i, d := range ds {
		c.ids[i], c.ns[i], c.gens[i], c.loaded[i] = d.MsgID, int32(d.N), d.ReplayGen, d.LoadedGen
		c.states[i], c.idents[i], c.sndrs[i], c.types[i], c.styps[i], c.seqns[i] = d.State, d.IdentityKey, d.SNDR, d.Type, d.STYP, d.SEQN
		c.classes[i], c.reasons[i], c.lastErrs[i], c.plans[i] = d.ErrorClass, d.Reason, d.LastError, d.FlightPlan
		c.updated[i] = d.Now
		// As QueueDecision: a terminal state carries its backfill intent.
		if message.IsTerminal(d.State) {
			c.backfill[i] = &ds[i].Now
		}
		if d.State == message.StateRouted {
			c.routedAt[i] = &ds[i].Now
		}
		if f, ok := fresh[d.MsgID]; ok {
			c.received[i], c.enqueued[i] = f.ReceivedAt, f.EnqueuedAt
			c.parts[i], c.offs[i] = f.Inbox.Partition, f.Inbox.Offset
		}
	}
	return c
}

// PendingPurge is a purge the router started handing to the flights
// processor (purge_pending, migration 0028).
type PendingPurge struct {
	FLID   string
	Before time.Time
}

// StartPurges records, inside tx, the purges of flids before the day before
// as pending and returns the flight_index entries of those flights.
func StartPurges(ctx context.Context, tx pgx.Tx, flids []string, before, now time.Time) (map[string]message.FlightDay, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO purge_pending (flid, purge_before, created_at)
		SELECT f, $2, $3 FROM unnest($1::text[]) AS f ON CONFLICT (flid) DO NOTHING`, flids, before, now); err != nil {
		return nil, fmt.Errorf("recording %d purges: %w", len(flids), err)
	}
	return indexEntries(ctx, tx, flids)
}

// PendingPurges reads, inside tx, the purges started and not finished, with
// the flight_index entries of their flights.
func PendingPurges(ctx context.Context, tx pgx.Tx) ([]PendingPurge, map[string]message.FlightDay, error) {
	rows, err := tx.Query(ctx, `SELECT flid, purge_before FROM purge_pending ORDER BY purge_before, flid`)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the pending purges: %w", err)
	}
	var out []PendingPurge
	var flids []string
	for rows.Next() {
		var p PendingPurge
		if err := rows.Scan(&p.FLID, &p.Before); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("reading the pending purges: %w", err)
		}
		out = append(out, p)
		flids = append(flids, p.FLID)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading the pending purges: %w", err)
	}
	if len(out) == 0 {
		return nil, nil, nil
	}
	entries, err := indexEntries(ctx, tx, flids)
	return out, entries, err
}

// FinishPurges writes, inside tx, the flight_index entries the purges of
// flids left and forgets the purges.
func FinishPurges(ctx context.Context, tx pgx.Tx, flids []string, index []message.FlightDay, now time.Time) error {
	b := &pgx.Batch{}
	if len(index) > 0 {
		ix := indexColumnsOf(index)
		b.Queue(`UPDATE flight_index i SET state = NULLIF(f.state, ''), maid = NULLIF(f.maid, ''), flno = NULLIF(f.flno, '')
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS f(flid, state, maid, flno) WHERE i.flid = f.flid`,
			ix.flids, ix.states, ix.maids, ix.flnos)
	}
	b.Queue(`DELETE FROM purge_pending WHERE flid = ANY($1)`, flids)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("finishing %d purges: %w", len(flids), err)
	}
	return nil
}

func indexEntries(ctx context.Context, tx pgx.Tx, flids []string) (map[string]message.FlightDay, error) {
	rows, err := tx.Query(ctx, indexLookupSQL, flids, []time.Time{}, []string{})
	if err != nil {
		return nil, fmt.Errorf("reading %d flight index entries: %w", len(flids), err)
	}
	defer rows.Close()
	out := map[string]message.FlightDay{}
	if err := scanIndex(rows, func(d message.FlightDay) { out[d.FLID] = d }); err != nil {
		return nil, fmt.Errorf("reading %d flight index entries: %w", len(flids), err)
	}
	return out, nil
}

// truncated is t cut to PostgreSQL's precision (nil stays nil).
func truncated(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.Truncate(time.Microsecond)
	return &u
}
