package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lovoo/goka"
	"golang.org/x/sync/semaphore"

	"msgx/ingest"
	"msgx/internal/kafka"
	"msgx/internal/retry"
	"msgx/sink"
	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/refdata"
	"msgx/tables/route"
)

// The batch worker (docs/design.md#router-batches). The goka callback
// decodes a record (Prepare, pure) and queues it with goka's deferred
// commit; the worker decides the queued messages in batches:
//
//  1. gather up to Config.Batch messages (see gather for the linger);
//  2. in one PostgreSQL transaction, create their rows and read what their
//     decisions need (LoadBatch), decide each in MSG_ID order against what
//     the store knew plus the decisions before it in the batch (overlay),
//     and record all the decisions and index entries (RecordBatch);
//  3. hand every transition and router-table entry of the batch to the
//     worker's own producer;
//  4. once all are acknowledged, call the messages' deferred commits, in
//     order. The worker waits for that only after it handed the next
//     batch's records to the producer (or when nothing is queued), so that
//     one batch's produce overlaps the next one's transaction; records
//     still leave in batch order, and commits never pass a batch whose
//     records are not all acknowledged.
//
// Crash windows, step by step:
//   - before the commit of 2: nothing of the batch is recorded and no offset
//     is committed; the records are delivered again and decided afresh.
//   - after the commit of 2, before 3 is acknowledged: the messages are
//     recorded (ROUTED or terminal) but their offsets are not committed; the
//     redelivered records find their rows decided: a terminal one emits
//     nothing new, a ROUTED one is re-routed (the same transitions again,
//     which the applying processors recognise), as for a single message.
//   - after 3, before or during 4: the same, with transitions emitted twice;
//     offsets are committed in order only, so a committed offset never
//     passes a message whose effects are not durable.
//
// A message whose decision is not the batch's plain case is decided on its
// own, by the per-message path (Router.decide), with the batch before it
// finished first: a FAILED message (its backoff and attempts), a SCHD RESP
// under the RESP guard (request tracking is read at decision time) and a
// MSG_ID repeated in the batch (the second copy must see the first one's
// recorded state). A batch whose transaction fails is decided message by
// message the same way: that records a failure on the message that causes
// it, and waits out an outage on the first message (I7).

// item is one inbox record on its way through the worker.
type item struct {
	rec  *ingest.Record
	plan route.Plan
	// pos is the record's place in msgx.inbox, recorded with a fresh row
	// (msgx trace).
	pos sink.InboxPosition
	// done is goka's deferred commit of the record's offset.
	done      func(error)
	delivered time.Time
}

// errStopping fails the deferred commits of messages the worker did not
// finish: they are delivered again after the restart.
var errStopping = errors.New("router stopping before the message was decided; it is decided after the restart")

// queueBytes bounds the memory the inbox records held by the worker's
// queue and batch together take, each weighed by weight: with records of
// up to MSGX_KAFKA_MAX_MESSAGE_BYTES, a batch of large packages is cut
// short rather than held whole in memory.
const queueBytes = 32 << 20

// planFactor is what a queued record takes in memory, its text and its
// decoded plan together, per byte of its text. A SCHD DNLD package of 100
// flights (~34 KB of text) decodes to ~6 times its text (flights, their
// flattened fields, the expanded links; TestPlanFactor measures it). Weighed
// by their text alone, the queue and batch held ~1,000 such packages, ~250
// MB, when a backlog began with a day's schedule download.
const planFactor = 8

// weight is what a record of n bytes of text counts against queueBytes:
// never more than all of it, so that one record of any size still passes.
func weight(n int) int64 {
	return min(int64(n)*planFactor+1, queueBytes)
}

type worker struct {
	r    *Router
	in   chan item
	prod goka.Producer
	// pending is the last batch whose records are produced but not yet all
	// acknowledged, with its messages' commits (flush).
	pending *pendingEmit
	// budget holds the weight of the records queued or in a batch.
	budget *semaphore.Weighted
	// purges are the history sweep's hand-overs (Router.Purge).
	purges chan purgeReq
	// stopped is closed when the worker takes no more messages.
	stopped chan struct{}
}

func newWorker(r *Router, prod goka.Producer) *worker {
	return &worker{r: r, in: make(chan item, r.cfg.batch()), prod: prod, budget: semaphore.NewWeighted(queueBytes),
		purges: make(chan purgeReq), stopped: make(chan struct{})}
}

