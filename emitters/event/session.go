package event

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"msgx/internal/kafka"
	"msgx/internal/retry"
	"msgx/sink"
)

// The publisher's producer session (steps 1 and 3 of the package comment):
// opening it — with MSGX_EXACTLY_ONCE, initialising the transactional ID and
// reconciling the batch a crash left between Kafka's commit and
// PostgreSQL's delete —, producing a batch in one transaction with its
// position (or with the idempotent producer alone), and giving a
// transaction up, fenced or not.

// open starts a producer session. With ExactlyOnce it initialises the
// transactional ID — only while this instance is active — and reconciles.
func (p *Publisher) open(ctx context.Context) error {
	if !p.cfg.ExactlyOnce {
		prod, err := kafka.NewSyncProducer(p.d.Kafka, p.d.Brokers, "msgx-publisher")
		if err != nil {
			return err
		}
		p.producer = prod
		return nil
	}
	if p.d.Active != nil {
		if err := p.d.Active(ctx); err != nil {
			return fmt.Errorf("not taking transactional ID %q: %w", p.cfg.TransactionalID, err)
		}
	}
	prod, err := kafka.NewTransactionalProducer(p.d.Kafka, p.d.Brokers, "msgx-publisher", p.cfg.TransactionalID, p.cfg.TxnTimeout)
	if err != nil {
		return err
	}
	if err := p.reconcile(ctx); err != nil {
		_ = prod.Close()
		return err
	}
	p.producer = prod
	return nil
}

// reconcile reads back the position the transactional ID last committed
// (read_committed, after the ID was initialised: no transaction of it is
// open any more) and deletes the rows of that batch that PostgreSQL still
// holds — a crash fell between that commit and the delete — without
// producing them again.
func (p *Publisher) reconcile(ctx context.Context) error {
	kctx, cancel := context.WithTimeout(ctx, 3*p.d.Kafka.Timeout)
	value, found, err := kafka.LastCommitted(kctx, p.d.Kafka, p.d.Brokers, p.cfg.PositionTopic, []byte(p.cfg.TransactionalID))
	cancel()
	if err != nil {
		return fmt.Errorf("reading the committed position from %s: %w", p.cfg.PositionTopic, err)
	}
	if !found {
		return nil
	}
	var pos position
	if err := json.Unmarshal(value, &pos); err != nil {
		return retry.Permanent(fmt.Errorf("the committed position on %s does not decode: %w", p.cfg.PositionTopic, err))
	}
	p.mu.Lock()
	p.stats.Position = pos.LastID
	p.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, p.d.DBTimeout)
	rows, err := sink.ReadOutboxIDs(rctx, p.d.Pool, pos.ids())
	cancel()
	if err != nil || len(rows) == 0 {
		return err // none: the last batch was deleted after its commit
	}
	if err := pos.check(rows); err != nil {
		// Not the batch Kafka has: PostgreSQL was restored or re-bound.
		// Producing the rows again is at least once, deleting them
		// unpublished could lose them.
		p.log.Warn("the outbox rows of the last committed transaction are not what it published; publishing them again",
			"err", err, "position", pos.LastID, "committed_at", pos.CommittedAt)
		return nil
	}
	produced, skipped, err := pos.split(rows)
	if err != nil {
		return retry.Permanent(err)
	}
	// The position is committed; so must its events be. A broker commits a
	// transaction on all its partitions or none — except the embedded one
	// (kfake keeps no transaction log) when it dies in the middle of a
	// commit, the process of `msgx run` killed with it. Deleting rows whose
	// events were aborted would lose them: publish them again instead.
	if missing, err := p.invisible(ctx, produced); err != nil {
		return err
	} else if missing != "" {
		p.log.Warn("the last committed position's events are not all visible to read_committed consumers (a broker that died during the commit); publishing the batch again",
			"missing", missing, "position", pos.LastID, "committed_at", pos.CommittedAt)
		return nil
	}
	if err := p.at(PointReconcile); err != nil {
		return err
	}
	p.pending = &batch{produced: produced, skipped: skipped, reconciled: true}
	if err := p.forget(ctx, 0); err != nil {
		return err
	}
	p.log.Info("reconciled the last committed transaction: its outbox rows were on Kafka already and are deleted without publishing them again",
		"rows", len(rows), "position", pos.LastID, "committed_at", pos.CommittedAt)
	return nil
}

// invisible checks that every produced record of a committed batch is
// readable with read_committed at the offset the position says, with its
// key; it names the first that is not ("" when all are).
func (p *Publisher) invisible(ctx context.Context, produced []sink.Produced) (string, error) {
	type tp struct {
		topic     string
		partition int32
	}
	byPart := map[tp][]sink.Produced{}
	for _, r := range produced {
		k := tp{r.Event.Topic, r.Partition}
		byPart[k] = append(byPart[k], r)
	}
	for k, rs := range byPart {
		from, to := rs[0].Offset, rs[0].Offset
		for _, r := range rs {
			from, to = min(from, r.Offset), max(to, r.Offset)
		}
		kctx, cancel := context.WithTimeout(ctx, 3*p.d.Kafka.Timeout)
		keys, err := kafka.CommittedKeys(kctx, p.d.Kafka, p.d.Brokers, k.topic, k.partition, from, int(to-from+1))
		cancel()
		if err != nil {
			return "", fmt.Errorf("checking the committed position's events: %w", err)
		}
		for _, r := range rs {
			if key, ok := keys[r.Offset]; !ok || string(key) != r.Event.Key {
				return fmt.Sprintf("%s[%d]@%d (outbox row %d)", k.topic, k.partition, r.Offset, r.ID), nil
			}
		}
	}
	return "", nil
}

