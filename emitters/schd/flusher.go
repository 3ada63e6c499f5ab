package schd

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/need"
	"msgx/internal/retry"
	"msgx/sink"
	"msgx/tables/flight"
)

// Record headers carried by every schd record.
const (
	// HeaderStateVersion is the flight's STATE_VERSION, decimal.
	HeaderStateVersion = "stateVersion"
	// HeaderState is ACTIVE or DELETED (a DELETED record has a null value).
	HeaderState = "state"
)

// Deps are the Flusher's collaborators.
type Deps struct {
	// Pool is msgx's PostgreSQL (flight_schd).
	Pool *pgxpool.Pool
	// DBTimeout bounds every single database call (MSGX_DB_TIMEOUT).
	DBTimeout time.Duration
	// Brokers are the Kafka bootstrap addresses.
	Brokers []string
	// Kafka gives the producer configuration (docs/design.md#kafka-settings);
	// its Timeout bounds a send.
	Kafka kafka.Config
	// Clock paces the flushes and stamps the records.
	Clock clock.Clock
	// Log receives the flusher's lines (component=schd).
	Log *slog.Logger
}

// Stats are the flusher's running figures for status and metrics.
type Stats struct {
	// Flushed counts records produced by flushes that committed.
	Flushed int64
	// Flushes counts flushes that committed (empty ones included).
	Flushes int64
	// Failures counts flushes that failed (nothing marked).
	Failures int64
	// LastFlushAt is when the last flush committed (zero before the first).
	LastFlushAt time.Time
	// LastError is the last failure ("" before the first), LastErrorAt its
	// time; a later success does not clear them.
	LastError   string
	LastErrorAt time.Time
}

// Flusher publishes due flight_schd rows to the schd topic. Run is its
// long-running loop; Flush runs one batch.
type Flusher struct {
	cfg Config
	d   Deps
	log *slog.Logger

	// flushMu serialises Flush calls of this process (Run and, say, an
	// operator's flush-now); sink.LockSchdFlush does the same across processes.
	flushMu  sync.Mutex
	producer sarama.SyncProducer

	mu    sync.Mutex
	stats Stats

	// afterProduce lets tests crash a flush between produce and mark; nil
	// in production.
	afterProduce func(ctx context.Context) error
}

// New checks the configuration and returns a flusher; Run starts it.
// A producer configuration other than docs/design.md#kafka-settings is
// Validate reports which required collaborators are missing.
func (d Deps) Validate() error {
	return need.Check("schd", need.Pool(d.Pool), need.Timeout(d.DBTimeout), need.Brokers(d.Brokers), need.Clock(d.Clock), need.Log(d.Log))
}

// refused here, at start-up.
func New(cfg Config, d Deps) (*Flusher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	sc := d.Kafka.Sarama("msgx-schd")
	if err := kafka.CheckD3(sc); err != nil {
		return nil, fmt.Errorf("schd: %w", err)
	}
	return &Flusher{cfg: cfg, d: d, log: d.Log.With("component", "schd")}, nil
}

// Stats returns a snapshot of the running figures.
func (f *Flusher) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Run flushes every FlushPeriod until ctx ends, draining a backlog batch by
// batch. A failed flush is logged and retried next period; Run returns nil
// when ctx ends. Nothing needs flushing at shutdown: what was not marked is
// still due in PostgreSQL and is sent after the restart.
func (f *Flusher) Run(ctx context.Context) error {
	defer f.Close()
	f.log.Info("schd publisher started", "topic", f.cfg.Topic, "flush_period", f.cfg.FlushPeriod.String(), "flush_limit", f.cfg.FlushLimit)
	for {
		if err := clock.Sleep(ctx, f.d.Clock, f.cfg.FlushPeriod); err != nil {
			return nil
		}
		for ctx.Err() == nil {
			sent, marked, err := f.flush(ctx)
			if err != nil {
				if ctx.Err() == nil {
					f.log.Warn("schd flush failed; nothing marked, retrying next period",
						"err", err, "outage", retry.IsOutage(err))
				}
				break
			}
			// Only a full batch, fully marked, says more is due now. A batch
			// with rows skipped as locked waits a period: those rows are
			// being written and would only be sent twice in a row.
			if sent < f.cfg.FlushLimit || marked < sent {
				break
			}
		}
	}
}

