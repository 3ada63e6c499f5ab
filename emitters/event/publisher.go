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
	"msgx/internal/crashpoint"
	"msgx/internal/kafka"
	"msgx/internal/need"
	"msgx/internal/retry"
	"msgx/sink"
)

// Config configures the publisher.
type Config struct {
	// Batch is the most events produced in one request (with ExactlyOnce:
	// in one transaction, and at most as many as keep its position record
	// within MSGX_KAFKA_MAX_MESSAGE_BYTES, about 7,800), in events.
	Batch int `env:"MSGX_PUBLISH_BATCH" envDefault:"1000"`
	// Poll is how often the outbox is read when no commit announced events.
	Poll time.Duration `env:"MSGX_PUBLISH_POLL" envDefault:"1s"`
	// ExactlyOnce publishes each batch in a Kafka transaction together with
	// the publisher's position (docs/design.md#outbox): consumers with
	// isolation.level=read_committed see every event once. false produces
	// with the idempotent producer alone: at least once (for clusters
	// without transactions). With the embedded Kafka (MSGX_KAFKA_BROKERS
	// empty) it defaults to false, since that Kafka keeps no transaction
	// log (docs/operations.md#consuming-msgxmsg-and-msgxschd).
	ExactlyOnce bool `env:"MSGX_EXACTLY_ONCE" envDefault:"true"`
	// TransactionalID identifies the deployment's publisher to Kafka, the
	// same on its standbys and never shared with another deployment; a
	// producer that initialises it fences the previous one.
	TransactionalID string `env:"MSGX_PUBLISH_TRANSACTIONAL_ID,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx-publisher"`
	// PositionTopic is the compacted topic of the positions committed with
	// each transaction (one partition, key TransactionalID).
	PositionTopic string `env:"MSGX_TOPIC_PUBLISHER_POSITION,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.publisher-position"`
	// TxnTimeout is transaction.timeout.ms: Kafka aborts a transaction left
	// open longer. It bounds how long a publisher killed inside a batch,
	// and not restarted, holds back read_committed consumers of the topics
	// it wrote to; a batch's transaction takes milliseconds. 1s to 15m.
	TxnTimeout time.Duration `env:"MSGX_PUBLISH_TXN_TIMEOUT" envDefault:"30s"`
	// VacuumRows is how many outbox rows the publisher deletes between two
	// vacuums of event_outbox, in rows; 0 leaves it to autovacuum. The
	// deleted rows' index entries slow every read of the outbox until a
	// vacuum removes them (sink.VacuumOutbox).
	VacuumRows int `env:"MSGX_PUBLISH_VACUUM_ROWS" envDefault:"10000"`
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
	if c.VacuumRows < 0 {
		errs = append(errs, fmt.Errorf("MSGX_PUBLISH_VACUUM_ROWS=%d: must be 0 (never) or more", c.VacuumRows))
	}
	if c.ExactlyOnce {
		if c.TransactionalID == "" {
			errs = append(errs, errors.New("MSGX_PUBLISH_TRANSACTIONAL_ID: empty"))
		}
		if err := kafka.CheckTopicName(c.PositionTopic); err != nil {
			errs = append(errs, fmt.Errorf("MSGX_TOPIC_PUBLISHER_POSITION: %w", err))
		}
		// The broker refuses more than its transaction.max.timeout.ms
		// (15 minutes by default).
		if c.TxnTimeout < time.Second || c.TxnTimeout > 15*time.Minute {
			errs = append(errs, fmt.Errorf("MSGX_PUBLISH_TXN_TIMEOUT=%s: must be 1s..15m", c.TxnTimeout))
		}
	}
	return errors.Join(errs...)
}

// TopicSpec is the position topic, created at start-up with ExactlyOnce:
// compacted (only each transactional ID's newest position matters), one
// partition, and hour-long segments so that compaction, which never cleans
// the active segment, keeps it small.
func (c Config) TopicSpec() kafka.TopicSpec {
	return kafka.TopicSpec{Name: c.PositionTopic, Partitions: 1, Compact: true, Segment: time.Hour}
}

