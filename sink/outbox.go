package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Event is one record for the outbox: Value nil is a tombstone. OriginAt is
// when the change entered msgx (the inbox enqueue time), for the end-to-end
// latency.
type Event struct {
	Topic    string
	Key      string
	Value    []byte
	OriginAt time.Time
	// MsgID and StateVersion are the flight version a msg event announces
	// (0 otherwise): the publisher indexes where it produced it (msg_event,
	// migration 0026).
	MsgID, StateVersion int64
	// New says that no earlier transaction queued this version's event:
	// the transaction queueing it wrote its flight's row from the version
	// before. The publisher then produces it without looking the version
	// up in msg_event (migration 0031); otherwise (false, the safe zero)
	// it looks, and a version published already is not published again.
	New bool
}

// eventColumns are the event_outbox columns QueueEvents writes.
var eventColumns = []string{"topic", "key", "value", "origin_at", "created_at", "msg_id", "state_version", "recheck"}

// QueueEvents adds events to the outbox inside the caller's transaction, so
// they are durable exactly when the state they announce is; their ids
// follow their order.
//
// It copies them (COPY ... FROM STDIN) rather than inserting an array of
// each column: the events carry whole flight documents, a group's ~1 MB,
// and pgx grows a statement's parameter buffer from 256 bytes for every
// statement (its wire buffer from 1 KB), which copied and threw away a
// few times their size per group — ~7 % of all the bytes msgx
// allocated on a backlog. COPY is sent in 64 KB pieces, and PostgreSQL
// plans nothing for it.
func QueueEvents(ctx context.Context, tx pgx.Tx, events []Event, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"event_outbox"}, eventColumns, pgx.CopyFromSlice(len(events), func(i int) ([]any, error) {
		e := &events[i]
		var origin, msgID, version any // NULL
		if !e.OriginAt.IsZero() {
			origin = e.OriginAt
		}
		if e.MsgID != 0 {
			msgID = e.MsgID
		}
		if e.StateVersion != 0 {
			version = e.StateVersion
		}
		return []any{e.Topic, e.Key, e.Value, origin, now, msgID, version, !e.New}, nil
	}))
	if err != nil {
		return fmt.Errorf("queueing %d events: %w", len(events), err)
	}
	return nil
}

// OutboxRow is one event_outbox row: an event waiting to be produced.
type OutboxRow struct {
	ID    int64
	Event Event
}

// ReadOutbox returns up to limit of the oldest outbox rows, in the order
// they were committed (id order), and which of the versions they announce
// msg_event records as published: their events are on the msg topic
// already, and an outbox row announcing one again (a transition redelivered
// after a crash re-queues it) must not be published twice. Only the rows
// not queued as new (Event.New) are looked up. One statement, so one
// commit per publisher round — none during a backlog, where DeleteOutbox
// reads the next rows in its own transaction.
func ReadOutbox(ctx context.Context, pool *pgxpool.Pool, limit int) ([]OutboxRow, map[Version]bool, error) {
	rows, err := pool.Query(ctx, readOutboxSQL, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the outbox: %w", err)
	}
	out, published, err := collectOutbox(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the outbox: %w", err)
	}
	return out, published, nil
}

// readOutboxSQL is ReadOutbox's statement. msg_event's primary key (flid,
// state_version, msg_id) serves the lookup by its first two columns. At a
// million versions a lookup is an index descent through pages mostly
// outside shared_buffers, ~25 µs each: half of the read's time, and needed
// only by the rows of a redelivery, which the flights processor marks
// (recheck).
const readOutboxSQL = `WITH due AS (
		SELECT id, topic, key, value, origin_at, COALESCE(msg_id, 0) AS msg_id, COALESCE(state_version, 0) AS state_version, recheck
		FROM event_outbox ORDER BY id LIMIT $1)
	SELECT d.id, d.topic, d.key, d.value, d.origin_at, d.msg_id, d.state_version, NOT d.recheck,
		CASE WHEN d.recheck THEN EXISTS (SELECT 1 FROM msg_event m WHERE m.flid = d.key AND m.state_version = d.state_version) ELSE false END
	FROM due d ORDER BY d.id`

// collectOutbox reads the rows of readOutboxSQL.
func collectOutbox(rows pgx.Rows) ([]OutboxRow, map[Version]bool, error) {
	published := map[Version]bool{}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxRow, error) {
		var done bool
		r, err := scanOutbox(row, &done)
		if done {
			published[Version{FLID: r.Event.Key, StateVersion: r.Event.StateVersion}] = true
		}
		return r, err
	})
	return out, published, err
}

func scanOutboxRow(row pgx.CollectableRow) (OutboxRow, error) { return scanOutbox(row) }

