package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype/zeronull"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/ingest"
	"msgx/internal/kafka"
	"msgx/internal/need"
	"msgx/sink"
	"msgx/sink/aodb"
	"msgx/tables/message"
	"msgx/tables/route"
)

// Batch is the most messages one batch of Run resets and
// re-injects. It bounds the time the backfill lock is held (the raw XML Run
// holds in memory is bounded by Deps.MaxBytes as well); a larger selection
// runs in several batches.
const Batch = 500

// ClassUnsupported is the replay class of SKIPPED unsupported:…
// messages. It is not an error_class (the router records those as SKIPPED
// with a reason, docs/design.md#decisions), so it selects by reason prefix.
const ClassUnsupported = "UNSUPPORTED"

// unsupportedPrefix is the reason prefix of ClassUnsupported.
const unsupportedPrefix = "unsupported:"

// ErrNotReplayable is returned for a selector that can never select
// anything (class MALFORMED or PROTOCOL).
var ErrNotReplayable = errors.New("not replayable")

// ErrReplayBusy is returned when another replay is running: replays are
// serialised (sink.LockReplay). Nothing was changed; run it again when the
// other one is done.
var ErrReplayBusy = errors.New("another replay is running")

// ErrBackfillBusy is returned when Run gave up waiting for the backfill
// lock (a sweep pass kept it longer than a pass should take). The batch
// that waited changed nothing (earlier batches of the same call stay done,
// see Result); run the replay again.
var ErrBackfillBusy = errors.New("backfill lock busy")

// replayableSQL is the replay whitelist (docs/design.md#replay) as a condition
// on proc_state p. It is the only definition: the reason-prefix and ID
// selectors, the re-check of the reset and the refusals of explicit IDs use it;
// a class selector is one of its classes (normalized admits no other).
const replayableSQL = `((p.state IN ('FAILED', 'DEAD') AND p.error_class IN ('CODEC_ERROR', 'INFRA', 'EXHAUSTED'))
	OR (p.state = 'SKIPPED' AND starts_with(p.reason, 'unsupported:')))`

// resetByReplaySQL: a PENDING message that a replay reset and the router has
// not decided since. The router creates a message PENDING once and never
// puts it back, so PENDING with a before-image means exactly that.
const resetByReplaySQL = `(p.state = 'PENDING' AND EXISTS (SELECT 1 FROM replay_audit_msg i WHERE i.msg_id = p.msg_id))`

// unproducedSQL: a message reset by a replay whose re-injection was never
// confirmed (its newest before-image is not produced): the crash window.
const unproducedSQL = `(p.state = 'PENDING' AND NOT (SELECT i.produced FROM replay_audit_msg i
	WHERE i.msg_id = p.msg_id ORDER BY i.audit_id DESC LIMIT 1))`

// rowColumns are the proc_state columns of a Row (alias p), in scanRow's
// order.
const rowColumns = `p.msg_id, p.state, p.error_class, p.reason, p.last_error, p.identity_key, p.attempts`

// Selector names the messages to replay. Exactly one field is set.
type Selector struct {
	// Class selects by error class: EXHAUSTED, CODEC_ERROR or INFRA (FAILED
	// and DEAD messages), or UNSUPPORTED (SKIPPED unsupported:…, the same as
	// ReasonPrefix "unsupported:"). MALFORMED and PROTOCOL are refused with
	// ErrNotReplayable.
	Class string
	// ReasonPrefix selects the replayable messages whose reason starts with
	// it, e.g. "unsupported:FLOP-" or "exhausted:CODEC_ERROR" (a DEAD
	// EXHAUSTED message's reason keeps its last class). Messages it matches
	// that are not replayable are not selected.
	ReasonPrefix string
	// IDs selects these messages. Each one that is not replayable is
	// reported as refused, with the reason. A PENDING message that an
	// earlier replay reset counts as replayable, so repeating a replay by
	// IDs after a crash re-injects what the crash left behind.
	IDs []int64
	// PendingReplayed selects every message an earlier replay reset but
	// never confirmed re-injecting (crash or Kafka failure between reset and
	// produce; see the package comment): the recovery run.
	PendingReplayed bool

	// Force also replays the selected messages that the router would
	// decide DEAD again now (their dry-run verdict: the cause is not
	// fixed). Without it Run refuses them, when Deps.Route lets it know.
	// It is not a selector of its own.
	Force bool
}

