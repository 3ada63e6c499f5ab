package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype/zeronull"

	"msgx/sink"
	"msgx/tables/message"
)

// Selection: which messages a selector names, the replayable ones among
// them (the predicates below), in MSG_ID order.

// ClassUnsupported is the replay class of SKIPPED unsupported:…
// messages. It is not an error_class (the router records those as SKIPPED
// with a reason, docs/design.md#decisions), so it selects by reason prefix.
const ClassUnsupported = "UNSUPPORTED"

// unsupportedPrefix is the reason prefix of ClassUnsupported.
const unsupportedPrefix = "unsupported:"

// ErrNotReplayable is returned for a selector that can never select
// anything (class MALFORMED or PROTOCOL).
var ErrNotReplayable = errors.New("not replayable")

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
