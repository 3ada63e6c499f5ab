package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// snapLogCallTimeout bounds AppendSnapLog when the caller's context has no
// shorter deadline.
const snapLogCallTimeout = 10 * time.Second

// SnapLogEntry is one line of schd_snap_log: a schedule package (SCHD DNLD or
// RESP) the router decided.
type SnapLogEntry struct {
	// MsgID is the package's message.
	MsgID int64
	// STYP is the package's subtype (DNLD, RESP).
	STYP string
	// OperationDays are the days the package covers (dates; only year,
	// month and day are used).
	OperationDays []time.Time
	// Flights is the number of flight records in the package.
	Flights int
	// RecvAt is when the message was received (or enqueued).
	RecvAt time.Time
	// ScopeEnd is the last day the package covers. Zero: the latest of
	// OperationDays, or RecvAt's date when there are none (RECS=0).
	ScopeEnd time.Time
}

func dateOnly(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// AppendSnapLog appends entries to schd_snap_log, in one round trip and
// one transaction, outside any business transaction: the log is a trace,
// and losing a line in a crash must not touch state
// (docs/design.md#schedule-merge). The router's batches write their
// packages' lines with their decisions instead (AppendSnapLogTx); this is
// the path of a message decided alone. An incomplete entry writes nothing.
func AppendSnapLog(ctx context.Context, pool *pgxpool.Pool, entries ...SnapLogEntry) error {
	b, err := snapLogBatch(entries)
	if err != nil || b == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, snapLogCallTimeout)
	defer cancel()
	// Sent outside a transaction, the batch is one implicit transaction.
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("appending schd_snap_log for messages %d to %d: %w", entries[0].MsgID, entries[len(entries)-1].MsgID, err)
	}
	return nil
}

// AppendSnapLogTx appends entries inside tx, the router batch's
// transaction, under a savepoint: the lines commit with the decisions they
// trace (a batch decided again after a failure writes them once), and a
// line that cannot be written is rolled back alone, the decisions kept —
// the error says so and the caller logs it. Folding the trace into the
// batch saves the commit of its own transaction per batch (one in eleven
// of a codeshare-heavy backlog's commits, docs/benchmarks.md).
//
// An error of tx itself (the connection lost, the deadline passed) is
// returned as one too, and the batch's commit fails with it: that is the
// caller's transaction error, retried as every other.
func AppendSnapLogTx(ctx context.Context, tx pgx.Tx, entries ...SnapLogEntry) error {
	b, err := snapLogBatch(entries)
	if err != nil || b == nil {
		return err
	}
	// pgx.BeginFunc on a transaction opens a savepoint, rolls it back on
	// an error and releases it otherwise.
	err = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return sp.SendBatch(ctx, b).Close() })
	if err != nil {
		return fmt.Errorf("appending schd_snap_log for messages %d to %d: %w", entries[0].MsgID, entries[len(entries)-1].MsgID, err)
	}
	return nil
}

// snapLogBatch queues one INSERT per entry; nil for no entries.
func snapLogBatch(entries []SnapLogEntry) (*pgx.Batch, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	b := &pgx.Batch{}
	for _, e := range entries {
		if e.MsgID <= 0 || e.STYP == "" || e.RecvAt.IsZero() || e.Flights < 0 {
			return nil, fmt.Errorf("appending schd_snap_log for message %d: incomplete entry (styp %q, recv_at %v, flights %d)",
				e.MsgID, e.STYP, e.RecvAt, e.Flights)
		}
		days := make([]time.Time, len(e.OperationDays))
		scope := e.ScopeEnd
		for i, d := range e.OperationDays {
			days[i] = dateOnly(d)
			if e.ScopeEnd.IsZero() && days[i].After(scope) {
				scope = days[i]
			}
		}
		if scope.IsZero() {
			scope = e.RecvAt
		}
		b.Queue(`INSERT INTO schd_snap_log (msg_id, styp, operation_days, flights, recv_at, scope_end)
		VALUES ($1, $2, $3, $4, $5, $6)`, e.MsgID, e.STYP, days, e.Flights, e.RecvAt, dateOnly(scope))
	}
	return b, nil
}
