package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/need"
	"msgx/internal/retry"
	"msgx/sink"
	"msgx/sink/aodb"
)

// ErrNotSeeded stops a first start that has no cut-over decision.
var ErrNotSeeded = errors.New("no inbox cursor yet: set MSGX_CUTOVER_WATERMARK=min|zero|max|<id> for the first start (min reads every existing row)")

// Deps are the bridge's collaborators.
type Deps struct {
	// Inbox is the shared MySQL inbox (required; with the probe's pool
	// when MSGX_HOLE_PROBE is on).
	Inbox *aodb.Tables
	// Cursors is the watermark store in PostgreSQL (required).
	Cursors *sink.Cursors
	// PG is used for the ingest advisory lock (one active instance).
	PG sink.Config
	// Brokers and Kafka are where msgx.inbox is produced (required).
	Brokers []string
	Kafka   kafka.Config
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the bridge's lines (required; component=ingest is
	// added).
	Log *slog.Logger
}

// Stats are the bridge's running figures for status and metrics.
type Stats struct {
	Active         bool
	Watermark      int64
	HoleSince      time.Time
	HoleFrom       int64
	HoleTo         int64
	Produced       int64
	PermanentHoles int64
	LateRows       int64
	LastError      string
	LastErrorAt    time.Time
}

// Bridge moves inbox rows to msgx.inbox in ID order. It is the ingest role's
// long-running component.
type Bridge struct {
	cfg Config
	d   Deps
	log *slog.Logger

	mu    sync.Mutex
	stats Stats

	producer sarama.SyncProducer
	// window is how many rows the next poll looks at (0: MSGX_CLAIM_BATCH).
	window    int
	lastLate  time.Time
	sleepHook func() // tests: called when the bridge is about to wait
	// afterProduce lets tests crash the bridge between produce and cursor
	// save; nil in production.
	afterProduce func() error
}

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error {
	return need.Check("ingest", need.Has(d.Inbox != nil, "inbox reader"), need.Has(d.Cursors != nil, "cursor store"),
		need.Brokers(d.Brokers), need.Clock(d.Clock), need.Log(d.Log))
}

// New checks cfg and d and returns the bridge; Run starts it.
func New(cfg Config, d Deps) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Bridge{cfg: cfg, d: d, log: d.Log.With("component", "ingest")}, nil
}

// Stats returns a snapshot of the running figures.
func (b *Bridge) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

func (b *Bridge) update(fn func(*Stats)) {
	b.mu.Lock()
	fn(&b.stats)
	b.mu.Unlock()
}

// lockCheck is how often a polling bridge checks its ingest lock's session.
const lockCheck = time.Second