// transact produces publish in one transaction with the position of the
// whole batch all (published and skipped rows), and commits it.
func (p *Publisher) transact(all, publish []sink.OutboxRow, b *batch) error {
	started := p.d.Clock.Now()
	if err := p.producer.BeginTxn(); err != nil {
		p.closeProducer()
		return retry.Outage("kafka", fmt.Errorf("beginning a transaction: %w", err))
	}
	msgs := messages(publish)
	if err := p.producer.SendMessages(msgs); err != nil {
		return p.abandon(started, fmt.Errorf("producing %d events in a transaction: %w", len(msgs), kafka.FirstProduceError(err)))
	}
	if err := p.at(PointInBatch); err != nil {
		return err
	}
	b.produced = produced(publish, msgs)
	pos := newPosition(all, b.produced, p.d.Clock.Now())
	value, err := json.Marshal(pos)
	if err != nil {
		return p.abandon(started, err)
	}
	if _, _, err := p.producer.SendMessage(&sarama.ProducerMessage{Topic: p.cfg.PositionTopic,
		Key: sarama.StringEncoder(p.cfg.TransactionalID), Value: sarama.ByteEncoder(value)}); err != nil {
		return p.abandon(started, fmt.Errorf("producing the position to %s: %w", p.cfg.PositionTopic, err))
	}
	if err := p.producer.CommitTxn(); err != nil {
		// The outcome is unknown (the commit may have reached the
		// coordinator): the next session reads the position back.
		return p.abandon(started, fmt.Errorf("committing the transaction of %d events: %w", len(msgs), err))
	}
	p.mu.Lock()
	p.stats.Transactions["committed"]++
	p.stats.Position = pos.LastID
	p.mu.Unlock()
	return nil
}

// abandon gives up the open transaction: the producer session is closed
// without aborting — sarama's abort may re-initialise the ID, which only an
// instance that is still active may do — and the next session's
// initialisation aborts the transaction at the broker. A fencing error
// stops the publisher, unless the transaction outlived MSGX_PUBLISH_TXN_TIMEOUT
// (the broker aborted it and bumped the epoch itself: nobody took over).
func (p *Publisher) abandon(started time.Time, err error) error {
	p.closeProducer()
	p.mu.Lock()
	p.stats.Transactions["aborted"]++
	p.mu.Unlock()
	code := kafka.FenceCode(err)
	if code == "" {
		return retry.Outage("kafka", err)
	}
	err = fmt.Errorf("%s: %w", code, err)
	if age := p.d.Clock.Now().Sub(started); age >= p.cfg.TxnTimeout {
		p.log.Warn("Kafka aborted the publisher's transaction: it was open longer than MSGX_PUBLISH_TXN_TIMEOUT; publishing the batch again",
			"err", err, "open_for", age.String(), "txn_timeout", p.cfg.TxnTimeout.String())
		return retry.Outage("kafka", err)
	}
	now := p.d.Clock.Now()
	reason := fmt.Sprintf("fenced: another producer initialised transactional ID %q (a second instance publishing this deployment's outbox); this instance stopped publishing until it restarts or takes the process lock again", p.cfg.TransactionalID)
	p.mu.Lock()
	p.stats.Fenced, p.stats.FencedAt, p.stats.LastError = reason, now, err.Error()
	p.mu.Unlock()
	p.log.Error("event publisher "+reason, "err", err, "transactional_id", p.cfg.TransactionalID,
		"what_to_do", "its open transaction was aborted, so nothing it produced is visible to read_committed consumers; if no other instance should publish this outbox, restart this one (docs/operations.md#event-publisher-fenced)")
	return ErrFenced
}

// send produces publish with the idempotent producer (ExactlyOnce off).
func (p *Publisher) send(publish []sink.OutboxRow, b *batch) error {
	msgs := messages(publish)
	if err := p.producer.SendMessages(msgs); err != nil {
		p.closeProducer()
		return retry.Outage("kafka", fmt.Errorf("producing %d events: %w", len(msgs), kafka.FirstProduceError(err)))
	}
	if err := p.at(PointInBatch); err != nil {
		return err
	}
	b.produced = produced(publish, msgs)
	return nil
}

func (p *Publisher) fenced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats.Fenced != ""
}

func (p *Publisher) closeProducer() {
	if p.producer != nil {
		_ = p.producer.Close()
		p.producer = nil
	}
}

// Close releases the producer; Run closes it when it returns.
func (p *Publisher) Close() { p.closeProducer() }

// messages are the records of rows, in order.
func messages(rows []sink.OutboxRow) []*sarama.ProducerMessage {
	msgs := make([]*sarama.ProducerMessage, len(rows))
	for i, r := range rows {
		msgs[i] = &sarama.ProducerMessage{Topic: r.Event.Topic, Key: sarama.StringEncoder(r.Event.Key)}
		if r.Event.Value != nil {
			msgs[i].Value = sarama.ByteEncoder(r.Event.Value)
		}
	}
	return msgs
}

// produced pairs rows with where the producer put their records.
func produced(rows []sink.OutboxRow, msgs []*sarama.ProducerMessage) []sink.Produced {
	out := make([]sink.Produced, len(rows))
	for i, r := range rows {
		out[i] = sink.Produced{ID: r.ID, Event: r.Event, Partition: msgs[i].Partition, Offset: msgs[i].Offset}
	}
	return out
}
