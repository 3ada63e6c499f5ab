package router

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lovoo/goka"

	"msgx/ingest"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/need"
	"msgx/internal/retry"
	"msgx/sink"
	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/refdata"
	"msgx/tables/request"
	"msgx/tables/route"
	"msgx/tables/sis"
)

// Entry is the router table's value for one message (key = MSG_ID): the
// decision as the router made it. Completion by the applying processors
// (ROUTED → SUCCEEDED) is recorded in PostgreSQL proc_state.
type Entry struct {
	MsgID        int64      `json:"msgId"`
	State        string     `json:"state"`
	ErrorClass   string     `json:"errorClass,omitempty"`
	Reason       string     `json:"reason,omitempty"`
	Detail       string     `json:"detail,omitempty"`
	IdentityKey  string     `json:"identityKey,omitempty"`
	Type         string     `json:"type,omitempty"`
	STYP         string     `json:"styp,omitempty"`
	Attempts     int        `json:"attempts"`
	NTransitions int        `json:"nTransitions"`
	ReceivedAt   *time.Time `json:"receivedAt"`
	EnqueuedAt   time.Time  `json:"enqueuedAt"`
	DecidedAt    time.Time  `json:"decidedAt"`
}

// Requests is what the router needs from outbound request tracking
// (emitters/outbound implements it).
type Requests interface {
	OpenFor(ctx context.Context, kind request.Kind, rtype string) (*request.ReqTrack, bool, error)
	Accepts(r request.ReqTrack, rtype string, respMsgID int64, respDTTM, now time.Time) error
	Complete(ctx context.Context, tx pgx.Tx, kind request.Kind, rtype string, respMsgID int64, respDTTM, now time.Time) error
	Eror(ctx context.Context, e request.ErorAnswer) (request.Answer, error)
}

// Deps are the router's collaborators.
type Deps struct {
	// Messages is the proc_state store (required).
	Messages *sink.Messages
	// Clock is the source of time (required).
	Clock clock.Clock
	// Log receives the router's lines (required; component=router is
	// added).
	Log *slog.Logger
	// Loc is the airport time zone (required).
	Loc *time.Location
	// Requests is optional: without it EROR answers are not recorded and
	// close nothing, and the RESP guard finds no open request.
	Requests Requests
	// ObserveDecision, if set, receives the time from a message's delivery
	// to its recorded decision (metrics).
	ObserveDecision func(time.Duration)
}

// Stats are the router's running figures.
type Stats struct {
	Decided map[string]int64 // by state
	// Reasons counts SKIPPED and DEAD decisions by reason class
	// (duplicate, ignored, unsupported, no-match, MALFORMED, PROTOCOL, …).
	Reasons map[string]int64
	// Ignored counts ignored messages by rule.
	Ignored map[string]int64
	Retries int64
	// Batches counts the transactions that recorded a batch of
	// decisions; Batched the messages they decided (docs/design.md#router-batches).
	Batches, Batched int64
	Paused           bool
	PausedFor        string
	LastMsgID        int64
}

// Router is the msgx-router processor.
type Router struct {
	cfg Config
	set route.Settings
	d   Deps
	log *slog.Logger

	mu    sync.Mutex
	stats Stats
	// worker is the running processor's batch worker (Purge).
	worker *worker
}

// Validate reports which required collaborators are missing.
func (d Deps) Validate() error {
	return need.Check("router", need.Has(d.Messages != nil, "proc_state store"), need.Clock(d.Clock), need.Log(d.Log),
		need.Has(d.Loc != nil, "airport time zone"))
}

// New checks cfg and d and returns the router.
func New(cfg Config, d Deps) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Router{cfg: cfg, set: cfg.Settings(d.Loc), d: d,
		log: d.Log.With("component", "router"), stats: Stats{Decided: map[string]int64{}, Reasons: map[string]int64{}, Ignored: map[string]int64{}}}, nil
}

// Stats returns a snapshot of the running figures.
func (r *Router) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Decided, s.Reasons, s.Ignored = maps.Clone(r.stats.Decided), maps.Clone(r.stats.Reasons), maps.Clone(r.stats.Ignored)
	return s
}

