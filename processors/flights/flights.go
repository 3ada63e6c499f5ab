package flights

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"

	"msgx/internal/clock"
	"msgx/internal/commit"
	"msgx/internal/kafka"
	"msgx/processors/applier"
	"msgx/sink"
	"msgx/tables/flight"
)

// BaseGroup is the processor's goka group name before MSGX_KAFKA_PREFIX:
// Config.Group is the group a deployment runs; its table (key FLID) is
// Config.Table (msgx-flights-table without a prefix).
const BaseGroup = "msgx-flights"

// Config configures the flights processor.
type Config struct {
	// TransitionTopic is the processor's input, the router's flight
	// transitions (key FLID; router.Config.FlightTopic reads the same
	// variable).
	TransitionTopic string `env:"MSGX_TOPIC_FLIGHT_TRANSITIONS,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.flight-transitions"`
	// MsgTopic receives one event per applied flight change (key FLID),
	// published from the outbox by the event publisher.
	MsgTopic string `env:"MSGX_TOPIC_MSG,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.msg"`
	// ScheduleMissing: a tag a DNLD/RESP record does not carry is kept ("keep",
	// the default) or cleared ("clear"); docs/design.md#schedule-merge.
	ScheduleMissing string `env:"MSGX_SCHEDULE_MISSING" envDefault:"keep"`
	// SchdTopic is the latest-state topic: the full flight JSON per FLID,
	// compacted, a deleted flight's tombstone a null value. This processor
	// writes the tombstone of a flight the history sweep removes; the schd
	// flusher publishes everything else.
	SchdTopic string `env:"MSGX_TOPIC_SCHD,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.schd"`
	// KafkaPrefix goes before the group's name (kafka.Config.Prefix reads
	// the same variable and validates it).
	KafkaPrefix string `env:"MSGX_KAFKA_PREFIX"`
	// Commit sizes the group commit: MSGX_APPLY_BATCH, MSGX_APPLY_LINGER
	// (docs/design.md#group-commits). The refdata processor reads the same variables.
	Commit commit.Config
}

// Group is the processor's goka group: MSGX_KAFKA_PREFIX + BaseGroup.
func (c Config) Group() goka.Group { return goka.Group(c.KafkaPrefix + BaseGroup) }

// Table is the flights table topic, named after the group.
func (c Config) Table() goka.Table { return goka.GroupTable(c.Group()) }

// LoopTopic is the loop topic of msgx versions before the router derived
// the codeshare transitions (docs/design.md#codeshare): goka named it after
// the group (goka.Loop). Nothing reads or writes it now; an upgrade checks
// that the earlier version left it drained.
func (c Config) LoopTopic() string { return string(c.Group()) + "-loop" }

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.TransitionTopic == "" {
		errs = append(errs, errors.New("MSGX_TOPIC_FLIGHT_TRANSITIONS: empty"))
	}
	if c.MsgTopic == "" || c.SchdTopic == "" {
		errs = append(errs, errors.New("MSGX_TOPIC_MSG and MSGX_TOPIC_SCHD must be set"))
	}
	if c.ScheduleMissing != flight.ScheduleMissingKeep && c.ScheduleMissing != flight.ScheduleMissingClear {
		errs = append(errs, fmt.Errorf("MSGX_SCHEDULE_MISSING=%q: want keep or clear", c.ScheduleMissing))
	}
	if err := c.Commit.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TopicSpecs are the topics the processor writes (created at start-up).
func (c Config) TopicSpecs(partitions int32) []kafka.TopicSpec {
	return []kafka.TopicSpec{
		{Name: c.MsgTopic, Partitions: partitions},
	}
}

// Deps are the processor's collaborators.
type Deps struct {
	// Pool is msgx's PostgreSQL (required).
	Pool *pgxpool.Pool
	// Timeout bounds one write transaction (MSGX_DB_TIMEOUT, positive).
	Timeout time.Duration
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the processor's lines (required; component=flights is
	// added).
	Log *slog.Logger
	// OnMessageDone, if set, runs inside the write transaction that applied
	// a message's last transition: request tracking completes an RQFD there,
	// so the request is DONE exactly when its SCHD RESP is applied.
	OnMessageDone func(ctx context.Context, tx pgx.Tx, t *flight.Transition) error
	// Notify, if set, is called after a group commit that queued events or
	// applied counted transitions: it wakes the outbox publisher and the
	// backfill sweeper.
	Notify func()
}