// Check reports what is wrong with the selector (the error DryRun and Run
// would return before touching anything), nil when it is usable.
func (s Selector) Check() error {
	_, err := s.normalized()
	return err
}

// normalized checks the selector and returns it with Class upper-cased and
// IDs sorted and de-duplicated.
func (s Selector) normalized() (Selector, error) {
	s.Class = strings.ToUpper(strings.TrimSpace(s.Class))
	n := 0
	for _, set := range []bool{s.Class != "", s.ReasonPrefix != "", len(s.IDs) > 0, s.PendingReplayed} {
		if set {
			n++
		}
	}
	if n != 1 {
		return s, errors.New("give exactly one selector: a class, a reason prefix, IDs or pending-replayed")
	}
	switch s.Class {
	case "", message.ClassExhausted, message.ClassCodecError, message.ClassInfra, ClassUnsupported:
	case message.ClassMalformed, message.ClassProtocol:
		return s, fmt.Errorf("replay class %s: %w (the message itself is wrong; deciding it again gives the same verdict)", s.Class, ErrNotReplayable)
	default:
		return s, fmt.Errorf("replay class %q: want EXHAUSTED, CODEC_ERROR, INFRA or UNSUPPORTED", s.Class)
	}
	if len(s.IDs) > 0 {
		ids := slices.Clone(s.IDs)
		slices.Sort(ids)
		s.IDs = slices.Compact(ids)
		if s.IDs[0] <= 0 {
			return s, fmt.Errorf("message ID %d is not a CMINMSGS_ID", s.IDs[0])
		}
	}
	return s, nil
}

// String renders the selector as the audit row records it: "class=EXHAUSTED",
// "reason=unsupported:", "ids=3,5,8" (sorted, without repeats) or
// "pending-replayed".
func (s Selector) String() string {
	switch {
	case s.Class != "":
		return "class=" + strings.ToUpper(strings.TrimSpace(s.Class))
	case s.ReasonPrefix != "":
		return "reason=" + s.ReasonPrefix
	case len(s.IDs) > 0:
		ids := slices.Clone(s.IDs)
		slices.Sort(ids)
		return "ids=" + sink.IDList(slices.Compact(ids))
	case s.PendingReplayed:
		return "pending-replayed"
	}
	return "none"
}

// filter is the selector as a condition on proc_state p; "$ARG" in cond
// stands for arg (nil: no argument).
type filter struct {
	cond string
	arg  any
}

// sql returns the condition with its argument numbered $n, and the
// arguments to append.
func (f filter) sql(n int) (string, []any) {
	if f.arg == nil {
		return f.cond, nil
	}
	return strings.ReplaceAll(f.cond, "$ARG", "$"+strconv.Itoa(n)), []any{f.arg}
}

// filter of a normalized selector. For IDs it is the replayability of a
// named row; the IDs themselves are applied by the caller.
func (s Selector) filter() filter {
	prefix := s.ReasonPrefix
	switch {
	case s.Class == ClassUnsupported:
		prefix = unsupportedPrefix
	case s.Class != "":
		// A DEAD(EXHAUSTED) message keeps its original class in its
		// reason (exhausted:CODEC_ERROR): --class CODEC_ERROR selects it
		// too, not only the FAILED ones still retrying.
		return filter{cond: `(p.state IN ('FAILED', 'DEAD') AND (p.error_class = $ARG OR
			(p.state = 'DEAD' AND p.error_class = 'EXHAUSTED' AND p.reason = 'exhausted:' || $ARG)))`, arg: s.Class}
	case len(s.IDs) > 0:
		return filter{cond: `(` + replayableSQL + ` OR ` + resetByReplaySQL + `)`}
	case s.PendingReplayed:
		return filter{cond: unproducedSQL}
	}
	return filter{cond: `(starts_with(p.reason, $ARG) AND ` + replayableSQL + `)`, arg: prefix}
}

// Row is a message as a replay found it (the dry run lists these; a
// replay returns the before-image of each message it reset). Empty strings
// are NULL columns.
type Row struct {
	MsgID       int64  `json:"msgId"`
	State       string `json:"state"`
	ErrorClass  string `json:"errorClass,omitempty"`
	Reason      string `json:"reason,omitempty"`
	LastError   string `json:"lastError,omitempty"`
	IdentityKey string `json:"identityKey,omitempty"`
	Attempts    int    `json:"attempts"`
}

