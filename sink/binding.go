package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/kafka"
)

// Binding is the Kafka identity this database is bound to
// (docs/design.md#kafka-binding, migration 0019).
type Binding struct {
	kafka.Identity
	BoundAt time.Time
	BoundBy string
}

// How a binding was recorded (kafka_binding.bound_by).
const (
	BoundFirstStart = "first-start"
	BoundByOperator = "msgx bind --force"
)

// LoadBinding returns the recorded binding; ok is false when the database
// was never bound.
func LoadBinding(ctx context.Context, pool *pgxpool.Pool) (b Binding, ok bool, err error) {
	err = pool.QueryRow(ctx, `SELECT cluster_id, inbox_topic, inbox_topic_id, bound_at, bound_by FROM kafka_binding`).
		Scan(&b.ClusterID, &b.InboxTopic, &b.InboxTopicID, &b.BoundAt, &b.BoundBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return Binding{}, false, nil
	}
	if err != nil {
		return Binding{}, false, fmt.Errorf("reading the Kafka binding: %w", err)
	}
	return b, true, nil
}

// BindFirst records id as the binding when there is none and returns the
// binding in force: id's when this call (or a concurrent first start, whose
// row wins the race) recorded it, the older one otherwise. The caller
// compares it with id.
func BindFirst(ctx context.Context, pool *pgxpool.Pool, id kafka.Identity, now time.Time) (Binding, error) {
	if id.InboxTopicID == "" {
		return Binding{}, fmt.Errorf("binding to Kafka: topic %s does not exist", id.InboxTopic)
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO kafka_binding (cluster_id, inbox_topic, inbox_topic_id, bound_at, bound_by)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (one) DO NOTHING`, id.ClusterID, id.InboxTopic, id.InboxTopicID, now, BoundFirstStart)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return logBinding(ctx, tx, id, now, BoundFirstStart)
	})
	if err != nil {
		return Binding{}, fmt.Errorf("recording the Kafka binding: %w", err)
	}
	b, ok, err := LoadBinding(ctx, pool)
	if err == nil && !ok {
		err = errors.New("recording the Kafka binding: the row vanished")
	}
	return b, err
}

// Rebind replaces the binding with id (the operator's `msgx bind --force`).
func Rebind(ctx context.Context, pool *pgxpool.Pool, id kafka.Identity, now time.Time) error {
	if id.InboxTopicID == "" {
		return fmt.Errorf("binding to Kafka: topic %s does not exist on %s", id.InboxTopic, id.ClusterID)
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO kafka_binding (cluster_id, inbox_topic, inbox_topic_id, bound_at, bound_by)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (one) DO UPDATE SET cluster_id = EXCLUDED.cluster_id,
			inbox_topic = EXCLUDED.inbox_topic, inbox_topic_id = EXCLUDED.inbox_topic_id, bound_at = EXCLUDED.bound_at,
			bound_by = EXCLUDED.bound_by`, id.ClusterID, id.InboxTopic, id.InboxTopicID, now, BoundByOperator); err != nil {
			return err
		}
		return logBinding(ctx, tx, id, now, BoundByOperator)
	})
	if err != nil {
		return fmt.Errorf("re-binding to Kafka: %w", err)
	}
	return nil
}

func logBinding(ctx context.Context, tx pgx.Tx, id kafka.Identity, now time.Time, by string) error {
	_, err := tx.Exec(ctx, `INSERT INTO kafka_binding_log (cluster_id, inbox_topic, inbox_topic_id, bound_at, bound_by)
		VALUES ($1, $2, $3, $4, $5)`, id.ClusterID, id.InboxTopic, id.InboxTopicID, now, by)
	return err
}

// FlightKnown says where PostgreSQL knows a flight from messages older than
// msgID: "flight_schd" (the read model holds it, last changed by an older
// message) or "flight_index" (the router indexed it for an older message
// and the history sweep never archived it); "" when it does not. The flights
// processor asks it for a transition whose flight its table lacks
// (docs/design.md#divergence).
//
// Only older messages count, because of a crash between the flights
// processor's PostgreSQL commit and the acknowledgement of its table write:
// the transition that created the flight is delivered again to a table
// without it, while PostgreSQL already holds what it (and the transitions
// after it, delivered again behind it) wrote — all at or above its own
// message. Applying it again is the crash recovery of
// docs/design.md#i4-exactly-once-effect, not a divergence.
func FlightKnown(ctx context.Context, pool *pgxpool.Pool, flid string, msgID int64) (string, error) {
	var schd, index bool
	err := pool.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM flight_schd WHERE flid = $1 AND last_msg_id < $2),
		EXISTS (SELECT 1 FROM flight_index WHERE flid = $1 AND first_msg_id < $2)
		   AND NOT EXISTS (SELECT 1 FROM flight_hist WHERE flid = $1)`, flid, msgID).Scan(&schd, &index)
	switch {
	case err != nil:
		return "", fmt.Errorf("looking flight %s up in PostgreSQL: %w", flid, err)
	case schd:
		return "flight_schd", nil
	case index:
		return "flight_index", nil
	}
	return "", nil
}

// RefdataKnown reports whether ref_master holds records of category rtype
// written by messages older than msgID: the refdata processor asks it for a
// transition whose category its table lacks (docs/design.md#divergence).
// Records of msgID or later are a crash's redelivery, as in FlightKnown.
func RefdataKnown(ctx context.Context, pool *pgxpool.Pool, rtype string, msgID int64) (bool, error) {
	var known bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ref_master WHERE rtype = $1 AND last_msg_id < $2)`, rtype, msgID).Scan(&known); err != nil {
		return false, fmt.Errorf("looking category %s up in PostgreSQL: %w", rtype, err)
	}
	return known, nil
}