// Deps are the publisher's collaborators; all are required except Observe
// and Active.
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
	// Active, if set, says whether this instance may publish: nil while it
	// holds the process lock. It is asked before every new producer
	// session, because initialising the transactional ID fences whoever
	// holds it — a process that lost its lock without knowing it yet must
	// not fence the instance that took over.
	Active func(context.Context) error
}

// Stats are the publisher's running figures.
type Stats struct {
	Published map[string]int64 `json:"published"`
	Batches   int64            `json:"batches"`
	LastError string           `json:"lastError,omitempty"`
	// Denied is LastError when Kafka refused it for lack of an ACL: not an
	// outage, but a cause an operator must remove (the publisher retries
	// with backoff and resumes once the ACL is granted).
	Denied string `json:"denied,omitempty"`
	// ExactlyOnce is MSGX_EXACTLY_ONCE; TransactionalID its ID.
	ExactlyOnce     bool   `json:"exactlyOnce"`
	TransactionalID string `json:"transactionalId,omitempty"`
	// Transactions counts Kafka transactions by result: committed, or
	// aborted (begun and given up: a produce or the commit failed; the
	// next producer session's initialisation aborts it at the broker).
	Transactions map[string]int64 `json:"transactions"`
	// Fenced is why the publisher stopped because another producer took
	// its transactional ID ("" while it is not); FencedAt when.
	Fenced   string    `json:"fenced,omitempty"`
	FencedAt time.Time `json:"fencedAt,omitzero"`
	// Position is the last event_outbox id committed with a transaction
	// (read back at start-up; 0 before the first).
	Position int64 `json:"position"`
	// Reconciled counts outbox rows a previous session had committed to
	// Kafka but not deleted (a crash in between), deleted at start-up
	// without being published again.
	Reconciled int64 `json:"reconciled"`
	// Deduplicated counts outbox rows not published because their
	// (FLID, version) was published already (msg_event) or earlier in
	// the same batch.
	Deduplicated int64 `json:"deduplicated"`
}

// ErrFenced is what Publish returns once another producer took the
// publisher's transactional ID: it publishes nothing more until Run is
// called again (this instance takes the process lock again or restarts).
var ErrFenced = errors.New("event publisher fenced")

// The crash points of the publisher (internal/crashpoint, the crash tests):
// inside a batch (its records produced, the transaction not committed);
// between the Kafka commit (or acknowledgement) and the PostgreSQL delete;
// during start-up reconciliation, before deleting what the last
// transaction committed.
const (
	PointInBatch     = "publish.in-batch"
	PointAfterCommit = "publish.after-commit"
	PointReconcile   = "publish.reconcile"
)

// batch is what Kafka has of one batch and PostgreSQL still has to
// forget: the produced rows with where they landed, and the rows skipped
// as duplicates.
type batch struct {
	produced []sink.Produced
	skipped  []int64
	// reconciled: a previous session published it (start-up
	// reconciliation); not counted as published again.
	reconciled bool
}

// Publisher produces the outbox in order (see the package comment).
type Publisher struct {
	cfg    Config
	d      Deps
	log    *slog.Logger
	notify chan struct{}

	// producer is the current producer session (nil: none). With
	// ExactlyOnce, opening one initialises the transactional ID and
	// reconciles; any failure of a transaction closes it.
	producer sarama.SyncProducer
	// pending is a batch Kafka has and whose rows are not deleted yet: it
	// is deleted before anything else is produced.
	pending *batch
	// next is what the last round's delete read of the outbox's next rows
	// (nil: nothing), for the round after it.
	next *readAhead
	// deleted counts the rows deleted since the last vacuum of the outbox.
	deleted int

	mu    sync.Mutex
	stats Stats
	// hook lets tests stop at the crash points (nil: none).
	hook func(point string) error
}

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error {
	return need.Check("event publisher", need.Pool(d.Pool), need.Timeout(d.DBTimeout), need.Brokers(d.Brokers), need.Clock(d.Clock),
		need.Log(d.Log))
}

// New returns the outbox publisher.
func New(cfg Config, d Deps) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	st := Stats{Published: map[string]int64{}, Transactions: map[string]int64{}, ExactlyOnce: cfg.ExactlyOnce}
	if cfg.ExactlyOnce {
		st.TransactionalID = cfg.TransactionalID
	}
	return &Publisher{cfg: cfg, d: d, log: d.Log.With("component", "publisher"), notify: make(chan struct{}, 1), stats: st}, nil
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
	s.Transactions = make(map[string]int64, len(p.stats.Transactions))
	for k, v := range p.stats.Transactions {
		s.Transactions[k] = v
	}
	return s
}