// Flush runs one flush and returns the number of records sent. It is what
// Run does every period; callers may use it to flush now.
func (f *Flusher) Flush(ctx context.Context) (int, error) {
	sent, _, err := f.flush(ctx)
	return sent, err
}

// Close releases the producer. Run closes it on return.
func (f *Flusher) Close() {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	f.closeProducer()
}

// due is one flight_schd row to publish.
type due struct {
	flid    string
	state   string
	version int64
	doc     []byte
}

func (f *Flusher) flush(ctx context.Context) (sent, marked int, err error) {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	defer func() {
		now := f.d.Clock.Now()
		f.mu.Lock()
		defer f.mu.Unlock()
		if err != nil {
			f.stats.Failures++
			f.stats.LastError, f.stats.LastErrorAt = err.Error(), now
			return
		}
		f.stats.Flushes++
		f.stats.Flushed += int64(sent)
		f.stats.LastFlushAt = now
	}()

	tx, err := f.begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		// After a commit this is a no-op; otherwise nothing is marked.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.d.DBTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()

	if ok, err := f.lock(ctx, tx); err != nil || !ok {
		if err == nil {
			f.log.Debug("another instance is flushing schd; skipping this flush")
		}
		return 0, 0, err
	}
	rows, err := f.read(ctx, tx)
	if err != nil || len(rows) == 0 {
		return 0, 0, err
	}
	// Produce before marking: a crash from here until the commit leaves the
	// rows unmarked and they are sent again after the restart (at least
	// once), never marked without having been sent.
	if err := f.produce(ctx, rows); err != nil {
		return 0, 0, err
	}
	if f.afterProduce != nil {
		if err := f.afterProduce(ctx); err != nil {
			return 0, 0, err
		}
	}
	marked, err = f.mark(ctx, tx, rows)
	if err != nil {
		return 0, 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, f.d.DBTimeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		// The records are on the topic; the rows stay due and are sent
		// again (at least once).
		return 0, 0, fmt.Errorf("committing schd marks of %d flights: %w", len(rows), err)
	}
	f.log.Debug("schd flushed", "records", len(rows), "marked", marked)
	return len(rows), marked, nil
}

func (f *Flusher) begin(ctx context.Context) (pgx.Tx, error) {
	bctx, cancel := context.WithTimeout(ctx, f.d.DBTimeout)
	defer cancel()
	tx, err := f.d.Pool.Begin(bctx)
	if err != nil {
		return nil, fmt.Errorf("starting schd flush transaction: %w", err)
	}
	return tx, nil
}

func (f *Flusher) lock(ctx context.Context, tx pgx.Tx) (bool, error) {
	lctx, cancel := context.WithTimeout(ctx, f.d.DBTimeout)
	defer cancel()
	return sink.TryXactLock(lctx, tx, sink.LockSchdFlush)
}