// handle is the goka callback. It does the pure work (decoding) and queues
// the record for the worker with goka's deferred commit, so goka delivers
// the next record at once while the worker decides; the offset is committed
// only when the worker calls done. A full queue blocks the callback
// (bounded memory), as does a queue whose records weigh queueBytes.
func (w *worker) handle(gctx goka.Context, msg any) {
	rec, ok := msg.(*ingest.Record)
	if !ok {
		kafka.Abort(gctx, fmt.Errorf("router: unexpected input %T", msg))
	}
	size := weight(len(rec.Raw))
	if err := w.budget.Acquire(gctx.Context(), size); err != nil {
		// Stopping: the record is delivered again after the restart.
		kafka.Abort(gctx, err)
	}
	commit := gctx.DeferCommit()
	var once sync.Once
	done := func(err error) {
		once.Do(func() {
			commit(err)
			w.budget.Release(size)
		})
	}
	it := item{rec: rec, plan: w.r.prepare(rec), pos: sink.InboxPosition{Partition: gctx.Partition(), Offset: gctx.Offset()},
		done: done, delivered: w.r.d.Clock.Now()}
	select {
	case w.in <- it:
	case <-w.stopped:
		it.done(errStopping)
	case <-gctx.Context().Done():
		it.done(gctx.Context().Err())
	}
}

