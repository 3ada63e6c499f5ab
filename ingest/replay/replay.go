package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/ingest"
	"msgx/internal/kafka"
	"msgx/internal/need"
	"msgx/sink"
	"msgx/sink/aodb"
	"msgx/tables/route"
)

// Batch is the most messages one batch of Run resets and
// re-injects. It bounds the time the backfill lock is held (the raw XML Run
// holds in memory is bounded by Deps.MaxBytes as well); a larger selection
// runs in several batches.
const Batch = 500

// ErrReplayBusy is returned when another replay is running: replays are
// serialised (sink.LockReplay). Nothing was changed; run it again when the
// other one is done.
var ErrReplayBusy = errors.New("another replay is running")

// ErrBackfillBusy is returned when Run gave up waiting for the backfill
// lock (a sweep pass kept it longer than a pass should take). The batch
// that waited changed nothing (earlier batches of the same call stay done,
// see Result); run the replay again.
var ErrBackfillBusy = errors.New("backfill lock busy")

// Deps is what Run works with.
type Deps struct {
	// PG is msgx's PostgreSQL (proc_state, replay_audit).
	PG *pgxpool.Pool
	// Inbox is the shared inbox; Run only reads it (shadow mode is fine).
	Inbox *aodb.Tables
	// Brokers and Kafka reach the cluster; the producer must have the settings
	// of docs/design.md#kafka-settings (CheckD3).
	Brokers []string
	Kafka   kafka.Config
	// Topic is msgx.inbox (MSGX_TOPIC_INBOX). It must exist with one
	// partition; Run never creates it.
	Topic string
	// Timeout bounds every single database call (MSGX_DB_TIMEOUT); the wait
	// for the backfill lock is bounded by lockWait(Timeout).
	Timeout time.Duration
	// Log receives the replay's lines, with component=replay
	// (slog.Default() when nil).
	Log *slog.Logger
	// MaxBytes bounds the inbox text one batch holds in memory, in bytes
	// (MSGX_CLAIM_MAX_BYTES); a batch always takes at least one message.
	// 0 means ingest.DefaultClaimMaxBytes.
	MaxBytes int
	// Route are the router's settings (its Config.Settings): a message's
	// effect is the router's decision on it now (route.Decide) and the
	// flight tags it touches under Route.Flight (MSGX_SCHEDULE_MISSING).
	// Explain needs them. Optional for Run: with them, each before-image
	// also records the message's Effect, worked out just before the reset
	// (replay_audit_msg.effect).
	Route *route.Settings
}

func (d Deps) maxBytes() int {
	if d.MaxBytes <= 0 {
		return ingest.DefaultClaimMaxBytes
	}
	return d.MaxBytes
}

// validate checks what Run needs (validateExplain: what a dry run's
// explanation needs).
func (d Deps) validate() error {
	var topic error
	if d.Topic == "" {
		topic = errors.New("MSGX_TOPIC_INBOX: empty")
	}
	return need.Check("replay", append(d.inboxNeeds(), need.Has(len(d.Brokers) > 0, "Kafka brokers to re-inject into"),
		need.Valid(topic))...)
}

// inboxNeeds are what every replay step needs: PostgreSQL, the MySQL inbox
// it reads raw messages from, and the call timeout.
func (d Deps) inboxNeeds() []need.Need {
	return []need.Need{need.Pool(d.PG), need.Has(d.Inbox != nil, "MySQL connection (the raw messages are read from the inbox)"),
		need.Timeout(d.Timeout)}
}

// lockWait bounds the wait for the backfill lock. A pass holds it for at
// most four calls each bounded by the same MSGX_DB_TIMEOUT (scan, inbox
// write, recording, commit; see Backfill.sweep), so a replay that waited
// longer is behind something that is not a pass, and gives up.
func lockWait(timeout time.Duration) time.Duration { return 4 * timeout }

