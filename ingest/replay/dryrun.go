package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/sink"
)

// The dry run: what a replay would move, read without changing anything,
// and its audit row.

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