func scanRow(row pgx.Row, extra ...any) (Row, error) {
	var r Row
	// NULL columns scan as "" (zeronull.Text).
	dest := append([]any{&r.MsgID, &r.State, (*zeronull.Text)(&r.ErrorClass), (*zeronull.Text)(&r.Reason),
		(*zeronull.Text)(&r.LastError), (*zeronull.Text)(&r.IdentityKey), &r.Attempts}, extra...)
	if err := row.Scan(dest...); err != nil {
		return Row{}, err
	}
	return r, nil
}

// Refusal is an explicitly named message that a replay will not move.
type Refusal struct {
	MsgID int64 `json:"msgId"`
	// State is the message's state; empty when msgx does not know it.
	State string `json:"state,omitempty"`
	// Why says why, e.g. "DEAD MALFORMED: never replayable".
	Why string `json:"why"`
	// Verdict is set when the message was refused for the router's
	// verdict on it now (DEAD: it would die again; see Selector.Force).
	Verdict string `json:"verdict,omitempty"`
}

// refusal explains why a row the IDs selector named is not replayable.
func refusal(r Row) Refusal {
	out := Refusal{MsgID: r.MsgID, State: r.State}
	switch r.State {
	case message.StatePending:
		out.Why = "PENDING: not decided yet; the router will decide it"
	case message.StateRouted:
		out.Why = "ROUTED: its transitions are being applied"
	case message.StateSucceeded:
		out.Why = "SUCCEEDED: finished"
	case message.StateArchived:
		out.Why = "ARCHIVED: moved to proc_state_hst"
	case message.StateSkipped:
		out.Why = "SKIPPED " + r.Reason + ": only unsupported:… skips are replayable"
	default:
		switch r.ErrorClass {
		case message.ClassMalformed, message.ClassProtocol:
			out.Why = r.State + " " + r.ErrorClass + ": never replayable"
		default:
			out.Why = r.State + " " + r.ErrorClass + ": not a replayable error class"
		}
	}
	return out
}

func unknownRefusal(id int64) Refusal {
	return Refusal{MsgID: id, Why: "unknown: msgx has no record of this message (the ingest bridge delivers inbox rows by itself)"}
}

// Plan is the dry run: what a replay would move now.
type Plan struct {
	// Selector is the selector as the audit records it.
	Selector string `json:"selector"`
	// Rows are the messages that would move, in MSG_ID order (at most the
	// limit given to DryRun).
	Rows []Row `json:"rows"`
	// Total is how many messages would move (Rows may list fewer).
	Total int `json:"total"`
	// Refused are the explicit IDs that would not move, with the reason.
	Refused []Refusal `json:"refused,omitempty"`
	// Effects are what replaying each of the first MaxExplained Rows would
	// do now (Explain), in the order of Rows: the flights and categories it
	// touches and the newer messages whose changes it overwrites.
	// Unexplained counts the Rows beyond them.
	Effects     []Effect `json:"effects,omitempty"`
	Unexplained int      `json:"unexplained,omitempty"`
}