// Result is what Run did.
type Result struct {
	// AuditID is the replay's replay_audit row (0 when it failed before
	// its first commit).
	AuditID int64 `json:"auditId"`
	// Selector is the selector as the audit records it.
	Selector string `json:"selector"`
	// Replayed are the messages reset and re-injected, as they were before
	// the reset, in MSG_ID order.
	Replayed []Row `json:"replayed"`
	// Refused are the explicit IDs not replayed, with the reason.
	Refused []Refusal `json:"refused,omitempty"`
	// Missing are selected messages whose inbox row no longer exists; they
	// were left as they were.
	Missing []int64 `json:"missing,omitempty"`
	// Changed are selected messages that were no longer replayable when the
	// reset re-checked them (the router decided them meanwhile); left alone.
	Changed []int64 `json:"changed,omitempty"`
	// Unproduced are messages reset but whose re-injection failed: they are
	// PENDING and nothing decides them until the replay is run again (same
	// IDs, or PendingReplayed). Set only with an error.
	Unproduced []int64 `json:"unproduced,omitempty"`
}

// Run resets the messages sel names and re-injects them into msgx.inbox
// (see the package comment for the steps, the crash windows and concurrency).
// who is recorded in the audit row; now is the time of the audit row, of
// updated_at and of the records' EnqueuedAt.
//
// It works in batches of at most Batch messages in MSG_ID order; each
// batch is committed and re-injected before the next starts. On error the
// result holds what was done until then; Unproduced lists messages the
// failed batch reset but could not re-inject. The audit row exists from the
// first batch on, even when nothing was selected.
func Run(ctx context.Context, d Deps, sel Selector, who string, now time.Time) (Result, error) {
	sel, err := sel.normalized()
	if err != nil {
		return Result{}, err
	}
	if err := d.validate(); err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(who) == "" {
		return Result{}, errors.New("who is empty (the audit records who replayed)")
	}
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	r := &replayer{d: d, sel: sel, f: sel.filter(), who: who, now: now,
		log: log.With("component", "replay", "selector", sel.String(), "who", who)}
	res := Result{Selector: sel.String(), Replayed: []Row{}}

	// One replay at a time, from its first batch to its last re-injection:
	// its generation (the audit row's id, allocated under the lock) must
	// be above every generation already on msgx.inbox and below every
	// later one, or a transition of the later replay could be taken for a
	// redelivery (docs/design.md#replay).
	release, ok, err := sink.TryPoolLock(ctx, d.PG, sink.LockReplay, d.Timeout)
	if err != nil {
		return res, fmt.Errorf("taking the replay lock: %w", err)
	}
	if !ok {
		return res, fmt.Errorf("%w (it holds %s); nothing was changed, run the replay again once it is done", ErrReplayBusy, sink.LockReplay)
	}
	defer release()

	// Kafka first: a replay that cannot produce must not reset anything.
	prod, closeProd, err := newReplayProducer(d)
	if err != nil {
		return res, err
	}
	defer closeProd()
	r.prod = prod

	var after int64 // keyset: the last MSG_ID a batch looked at
	for {
		var ids []int64
		if len(sel.IDs) > 0 {
			rest := sel.IDs[sort.Search(len(sel.IDs), func(i int) bool { return sel.IDs[i] > after }):]
			if len(rest) == 0 {
				break
			}
			ids = rest[:min(Batch, len(rest))]
		}
		b, err := r.batch(ctx, res.AuditID, ids, after)
		if err != nil {
			return res, err
		}
		res.AuditID = b.auditID
		res.Refused = append(res.Refused, b.refused...)
		res.Missing = append(res.Missing, b.missing...)
		res.Changed = append(res.Changed, b.changed...)
		r.logBatch(b)
		if len(b.reset) > 0 {
			if err := r.reinject(ctx, b); err != nil {
				for _, row := range b.reset {
					res.Unproduced = append(res.Unproduced, row.MsgID)
				}
				r.log.Error("re-injecting replayed messages failed: they are PENDING and nothing decides them until "+
					"the replay is run again (same IDs, or pending-replayed)", "audit_id", b.auditID, "msg_ids", res.Unproduced, "err", err)
				return res, err
			}
			res.Replayed = append(res.Replayed, b.reset...)
		}
		if len(sel.IDs) == 0 && !b.more {
			break
		}
		after = b.last
	}
	r.log.Info("replay done", "audit_id", res.AuditID, "replayed", len(res.Replayed), "refused", len(res.Refused),
		"missing", len(res.Missing), "changed", len(res.Changed))
	return res, nil
}