// graph is the router's goka group graph: input msgx.inbox, decided by w.
// The transitions and the router table (keyed by MSG_ID) are written by
// the batch worker's producer once a batch is recorded in PostgreSQL, not
// by goka: the callback has finished long before (deferred commits).
func (r *Router) graph(w *worker) *goka.GroupGraph {
	return goka.DefineGroup(r.cfg.Group(), goka.Input(goka.Stream(r.cfg.InboxTopic), ingest.Codec{}, w.handle))
}

// Processor is the router ready to run: the goka processor and the batch
// worker with its producer.
type Processor struct {
	p    *goka.Processor
	w    *worker
	prod goka.Producer
}

// Processor builds the router's goka processor (opts carry its Kafka
// clients and storage, kafka.GokaOptions, or a goka tester) and the batch
// worker, which produces with a producer from out (kafka.ProducerBuilder,
// or a tester's ProducerBuilder).
func (r *Router) Processor(brokers []string, out goka.ProducerBuilder, opts ...goka.ProcessorOption) (*Processor, error) {
	prod, err := out(brokers, "msgx-router", goka.DefaultHasher())
	if err != nil {
		return nil, retry.Outage("kafka", fmt.Errorf("creating the router's producer: %w", err))
	}
	w := newWorker(r, prod)
	p, err := goka.NewProcessor(brokers, r.graph(w), opts...)
	if err != nil {
		_ = prod.Close()
		return nil, retry.Outage("kafka", fmt.Errorf("creating router processor: %w", err))
	}
	return &Processor{p: p, w: w, prod: prod}, nil
}

