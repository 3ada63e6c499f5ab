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
}

const queueEventsSQL = `INSERT INTO event_outbox (topic, key, value, origin_at, created_at)
	SELECT t, k, v, o, $5 FROM unnest($1::text[], $2::text[], $3::bytea[], $4::timestamptz[]) WITH ORDINALITY AS e(t, k, v, o, n)
	ORDER BY n`

func eventArgs(events []Event, now time.Time) []any {
	topics := make([]string, len(events))
	keys := make([]string, len(events))
	values := make([][]byte, len(events))
	origins := make([]*time.Time, len(events))
	for i, e := range events {
		topics[i], keys[i], values[i] = e.Topic, e.Key, e.Value
		if !e.OriginAt.IsZero() {
			o := e.OriginAt
			origins[i] = &o
		}
	}
	return []any{topics, keys, values, origins, now}
}

// BatchEvents queues the events' outbox insert on b (to run in the batch's
// transaction).
func BatchEvents(b *pgx.Batch, events []Event, now time.Time) {
	if len(events) > 0 {
		b.Queue(queueEventsSQL, eventArgs(events, now)...)
	}
}

// QueueEvents adds events to the outbox inside the caller's transaction, so
// they are durable exactly when the state they announce is.
func QueueEvents(ctx context.Context, tx pgx.Tx, events []Event, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, queueEventsSQL, eventArgs(events, now)...)
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
// they were committed (id order).
func ReadOutbox(ctx context.Context, pool *pgxpool.Pool, limit int) ([]OutboxRow, error) {
	rows, err := pool.Query(ctx, `SELECT id, topic, key, value, origin_at FROM event_outbox ORDER BY id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("reading the outbox: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxRow, error) {
		var r OutboxRow
		var origin *time.Time
		err := row.Scan(&r.ID, &r.Event.Topic, &r.Event.Key, &r.Event.Value, &origin)
		if origin != nil {
			r.Event.OriginAt = *origin
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the outbox: %w", err)
	}
	return out, nil
}

// DeleteOutbox removes the rows ids (what was produced).
func DeleteOutbox(ctx context.Context, pool *pgxpool.Pool, ids []int64) error {
	if _, err := pool.Exec(ctx, `DELETE FROM event_outbox WHERE id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("deleting %d published events: %w", len(ids), err)
	}
	return nil
}