// replayer is one Run call.
type replayer struct {
	d    Deps
	sel  Selector
	f    filter
	who  string
	now  time.Time
	log  *slog.Logger
	prod sarama.SyncProducer
}

// batchResult is one committed batch.
type batchResult struct {
	auditID int64
	reset   []Row // before-images, MSG_ID order
	inbox   map[int64]aodb.Row
	refused []Refusal
	missing []int64
	changed []int64
	more    bool  // more candidates after last (keyset selectors)
	last    int64 // the last candidate's MSG_ID
}

// batch runs step 1 of the package comment for the candidates after `after`
// (keyset selectors) or among ids (IDs selector). auditID 0 creates the
// audit row.
func (r *replayer) batch(ctx context.Context, auditID int64, ids []int64, after int64) (batchResult, error) {
	b := batchResult{auditID: auditID}
	tx, err := r.begin(ctx)
	if err != nil {
		return b, err
	}
	defer r.rollback(tx)
	if err := r.lock(ctx, tx); err != nil {
		return b, err
	}
	if b.auditID == 0 {
		if err := r.call(ctx, func(ctx context.Context) error {
			return tx.QueryRow(ctx, `INSERT INTO replay_audit (at, who, selector, dry_run) VALUES ($1, $2, $3, false) RETURNING id`,
				r.now, r.who, r.sel.String()).Scan(&b.auditID)
		}); err != nil {
			return b, fmt.Errorf("writing the replay audit row: %w", err)
		}
	}

	// Candidates, read after the lock so that a pass that just finished is
	// seen.
	var cands []Row
	if ids != nil {
		rows, err := namedRows(ctx, tx, r.f, ids, r.d.Timeout)
		if err != nil {
			return b, err
		}
		for _, n := range rows {
			switch {
			case !n.found:
				b.refused = append(b.refused, unknownRefusal(n.row.MsgID))
			case !n.ok:
				b.refused = append(b.refused, refusal(n.row))
			default:
				cands = append(cands, n.row)
			}
		}
		b.last = ids[len(ids)-1]
	} else {
		cands, err = r.candidates(ctx, tx, after)
		if err != nil {
			return b, err
		}
		if len(cands) > Batch {
			cands, b.more = cands[:Batch], true
		}
		if len(cands) > 0 {
			b.last = cands[len(cands)-1].MsgID
		}
	}
	if len(cands) == 0 {
		return b, r.commit(ctx, tx, &b)
	}

	// The inbox rows, before anything is reset: a message whose row is
	// gone cannot be re-injected, so it must not be reset either. The text
	// is kept until it is produced, so a purge after this read cannot lose
	// a reset message. How much text that is stays bounded: the batch ends
	// before the message that would take it over maxBytes (the rest goes to
	// the next batch).
	cands, err = r.fit(ctx, &b, cands)
	if err != nil {
		return b, err
	}
	want := make([]int64, len(cands))
	for i, c := range cands {
		want[i] = c.MsgID
	}
	b.inbox, err = r.readInbox(ctx, want)
	if err != nil {
		return b, err
	}
	present := make([]int64, 0, len(want))
	for _, id := range want {
		if _, ok := b.inbox[id]; ok {
			present = append(present, id)
		} else {
			b.missing = append(b.missing, id)
		}
	}
	var effects map[int64]Effect
	if len(present) > 0 && r.d.Route != nil {
		// What each message will overwrite, recorded with its before-image
		// (read before the reset: a reset message decides nothing yet).
		effects = make(map[int64]Effect, len(present))
		if err := effectsOf(ctx, r.d, tx, present, b.inbox, effects); err != nil {
			return b, err
		}
		if !r.sel.Force {
			present = refuseDead(&b, cands, present, effects)
		}
	}
	if len(present) > 0 {
		b.reset, err = r.reset(ctx, tx, b.auditID, present, effects)
		if err != nil {
			return b, err
		}
		done := make(map[int64]bool, len(b.reset))
		for _, row := range b.reset {
			done[row.MsgID] = true
		}
		for _, id := range present {
			if !done[id] {
				b.changed = append(b.changed, id)
			}
		}
	}
	return b, r.commit(ctx, tx, &b)
}