// Run publishes until ctx ends; failures (Kafka or PostgreSQL away) are
// retried, the rows stay until they are produced. A fenced publisher
// stops publishing and waits for ctx to end; each Run starts a new
// producer session (a standby taking over, or this instance taking the
// process lock again).
func (p *Publisher) Run(ctx context.Context) error {
	defer p.Close()
	p.mu.Lock()
	p.stats.Fenced, p.stats.FencedAt, p.stats.LastError = "", time.Time{}, ""
	p.mu.Unlock()
	// A failure that lasts (an outage, a missing ACL) is one WARN line
	// and a summary every 30 s, not a line per retry.
	failing := &retry.OutageLog{Log: p.log, Clock: p.d.Clock}
	for failures := 0; ; {
		n, err := p.Publish(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			failing.Recovered("publishing events succeeded again after failures")
		}
		if errors.Is(err, ErrFenced) {
			<-ctx.Done()
			return nil
		}
		if err == nil {
			// Kafka and PostgreSQL answered: not paused, even when the
			// outbox was empty (no batch to clear it after an outage).
			p.mu.Lock()
			p.stats.LastError, p.stats.Denied = "", ""
			p.mu.Unlock()
		}
		wait := time.Duration(0)
		switch {
		case err != nil:
			failures++
			wait = retry.WriteBackoff.Delay(failures)
			failing.Failed("publishing events failed; they stay in the outbox", err, "retry_in", wait.String())
			p.mu.Lock()
			p.stats.LastError = err.Error()
			p.stats.Denied = ""
			if kafka.IsDenied(err) {
				p.stats.Denied = err.Error()
			}
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
// returns how many outbox rows it handled.
//
// The sequence (docs/design.md#outbox): a batch Kafka has but PostgreSQL
// still holds (pending) is deleted first; a new producer session is opened
// if needed (with ExactlyOnce: the transactional ID is initialised, fencing
// any other producer and aborting a transaction a crashed session left
// open, then the committed position is read back and reconciled); the
// oldest rows are read and de-duplicated; the rest is produced — with
// ExactlyOnce in one transaction with the position — and only after Kafka
// committed (acknowledged) it are the rows deleted, with msg_event, in one
// PostgreSQL transaction. A crash before the commit leaves nothing visible
// to read_committed consumers; after it, the next session's reconciliation
// deletes the rows without producing them again.
func (p *Publisher) Publish(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if p.fenced() {
		return 0, ErrFenced
	}
	// What the last round's delete read next, if it read anything: used
	// only by this round, and only if the producer session it was read
	// under still runs (an opening session's reconciliation may delete
	// rows).
	next := p.next
	p.next = nil
	if p.pending != nil {
		if err := p.forget(ctx, 0); err != nil {
			return 0, err
		}
	}
	if p.producer == nil {
		next = nil
		if err := p.open(ctx); err != nil {
			return 0, err
		}
	}
	limit := p.cfg.Batch
	if p.cfg.ExactlyOnce {
		limit = min(limit, maxTransactionRows(p.d.Kafka.MaxMessageBytes))
	}
	due, published := next.rows(limit)
	var err error
	if len(due) == 0 {
		// Nothing read ahead: read now (one commit of its own).
		rctx, cancel := context.WithTimeout(ctx, p.d.DBTimeout)
		due, published, err = sink.ReadOutbox(rctx, p.d.Pool, limit)
		cancel()
		if err != nil || len(due) == 0 {
			return 0, err
		}
	}
	publish, skip := dedupe(due, published)
	b := &batch{skipped: make([]int64, len(skip))}
	for i, r := range skip {
		b.skipped[i] = r.ID
	}
	if len(publish) > 0 {
		if p.cfg.ExactlyOnce {
			err = p.transact(due, publish, b)
		} else {
			err = p.send(publish, b)
		}
		if err != nil {
			return 0, err
		}
	}
	p.pending = b
	if len(publish) > 0 {
		if err := p.at(PointAfterCommit); err != nil {
			return 0, err
		}
	}
	// The delete reads the next rows in its transaction: during a backlog
	// a round is one PostgreSQL commit, not two.
	if err := p.forget(ctx, limit); err != nil {
		return 0, err
	}
	return len(due), nil
}

// readAhead is what a round's delete read of the outbox's next rows
// (sink.DeleteOutbox).
type readAhead struct {
	due       []sink.OutboxRow
	published map[sink.Version]bool
}

// rows returns the rows read ahead, at most limit (none when r is nil).
func (r *readAhead) rows(limit int) ([]sink.OutboxRow, map[sink.Version]bool) {
	if r == nil {
		return nil, nil
	}
	return r.due[:min(len(r.due), limit)], r.published
}

// forget deletes the pending batch's rows and records msg_event in one
// PostgreSQL transaction. It is retried, never produced again, until it
// succeeds. With next > 0 the transaction also reads up to next of the
// outbox's following rows, for the next round (p.next).
func (p *Publisher) forget(ctx context.Context, next int) error {
	b := p.pending
	now := p.d.Clock.Now()
	dctx, cancel := context.WithTimeout(ctx, p.d.DBTimeout)
	defer cancel()
	due, published, err := sink.DeleteOutbox(dctx, p.d.Pool, b.produced, b.skipped, now, next)
	if err != nil {
		return err
	}
	p.pending = nil
	if len(due) > 0 {
		p.next = &readAhead{due: due, published: published}
	}
	p.vacuum(ctx, len(b.produced)+len(b.skipped))
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.reconciled {
		p.stats.Reconciled += int64(len(b.produced) + len(b.skipped))
		return nil
	}
	for _, r := range b.produced {
		p.stats.Published[r.Event.Topic]++
		if p.d.Observe != nil && !r.Event.OriginAt.IsZero() {
			p.d.Observe(now.Sub(r.Event.OriginAt))
		}
	}
	p.stats.Deduplicated += int64(len(b.skipped))
	p.stats.Batches++
	p.stats.LastError = ""
	return nil
}

// vacuum counts n deleted rows and vacuums the outbox once VacuumRows of
// them were deleted since the last vacuum. A failed vacuum is a warning:
// the rows are published and deleted all the same, autovacuum remains, and
// the next one is tried after as many rows again.
func (p *Publisher) vacuum(ctx context.Context, n int) {
	if p.cfg.VacuumRows == 0 {
		return
	}
	if p.deleted += n; p.deleted < p.cfg.VacuumRows {
		return
	}
	p.deleted = 0
	vctx, cancel := context.WithTimeout(ctx, p.d.DBTimeout)
	defer cancel()
	if err := sink.VacuumOutbox(vctx, p.d.Pool); err != nil && ctx.Err() == nil {
		p.log.Warn("vacuuming the outbox failed; autovacuum will", "err", err)
	}
}

// at is a crash point: the binary built for the crash tests may die here,
// unit tests may stop (hook).
func (p *Publisher) at(point string) error {
	crashpoint.Hit(point)
	if p.hook != nil {
		return p.hook(point)
	}
	return nil
}

// versionOf is the flight version a msg event row announces.
func versionOf(r sink.OutboxRow) (sink.Version, bool) {
	if r.Event.MsgID == 0 || r.Event.StateVersion == 0 {
		return sink.Version{}, false
	}
	return sink.Version{FLID: r.Event.Key, StateVersion: r.Event.StateVersion}, true
}

// dedupe splits a batch (in id order) into the rows to produce and those
// to delete unproduced: a msg event whose (FLID, stateVersion) msg_event
// records as published, or that an earlier row of the batch announces
// already — a transition redelivered after a crash queues its version's
// event again. Rows without a version (schd tombstones) are always
// produced.
func dedupe(rows []sink.OutboxRow, published map[sink.Version]bool) (publish, skip []sink.OutboxRow) {
	seen := map[sink.Version]bool{}
	for _, r := range rows {
		v, ok := versionOf(r)
		if ok && (published[v] || seen[v]) {
			skip = append(skip, r)
			continue
		}
		if ok {
			seen[v] = true
		}
		publish = append(publish, r)
	}
	return publish, skip
}