// Processor is the msgx-flights processor: the applier shell
// (processors/applier) around the application of flight transitions.
type Processor struct {
	*applier.Shell[flight.Transition, *txWrite]
	cfg  Config
	opts flight.Options
	d    Deps
}

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error { return d.shell().Validate("flights") }

// shell are the collaborators the applier shell takes of d.
func (d Deps) shell() applier.Deps {
	return applier.Deps{Pool: d.Pool, Timeout: d.Timeout, Clock: d.Clock, Log: d.Log, Notify: d.Notify}
}

// New checks cfg and d and returns the processor.
func New(cfg Config, d Deps) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	p := &Processor{cfg: cfg, opts: flight.Options{ScheduleMissing: cfg.ScheduleMissing}, d: d}
	// Every transition comes from the router (the history sweep's through
	// it), in inbox order per flight (docs/design.md#codeshare); the table
	// is keyed by FLID.
	p.Shell = applier.New(applier.Spec[flight.Transition, *txWrite]{
		Name: "flights", Group: cfg.Group(), Input: cfg.TransitionTopic, Table: tableCodec{}, Commit: cfg.Commit,
		Attrs: func(t *flight.Transition) []any { return []any{"msg_id", t.MsgID, "flid", t.FLID} },
		Apply: p.apply, Write: p.writeBatch, Wakes: wakes,
	}, d.shell())
	return p, nil
}

// apply applies one transition: everything one message does to one flight
// (its own change, the LINKs of its children, its master's cascade), or the
// history sweep's purge. The sequence, and what a crash at each step leaves
// behind (docs/design.md#group-commits):
//
//  1. Apply the transition to the table's state (pure).
//  2. Hand its PostgreSQL writes to the group commit with goka's deferred
//     commit: the flight row and its collections (or the placeholder's
//     row), a change-history line and an outbox msg event per new version,
//     and the (msg, FLID) applied mark, which makes the message SUCCEEDED
//     with its backfill intent when it is the last of its n.
//  3. SetValue (or Delete), at once: the flight's next transition reads the
//     new state while the write is still queued.
//  4. The group commits the transaction of many transitions, then their
//     offsets, in order.
//
// A crash before 4's commit leaves the table (its topic) possibly ahead of
// PostgreSQL, with the offsets not committed: the transitions are
// delivered again, and the first one the table claims as applied — or, a
// table entry lost with a crash, finds no entry — is checked against
// PostgreSQL's table value of the flight (durable, placeholder): when it is
// not the table's, the transition is applied again to PostgreSQL's, which
// regenerates every lost version, its row, history line and event, and
// sets the table back on track. A crash after 4's commit but before the
// offsets are committed re-delivers transitions PostgreSQL has: Apply sees
// a redelivery and nothing is written but the mark, which is there already.
// The history sweep's transitions carry no message to tell a redelivery
// by: each is checked against PostgreSQL.
func (p *Processor) apply(gctx goka.Context, g *commit.Group[*txWrite], log *slog.Logger, t *flight.Transition) {
	var table *flight.State
	if v := gctx.Value(); v != nil {
		table = v.(*flight.State)
	}
	cur := table
	if !counted(t) || flight.Redelivered(cur, *t) {
		var err error
		if cur, err = p.durable(gctx.Context(), g, log, t, cur); err != nil {
			kafka.Abort(gctx, err) // shutdown: delivered again after restart
		}
	}
	if (cur == nil || cur.IsPlaceholder()) && counted(t) && !t.FirstSeen {
		if err := p.checkKnown(gctx, log, t); err != nil {
			kafka.Abort(gctx, err)
		}
	}
	if cur == nil && counted(t) && !t.FirstSeen {
		// No table entry: PostgreSQL may still hold the placeholder a
		// crash took out of the table before its transaction deleted the
		// row (the drop is delivered again now), which this transition
		// must start from.
		var err error
		if cur, err = p.placeholder(gctx.Context(), g, log, t); err != nil {
			kafka.Abort(gctx, err)
		}
	}
	res, err := flight.Apply(cur, *t, p.opts)
	if err != nil {
		// The router validates everything Apply checks (whole package,
		// DEAD with the reason) and derives every codeshare step from an
		// index that follows the table: a transition Apply rejects is a
		// bug. It is never counted as consumed — its message would end
		// SUCCEEDED without its effect — so the processor halts on it.
		p.Count(func(s *applier.Stats) { s.Rejected++ })
		p.Halt(gctx, log, fmt.Sprintf("transition of message #%d for flight %s rejected (%v)", t.MsgID, t.FLID, err),
			"this is a msgx bug: keep the logs, report it, and replay or skip the message once fixed")
	}
	w, err := p.prepare(log, t, cur, res)
	if err != nil {
		kafka.Abort(gctx, err)
	}
	if w != nil {
		if err := g.Add(gctx.Context(), w, w.size(), gctx.DeferCommit()); err != nil {
			kafka.Abort(gctx, err) // shutdown: delivered again after restart
		}
	}
	switch {
	case res.Purge, res.State == nil && table != nil:
		gctx.Delete()
	case res.State != nil && (!res.Replay || cur != table):
		if w != nil && w.enc != nil {
			// Encoded once, for the row and the table.
			gctx.SetValue(encodedState(w.enc.TableValue()))
		} else {
			gctx.SetValue(res.State)
		}
	}
	p.Count(func(s *applier.Stats) {
		if res.Replay {
			s.Replays++
		} else if res.Applied {
			s.Applied++
		}
		s.Events += int64(len(res.Versions))
	})
	log.Debug("flight transition applied", "outcome", res.Outcome, "state_version", versionOf(res.State), "changed", res.Changed)
}

