package refdata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"

	"msgx/internal/clock"
	"msgx/internal/commit"
	"msgx/internal/kafka"
	"msgx/processors/applier"
	"msgx/sink"
	"msgx/tables/message"
	"msgx/tables/refdata"
)

// BaseGroup is the processor's goka group name before MSGX_KAFKA_PREFIX:
// Config.Group is the group a deployment runs, Config.Table its table keyed
// by RTYPE (msgx-refdata-table without a prefix).
const BaseGroup = "msgx-refdata"

// Config configures the refdata processor.
type Config struct {
	// TransitionTopic is the processor's input, the router's reference
	// transitions (key RTYPE; router.Config.RefdataTopic reads the same
	// variable).
	TransitionTopic string `env:"MSGX_TOPIC_REFDATA_TRANSITIONS,expand" envDefault:"${MSGX_KAFKA_PREFIX}msgx.refdata-transitions"`
	// KafkaPrefix goes before the group's name (kafka.Config.Prefix reads
	// the same variable and validates it).
	KafkaPrefix string `env:"MSGX_KAFKA_PREFIX"`
	// Commit sizes the group commit: MSGX_APPLY_BATCH, MSGX_APPLY_LINGER
	// (docs/design.md#group-commits). The flights processor reads the same variables.
	Commit commit.Config
}

// Group is the processor's goka group: MSGX_KAFKA_PREFIX + BaseGroup.
func (c Config) Group() goka.Group { return goka.Group(c.KafkaPrefix + BaseGroup) }

// Table is the refdata table topic, named after the group.
func (c Config) Table() goka.Table { return goka.GroupTable(c.Group()) }

// Validate checks the configuration; errors name the variable.
func (c Config) Validate() error {
	var errs []error
	if c.TransitionTopic == "" {
		errs = append(errs, errors.New("MSGX_TOPIC_REFDATA_TRANSITIONS: empty"))
	}
	if err := c.Commit.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Deps are the processor's collaborators.
type Deps struct {
	// Pool is msgx's PostgreSQL (required).
	Pool *pgxpool.Pool
	// Timeout bounds one write transaction (MSGX_DB_TIMEOUT, positive).
	Timeout time.Duration
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the processor's lines (required; component=refdata is
	// added).
	Log *slog.Logger
	// OnApplied, if set, runs inside the write transaction after the
	// category was written: outbound request tracking completes a
	// request there, so it closes only once its response's data is applied.
	OnApplied func(ctx context.Context, tx pgx.Tx, t *refdata.Transition) error
	// Notify, if set, is called after each group commit: it wakes the
	// backfill sweeper (the transitions completed messages).
	Notify func()
}

// Processor is the msgx-refdata processor: the applier shell
// (processors/applier) around the application of reference-data
// transitions.
type Processor struct {
	*applier.Shell[refdata.Transition, *txWrite]
	cfg Config
	d   Deps
	// codec is the table's, with the states the callbacks wrote.
	codec tableCodec
}

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error { return d.shell().Validate("refdata") }

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
	p := &Processor{cfg: cfg, d: d, codec: tableCodec{states: newOwnedStates()}}
	// The table is keyed by RTYPE.
	p.Shell = applier.New(applier.Spec[refdata.Transition, *txWrite]{
		Name: "refdata", Group: cfg.Group(), Input: cfg.TransitionTopic, Table: p.codec, Commit: cfg.Commit,
		Attrs: func(t *refdata.Transition) []any { return []any{"msg_id", t.MsgID, "rtype", t.RType} },
		Apply: p.apply, Write: p.writeBatch,
	}, d.shell())
	return p, nil
}