// Run runs the router until ctx ends (Processor, then Processor.Run).
func (r *Router) Run(ctx context.Context, brokers []string, out goka.ProducerBuilder, opts ...goka.ProcessorOption) error {
	p, err := r.Processor(brokers, out, opts...)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// Run runs the processor and the batch worker until ctx ends or either
// fails; it can be called once.
func (p *Processor) Run(ctx context.Context) error {
	defer p.prod.Close()
	// The processor and the worker stop together: whichever ends first
	// cancels the other, and the worker fails the commits of what it did not
	// finish until the processor is gone (goka waits for every deferred
	// commit before it stops).
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	procErr := make(chan error, 1)
	procDone := make(chan struct{})
	go func() {
		defer close(procDone)
		procErr <- kafka.RunProcessor(pctx, p.p, "router")
		cancel()
	}()
	p.w.r.mu.Lock()
	p.w.r.worker = p.w
	p.w.r.mu.Unlock()
	werr := p.w.run(pctx)
	cancel()
	p.w.r.mu.Lock()
	if p.w.r.worker == p.w {
		p.w.r.worker = nil
	}
	p.w.r.mu.Unlock()
	p.w.drain(procDone)
	if perr := <-procErr; perr != nil {
		return perr
	}
	if werr != nil && ctx.Err() == nil {
		return fmt.Errorf("router: %w", werr)
	}
	return nil
}

// outcome is what one message leads to.
type outcome struct {
	entry   Entry
	flights []flight.Transition
	refdata []refdata.Transition
	// noEntry: no router-table entry (a purge is no message).
	noEntry bool
}

// decide returns the message's outcome, retrying the message's own failures
// in place with backoff and waiting out outages. The only error is the
// context's.
func (r *Router) decide(ctx context.Context, rec *ingest.Record, pos sink.InboxPosition) (outcome, error) {
	log := r.log.With("msg_id", rec.MsgID)
	for {
		// Decoding is pure; the row (created PENDING on first delivery)
		// and the lookups the decision needs come back in one round trip.
		p := r.prepare(rec)
		var m sink.Message
		var l message.Lookups
		err := r.available(ctx, func(ctx context.Context) error {
			var err error
			m, l, err = r.d.Messages.Load(ctx, rec.MsgID, pos, rec.ReceivedAt, rec.EnqueuedAt, r.d.Clock.Now(), p.Query())
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return outcome{}, ctx.Err()
			}
			// Not an outage, yet the row cannot be read or written: there is
			// no row to count attempts on, so wait and try again.
			log.Error("loading the message failed; retrying", "err", err)
			if err := clock.Sleep(ctx, r.d.Clock, r.cfg.backoff().Delay(1)); err != nil {
				return outcome{}, err
			}
			continue
		}
		p.Replay = replayGen(rec, m)
		switch m.State {
		case message.StateSucceeded, message.StateSkipped, message.StateDead, message.StateArchived:
			// An ingest duplicate or a re-delivery after a crash: the
			// message is finished, nothing to do.
			log.Debug("message already decided", "state", m.State)
			r.recordEror(ctx, p, rec.MsgID, r.d.Clock.Now())
			return outcome{entry: entryOf(m)}, nil
		case message.StateRouted:
			return r.reroute(log, p, l, m), nil
		}
		// Only INFRA failures are retried. A FAILED row of another class was
		// left by an earlier version, which retried CODEC_ERROR: it is
		// decided again at once (now DEAD), never after sleeping through
		// its recorded backoff or being exhausted by it.
		if m.State == message.StateFailed && deref(m.ErrorClass) == message.ClassInfra {
			if m.Attempts >= r.cfg.MaxAttempts {
				return r.exhaust(ctx, log, m)
			}
			if m.NextAttempt != nil && m.NextAttempt.After(r.d.Clock.Now()) {
				// Restarted during a backoff: keep the head waiting, then
				// look again.
				if err := clock.Sleep(ctx, r.d.Clock, m.NextAttempt.Sub(r.d.Clock.Now())); err != nil {
					return outcome{}, err
				}
				continue
			}
		}
		out, fail, err := r.route(ctx, rec, p, l, m)
		if err != nil {
			return outcome{}, err
		}
		if fail == nil {
			return out, nil
		}
		if err := r.fail(ctx, log, m.MsgID, p.IdentityKey, fail); err != nil {
			return outcome{}, err
		}
	}
}

// route decides a PENDING or FAILED message and records the decision.
func (r *Router) route(ctx context.Context, rec *ingest.Record, p route.Plan, l message.Lookups, m sink.Message) (outcome, *Failure, error) {
	if p.NeedsRequest && r.d.Requests != nil {
		err := r.available(ctx, func(ctx context.Context) error {
			req, ok, err := r.d.Requests.OpenFor(ctx, request.RQFD, request.STYPNone)
			if err == nil && ok {
				l.RequestOpen = r.d.Requests.Accepts(*req, request.STYPNone, rec.MsgID, p.Msg.Meta.DTTM, r.d.Clock.Now()) == nil
			}
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return outcome{}, nil, ctx.Err()
			}
			return outcome{}, &Failure{Class: message.ClassInfra, Err: err}, nil
		}
	}
	v := route.Decide(p, l, m.EnqueuedAt)
	now := r.d.Clock.Now()
	d := decisionOf(rec, p, v, m, now)
	// The decision's write on its own: this is the per-message path (a
	// batch records its decisions with sink.RecordBatch).
	var recorded bool
	err := r.available(ctx, func(ctx context.Context) error {
		var err error
		recorded, err = r.d.Messages.Record(ctx, d)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return outcome{}, nil, ctx.Err()
		}
		return outcome{}, &Failure{Class: message.ClassInfra, Err: err}, nil
	}
	if !recorded {
		return outcome{}, &Failure{Class: message.ClassInfra, Err: fmt.Errorf("message %d changed state while it was being decided", rec.MsgID)}, nil
	}
	r.logDecision(ctx, p, v, d)
	if e, ok := snapEntry(rec.MsgID, p, v, now); ok {
		r.snapLog(ctx, []sink.SnapLogEntry{e})
	}
	r.afterDecision(ctx, p, rec.MsgID, v, now)
	r.count(v.State, rec.MsgID)
	r.countReason(v)
	e := entryFor(d, v, m)
	return outcome{entry: e, flights: v.Flights, refdata: v.Refdata}, nil, nil
}

// replayGen is the replay generation a message read from rec is decided
// under (docs/design.md#replay), given its row m: the generation of a
// finished or ROUTED message is the one recorded with its decision, so a
// re-routed message emits the same transitions; a message still to decide
// takes the generation of the record (where the replay put it on the
// topic: replays are serialised, so generations grow along the topic) or,
// for a copy without one (an ingest duplicate read after a replay reset the
// message), the generation of the replay that reset it.
func replayGen(rec *ingest.Record, m sink.Message) int64 {
	if m.State == message.StatePending || m.State == message.StateFailed {
		if rec.Replay > 0 {
			return rec.Replay
		}
	}
	return m.ReplayGen
}

// prepare is Prepare for an inbox record, which may be an oversize marker.
func (r *Router) prepare(rec *ingest.Record) route.Plan {
	if rec.Oversize > 0 {
		return route.Plan{MsgID: rec.MsgID, Early: &route.Verdict{State: message.StateDead, ErrorClass: message.ClassMalformed,
			Reason: message.ReasonRawTooLarge, Detail: fmt.Sprintf("the inbox row holds %d bytes, more than a Kafka record may (MSGX_KAFKA_MAX_MESSAGE_BYTES)", rec.Oversize)}}
	}
	return route.Prepare(rec.MsgID, rec.Raw, r.set)
}

// afterDecision tells request tracking what a decided message means for
// it. An EROR (SKIPPED as ignored by default) is paired with the request it
// names and its outcome recorded (recordEror); a SCHD RESP with nothing to
// apply completes its request at once, since all of its (no) data is
// applied. Both are idempotent; a failure is logged and the request times
// out instead.
func (r *Router) afterDecision(ctx context.Context, p route.Plan, msgID int64, v route.Verdict, now time.Time) {
	if p.Msg == nil || r.d.Requests == nil {
		return
	}
	var err error
	switch {
	case isEror(p):
		r.recordEror(ctx, p, msgID, now)
	case p.Msg.Kind == sis.KindSchedule && p.Msg.Meta.STYP == "RESP" && v.State == message.StateSucceeded:
		err = pgx.BeginFunc(ctx, r.d.Messages.Pool(), func(tx pgx.Tx) error {
			return r.d.Requests.Complete(ctx, tx, request.RQFD, request.STYPNone, msgID, p.Msg.Meta.DTTM, now)
		})
	}
	if err != nil {
		r.log.Error("request tracking update failed", "msg_id", msgID, "err", err)
	}
}

// isEror reports whether p is an EROR answer (whatever its payload: one
// that does not decode still names a kind in its META).
func isEror(p route.Plan) bool { return p.Msg != nil && strings.EqualFold(p.Msg.Meta.TYPE, "EROR") }

// recordEror hands an EROR to request tracking, which records its outcome
// once. It runs after the decision is recorded and again when a finished
// EROR is delivered again, so that a crash in between loses no pairing.
func (r *Router) recordEror(ctx context.Context, p route.Plan, msgID int64, now time.Time) {
	if r.d.Requests == nil || !isEror(p) {
		return
	}
	e := request.ErorAnswer{MsgID: msgID, MetaSTYP: p.Msg.Meta.STYP, DTTM: p.Msg.Meta.DTTM, At: now}
	if ea := p.Msg.ErrorAnswer; ea != nil {
		e.RefSEQN, e.RefTYPE, e.RefSTYP, e.Code, e.Text = ea.RefSEQN, ea.RefTYPE, ea.RefSTYP, ea.Code, ea.Text
	}
	if _, err := r.d.Requests.Eror(ctx, e); err != nil {
		r.log.Error("recording an EROR answer failed; it is tried again when the message is delivered again", "msg_id", msgID, "err", err)
	}
}

// snapEntry is the trace line (schd_snap_log) of a decided schedule
// package; false for every other message.
func snapEntry(msgID int64, p route.Plan, v route.Verdict, now time.Time) (sink.SnapLogEntry, bool) {
	if p.Msg == nil || p.Msg.Kind != sis.KindSchedule || (p.Msg.Meta.STYP != "DNLD" && p.Msg.Meta.STYP != "RESP") || v.State == message.StateDead {
		return sink.SnapLogEntry{}, false
	}
	days := map[string]time.Time{}
	for _, t := range v.Flights {
		if d, err := time.Parse(time.DateOnly, t.OperationDay); err == nil {
			days[t.OperationDay] = d
		}
	}
	e := sink.SnapLogEntry{MsgID: msgID, STYP: p.Msg.Meta.STYP, Flights: len(p.Msg.Schedule.Flights), RecvAt: now}
	for _, d := range days {
		e.OperationDays = append(e.OperationDays, d)
	}
	return e, true
}

// snapLog appends the trace line of a schedule package decided alone (a
// batch writes its lines in its transaction, worker.record). It is only a
// trace: a failure is logged.
func (r *Router) snapLog(ctx context.Context, entries []sink.SnapLogEntry) {
	if err := sink.AppendSnapLog(ctx, r.d.Messages.Pool(), entries...); err != nil {
		r.log.Warn("schedule trace not written", "messages", len(entries), "err", err)
	}
}

// reroute handles a message found ROUTED: it was decided before a crash or
// is an ingest duplicate. route.Reroute decides it again from its records
// and the plan stored with the decision; all its transitions are emitted
// again, and the applying processors recognise what they already applied.
func (r *Router) reroute(log *slog.Logger, p route.Plan, l message.Lookups, m sink.Message) outcome {
	// A routed SCHD RESP passed the RESP guard when it was decided; its
	// request may be closed by now, which must not change the answer. The
	// same holds for the key-tag check: the index holds this message's key
	// tag by now, or a later message's.
	l.RequestOpen, l.KeyTag = true, ""
	v, err := route.Reroute(p, l, m.EnqueuedAt, m.FlightPlan)
	if err != nil || v.State != message.StateRouted || (m.NTransitions != nil && v.N() != *m.NTransitions) {
		// Only a configuration change between the two deliveries can get
		// here; the recorded decision stands and an operator must look.
		log.Error("re-routing a routed message gives another decision; nothing re-emitted", "state", v.State, "reason", v.Reason, "err", err)
		return outcome{entry: entryOf(m)}
	}
	log.Info("re-emitting the transitions of a routed message", "transitions", v.N())
	return outcome{entry: entryOf(m), flights: v.Flights, refdata: v.Refdata}
}

// Failure is a failure that belongs to the message while it is processed
// (INFRA): it is retried with backoff and counts against its attempts.
type Failure struct {
	Class string
	Err   error
}

func (f *Failure) Error() string { return f.Class + ": " + f.Err.Error() }

// fail records a failure of the message, binding its identity (identityKey,
// "" when none was computed) so that a resend is a duplicate of it even once
// it is exhausted (docs/design.md#identity), and waits its backoff; when the
// attempts are used up the message becomes DEAD(EXHAUSTED) on the next turn.
func (r *Router) fail(ctx context.Context, log *slog.Logger, msgID int64, identityKey string, f *Failure) error {
	var attempts int
	now := r.d.Clock.Now()
	// The wait after this failure is known only once the count is; the
	// stored next_attempt_at uses the tier of the new count.
	err := r.available(ctx, func(ctx context.Context) error {
		m, ok, err := r.d.Messages.Get(ctx, msgID)
		if err != nil {
			return err
		}
		next := 1
		if ok {
			next = m.Attempts + 1
		}
		attempts, err = r.d.Messages.Fail(ctx, msgID, identityKey, f.Class, f.Err.Error(), now.Add(r.cfg.backoff().Delay(next)), now)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The failure could not be counted; still never spin on the head.
		log.Error("recording a failure failed", "err", err, "failure", f)
		return clock.Sleep(ctx, r.d.Clock, r.cfg.backoff().Delay(1))
	}
	r.mu.Lock()
	r.stats.Retries++
	r.mu.Unlock()
	wait := r.cfg.backoff().Delay(attempts)
	log.Warn("message failed; the head is retried in place", "error_class", f.Class, "err", f.Err, "attempt", attempts,
		"max_attempts", r.cfg.MaxAttempts, "retry_in", wait.String())
	if attempts >= r.cfg.MaxAttempts {
		return nil
	}
	return clock.Sleep(ctx, r.d.Clock, wait)
}

// exhaust makes a message whose attempts are used up DEAD(EXHAUSTED).
func (r *Router) exhaust(ctx context.Context, log *slog.Logger, m sink.Message) (outcome, error) {
	now := r.d.Clock.Now()
	if err := r.persist(ctx, func(ctx context.Context) error { return r.d.Messages.Exhaust(ctx, m.MsgID, now) }); err != nil {
		return outcome{}, err
	}
	log.Error("message DEAD: attempts exhausted", "attempts", m.Attempts, "last_error", deref(m.LastError))
	r.count(message.StateDead, m.MsgID)
	r.countReason(route.Verdict{State: message.StateDead, ErrorClass: message.ClassExhausted})
	e := entryOf(m)
	e.State, e.ErrorClass, e.DecidedAt = message.StateDead, message.ClassExhausted, now
	e.Reason = message.ReasonExhausted + deref(m.ErrorClass)
	return outcome{entry: e}, nil
}

// available runs fn, waiting out PostgreSQL outages without counting them
// against the message (I7). It returns fn's last error when that is not an
// outage, or the context's error.
func (r *Router) available(ctx context.Context, fn func(context.Context) error) error {
	pausedAt := time.Time{}
	err := retry.UntilAvailable(ctx, r.d.Clock, outageBackoff, func(err error, wait time.Duration) {
		if pausedAt.IsZero() {
			pausedAt = r.d.Clock.Now()
			r.log.Warn("paused: a dependency is unavailable; the message keeps its attempts", "err", err)
		}
		r.mu.Lock()
		r.stats.Paused, r.stats.PausedFor = true, err.Error()
		r.mu.Unlock()
	}, fn)
	if !pausedAt.IsZero() {
		r.mu.Lock()
		r.stats.Paused, r.stats.PausedFor = false, ""
		r.mu.Unlock()
		if err == nil {
			r.log.Info("resumed after outage", "paused_for", r.d.Clock.Now().Sub(pausedAt).String())
		}
	}
	return err
}

// persist runs fn until it succeeds: for writes that no longer belong to a
// message's attempts (its verdict is decided). Outages pause as in
// available; other errors are logged and retried. It returns only the
// context's error.
func (r *Router) persist(ctx context.Context, fn func(context.Context) error) error {
	return retry.Forever(ctx, r.d.Clock, r.log, func(paused bool, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.stats.Paused = paused
		if err != nil {
			r.stats.PausedFor = err.Error()
		} else {
			r.stats.PausedFor = ""
		}
	}, fn)
}

// outageBackoff paces retries while a dependency is down.
var outageBackoff = retry.Backoff{Tiers: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}}

// countReason counts a SKIPPED or DEAD verdict by the class of its reason.
func (r *Router) countReason(v route.Verdict) {
	if v.State != message.StateSkipped && v.State != message.StateDead {
		return
	}
	class := v.ErrorClass
	if class == "" {
		class = message.ReasonClass(v.Reason)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Reasons[class]++
	if rule, ok := strings.CutPrefix(v.Reason, message.ReasonIgnored); ok {
		r.stats.Ignored[rule]++
	}
}

func (r *Router) count(state string, msgID int64) {
	r.mu.Lock()
	r.stats.Decided[state]++
	r.stats.LastMsgID = msgID
	r.mu.Unlock()
}

func entryOf(m sink.Message) Entry {
	e := Entry{MsgID: m.MsgID, State: m.State, ErrorClass: deref(m.ErrorClass), Reason: deref(m.Reason),
		IdentityKey: deref(m.IdentityKey), Type: deref(m.Type), STYP: deref(m.STYP), Attempts: m.Attempts,
		ReceivedAt: m.ReceivedAt, EnqueuedAt: m.EnqueuedAt, DecidedAt: m.UpdatedAt}
	if m.NTransitions != nil {
		e.NTransitions = *m.NTransitions
	}
	return e
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