// durable returns the state t is to be applied to when the table claims t
// applied already (a redelivery), and for the history sweep's transitions,
// whose redelivery no message id tells. Normally that is the table's state
// cur. But the table may be ahead of PostgreSQL: goka writes the table at
// once, the group commit writes PostgreSQL later, and a crash in between
// leaves table versions whose rows, history and events were never
// committed. The sequence that recovers them:
//
//  1. Sync: this process's own queued writes are committed first (a
//     duplicate transition, from a router that re-routed a message after a
//     crash, may follow the original while its write is still queued).
//  2. Read PostgreSQL's table value of the flight (flight_schd.table_state,
//     or its flight_placeholder row).
//  3. When it is not the table's (another version or lastMsgId), return it:
//     t and the transitions redelivered after it apply to the state
//     PostgreSQL committed, as in an undisturbed run, and the table is set
//     back to it. No row: the flight (or placeholder) was created in a lost
//     transaction; it starts from nothing.
//
// Another instance's writes cannot be pending here: goka revokes a
// partition only after every deferred commit of its callbacks completed.
func (p *Processor) durable(ctx context.Context, g *commit.Group[*txWrite], log *slog.Logger, t *flight.Transition, cur *flight.State) (*flight.State, error) {
	if err := g.Sync(ctx); err != nil {
		return nil, err
	}
	var pg *flight.State
	var found bool
	err := p.Read(ctx, log, func(ctx context.Context) (err error) {
		if pg, found, err = sink.TableState(ctx, p.d.Pool, t.FLID); err != nil || found {
			return err
		}
		pg, err = sink.Placeholder(ctx, p.d.Pool, t.FLID)
		found = pg != nil
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case found && pg == nil:
		// A row written before its table value was kept (and not filled
		// in at start-up, sink.Migrate): the table is all there is.
		return cur, nil
	case sameTableValue(pg, cur):
		return cur, nil
	}
	p.Recovered(ctx, log, "flights table ahead of PostgreSQL after a crash: the transition is applied again to PostgreSQL's state (each further flight: DEBUG, counted in msgx_transitions_recovered_total)",
		"table_version", versionOf(cur), "table_last_msg_id", lastMsgOf(cur), "pg_version", versionOf(pg), "pg_last_msg_id", lastMsgOf(pg))
	return pg, nil
}

// placeholder returns the placeholder PostgreSQL holds for t's FLID, which
// the table lacks (nil: none, the common case). The table lost it with a
// crash between a group's table writes and its commit, and t is the
// transition that dropped it, delivered again: t applies to it.
func (p *Processor) placeholder(ctx context.Context, g *commit.Group[*txWrite], log *slog.Logger, t *flight.Transition) (*flight.State, error) {
	var pg *flight.State
	err := p.Read(ctx, log, func(ctx context.Context) (err error) {
		pg, err = sink.Placeholder(ctx, p.d.Pool, t.FLID)
		return err
	})
	if err != nil || pg == nil {
		return nil, err
	}
	// The row may be this process's own, queued and not committed yet
	// when it read it: it is the recovery case only once everything queued
	// is committed and it is still there.
	if err := g.Sync(ctx); err != nil {
		return nil, err
	}
	return p.durable(ctx, g, log, t, nil)
}

// sameTableValue reports whether PostgreSQL's table value pg is the table's
// cur: the same flight version, placeholder or not, and lastMsgId (each
// applied transition moves one of them).
func sameTableValue(pg, cur *flight.State) bool {
	if pg == nil || cur == nil {
		return pg == nil && cur == nil
	}
	return pg.IsPlaceholder() == cur.IsPlaceholder() && pg.StateVersion == cur.StateVersion && pg.LastMsgID == cur.LastMsgID
}

func lastMsgOf(s *flight.State) int64 {
	if s == nil {
		return 0
	}
	return s.LastMsgID
}

// checkKnown halts the processor when the table lacks t's flight but
// PostgreSQL knows it from older messages (docs/design.md#divergence): the
// goka table is not the state PostgreSQL was built from (another Kafka
// cluster, a wiped or re-created table topic), and applying t would answer
// no-match — or create the flight anew — and mark its message applied.
// Every transition of a message is checked, a master's LINK and a child's
// cascade too: they complete messages. A creation the router saw first
// (Transition.FirstSeen) is not: no older message put its flight into
// PostgreSQL, and a backlog of new flights needs no lookup each. The
// history sweep's transitions complete no message; they are checked
// against PostgreSQL's table value instead (durable).
func (p *Processor) checkKnown(gctx goka.Context, log *slog.Logger, t *flight.Transition) error {
	var where string
	err := p.Read(gctx.Context(), log, func(ctx context.Context) (err error) {
		where, err = sink.FlightKnown(ctx, p.d.Pool, t.FLID, t.MsgID)
		return err
	})
	if err != nil || where == "" {
		return err
	}
	p.Count(func(s *applier.Stats) { s.Diverged++ })
	p.Halt(gctx, log, fmt.Sprintf("divergence: flight %s (message #%d) is in PostgreSQL %s but not in the flights table", t.FLID, t.MsgID, where),
		applier.DivergenceAdvice)
	return nil
}

// counted reports whether t is one of its message's n transitions: every
// transition but the history sweep's, which carry no message.
func counted(t *flight.Transition) bool { return t.MsgID > 0 }

// txWrite is one transition's share of a group commit: what prepare
// derived from the transition and its result, immutable, so that a
// transaction that failed can be written again.
type txWrite struct {
	log    *slog.Logger
	t      *flight.Transition
	res    flight.Result
	events []sink.Event
	// enc is the flight's row, encoded in the callback (row() only): the
	// encoding is most of the write's CPU, and the callback runs beside the
	// group commit worker while the worker is serial.
	enc *sink.Encoded
	// unplaced says the FLID's placeholder row goes: the transition turned
	// the placeholder into the flight, or its last child left.
	unplaced bool
	now      time.Time
}

// row reports whether the write stores the flight: a placeholder is table
// bookkeeping (placed), and a purge deletes instead.
func (w *txWrite) row() bool {
	return !w.res.Purge && w.res.State != nil && !w.res.State.IsPlaceholder() && !w.res.Replay
}

// placed reports whether the write stores a placeholder.
func (w *txWrite) placed() bool {
	return w.res.State.IsPlaceholder() && !w.res.Replay
}

// size is what the write holds in memory, roughly: its events carry the
// whole flight.
func (w *txWrite) size() int64 {
	n := int64(1 << 10)
	for _, e := range w.events {
		n += int64(len(e.Value))
	}
	return n
}

// prepare returns the transition's write, nil when it has none (a sweep's
// transition that changed nothing). cur is the state t was applied to.
func (p *Processor) prepare(log *slog.Logger, t *flight.Transition, cur *flight.State, res flight.Result) (*txWrite, error) {
	if !counted(t) && !res.Purge && len(res.Versions) == 0 && (res.State == nil || sameTableValue(res.State, cur)) {
		return nil, nil
	}
	w := &txWrite{log: log, t: t, res: res, now: p.d.Clock.Now()}
	var err error
	if w.row() {
		if w.enc, err = sink.EncodeFlight(res.State); err != nil {
			return nil, err
		}
	}
	if w.events, err = p.events(t, res, w.enc); err != nil {
		return nil, err
	}
	w.unplaced = cur.IsPlaceholder() && !res.Replay && !res.State.IsPlaceholder()
	return w, nil
}

// writeBatch writes the transitions ws, in order, in tx: runs of them in
// one round trip each (writeRun), a purge on its own (it deletes the rows a
// later write of its flight would recreate).
func (p *Processor) writeBatch(ctx context.Context, tx pgx.Tx, ws []*txWrite) error {
	// The group's multi-row statements join arrays with tables that grow
	// from nothing: a generic plan PostgreSQL made while they were small
	// (after five runs of a prepared statement) would scan them whole ever
	// after, as the router's batches once did (sink.LoadBatch). Planned
	// for each group's arguments and the tables' size instead, without JIT.
	if _, err := tx.Exec(ctx, sink.BatchPlanning); err != nil {
		return err
	}
	for len(ws) > 0 {
		n := len(ws)
		for i, w := range ws {
			if w.res.Purge {
				n = max(i, 1)
				break
			}
		}
		if err := p.writeRun(ctx, tx, ws[:n]); err != nil {
			return err
		}
		ws = ws[n:]
	}
	return nil
}

// writeRun writes ws in tx: in one round trip a statement each for all
// their applied marks and history lines, the incremental write of the
// newest state of each flight (docs/design.md#group-commits) and the
// placeholders; then the full writes the incremental ones left to do, in
// one statement, their events in another, a purge, and the completion hook
// of the messages whose last transition was among ws.
func (p *Processor) writeRun(ctx context.Context, tx pgx.Tx, ws []*txWrite) error {
	// The newest table value of each FLID among ws decides what its rows
	// become: a flight row, a placeholder row, or neither.
	newest := make(map[string]int, len(ws))
	// placeholderSeen are the FLIDs a write of the run placed a
	// placeholder of, or made a flight (or nothing) out of one.
	placeholderSeen := map[string]bool{}
	// The versions the run made of each FLID: the first one's predecessor
	// is what an incremental write of the newest builds on, and their
	// changes together are what it rewrites (sink.QueueFlightGroup).
	firstVersion := map[string]int64{}
	changed := map[string][]string{}
	for i, w := range ws {
		if w.row() || w.placed() || w.unplaced {
			newest[w.t.FLID] = i
		}
		if w.placed() || w.unplaced {
			placeholderSeen[w.t.FLID] = true
		}
		for _, v := range w.res.Versions {
			if _, ok := firstVersion[v.FLID]; !ok {
				firstVersion[v.FLID] = v.StateVersion
			}
			if v.Last != nil {
				for _, tag := range v.Last.Changed {
					if !slices.Contains(changed[v.FLID], tag) {
						changed[v.FLID] = append(changed[v.FLID], tag)
					}
				}
			}
		}
	}
	now := ws[len(ws)-1].now
	var events []sink.Event
	var marks []sink.Mark
	var changes []sink.Change
	var flights []sink.GroupFlight
	var placed []*flight.State
	var unplaced []string
	b := &pgx.Batch{}
	for i, w := range ws {
		events = append(events, w.events...)
		if counted(w.t) {
			// What the transition did goes with its mark (msgx trace).
			m := sink.Mark{MsgID: w.t.MsgID, Kind: "flight", Key: w.t.FLID, Applied: sink.Applied{Outcome: w.res.Outcome}}
			if w.res.Applied {
				m.StateVersion = w.res.Versions[len(w.res.Versions)-1].StateVersion
			}
			marks = append(marks, m)
		}
		// Every new version leaves its line in the change history, in the
		// same transaction (docs/design.md#flight-change).
		for _, v := range w.res.Versions {
			changes = append(changes, sink.Change{State: v, Replay: w.t.Replay})
		}
		if newest[w.t.FLID] != i {
			continue
		}
		switch {
		case w.row():
			base := w.res.State.StateVersion
			if first, ok := firstVersion[w.t.FLID]; ok {
				base = first - 1
			}
			flights = append(flights, sink.GroupFlight{Enc: w.enc, Base: base, Changed: changed[w.t.FLID]})
		case w.placed():
			placed = append(placed, w.res.State)
		}
		// The placeholder row goes when the newest value is none, or a
		// flight that a write of the run made out of a placeholder (its
		// row committed before, or placed in this run).
		if !w.placed() && placeholderSeen[w.t.FLID] {
			unplaced = append(unplaced, w.t.FLID)
		}
	}
	finishFlights, err := sink.QueueFlightGroup(ctx, tx, b, flights)
	if err != nil {
		return err
	}
	done := sink.QueueMarksApplied(b, marks, now)
	if err := sink.QueueFlightChanges(b, changes, now); err != nil {
		return err
	}
	if err := sink.QueuePlaceholders(b, placed, unplaced, now); err != nil {
		return err
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	fresh, err := finishFlights(ctx, tx)
	if err != nil {
		return err
	}
	// The events go last, in a statement of their own: whether a version
	// is new (its event queued for the first time, Event.New) is known
	// once the flight rows are written. A flight written from the version
	// before the run's first makes only new versions; any other — a
	// redelivery after a crash that left the table behind PostgreSQL, a
	// full write — leaves its events for the publisher to look up in
	// msg_event.
	for i, e := range events {
		events[i].New = e.StateVersion > 0 && fresh[e.Key]
	}
	if err := sink.QueueEvents(ctx, tx, events, now); err != nil {
		return err
	}
	completed := map[int64]bool{}
	for i := len(ws) - 1; i >= 0; i-- {
		// The hook runs once per completed message, with its last
		// transition among ws.
		w := ws[i]
		if !counted(w.t) || !done.Completed(w.t.MsgID) || completed[w.t.MsgID] {
			continue
		}
		completed[w.t.MsgID] = true
		w.log.Debug("message succeeded: all its transitions are applied")
		if p.d.OnMessageDone != nil {
			if err := p.d.OnMessageDone(ctx, tx, w.t); err != nil {
				return err
			}
		}
	}
	for _, w := range ws {
		if w.res.Purge {
			if err := sink.PurgeFlight(ctx, tx, w.res.State, w.now); err != nil {
				return err
			}
		}
	}
	return nil
}

// wakes reports whether a transaction of ws wakes the outbox publisher and
// the backfill sweeper: it queued events or applied counted transitions.
func wakes(ws []*txWrite) bool {
	for _, w := range ws {
		if len(w.events) > 0 || counted(w.t) {
			return true
		}
	}
	return false
}

// events are what the result announces: the msg event of each new
// version and, for a purged flight, the schd tombstone. enc is the row of
// res.State when it is written: its document is the newest version's.
func (p *Processor) events(t *flight.Transition, res flight.Result, enc *sink.Encoded) ([]sink.Event, error) {
	var out []sink.Event
	for _, v := range res.Versions {
		var doc string
		if enc != nil && v == enc.State {
			doc = enc.Doc()
		} else {
			b, err := v.Doc()
			if err != nil {
				return nil, fmt.Errorf("encoding flight %s v%d: %w", v.FLID, v.StateVersion, err)
			}
			doc = string(b)
		}
		value, err := flight.EncodeEvent(v, doc)
		if err != nil {
			return nil, err
		}
		// Only a first application measures end-to-end latency; a sweep's
		// tombstone is timed from nothing a message did.
		ev := sink.Event{Topic: p.cfg.MsgTopic, Key: t.FLID, Value: value, MsgID: flight.EventMsgID(v), StateVersion: v.StateVersion}
		if counted(t) {
			ev.OriginAt = t.At
		}
		out = append(out, ev)
	}
	if res.Purge {
		out = append(out, sink.Event{Topic: p.cfg.SchdTopic, Key: t.FLID})
	}
	return out, nil
}

func versionOf(s *flight.State) int64 {
	if s == nil {
		return 0
	}
	return s.StateVersion
}