// apply applies one transition: Apply on the table's state (the decoded
// table value, a copy of its own), SetValue at once, and the PostgreSQL
// writes — ref_master rows, the category's table value (ref_table_state),
// the completion hook and the applied mark that completes the message —
// handed to the group commit with goka's deferred commit
// (docs/design.md#group-commits). A crash before the group's commit leaves
// the table possibly ahead of PostgreSQL, with the offsets not committed:
// the first redelivered transition the table claims as applied is checked
// against ref_table_state (durable) and applied again to PostgreSQL's value
// when it is not the table's. A crash after the commit re-delivers
// transitions PostgreSQL has: Apply re-lists the writes still current, and
// the sink's never-backwards guard on (version, last_msg_id) keeps them from
// overwriting anything newer. A replayed message (docs/design.md#replay) is
// applied like a new one.
func (p *Processor) apply(gctx goka.Context, g *commit.Group[*txWrite], log *slog.Logger, t *refdata.Transition) {
	s, _ := gctx.Value().(*refdata.State)
	recovered := false
	if s != nil && message.Applied(s.LastMsgID, s.Replayed, t.Replay, t.MsgID) {
		var err error
		if s, recovered, err = p.durable(gctx.Context(), g, log, t, s); err != nil {
			kafka.Abort(gctx, err) // shutdown: delivered again after restart
		}
	}
	if s == nil {
		p.checkKnown(gctx, log, t)
		s = refdata.NewState(t.RType)
	}
	res, err := refdata.Apply(s, *t)
	if err != nil {
		// The router validates whole packages (refdata.Check, the key-tag
		// index): a transition Apply still rejects is a bug. It is never
		// counted as consumed — its message would end SUCCEEDED without
		// its effect — so the processor halts on it.
		p.Count(func(s *applier.Stats) { s.Rejected++ })
		p.Halt(gctx, log, fmt.Sprintf("transition of message #%d for category %s rejected (%v)", t.MsgID, t.RType, err),
			"this is a msgx bug: keep the logs, report it, and replay or skip the message once fixed")
	}
	// The write holds what it needs of s: the next transition of the
	// category changes s in place (refdata.Apply), maybe before the write
	// runs.
	w := &txWrite{log: log, t: t, s: s.Subset(res.Upserts), res: res, now: p.d.Clock.Now()}
	if !res.Replay || recovered {
		if w.enc, err = sink.EncodeRefState(s); err != nil {
			kafka.Abort(gctx, err)
		}
	}
	if err := g.Add(gctx.Context(), w, w.size(), gctx.DeferCommit()); err != nil {
		kafka.Abort(gctx, err) // shutdown: delivered again after restart
	}
	if w.enc != nil {
		// Encoded once, for ref_table_state and the table; the next
		// transition of the category takes s back with this value.
		v := []byte(w.enc.JSON())
		gctx.SetValue(encodedState(v))
		p.codec.states.keep(s, v)
	}
	p.Count(func(s *applier.Stats) {
		if res.Replay {
			s.Replays++
		} else {
			s.Applied++
		}
	})
}

// durable returns the state t is to be applied to when the table claims t
// applied already (a redelivery), as the flights processor does: first this
// process's queued writes are committed (Sync), then PostgreSQL's table
// value of the category is read (ref_table_state). When it is not the
// table's (another version or lastMsgId), it is returned, recovered set: t
// and the transitions redelivered after it apply to what PostgreSQL
// committed, and the table is set back to it. No row and no records: the
// category was created in a lost transaction and starts empty. No row
// but records: written before migration 0027, the table is all there is.
func (p *Processor) durable(ctx context.Context, g *commit.Group[*txWrite], log *slog.Logger, t *refdata.Transition, cur *refdata.State) (*refdata.State, bool, error) {
	if err := g.Sync(ctx); err != nil {
		return nil, false, err
	}
	var pg *refdata.State
	var found, legacy bool
	err := p.Read(ctx, log, func(ctx context.Context) (err error) {
		pg, found, legacy, err = sink.RefTableState(ctx, p.d.Pool, t.RType)
		return err
	})
	switch {
	case err != nil:
		return nil, false, err
	case !found && legacy:
		return cur, false, nil
	case found && pg.Version == cur.Version && pg.LastMsgID == cur.LastMsgID:
		return cur, false, nil
	}
	var v, m int64
	if pg != nil {
		v, m = pg.Version, pg.LastMsgID
	}
	p.Recovered(ctx, log, "refdata table ahead of PostgreSQL after a crash: the transition is applied again to PostgreSQL's state (each further category: DEBUG, counted in msgx_transitions_recovered_total)",
		"table_version", cur.Version, "table_last_msg_id", cur.LastMsgID, "pg_version", v, "pg_last_msg_id", m)
	if pg == nil {
		return refdata.NewState(t.RType), true, nil
	}
	return pg, true, nil
}

