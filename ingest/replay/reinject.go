package replay

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"

	"msgx/ingest"
	"msgx/internal/kafka"
	"msgx/sink/aodb"
)

// Re-injection: the reset messages' inbox rows produced to msgx.inbox again
// as ingest records of the replay's generation, then their before-images
// marked produced.

// reinject runs steps 2 and 3 of the package comment for a committed batch.
func (r *replayer) reinject(ctx context.Context, b batchResult) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("replay interrupted before re-injecting %d messages: %w", len(b.reset), err)
	}
	msgs := make([]*sarama.ProducerMessage, len(b.reset))
	ids := make([]int64, len(b.reset))
	for i, row := range b.reset {
		m, _, err := ingest.ReplayMessage(b.inbox[row.MsgID], r.d.Topic, b.auditID, r.now, r.d.Kafka.MaxMessageBytes)
		if err != nil {
			return err
		}
		msgs[i], ids[i] = m, row.MsgID
	}
	// One batch on one partition through an idempotent producer with one
	// request in flight: the records land in MSG_ID order. On a failure
	// none of the batch counts as produced, even records Kafka did take:
	// producing those again is harmless, losing one is not.
	if err := r.prod.SendMessages(msgs); err != nil {
		return fmt.Errorf("producing %d replayed messages to %s: %w", len(msgs), r.d.Topic, err)
	}
	// The producer filled in where each record landed (msgx trace shows it).
	parts, offsets := make([]int32, len(msgs)), make([]int64, len(msgs))
	for i, m := range msgs {
		parts[i], offsets[i] = m.Partition, m.Offset
	}
	err := r.call(ctx, func(ctx context.Context) error {
		_, err := r.d.PG.Exec(ctx, `UPDATE replay_audit_msg a SET produced = true, inbox_partition = p.part, inbox_offset = p.off
			FROM unnest($2::bigint[], $3::int[], $4::bigint[]) AS p(id, part, off)
			WHERE a.audit_id = $1 AND a.msg_id = p.id`, b.auditID, ids, parts, offsets)
		return err
	})
	if err != nil {
		// The records are on the topic; only the confirmation is lost. A
		// pending-replayed run would produce them once more (harmless), so
		// this is not a failure of the replay.
		r.log.Warn("replayed messages re-injected, but confirming that failed; a pending-replayed run would re-inject them again",
			"audit_id", b.auditID, "msg_ids", ids, "err", err)
		return nil
	}
	r.log.Info("replayed messages re-injected", "audit_id", b.auditID, "count", len(ids), "first_msg_id", ids[0], "last_msg_id", ids[len(ids)-1])
	return nil
}

// readInbox reads the inbox rows of ids; IDs without a row are absent from
// the result.
func (r *replayer) readInbox(ctx context.Context, ids []int64) (map[int64]aodb.Row, error) {
	rows, err := r.d.Inbox.ReadIDs(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the inbox rows to replay: %w", err)
	}
	out := make(map[int64]aodb.Row, len(rows))
	for _, row := range rows {
		out[row.ID] = row
	}
	return out, nil
}

// newReplayProducer builds the producer (docs/design.md#kafka-settings) and
// checks the topic before anything is reset: it must exist with one partition
// (global FIFO). Automatic topic creation is off — a msgx.inbox created by a
// produce would get the broker's defaults (partitions, retention) instead of
// those of the source of truth.
func newReplayProducer(d Deps) (sarama.SyncProducer, func(), error) {
	sc := d.Kafka.Sarama("msgx-replay")
	if err := kafka.CheckD3(sc); err != nil {
		return nil, nil, err
	}
	sc.Metadata.AllowAutoTopicCreation = false
	client, err := sarama.NewClient(d.Brokers, sc)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to kafka: %w", err)
	}
	parts, err := client.Partitions(d.Topic)
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("topic %s: %w", d.Topic, err)
	}
	if len(parts) != 1 {
		client.Close()
		return nil, nil, fmt.Errorf("topic %s has %d partitions; msgx.inbox must have exactly 1", d.Topic, len(parts))
	}
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("creating the replay producer: %w", err)
	}
	return prod, func() {
		_ = prod.Close()
		_ = client.Close()
	}, nil
}