// DryRun is the dry run: it lists, in MSG_ID order, up to limit
// messages (all when limit <= 0) that Run would move, how many there are,
// and which explicit IDs it would refuse. It changes nothing and does not
// look at the inbox: a message whose inbox row is gone is listed here and
// reported missing by Run. Record the dry run with AuditDryRun.
func DryRun(ctx context.Context, pool *pgxpool.Pool, sel Selector, limit int) (Plan, error) {
	sel, err := sel.normalized()
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Selector: sel.String(), Rows: []Row{}}
	f := sel.filter()
	if len(sel.IDs) > 0 {
		rows, err := namedRows(ctx, pool, f, sel.IDs, sink.OperatorCallTimeout)
		if err != nil {
			return Plan{}, err
		}
		for _, n := range rows {
			switch {
			case !n.found:
				plan.Refused = append(plan.Refused, unknownRefusal(n.row.MsgID))
			case !n.ok:
				plan.Refused = append(plan.Refused, refusal(n.row))
			default:
				plan.Total++
				if limit <= 0 || len(plan.Rows) < limit {
					plan.Rows = append(plan.Rows, n.row)
				}
			}
		}
		return plan, nil
	}
	err = func() error {
		ctx, cancel := context.WithTimeout(ctx, sink.OperatorCallTimeout)
		defer cancel()
		cond, args := f.sql(1)
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM proc_state p WHERE `+cond, args...).Scan(&plan.Total); err != nil {
			return fmt.Errorf("counting messages to replay (%s): %w", plan.Selector, err)
		}
		var lim *int
		if limit > 0 {
			lim = &limit
		}
		rows, err := pool.Query(ctx, `SELECT `+rowColumns+` FROM proc_state p WHERE `+cond+
			` ORDER BY p.msg_id LIMIT $`+strconv.Itoa(len(args)+1), append(args, lim)...)
		if err != nil {
			return fmt.Errorf("listing messages to replay (%s): %w", plan.Selector, err)
		}
		plan.Rows, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) { return scanRow(r) })
		if err != nil {
			return fmt.Errorf("listing messages to replay (%s): %w", plan.Selector, err)
		}
		return nil
	}()
	if err != nil {
		return Plan{}, err
	}
	return plan, nil
}

// named is one explicitly named ID: its row (when found) and whether it is
// replayable.
type named struct {
	row   Row
	found bool
	ok    bool
}

// queryer is a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// namedRows returns every ID of ids (sorted) with its row and whether f
// holds for it, in one query bounded by timeout.
func namedRows(ctx context.Context, q queryer, f filter, ids []int64, timeout time.Duration) ([]named, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cond, args := f.sql(2)
	rows, err := q.Query(ctx, `SELECT `+rowColumns+`, COALESCE(`+cond+`, false) FROM proc_state p
		WHERE p.msg_id = ANY($1) ORDER BY p.msg_id`, append([]any{ids}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("reading %d named messages: %w", len(ids), err)
	}
	found := map[int64]named{}
	_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
		var n named
		var err error
		n.row, err = scanRow(r, &n.ok)
		n.found = true
		found[n.row.MsgID] = n
		return struct{}{}, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %d named messages: %w", len(ids), err)
	}
	out := make([]named, len(ids))
	for i, id := range ids {
		n, ok := found[id]
		if !ok {
			n = named{row: Row{MsgID: id}}
		}
		out[i] = n
	}
	return out, nil
}

// AuditDryRun records a dry run in replay_audit (dry_run = true, count =
// plan.Total, msg_ids = the IDs the plan listed, effects = plan.Effects)
// and returns the audit ID. The CLI calls it after DryRun and Explain so
// that looking, and what the replay would have overwritten, are on record
// too.
func AuditDryRun(ctx context.Context, pool *pgxpool.Pool, plan Plan, who string, now time.Time) (int64, error) {
	if strings.TrimSpace(who) == "" {
		return 0, errors.New("replay audit: who is empty")
	}
	ids := make([]int64, len(plan.Rows))
	for i, r := range plan.Rows {
		ids[i] = r.MsgID
	}
	var effects []byte
	if plan.Effects != nil {
		var err error
		if effects, err = json.Marshal(plan.Effects); err != nil {
			return 0, fmt.Errorf("auditing dry run (%s): %w", plan.Selector, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, sink.OperatorCallTimeout)
	defer cancel()
	var id int64
	err := pool.QueryRow(ctx, `INSERT INTO replay_audit (at, who, selector, dry_run, count, msg_ids, effects)
		VALUES ($1, $2, $3, true, $4, $5, $6::jsonb) RETURNING id`, now, who, plan.Selector, plan.Total, ids, effectsArg(effects)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("auditing dry run (%s): %w", plan.Selector, err)
	}
	return id, nil
}

// effectsArg is a JSON document as a jsonb parameter: NULL when empty.
func effectsArg(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

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

// refuseDead takes out of present the messages whose verdict now is DEAD
// again — replaying them would only make them die once more — and refuses
// them in b, saying why.
func refuseDead(b *batchResult, cands []Row, present []int64, effects map[int64]Effect) []int64 {
	rows := make(map[int64]Row, len(cands))
	for _, c := range cands {
		rows[c.MsgID] = c
	}
	kept := present[:0]
	for _, id := range present {
		// A PENDING message was reset by an earlier replay that could not
		// re-inject it: it must go out now, whatever its verdict.
		e := effects[id]
		if e.Verdict != message.StateDead || rows[id].State == message.StatePending {
			kept = append(kept, id)
			continue
		}
		why := "the router would decide it DEAD again now"
		if e.ErrorClass != "" {
			why += " (" + e.ErrorClass + ": " + orNone(e.Reason) + ")"
		}
		b.refused = append(b.refused, Refusal{MsgID: id, State: rows[id].State, Verdict: e.Verdict,
			Why: why + ": fix the cause first, or force the replay (msgx replay --force)"})
	}
	slices.SortFunc(b.refused, func(x, y Refusal) int { return cmp.Compare(x.MsgID, y.MsgID) })
	return kept
}

func orNone(s string) string {
	if s == "" {
		return "no reason recorded"
	}
	return s
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

// candidates returns up to Batch+1 messages the selector names after
// the MSG_ID after (one more than a batch tells whether another batch
// follows).
func (r *replayer) candidates(ctx context.Context, tx pgx.Tx, after int64) ([]Row, error) {
	var out []Row
	err := r.call(ctx, func(ctx context.Context) error {
		cond, args := r.f.sql(3)
		rows, err := tx.Query(ctx, `SELECT `+rowColumns+` FROM proc_state p
			WHERE p.msg_id > $1 AND `+cond+` ORDER BY p.msg_id LIMIT $2`, append([]any{after, Batch + 1}, args...)...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) { return scanRow(r) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("selecting messages to replay: %w", err)
	}
	return out, nil
}

// reset is the conditional reset of ids, in one statement: lock the rows
// that are still selected and replayable (FOR UPDATE re-evaluates the
// condition on the newest committed version, so a message the router
// decided meanwhile drops out), reset them, delete their transition_applied
// marks and write their before-images. It returns the before-images of the
// rows it reset.
//
// identity_key is deliberately not in the SET list (I5), and neither are
// enqueued_at (the backfill deadline R and the transitions' time are
// measured from the first enqueue) nor received_at. replay_gen becomes the
// replay's generation (its audit id): the router decides the message under
// it (docs/design.md#replay). effects (nil: none) go with the before-images.
func (r *replayer) reset(ctx context.Context, tx pgx.Tx, auditID int64, ids []int64, effects map[int64]Effect) ([]Row, error) {
	var withEffect []int64
	var docs []string
	for _, id := range ids {
		if e, ok := effects[id]; ok {
			doc, err := json.Marshal(e)
			if err != nil {
				return nil, fmt.Errorf("encoding the effect of message %d: %w", id, err)
			}
			withEffect, docs = append(withEffect, id), append(docs, string(doc))
		}
	}
	var out []Row
	err := r.call(ctx, func(ctx context.Context) error {
		cond, args := r.f.sql(6)
		rows, err := tx.Query(ctx, `WITH old AS (
				SELECT `+rowColumns+` FROM proc_state p
				WHERE p.msg_id = ANY($1) AND `+cond+`
				FOR UPDATE
			), reset AS (
				UPDATE proc_state p SET state = 'PENDING', attempts = 0, next_attempt_at = NULL,
					error_class = NULL, reason = NULL, last_error = NULL,
					n_transitions = NULL, n_applied = 0, routed_at = NULL, decided_at = NULL, updated_at = $2,
					backfill_at = NULL, backfill_next_at = NULL, backfill_attempts = 0, backfill_error = NULL,
					backfill_abandoned_at = NULL, backfill_abandoned_reason = NULL, replay_gen = $3
				FROM old WHERE p.msg_id = old.msg_id
			), applied AS (
				DELETE FROM transition_applied t USING old WHERE t.msg_id = old.msg_id
			), owed AS (
				DELETE FROM backfill_owed o USING old WHERE o.msg_id = old.msg_id
			), image AS (
				INSERT INTO replay_audit_msg (audit_id, msg_id, state, error_class, reason, last_error, attempts, identity_key, effect)
				SELECT $3::bigint, old.msg_id, state, error_class, reason, last_error, attempts, identity_key, e.effect::jsonb
				FROM old LEFT JOIN unnest($4::bigint[], $5::text[]) AS e(msg_id, effect) ON e.msg_id = old.msg_id
			)
			SELECT `+rowColumns+` FROM old p ORDER BY p.msg_id`, append([]any{ids, r.now, auditID, withEffect, docs}, args...)...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) { return scanRow(r) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("resetting %d messages for replay: %w", len(ids), err)
	}
	return out, nil
}

// commit appends the batch's resets to the audit row and commits.
func (r *replayer) commit(ctx context.Context, tx pgx.Tx, b *batchResult) error {
	ids := make([]int64, len(b.reset))
	for i, row := range b.reset {
		ids[i] = row.MsgID
	}
	if err := r.call(ctx, func(ctx context.Context) error {
		_, err := tx.Exec(ctx, `UPDATE replay_audit SET count = count + $2, msg_ids = msg_ids || $3::bigint[] WHERE id = $1`,
			b.auditID, len(ids), ids)
		return err
	}); err != nil {
		return fmt.Errorf("updating replay audit row %d: %w", b.auditID, err)
	}
	if err := r.call(ctx, tx.Commit); err != nil {
		// Whether or not the commit reached the server, re-running is
		// safe: either nothing was reset, or the resets are PENDING with
		// unproduced before-images (the crash window).
		return fmt.Errorf("committing the replay of %d messages: %w", len(ids), err)
	}
	return nil
}

// reinject runs steps 2 and 3 of the package comment for a committed batch.
func (r *replayer) reinject(ctx context.Context, b batchResult) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("replay interrupted before re-injecting %d messages: %w", len(b.reset), err)
	}
	msgs := make([]*sarama.ProducerMessage, len(b.reset))
	ids := make([]int64, len(b.reset))
	for i, row := range b.reset {
		m, _, err := ingest.ReplayMessage(b.inbox[row.MsgID], r.d.Topic, b.auditID, r.now, r.d.Kafka.MaxMessageBytes)
		if err != nil {
			return err
		}
		msgs[i], ids[i] = m, row.MsgID
	}
	// One batch on one partition through an idempotent producer with one
	// request in flight: the records land in MSG_ID order. On a failure
	// none of the batch counts as produced, even records Kafka did take:
	// producing those again is harmless, losing one is not.
	if err := r.prod.SendMessages(msgs); err != nil {
		return fmt.Errorf("producing %d replayed messages to %s: %w", len(msgs), r.d.Topic, err)
	}
	// The producer filled in where each record landed (msgx trace shows it).
	parts, offsets := make([]int32, len(msgs)), make([]int64, len(msgs))
	for i, m := range msgs {
		parts[i], offsets[i] = m.Partition, m.Offset
	}
	err := r.call(ctx, func(ctx context.Context) error {
		_, err := r.d.PG.Exec(ctx, `UPDATE replay_audit_msg a SET produced = true, inbox_partition = p.part, inbox_offset = p.off
			FROM unnest($2::bigint[], $3::int[], $4::bigint[]) AS p(id, part, off)
			WHERE a.audit_id = $1 AND a.msg_id = p.id`, b.auditID, ids, parts, offsets)
		return err
	})
	if err != nil {
		// The records are on the topic; only the confirmation is lost. A
		// pending-replayed run would produce them once more (harmless), so
		// this is not a failure of the replay.
		r.log.Warn("replayed messages re-injected, but confirming that failed; a pending-replayed run would re-inject them again",
			"audit_id", b.auditID, "msg_ids", ids, "err", err)
		return nil
	}
	r.log.Info("replayed messages re-injected", "audit_id", b.auditID, "count", len(ids), "first_msg_id", ids[0], "last_msg_id", ids[len(ids)-1])
	return nil
}

// readInbox reads the inbox rows of ids; IDs without a row are absent from
// the result.
func (r *replayer) readInbox(ctx context.Context, ids []int64) (map[int64]aodb.Row, error) {
	rows, err := r.d.Inbox.ReadIDs(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the inbox rows to replay: %w", err)
	}
	out := make(map[int64]aodb.Row, len(rows))
	for _, row := range rows {
		out[row.ID] = row
	}
	return out, nil
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

// newReplayProducer builds the producer (docs/design.md#kafka-settings) and
// checks the topic before anything is reset: it must exist with one partition
// (global FIFO). Automatic topic creation is off — a msgx.inbox created by a
// produce would get the broker's defaults (partitions, retention) instead of
// those of the source of truth.
func newReplayProducer(d Deps) (sarama.SyncProducer, func(), error) {
	sc := d.Kafka.Sarama("msgx-replay")
	if err := kafka.CheckD3(sc); err != nil {
		return nil, nil, err
	}
	sc.Metadata.AllowAutoTopicCreation = false
	client, err := sarama.NewClient(d.Brokers, sc)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to kafka: %w", err)
	}
	parts, err := client.Partitions(d.Topic)
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("topic %s: %w", d.Topic, err)
	}
	if len(parts) != 1 {
		client.Close()
		return nil, nil, fmt.Errorf("topic %s has %d partitions; msgx.inbox must have exactly 1", d.Topic, len(parts))
	}
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("creating the replay producer: %w", err)
	}
	return prod, func() {
		_ = prod.Close()
		_ = client.Close()
	}, nil
}
