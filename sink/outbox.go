package sink

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/retry"
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

// PublisherStats are the publisher's running figures.
type PublisherStats struct {
	Published map[string]int64 `json:"published"`
	Batches   int64            `json:"batches"`
	LastError string           `json:"lastError,omitempty"`
}

// Publisher produces the outbox in order (a D3 producer, synchronously, a
// batch at a time) and then deletes what it produced. Sequence and crash
// windows: read the oldest rows → produce them → delete them. A crash after
// the produce and before the delete produces those rows again after
// restart: events are at least once, and consumers de-duplicate (by FLID and
// stateVersion for msg). One instance publishes (the processing role holds
// the process lock), so the order of the rows is the order on the topics.
type Publisher struct {
	pool     *pgxpool.Pool
	brokers  []string
	kafka    kafka.Config
	clock    clock.Clock
	timeout  time.Duration
	batch    int
	poll     time.Duration
	log      *slog.Logger
	notify   chan struct{}
	observe  func(time.Duration)
	producer sarama.SyncProducer

	mu    sync.Mutex
	stats PublisherStats
	// afterProduce lets tests crash between produce and delete.
	afterProduce func() error
}

// NewPublisher returns the outbox publisher. observe, if set, receives each
// event's latency from its OriginAt.
func NewPublisher(pool *pgxpool.Pool, timeout time.Duration, brokers []string, kc kafka.Config, clk clock.Clock, log *slog.Logger,
	observe func(time.Duration)) *Publisher {
	return &Publisher{pool: pool, brokers: brokers, kafka: kc, clock: clk, timeout: timeout, batch: 1000, poll: time.Second,
		log: log.With("component", "publisher"), notify: make(chan struct{}, 1), observe: observe,
		stats: PublisherStats{Published: map[string]int64{}}}
}

// Notify wakes the publisher: events were committed.
func (p *Publisher) Notify() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Stats returns a snapshot of the running figures.
func (p *Publisher) Stats() PublisherStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Published = make(map[string]int64, len(p.stats.Published))
	for k, v := range p.stats.Published {
		s.Published[k] = v
	}
	return s
}

// Run publishes until ctx ends; failures (Kafka or PostgreSQL away) are
// retried, the rows stay until they are produced.
func (p *Publisher) Run(ctx context.Context) error {
	defer p.close()
	for failures := 0; ; {
		n, err := p.Publish(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := time.Duration(0)
		switch {
		case err != nil:
			failures++
			wait = retry.WriteBackoff.Delay(failures)
			p.log.Warn("publishing events failed; they stay in the outbox", "err", err, "retry_in", wait.String())
			p.mu.Lock()
			p.stats.LastError = err.Error()
			p.mu.Unlock()
		case n == 0:
			failures = 0
			// Nothing due: wait for a commit to announce events, or poll.
			select {
			case <-ctx.Done():
				return nil
			case <-p.notify:
			case <-p.clock.After(p.poll):
			}
		default:
			failures = 0
		}
		if wait > 0 {
			if err := clock.Sleep(ctx, p.clock, wait); err != nil {
				return nil
			}
		}
	}
}

type outboxRow struct {
	id     int64
	topic  string
	key    string
	value  []byte
	origin *time.Time
}

// Publish produces one batch of the oldest events and deletes them; it
// returns how many.
func (p *Publisher) Publish(ctx context.Context) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, p.timeout)
	rows, err := p.pool.Query(rctx, `SELECT id, topic, key, value, origin_at FROM event_outbox ORDER BY id LIMIT $1`, p.batch)
	if err != nil {
		cancel()
		return 0, fmt.Errorf("reading the outbox: %w", err)
	}
	var due []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.id, &r.topic, &r.key, &r.value, &r.origin); err != nil {
			rows.Close()
			cancel()
			return 0, fmt.Errorf("reading the outbox: %w", err)
		}
		due = append(due, r)
	}
	rows.Close()
	cancel()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("reading the outbox: %w", err)
	}
	if len(due) == 0 {
		return 0, nil
	}
	if p.producer == nil {
		sc := p.kafka.Sarama("msgx-publisher")
		if err := kafka.CheckD3(sc); err != nil {
			return 0, err
		}
		prod, err := sarama.NewSyncProducer(p.brokers, sc)
		if err != nil {
			return 0, retry.Outage("kafka", fmt.Errorf("creating the event producer: %w", err))
		}
		p.producer = prod
	}
	msgs := make([]*sarama.ProducerMessage, len(due))
	for i, r := range due {
		msgs[i] = &sarama.ProducerMessage{Topic: r.topic, Key: sarama.StringEncoder(r.key)}
		if r.value != nil {
			msgs[i].Value = sarama.ByteEncoder(r.value)
		}
	}
	if err := p.producer.SendMessages(msgs); err != nil {
		p.close()
		return 0, retry.Outage("kafka", fmt.Errorf("producing %d events: %w", len(msgs), err))
	}
	if p.afterProduce != nil {
		if err := p.afterProduce(); err != nil {
			return 0, err
		}
	}
	dctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// Delete exactly what was produced: a row of a transaction that
	// committed meanwhile with a smaller id must wait for the next batch.
	ids := make([]int64, len(due))
	for i, r := range due {
		ids[i] = r.id
	}
	if _, err := p.pool.Exec(dctx, `DELETE FROM event_outbox WHERE id = ANY($1)`, ids); err != nil {
		return 0, fmt.Errorf("deleting published events: %w", err)
	}
	now := p.clock.Now()
	p.mu.Lock()
	for _, r := range due {
		p.stats.Published[r.topic]++
		if p.observe != nil && r.origin != nil {
			p.observe(now.Sub(*r.origin))
		}
	}
	p.stats.Batches++
	p.stats.LastError = ""
	p.mu.Unlock()
	return len(due), nil
}

func (p *Publisher) close() {
	if p.producer != nil {
		_ = p.producer.Close()
		p.producer = nil
	}
}