// run decides batches until ctx ends or producing fails (the only error
// that stops the worker: the process restarts and redelivery re-decides).
// The caller must drain afterwards.
func (w *worker) run(ctx context.Context) error {
	defer w.failPending()
	// A purge a crash left half done comes before any decision: its
	// flights' index entries are not the flights table's until it is done.
	if err := w.resumePurges(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for {
		// A batch's records are acknowledged while the next one is decided
		// (pending); with nothing queued, the last batch's commits must not
		// wait for the next message.
		var err error
		if len(w.in) == 0 {
			err = w.flush(ctx)
		}
		var b []item
		var req *purgeReq
		if err == nil {
			b, req, err = w.gather(ctx)
		}
		switch {
		case err == nil && req != nil:
			perr := w.purge(ctx, *req)
			req.done <- perr
			if perr != nil && !errors.Is(perr, errStopping) && ctx.Err() == nil {
				// A failed hand-over is the sweep's to report; producing
				// failed, which restarts the router as for a batch.
				err = perr
			}
		case err == nil:
			err = w.process(ctx, b)
		}
		if err != nil {
			for _, it := range b {
				it.done(errStopping) // a second call of a finished done is a no-op
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// drain fails every queued message's commit until the processor stopped
// (procDone), so that goka's shutdown does not wait for commits that never
// come.
func (w *worker) drain(procDone <-chan struct{}) {
	close(w.stopped)
	for {
		select {
		case it := <-w.in:
			it.done(errStopping)
		case <-procDone:
			for {
				select {
				case it := <-w.in:
					it.done(errStopping)
				default:
					return
				}
			}
		}
	}
}

// gather returns the next batch: the first message as it comes, whatever
// is queued behind it, and — only if something was queued behind it, that
// is while a backlog is flowing — what arrives within the linger, up to the
// batch size. A message that finds the queue empty is decided at once. A
// purge that comes before the first message is returned instead.
func (w *worker) gather(ctx context.Context) ([]item, *purgeReq, error) {
	limit := w.r.cfg.batch()
	var b []item
	select {
	case it := <-w.in:
		b = append(b, it)
	case req := <-w.purges:
		return nil, &req, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	b = w.take(b, limit)
	if len(b) == 1 || len(b) >= limit || w.r.cfg.Linger <= 0 {
		return b, nil, nil
	}
	deadline := w.r.d.Clock.After(w.r.cfg.Linger)
	for len(b) < limit {
		select {
		case it := <-w.in:
			b = w.take(append(b, it), limit)
		case <-deadline:
			return b, nil, nil
		case <-ctx.Done():
			return b, nil, ctx.Err()
		}
	}
	return b, nil, nil
}

// take appends what is queued, without waiting, up to limit.
func (w *worker) take(b []item, limit int) []item {
	for len(b) < limit {
		select {
		case it := <-w.in:
			b = append(b, it)
		default:
			return b
		}
	}
	return b
}

// process decides a batch: runs of plain messages through one transaction
// each (fast), the others one by one (single).
func (w *worker) process(ctx context.Context, b []item) error {
	for len(b) > 0 {
		n, alone, err := w.fast(ctx, b)
		if err != nil {
			return err
		}
		b = b[n:]
		if alone && len(b) > 0 {
			if err := w.single(ctx, b[0]); err != nil {
				return err
			}
			b = b[1:]
		}
	}
	return nil
}

// pendingEmit is a batch whose records were handed to the producer: wait
// returns once every one is acknowledged.
type pendingEmit struct {
	wait  func(context.Context) error
	items []item
}

// flush waits for the pending batch's acknowledgements and commits its
// messages' offsets, in order: step 4 of the batch, deferred so that the
// next batch's transaction overlaps the produce (the records are handed to
// the producer in batch order, so the topics keep it).
func (w *worker) flush(ctx context.Context) error {
	p := w.pending
	if p == nil {
		return nil
	}
	w.pending = nil
	if err := p.wait(ctx); err != nil {
		for _, it := range p.items {
			it.done(errStopping)
		}
		return err
	}
	for _, it := range p.items {
		it.done(nil)
	}
	return nil
}

// failPending fails the pending batch's commits when the worker stops.
func (w *worker) failPending() {
	if p := w.pending; p != nil {
		w.pending = nil
		for _, it := range p.items {
			it.done(errStopping)
		}
	}
}

// single decides one message by the per-message path, produces what it
// emits and commits its offset.
func (w *worker) single(ctx context.Context, it item) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	out, err := w.r.decide(ctx, it.rec, it.pos)
	if err != nil {
		return err
	}
	w.r.observe(it)
	if err := w.emit(ctx, []outcome{out}); err != nil {
		return err
	}
	it.done(nil)
	return nil
}

// decided is a message of a batch with its outcome and, when it is decided
// now, the decision to record.
type decided struct {
	it      item
	out     outcome
	p       route.Plan
	v       route.Verdict
	rec     *sink.Decision
	already string // state of a message decided before (logs)
}

// fast decides the longest run of plain messages at the head of b in one
// transaction and finishes them (produce, commit). It returns how many it
// finished and whether b[n] must be decided on its own. The only error is
// one of producing or the context's.
func (w *worker) fast(ctx context.Context, b []item) (int, bool, error) {
	r := w.r
	// Cut before a message that needs request tracking at decision time,
	// and before a MSG_ID met earlier in the run.
	n, alone := len(b), false
	seen := make(map[int64]bool, len(b))
	for i, it := range b {
		if it.plan.NeedsRequest && r.d.Requests != nil {
			n, alone = i, true
			break
		}
		if seen[it.rec.MsgID] {
			n = i
			break
		}
		seen[it.rec.MsgID] = true
	}
	if n == 0 {
		return 0, alone, nil
	}
	now := r.d.Clock.Now()
	ds, err := w.decideRun(ctx, b[:n], now)
	if err != nil {
		if ctx.Err() != nil {
			return 0, false, ctx.Err()
		}
		// Nothing of the run is recorded. Decide it message by message: that
		// path records a failure on the message that causes one, and waits
		// out an outage on the first message without counting it (I7) — also
		// a timeout, which a run too large for MSGX_DB_TIMEOUT would meet
		// again and again if it were retried whole.
		level := slog.LevelError
		if retry.IsOutage(err) {
			level = slog.LevelWarn
		}
		r.log.Log(ctx, level, "deciding a batch failed; deciding its messages one by one", "messages", n, "first_msg_id", b[0].rec.MsgID, "err", err)
		for _, it := range b[:n] {
			if err := w.single(ctx, it); err != nil {
				return 0, false, err
			}
		}
		return n, alone, nil
	}
	if len(ds) < n {
		// decideRun stopped before a FAILED message.
		n, alone = len(ds), true
		if n == 0 {
			return 0, true, nil
		}
	}
	r.mu.Lock()
	r.stats.Batches++
	r.stats.Batched += int64(len(ds))
	r.mu.Unlock()
	outs := make([]outcome, 0, len(ds))
	for _, d := range ds {
		if d.rec != nil {
			r.logDecision(ctx, d.p, d.v, *d.rec)
			r.afterDecision(ctx, d.p, d.rec.MsgID, d.v, now)
			r.count(d.v.State, d.rec.MsgID)
			r.countReason(d.v)
		} else if d.already != "" {
			r.log.Debug("message already decided", "msg_id", d.it.rec.MsgID, "state", d.already)
			r.recordEror(ctx, d.p, d.it.rec.MsgID, now)
		}
		r.observe(d.it)
		outs = append(outs, d.out)
	}
	wait := w.send(outs)
	if err := w.flush(ctx); err != nil {
		return 0, false, err
	}
	items := make([]item, len(ds))
	for i, d := range ds {
		items[i] = d.it
	}
	w.pending = &pendingEmit{wait: wait, items: items}
	return n, alone, nil
}

// decideRun loads, decides and records the run b in one transaction. It
// stops before the first FAILED message (returning fewer outcomes than b):
// that one is decided on its own.
func (w *worker) decideRun(ctx context.Context, b []item, now time.Time) ([]decided, error) {
	r := w.r
	ctx, cancel := context.WithTimeout(ctx, r.d.Messages.Timeout())
	defer cancel()
	deliveries := make([]sink.Delivery, len(b))
	var q sink.BatchQuery
	flids, days, keys, rtypes := map[string]bool{}, map[time.Time]bool{}, map[string]bool{}, map[string]bool{}
	for i, it := range b {
		deliveries[i] = sink.Delivery{MsgID: it.rec.MsgID, ReceivedAt: it.rec.ReceivedAt, EnqueuedAt: it.rec.EnqueuedAt, Inbox: it.pos}
		p := it.plan
		if p.IdentityKey != "" && !keys[p.IdentityKey] {
			keys[p.IdentityKey] = true
			q.IdentityKeys = append(q.IdentityKeys, p.IdentityKey)
		}
		for _, f := range p.FLIDs {
			if !flids[f] {
				flids[f] = true
				q.FLIDs = append(q.FLIDs, f)
			}
		}
		for _, d := range p.Days {
			if !days[d] {
				days[d] = true
				q.Days = append(q.Days, d)
			}
		}
		q.Cascade = append(q.Cascade, p.Deletes...)
		if p.RefType != "" && !rtypes[p.RefType] {
			rtypes[p.RefType] = true
			q.RefTypes = append(q.RefTypes, p.RefType)
		}
	}
	var out []decided
	err := pgx.BeginFunc(ctx, r.d.Messages.Pool(), func(tx pgx.Tx) error {
		rows, fresh, l, err := sink.LoadBatch(ctx, tx, deliveries, now, q)
		if err != nil {
			return err
		}
		ov := route.NewOverlay(l)
		// Sized once: a decision is large, and a batch is hundreds.
		out = make([]decided, 0, len(b))
		recs := make([]sink.Decision, 0, len(b))
		for _, it := range b {
			m := rows[it.rec.MsgID]
			p := it.plan
			p.Replay = replayGen(it.rec, m)
			d := decided{it: it, p: p}
			switch m.State {
			case message.StateSucceeded, message.StateSkipped, message.StateDead, message.StateArchived:
				d.out, d.already = outcome{entry: entryOf(m)}, m.State
			case message.StateRouted:
				d.out = r.reroute(r.log.With("msg_id", m.MsgID), p, ov.Lookups(p), m)
			case message.StatePending:
				d.v = route.Decide(p, ov.Lookups(p), m.EnqueuedAt)
				rec := decisionOf(it.rec, p, d.v, m, now)
				d.rec = &rec
				d.out = outcome{entry: entryFor(rec, d.v, m), flights: d.v.Flights, refdata: d.v.Refdata}
				ov.Record(p.MsgID, d.v)
				recs = append(recs, rec)
			default:
				// FAILED: its attempts and backoff are the per-message path's.
				return w.record(ctx, tx, recs, fresh, ov, out, now)
			}
			out = append(out, d)
		}
		return w.record(ctx, tx, recs, fresh, ov, out, now)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// record writes a run's decisions and the schedule trace of the packages
// among them (schd_snap_log, sink.AppendSnapLogTx) in the batch's
// transaction. A trace line that cannot be written is logged and the
// decisions kept: it is only a trace (docs/design.md#schedule-merge).
func (w *worker) record(ctx context.Context, tx pgx.Tx, recs []sink.Decision, fresh map[int64]sink.Delivery, ov *route.Overlay, ds []decided, now time.Time) error {
	if len(recs) == 0 {
		return nil
	}
	index, keys := ov.Written()
	if err := sink.RecordBatch(ctx, tx, recs, fresh, index, keys, now); err != nil {
		return err
	}
	var snaps []sink.SnapLogEntry
	for _, d := range ds {
		if d.rec == nil {
			continue
		}
		if e, ok := snapEntry(d.rec.MsgID, d.p, d.v, now); ok {
			snaps = append(snaps, e)
		}
	}
	if err := sink.AppendSnapLogTx(ctx, tx, snaps...); err != nil {
		// A lost connection fails the batch's commit next, as it would
		// without the trace.
		w.r.log.Warn("schedule trace not written", "messages", len(snaps), "err", err)
	}
	return nil
}

// emit produces the batch's transitions and router-table entries and waits
// for every acknowledgement.
func (w *worker) emit(ctx context.Context, outs []outcome) error {
	return w.send(outs)(ctx)
}

// send hands the batch's transitions and router-table entries to the
// producer and returns the wait for every acknowledgement. Records of one
// topic keep their order (one producer, one request in flight per
// partition).
func (w *worker) send(outs []outcome) func(context.Context) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // errs: a promise may be kept on another goroutine, or at once
		errs []error
	)
	send := func(topic, key string, v any, codec goka.Codec) {
		data, err := codec.Encode(v)
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("encoding a record for %s: %w", topic, err))
			mu.Unlock()
			return
		}
		wg.Add(1)
		w.prod.Emit(topic, key, data).Then(func(err error) {
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("producing to %s (key %s): %w", topic, key, err))
				mu.Unlock()
			}
			wg.Done()
		})
	}
	cfg := w.r.cfg
	for _, o := range outs {
		for _, t := range o.flights {
			send(cfg.FlightTopic, t.FLID, t, kafka.JSON[flight.Transition]{})
		}
		for _, t := range o.refdata {
			send(cfg.RefdataTopic, t.RType, t, kafka.JSON[refdata.Transition]{})
		}
		if !o.noEntry {
			send(string(cfg.Table()), strconv.FormatInt(o.entry.MsgID, 10), o.entry, kafka.JSON[Entry]{})
		}
	}
	acked := make(chan struct{})
	go func() { wg.Wait(); close(acked) }()
	return func(ctx context.Context) error {
		select {
		case <-acked:
		case <-ctx.Done():
			return ctx.Err()
		}
		mu.Lock()
		defer mu.Unlock()
		return errors.Join(errs...)
	}
}

// logDecision writes the decision's line: routine outcomes are debug lines
// (thousands a minute on a backlog); what an operator may have to look at
// is not.
func (r *Router) logDecision(ctx context.Context, p route.Plan, v route.Verdict, d sink.Decision) {
	level := slog.LevelDebug
	switch v.State {
	case message.StateSkipped:
		level = slog.LevelInfo
	case message.StateDead:
		level = slog.LevelWarn
	}
	if p.Replay != 0 {
		// A replayed message is one an operator is watching.
		level = max(level, slog.LevelInfo)
	}
	r.log.Log(ctx, level, "message decided", "msg_id", d.MsgID, "state", v.State, "reason", v.Reason, "error_class", v.ErrorClass,
		"type", d.Type, "styp", d.STYP, "transitions", v.N(), "replay", p.Replay)
}

// observe reports the time from a message's delivery to its recorded
// decision.
func (r *Router) observe(it item) {
	if r.d.ObserveDecision != nil {
		r.d.ObserveDecision(r.d.Clock.Now().Sub(it.delivered))
	}
}

// decisionOf is the row a verdict on rec writes.
func decisionOf(rec *ingest.Record, p route.Plan, v route.Verdict, m sink.Message, now time.Time) sink.Decision {
	d := sink.Decision{MsgID: rec.MsgID, State: v.State, IdentityKey: v.IdentityKey, ErrorClass: v.ErrorClass,
		Reason: v.Reason, LastError: v.Detail, N: v.N(), Index: v.Index, RefKey: v.RefKey, FlightPlan: v.FlightPlan, Now: now,
		ReplayGen: p.Replay, LoadedGen: m.ReplayGen}
	if p.Msg != nil {
		d.SNDR, d.Type, d.STYP, d.SEQN = p.Msg.Meta.SNDR, p.Msg.Meta.TYPE, p.Msg.Meta.STYP, p.Msg.Meta.SEQN
	}
	return d
}

// entryFor is the router-table entry of a decision recorded on row m.
func entryFor(d sink.Decision, v route.Verdict, m sink.Message) Entry {
	return Entry{MsgID: d.MsgID, State: v.State, ErrorClass: v.ErrorClass, Reason: v.Reason, Detail: v.Detail,
		IdentityKey: v.IdentityKey, Type: d.Type, STYP: d.STYP, Attempts: m.Attempts, NTransitions: v.N(),
		ReceivedAt: m.ReceivedAt, EnqueuedAt: m.EnqueuedAt, DecidedAt: d.Now}
}