// read returns up to FlushLimit due rows, longest due first. The doc is
// read in the same row as its version, so the record and its version always
// belong together.
func (f *Flusher) read(ctx context.Context, tx pgx.Tx) ([]due, error) {
	rctx, cancel := context.WithTimeout(ctx, f.d.DBTimeout)
	defer cancel()
	rs, err := tx.Query(rctx, `SELECT flid, state, state_version, doc FROM flight_schd
		WHERE schd_due_since IS NOT NULL ORDER BY schd_due_since, flid LIMIT $1`, f.cfg.FlushLimit)
	if err != nil {
		return nil, fmt.Errorf("reading due schd rows: %w", err)
	}
	defer rs.Close()
	var out []due
	for rs.Next() {
		var r due
		if err := rs.Scan(&r.flid, &r.state, &r.version, &r.doc); err != nil {
			return nil, fmt.Errorf("reading due schd rows: %w", err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("reading due schd rows: %w", err)
	}
	return out, nil
}

// produce sends the records synchronously, in order, with the producer of
// docs/design.md#kafka-settings. It gives up when ctx ends (shutdown): the
// flush then fails and marks nothing, while the send finishes in the
// background.
func (f *Flusher) produce(ctx context.Context, rows []due) error {
	if f.producer == nil {
		p, err := kafka.NewSyncProducer(f.d.Kafka, f.d.Brokers, "msgx-schd")
		if err != nil {
			return err
		}
		f.producer = p
	}
	now := f.d.Clock.Now()
	msgs := make([]*sarama.ProducerMessage, len(rows))
	for i, r := range rows {
		m := &sarama.ProducerMessage{
			Topic:     f.cfg.Topic,
			Key:       sarama.StringEncoder(r.flid),
			Timestamp: now,
			Headers: []sarama.RecordHeader{
				{Key: []byte(HeaderStateVersion), Value: []byte(strconv.FormatInt(r.version, 10))},
				{Key: []byte(HeaderState), Value: []byte(r.state)},
			},
		}
		// A deleted flight is a tombstone: a nil Value is a null record
		// value, which compaction removes with the key.
		if r.state != flight.StateDeleted {
			m.Value = sarama.ByteEncoder(r.doc)
		}
		msgs[i] = m
		f.log.Debug("schd record", "flid", r.flid, "state_version", r.version, "state", r.state)
	}
	p := f.producer
	done := make(chan error, 1)
	go func() { done <- p.SendMessages(msgs) }()
	select {
	case err := <-done:
		if err != nil {
			// Start over with a fresh producer next time; the whole batch
			// is sent again (duplicates are harmless, a mark without a
			// record would not be).
			f.closeProducer()
			return retry.Outage("kafka", fmt.Errorf("producing %d schd records to %s: %w", len(msgs), f.cfg.Topic, err))
		}
		return nil
	case <-ctx.Done():
		f.producer = nil
		go func() { <-done; _ = p.Close() }()
		return ctx.Err()
	}
}

// mark advances schd_sent_version of the rows sent and clears
// schd_due_since of those whose newest version it sent. GREATEST keeps the
// version from going back; a newer state written meanwhile keeps the row
// due: the row is locked here, so a writer either committed before (its
// version is above the one sent, the mark stays) or writes after this
// transaction (and sets the mark again). SKIP LOCKED:
// a row a writer holds locked right now is left unmarked (it is about to get
// a newer version anyway, or is sent once more), so the flusher never waits
// for a processor transaction and the two can never deadlock.
func (f *Flusher) mark(ctx context.Context, tx pgx.Tx, rows []due) (int, error) {
	flids := make([]string, len(rows))
	versions := make([]int64, len(rows))
	for i, r := range rows {
		flids[i], versions[i] = r.flid, r.version
	}
	mctx, cancel := context.WithTimeout(ctx, f.d.DBTimeout)
	defer cancel()
	tag, err := tx.Exec(mctx, `WITH sent AS (
			SELECT * FROM unnest($1::text[], $2::bigint[]) AS s(flid, version)
		), locked AS (
			SELECT f.flid, s.version FROM flight_schd f JOIN sent s ON s.flid = f.flid
			FOR UPDATE OF f SKIP LOCKED
		)
		UPDATE flight_schd f SET schd_sent_version = GREATEST(f.schd_sent_version, l.version),
			schd_due_since = CASE WHEN f.state_version <= GREATEST(f.schd_sent_version, l.version) THEN NULL ELSE f.schd_due_since END
		FROM locked l WHERE f.flid = l.flid`, flids, versions)
	if err != nil {
		return 0, fmt.Errorf("marking %d schd rows sent: %w", len(rows), err)
	}
	return int(tag.RowsAffected()), nil
}

func (f *Flusher) closeProducer() {
	if f.producer != nil {
		_ = f.producer.Close()
		f.producer = nil
	}
}