// scanOutbox scans an outbox row's columns, then the extra ones into extra.
func scanOutbox(row pgx.CollectableRow, extra ...any) (OutboxRow, error) {
	var r OutboxRow
	var origin *time.Time
	err := row.Scan(append([]any{&r.ID, &r.Event.Topic, &r.Event.Key, &r.Event.Value, &origin, &r.Event.MsgID, &r.Event.StateVersion, &r.Event.New}, extra...)...)
	if origin != nil {
		r.Event.OriginAt = *origin
	}
	return r, err
}

// ReadOutboxIDs returns the outbox rows with the given ids that still
// exist, in id order: what the publisher's reconciliation finds of a batch
// its last Kafka transaction committed.
func ReadOutboxIDs(ctx context.Context, pool *pgxpool.Pool, ids []int64) ([]OutboxRow, error) {
	rows, err := pool.Query(ctx, `SELECT id, topic, key, value, origin_at, COALESCE(msg_id, 0), COALESCE(state_version, 0), NOT recheck
		FROM event_outbox WHERE id = ANY($1) ORDER BY id`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading %d outbox rows: %w", len(ids), err)
	}
	out, err := pgx.CollectRows(rows, scanOutboxRow)
	if err != nil {
		return nil, fmt.Errorf("reading %d outbox rows: %w", len(ids), err)
	}
	return out, nil
}

// Version is one flight version a msg event announces: (FLID, state_version).
type Version struct {
	FLID         string
	StateVersion int64
}

// Produced is where Kafka put one produced outbox row.
type Produced struct {
	ID        int64
	Event     Event
	Partition int32
	Offset    int64
}

// DeleteOutbox removes the produced rows and the skipped ones (rows the
// publisher did not produce because their version was published already)
// and, in the same transaction, records where each msg event of a flight
// version landed (msg_event, migration 0026: what msgx trace reads instead
// of scanning the topic). A crash before the commit leaves the rows to be
// produced again (or, with exactly-once publishing, to be reconciled), and
// the index keeps the first position it recorded of a version.
//
// With next > 0 it then reads, in the same transaction, what ReadOutbox
// would read next (up to next rows): during a backlog the publisher's
// rounds cost one PostgreSQL commit each instead of two. The read sees the
// msg_event rows just recorded, as a read after the commit would.
func DeleteOutbox(ctx context.Context, pool *pgxpool.Pool, produced []Produced, skipped []int64, now time.Time, next int) (due []OutboxRow, published map[Version]bool, _ error) {
	ids := make([]int64, len(produced), len(produced)+len(skipped))
	var flids, topics []string
	var versions, msgIDs, offsets []int64
	var parts []int32
	for i, p := range produced {
		ids[i] = p.ID
		if p.Event.MsgID == 0 || p.Event.StateVersion == 0 {
			continue
		}
		flids, topics = append(flids, p.Event.Key), append(topics, p.Event.Topic)
		versions, msgIDs = append(versions, p.Event.StateVersion), append(msgIDs, p.Event.MsgID)
		parts, offsets = append(parts, p.Partition), append(offsets, p.Offset)
	}
	ids = append(ids, skipped...)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM event_outbox WHERE id = ANY($1)`, ids)
		if len(flids) > 0 {
			b.Queue(`INSERT INTO msg_event (flid, state_version, msg_id, topic, kafka_partition, kafka_offset, produced_at)
				SELECT f, v, m, t, p, o, $7 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::int[], $6::bigint[]) AS e(f, v, m, t, p, o)
				ON CONFLICT DO NOTHING`, flids, versions, msgIDs, topics, parts, offsets, now)
		}
		if next > 0 {
			b.Queue(readOutboxSQL, next).Query(func(rows pgx.Rows) error {
				var err error
				due, published, err = collectOutbox(rows)
				return err
			})
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, nil, fmt.Errorf("deleting %d published events: %w", len(ids), err)
	}
	return due, published, nil
}

// VacuumOutbox vacuums event_outbox (skipped while another vacuum of it
// runs). The publisher reads the oldest rows by id; every row it deleted
// leaves an entry at the head of the id index that each read steps over
// until a vacuum removes it, and autovacuum visits a database at most once
// a minute (autovacuum_naptime) and may be busy with larger tables
// meanwhile (docs/design.md#outbox). A role that does not own the table
// gets a warning from PostgreSQL, not an error, and autovacuum alone.
func VacuumOutbox(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, `VACUUM (SKIP_LOCKED) event_outbox`); err != nil {
		return fmt.Errorf("vacuuming the outbox: %w", err)
	}
	return nil
}