// Run takes the ingest lock (waiting as a standby while another instance has
// it), loads or seeds the cursor and polls until ctx ends. A MySQL, Kafka or
// PostgreSQL failure is logged and retried on the next poll with the
// watermark unchanged; it is never mistaken for "no new messages". Run
// returns an error only when this instance must stop: its lock session was
// lost, another instance moved the cursor, or start-up has no cut-over
// decision.
func (b *Bridge) Run(ctx context.Context) error {
	lockOutage := &retry.OutageLog{Log: b.log, Clock: b.d.Clock}
	lock, err := sink.AcquireLock(ctx, b.d.PG, b.d.Clock, sink.LockIngest, b.cfg.PollInterval, func() {
		b.log.Info("standby: another instance holds the ingest lock; waiting to take over")
	}, func(err error) {
		lockOutage.Failed("ingest lock: PostgreSQL unavailable, retrying every poll", err)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("taking the ingest lock: %w", err)
	}
	defer lock.Release()
	lockOutage.Recovered("ingest lock: PostgreSQL reachable again")
	b.log.Info("ingest lock acquired: this instance reads the inbox")
	defer b.closeProducer()
	defer b.update(func(s *Stats) { s.Active = false })

	cur, err := b.start(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	b.update(func(s *Stats) { s.Active = true; s.Watermark = cur.Watermark })
	// An outage fails every poll (every MSGX_POLL_INTERVAL): its first
	// failure, a summary every 30 s and the recovery are logged, not each
	// poll.
	pollOutage := &retry.OutageLog{Log: b.log, Clock: b.d.Clock}
	var checked time.Time
	for {
		// The lock's session is checked before a poll, at most once per
		// lockCheck: each check is a round trip and a PostgreSQL
		// transaction, and a backlog polls back to back (one commit in
		// nine of a codeshare-heavy backlog's, checked at every poll).
		// Meanwhile a lost session lets a second bridge read for up to
		// lockCheck beside this one, which the cursor's compare-and-set
		// stops (ErrCursorMoved) and the router's duplicate detection
		// absorbs (docs/design.md#locks). checked starts at the zero
		// time: the first poll checks.
		if now := b.d.Clock.Now(); now.Sub(checked) >= lockCheck {
			if err := lock.Alive(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			checked = now
		}
		wait, err := b.poll(ctx, &cur)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, sink.ErrCursorMoved) {
				return err
			}
			pollOutage.Failed("ingest poll failed; watermark kept, retrying every poll", err, "watermark", cur.Watermark)
			b.update(func(s *Stats) { s.LastError, s.LastErrorAt = err.Error(), b.d.Clock.Now() })
			wait = b.cfg.PollInterval
		} else {
			pollOutage.Recovered("ingest poll succeeded again after failures", "watermark", cur.Watermark)
		}
		if err := b.maybeCheckLate(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("late-row check failed", "err", err)
		}
		if wait > 0 {
			if b.sleepHook != nil {
				b.sleepHook()
			}
			if err := clock.Sleep(ctx, b.d.Clock, wait); err != nil {
				return nil
			}
		}
	}
}

// start loads the cursor or seeds it once from MSGX_CUTOVER_WATERMARK.
func (b *Bridge) start(ctx context.Context) (sink.Cursor, error) {
	mode, id, err := ParseCutover(b.cfg.Cutover)
	if err != nil {
		return sink.Cursor{}, fmt.Errorf("MSGX_CUTOVER_WATERMARK: %w", err)
	}
	waitingForRow := false
	outage := &retry.OutageLog{Log: b.log, Clock: b.d.Clock}
	for {
		cur, ok, err := b.d.Cursors.Load(ctx)
		if err == nil && ok {
			if mode != SeedNone {
				b.log.Warn("inbox cursor exists: refusing to re-seed; MSGX_CUTOVER_WATERMARK is ignored",
					"watermark", cur.Watermark, "cutover", b.cfg.Cutover)
			}
			return cur, nil
		}
		if err == nil {
			var w int64
			var ready bool
			w, ready, err = b.seedWatermark(ctx, mode, id)
			switch {
			case errors.Is(err, ErrNotSeeded):
				return sink.Cursor{}, err
			case err == nil && !ready:
				if !waitingForRow {
					b.log.Info("inbox is empty: seeding mode min waits for the first row")
					waitingForRow = true
				}
			case err == nil:
				var seeded bool
				seeded, err = b.d.Cursors.Seed(ctx, w, strings.ToLower(strings.TrimSpace(b.cfg.Cutover)), b.d.Clock.Now())
				if err == nil && seeded {
					b.log.Info("seeded inbox cursor", "mode", mode, "watermark", w)
					return sink.Cursor{Watermark: w}, nil
				}
				// Lost a race with another seeder: load what it stored.
				if err == nil {
					continue
				}
			}
		}
		if err != nil {
			outage.Failed("loading or seeding the inbox cursor failed; retrying every poll", err)
		}
		if err := clock.Sleep(ctx, b.d.Clock, b.cfg.PollInterval); err != nil {
			return sink.Cursor{}, err
		}
	}
}

func (b *Bridge) seedWatermark(ctx context.Context, mode string, id int64) (w int64, ready bool, err error) {
	switch mode {
	case SeedNone:
		return 0, false, ErrNotSeeded
	case SeedZero:
		return 0, true, nil
	case SeedID:
		return id, true, nil
	}
	lo, hi, ok, err := b.d.Inbox.Bounds(ctx)
	if err != nil {
		return 0, false, err
	}
	if mode == SeedMax {
		return hi, true, nil
	}
	if !ok {
		return 0, false, nil
	}
	return lo - 1, true, nil
}

// poll runs one read-plan-produce-save round and returns how long to wait
// before the next one (0: poll again at once).
func (b *Bridge) poll(ctx context.Context, cur *sink.Cursor) (time.Duration, error) {
	window := b.window
	if window <= 0 || window > b.cfg.ClaimBatch {
		window = b.cfg.ClaimBatch
	}
	rows, cut, err := b.d.Inbox.ReadAfter(ctx, cur.Watermark, window, b.cfg.claimMaxBytes())
	if err != nil {
		return 0, retry.Outage("mysql", err)
	}
	// Reading the lengths of large rows is what the byte bound costs the
	// database (each one is read whole). After a poll the bound cut short,
	// the next one looks only twice as far ahead as this one read; polls
	// that are not cut widen the window again up to MSGX_CLAIM_BATCH.
	if cut {
		b.window = 2 * len(rows)
	} else {
		b.window = 2 * window
	}
	more := cut || len(rows) == window
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	now := b.d.Clock.Now()
	step := Plan(*cur, ids, now, b.cfg.MaxCommitDelay)

	// Crash window: rows are produced before the cursor is saved. A crash in
	// between re-produces them after restart; the duplicates carry the same
	// MSG_ID and the router skips an ID it already handled. Saving first
	// would lose the rows instead.
	if step.Run > 0 {
		if err := b.produce(ctx, rows[:step.Run], now); err != nil {
			return 0, err
		}
		if b.afterProduce != nil {
			if err := b.afterProduce(); err != nil {
				return 0, err
			}
		}
	}
	if step.Next != *cur {
		// Rows just produced are saved even when shutdown began meanwhile
		// (the save is bounded by MSGX_DB_TIMEOUT): a stop between produce
		// and save would otherwise re-produce them at the next start, as
		// only a crash has to.
		if err := b.d.Cursors.Save(context.WithoutCancel(ctx), cur.Watermark, step.Next, now); err != nil {
			return 0, err
		}
		*cur = step.Next
		b.update(func(s *Stats) {
			s.Watermark, s.HoleSince = cur.Watermark, cur.HoleSince
			s.Produced += int64(step.Run)
			if step.Gap != nil {
				s.HoleFrom, s.HoleTo = step.Gap.From, step.Gap.To
			} else {
				s.HoleFrom, s.HoleTo = 0, 0
			}
		})
	}
	if step.Gap == nil {
		if more {
			return 0, nil
		}
		return b.cfg.PollInterval, nil
	}
	if step.Release {
		return 0, b.release(ctx, cur, *step.Gap, "aged")
	}
	if !b.cfg.HoleProbe {
		return b.cfg.PollInterval, nil
	}
	return b.probe(ctx, cur, *step.Gap)
}

// probe resolves a gap by waiting on the in-flight insert behind it. Sequence:
// a first locking read blocks until the writer commits (rows found: read
// again at once) or rolls back (nothing found). An empty result may also be
// an ID allocated but not yet inserted, so after MSGX_HOLE_GRACE a second
// probe decides; empty again releases the hole. A lock wait timeout leaves the
// hole to the aging fallback.
func (b *Bridge) probe(ctx context.Context, cur *sink.Cursor, g sink.Gap) (time.Duration, error) {
	for attempt := 0; attempt < 2; attempt++ {
		if attempt == 1 {
			if err := clock.Sleep(ctx, b.d.Clock, b.cfg.HoleGrace); err != nil {
				return 0, err
			}
		}
		found, err := b.d.Inbox.Probe(ctx, cur.Watermark, g.To+1, b.cfg.HoleProbeTimeout)
		if errors.Is(err, aodb.ErrProbeTimeout) {
			b.log.Info("hole still locked by an in-flight insert; aging continues", "from", g.From, "to", g.To)
			return b.cfg.PollInterval, nil
		}
		if err != nil {
			return 0, retry.Outage("mysql", err)
		}
		if len(found) > 0 {
			return 0, nil
		}
	}
	return 0, b.release(ctx, cur, g, "probe")
}

// release skips gap g for good and puts it on the late-row watch list.
func (b *Bridge) release(ctx context.Context, cur *sink.Cursor, g sink.Gap, reason string) error {
	now := b.d.Clock.Now()
	observed := cur.HoleSince
	if observed.IsZero() {
		observed = now
	}
	h := sink.Hole{Gap: g, ObservedAt: observed, ReleasedAt: now, Reason: reason}
	if err := b.d.Cursors.Release(ctx, cur.Watermark, h); err != nil {
		return err
	}
	*cur = cur.Released(g)
	b.update(func(s *Stats) {
		s.Watermark, s.HoleSince, s.HoleFrom, s.HoleTo = cur.Watermark, time.Time{}, 0, 0
		s.PermanentHoles++
	})
	b.log.Warn("released permanent hole: these inbox IDs are skipped", "from", g.From, "to", g.To,
		"reason", reason, "open_for", now.Sub(observed).String())
	return nil
}

// produce sends rows synchronously, in order, with the producer of
// docs/design.md#kafka-settings.
func (b *Bridge) produce(ctx context.Context, rows []aodb.Row, now time.Time) error {
	if b.producer == nil {
		p, err := kafka.NewSyncProducer(b.d.Kafka, b.d.Brokers, "msgx-ingest")
		if err != nil {
			return err
		}
		b.producer = p
	}
	msgs := make([]*sarama.ProducerMessage, len(rows))
	for i, r := range rows {
		m, oversize, err := Message(r, b.cfg.Topic, now, b.d.Kafka.MaxMessageBytes)
		if err != nil {
			return err
		}
		if oversize {
			b.log.Error("inbox row too large for a Kafka record; it is recorded DEAD", "msg_id", r.ID, "bytes", len(r.Raw),
				"limit", b.d.Kafka.MaxMessageBytes-RecordEnvelope)
		}
		msgs[i] = m
	}
	if err := b.producer.SendMessages(msgs); err != nil {
		// Start over with a fresh producer: the whole batch is sent again
		// (duplicates are harmless, a gap in the topic would not be).
		b.closeProducer()
		return retry.Outage("kafka", fmt.Errorf("producing %d inbox rows from %d: %w", len(rows), rows[0].ID, err))
	}
	return ctx.Err()
}

func (b *Bridge) closeProducer() {
	if b.producer != nil {
		_ = b.producer.Close()
		b.producer = nil
	}
}

// maybeCheckLate looks for released hole IDs that appeared after all. They
// are counted and logged, never enqueued: the rows behind them are already
// on the topic and enqueuing now would break the order.
func (b *Bridge) maybeCheckLate(ctx context.Context) error {
	now := b.d.Clock.Now()
	if !b.lastLate.IsZero() && now.Sub(b.lastLate) < b.cfg.LateCheckInterval {
		return nil
	}
	b.lastLate = now
	holes, err := b.d.Cursors.Watched(ctx, now.Add(-b.cfg.LateWatch), 1000)
	if err != nil || len(holes) == 0 {
		return err
	}
	late := map[int64]int64{}
	for i := 0; i < len(holes); i += 100 {
		chunk := holes[i:min(i+100, len(holes))]
		gaps := make([]sink.Gap, len(chunk))
		for j, h := range chunk {
			gaps[j] = h.Gap
		}
		ids, err := b.d.Inbox.Existing(ctx, gaps)
		if err != nil {
			return err
		}
		for _, id := range ids {
			for _, h := range chunk {
				if id >= h.From && id <= h.To {
					late[id] = h.From
				}
			}
		}
	}
	if len(late) == 0 {
		return nil
	}
	fresh, err := b.d.Cursors.RecordLate(ctx, late, now)
	for _, id := range fresh {
		b.log.Warn("late row: inbox ID appeared after its hole was released; it is not enqueued", "msg_id", id, "hole", late[id])
	}
	b.update(func(s *Stats) { s.LateRows += int64(len(fresh)) })
	return err
}