// fit shortens cands (MSG_ID order) to the messages whose inbox texts fit
// in the byte bound together, at least one. What it cuts off is left to the
// next batch: b.last becomes the last message kept, b.more is set, and
// refusals of named IDs after it are dropped (the next batch names them
// again).
func (r *replayer) fit(ctx context.Context, b *batchResult, cands []Row) ([]Row, error) {
	ids := make([]int64, len(cands))
	for i, c := range cands {
		ids[i] = c.MsgID
	}
	sizes, err := r.d.Inbox.Sizes(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the sizes of the inbox rows to replay: %w", err)
	}
	n := aodb.FitBytes(len(cands), func(i int) int { return sizes[ids[i]] }, r.d.maxBytes())
	if n == len(cands) {
		return cands, nil
	}
	b.last, b.more = ids[n-1], true
	b.refused = slices.DeleteFunc(b.refused, func(f Refusal) bool { return f.MsgID > b.last })
	return cands[:n], nil
}

func (r *replayer) begin(ctx context.Context) (pgx.Tx, error) {
	var tx pgx.Tx
	if err := r.call(ctx, func(ctx context.Context) error {
		var err error
		tx, err = r.d.PG.Begin(ctx)
		return err
	}); err != nil {
		return nil, fmt.Errorf("starting replay transaction: %w", err)
	}
	return tx, nil
}

func (r *replayer) rollback(tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.Background(), r.d.Timeout)
	defer cancel()
	_ = tx.Rollback(ctx) // no-op after Commit
}

// lock takes the backfill lock for the transaction, waiting at most
// lockWait for a running pass.
func (r *replayer) lock(ctx context.Context, tx pgx.Tx) error {
	wait := lockWait(r.d.Timeout)
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := sink.XactLock(lctx, tx, sink.LockBackfill)
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && lctx.Err() != nil {
		return fmt.Errorf("%w: a backfill pass held it for more than %s; nothing was changed, run the replay again: %w",
			ErrBackfillBusy, wait, err)
	}
	return err
}

// call runs one database call under its own MSGX_DB_TIMEOUT.
func (r *replayer) call(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.d.Timeout)
	defer cancel()
	return fn(ctx)
}

func (r *replayer) logBatch(b batchResult) {
	for _, f := range b.refused {
		r.log.Info("message not replayed", "msg_id", f.MsgID, "state", f.State, "why", f.Why)
	}
	for _, id := range b.missing {
		r.log.Warn("inbox row missing: message not replayed and left as it is", "msg_id", id)
	}
	for _, id := range b.changed {
		r.log.Info("message changed while the replay ran; left as it is", "msg_id", id)
	}
	for _, row := range b.reset {
		r.log.Info("message reset for replay", "msg_id", row.MsgID, "audit_id", b.auditID, "was_state", row.State,
			"was_error_class", row.ErrorClass, "was_reason", row.Reason, "last_error", row.LastError, "identity_key", row.IdentityKey)
	}
}