// checkKnown halts the processor when the table lacks t's category but
// ref_master holds records of it from older messages
// (docs/design.md#divergence): the goka table is not the state PostgreSQL
// was built from, and applying t to an empty category would miss the
// deletions a full replace implies and mark the message applied. Records of
// t's own message or later are a crash's redelivery (sink.RefdataKnown).
func (p *Processor) checkKnown(gctx goka.Context, log *slog.Logger, t *refdata.Transition) {
	var known bool
	err := p.Read(gctx.Context(), log, func(ctx context.Context) (err error) {
		known, err = sink.RefdataKnown(ctx, p.d.Pool, t.RType, t.MsgID)
		return err
	})
	if err != nil {
		kafka.Abort(gctx, err) // shutdown: delivered again after restart
	}
	if known {
		p.Count(func(s *applier.Stats) { s.Diverged++ })
		p.Halt(gctx, log, fmt.Sprintf("divergence: category %s (message #%d) is in PostgreSQL ref_master but not in the refdata table", t.RType, t.MsgID),
			applier.DivergenceAdvice)
	}
}

// txWrite is one transition's share of a group commit: the state after
// Apply (a copy of the table value of its own, not touched again), the
// result and, when the table value changed, its encoding.
type txWrite struct {
	log *slog.Logger
	t   *refdata.Transition
	s   *refdata.State
	res refdata.Result
	enc *sink.RefState
	now time.Time
}

// size is what the write holds in memory, roughly: the category's value.
func (w *txWrite) size() int64 {
	n := int64(1 << 10)
	if w.enc != nil {
		n += int64(len(w.enc.JSON()))
	}
	return n
}

// writeBatch writes the transitions ws, in order, in tx: each one's
// category rows and completion hook, then in one round trip every applied
// mark and the newest table value of each category.
func (p *Processor) writeBatch(ctx context.Context, tx pgx.Tx, ws []*txWrite) error {
	marks := make([]sink.Mark, 0, len(ws))
	newest := map[string]int{}
	for i, w := range ws {
		if err := sink.WriteRefData(ctx, tx, w.s, w.res); err != nil {
			return err
		}
		if p.d.OnApplied != nil {
			if err := p.d.OnApplied(ctx, tx, w.t); err != nil {
				return err
			}
		}
		// What the transition did goes with its mark (msgx trace).
		a := sink.Applied{Outcome: "no-change"}
		switch {
		case w.res.Replay:
			a.Outcome = "replay"
		case w.res.Changed:
			a = sink.Applied{Outcome: "applied", StateVersion: w.s.Version}
		}
		marks = append(marks, sink.Mark{MsgID: w.t.MsgID, Kind: "refdata", Key: w.t.RType, Applied: a})
		if w.enc != nil {
			newest[w.t.RType] = i
		}
	}
	states := make([]*sink.RefState, 0, len(newest))
	for i, w := range ws {
		if w.enc != nil && newest[w.t.RType] == i {
			states = append(states, w.enc)
		}
	}
	now := ws[len(ws)-1].now
	b := &pgx.Batch{}
	done := sink.QueueMarksApplied(b, marks, now)
	sink.QueueRefTableStates(b, states, now)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	for _, w := range ws {
		if done.Completed(w.t.MsgID) {
			w.log.Debug("message succeeded: reference data applied", "upserts", len(w.res.Upserts), "deletes", len(w.res.Deletes))
		}
	}
	return nil
}
