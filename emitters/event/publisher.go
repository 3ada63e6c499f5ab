package event

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/retry"
	"msgx/sink"
)

// Config configures the publisher.
type Config struct {
	// Batch is the most events produced in one request, in events.
	Batch int `env:"MSGX_PUBLISH_BATCH" envDefault:"1000"`
	// Poll is how often the outbox is read when no commit announced events.
	Poll time.Duration `env:"MSGX_PUBLISH_POLL" envDefault:"1s"`
}

// Validate checks the configuration; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if c.Batch < 1 || c.Batch > 100000 {
		errs = append(errs, fmt.Errorf("MSGX_PUBLISH_BATCH=%d: must be 1..100000", c.Batch))
	}
	if c.Poll <= 0 {
		errs = append(errs, errors.New("MSGX_PUBLISH_POLL: must be positive"))
	}
	return errors.Join(errs...)
}

// Deps are the publisher's collaborators; all are required except Observe.
type Deps struct {
	Pool *pgxpool.Pool
	// DBTimeout bounds every database call (MSGX_DB_TIMEOUT).
	DBTimeout time.Duration
	Brokers   []string
	Kafka     kafka.Config
	Clock     clock.Clock
	Log       *slog.Logger
	// Observe, if set, receives each event's latency from its OriginAt.
	Observe func(time.Duration)
}

// Stats are the publisher's running figures.
type Stats struct {
	Published map[string]int64 `json:"published"`
	Batches   int64            `json:"batches"`
	LastError string           `json:"lastError,omitempty"`
}

// Publisher produces the outbox in order (see the package comment).
type Publisher struct {
	cfg      Config
	d        Deps
	log      *slog.Logger
	notify   chan struct{}
	producer sarama.SyncProducer

	mu    sync.Mutex
	stats Stats
	// afterProduce lets tests crash between produce and delete.
	afterProduce func() error
}

// New returns the outbox publisher.
func New(cfg Config, d Deps) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case d.Pool == nil:
		return nil, errors.New("event publisher: no PostgreSQL pool")
	case d.DBTimeout <= 0:
		return nil, errors.New("event publisher: MSGX_DB_TIMEOUT must be positive")
	case len(d.Brokers) == 0:
		return nil, errors.New("event publisher: no Kafka brokers")
	case d.Clock == nil || d.Log == nil:
		return nil, errors.New("event publisher: clock and logger are required")
	}
	return &Publisher{cfg: cfg, d: d, log: d.Log.With("component", "publisher"), notify: make(chan struct{}, 1),
		stats: Stats{Published: map[string]int64{}}}, nil
}

// Notify wakes the publisher: events were committed.
func (p *Publisher) Notify() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Stats returns a snapshot of the running figures.
func (p *Publisher) Stats() Stats {
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
	defer p.Close()
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
			// The outbox was read: PostgreSQL answers again. Without
			// this, a publisher that failed during an outage stayed
			// "paused" (and /readyz 503) until the next event.
			p.mu.Lock()
			p.stats.LastError = ""
			p.mu.Unlock()
			// Nothing due: wait for a commit to announce events, or poll.
			select {
			case <-ctx.Done():
				return nil
			case <-p.notify:
			case <-p.d.Clock.After(p.cfg.Poll):
			}
		default:
			failures = 0
		}
		if wait > 0 {
			if err := clock.Sleep(ctx, p.d.Clock, wait); err != nil {
				return nil
			}
		}
	}
}

// Publish produces one batch of the oldest events and deletes them; it
// returns how many.
func (p *Publisher) Publish(ctx context.Context) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, p.d.DBTimeout)
	due, err := sink.ReadOutbox(rctx, p.d.Pool, p.cfg.Batch)
	cancel()
	if err != nil || len(due) == 0 {
		return 0, err
	}
	if p.producer == nil {
		prod, err := kafka.NewSyncProducer(p.d.Kafka, p.d.Brokers, "msgx-publisher")
		if err != nil {
			return 0, err
		}
		p.producer = prod
	}
	msgs := make([]*sarama.ProducerMessage, len(due))
	for i, r := range due {
		msgs[i] = &sarama.ProducerMessage{Topic: r.Event.Topic, Key: sarama.StringEncoder(r.Event.Key)}
		if r.Event.Value != nil {
			msgs[i].Value = sarama.ByteEncoder(r.Event.Value)
		}
	}
	if err := p.producer.SendMessages(msgs); err != nil {
		p.Close()
		return 0, retry.Outage("kafka", fmt.Errorf("producing %d events: %w", len(msgs), err))
	}
	if p.afterProduce != nil {
		if err := p.afterProduce(); err != nil {
			return 0, err
		}
	}
	// Delete exactly what was produced: a row of a transaction that
	// committed meanwhile with a smaller id must wait for the next batch.
	// The producer filled in where each record landed: indexed with the
	// delete, for msgx trace.
	now := p.d.Clock.Now()
	produced := make([]sink.Produced, len(due))
	for i, r := range due {
		produced[i] = sink.Produced{ID: r.ID, Event: r.Event, Partition: msgs[i].Partition, Offset: msgs[i].Offset}
	}
	dctx, cancel := context.WithTimeout(ctx, p.d.DBTimeout)
	defer cancel()
	if err := sink.DeleteOutbox(dctx, p.d.Pool, produced, now); err != nil {
		return 0, err
	}
	p.mu.Lock()
	for _, r := range due {
		p.stats.Published[r.Event.Topic]++
		if p.d.Observe != nil && !r.Event.OriginAt.IsZero() {
			p.d.Observe(now.Sub(r.Event.OriginAt))
		}
	}
	p.stats.Batches++
	p.stats.LastError = ""
	p.mu.Unlock()
	return len(due), nil
}

// Close releases the producer; Run closes it when it returns.
func (p *Publisher) Close() {
	if p.producer != nil {
		_ = p.producer.Close()
		p.producer = nil
	}
}
