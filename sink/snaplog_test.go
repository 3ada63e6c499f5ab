package sink_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/sink"
)

// A trace line PostgreSQL refuses is rolled back alone: the transaction it
// was written in (the router batch's, with its decisions) goes on and
// commits what it wrote before and after.
func TestAppendSnapLogTxRollsBackOnlyItsLines(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	day := time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := sink.AppendSnapLogTx(ctx, tx, sink.SnapLogEntry{MsgID: 1, STYP: "DNLD", OperationDays: []time.Time{day}, Flights: 3, RecvAt: at}); err != nil {
			t.Fatalf("first line: %v", err)
		}
		// A NUL byte in text: PostgreSQL refuses the statement, which
		// aborts the transaction unless its savepoint is rolled back.
		err := sink.AppendSnapLogTx(ctx, tx, sink.SnapLogEntry{MsgID: 2, STYP: "DN\x00LD", Flights: 1, RecvAt: at},
			sink.SnapLogEntry{MsgID: 3, STYP: "DNLD", Flights: 1, RecvAt: at})
		if err == nil || !strings.Contains(err.Error(), "messages 2 to 3") {
			t.Fatalf("refused lines: %v", err)
		}
		if err := sink.AppendSnapLogTx(ctx, tx, sink.SnapLogEntry{MsgID: 4, STYP: "RESP", Flights: 0, RecvAt: at}); err != nil {
			t.Fatalf("line after the refused ones: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the transaction did not commit: %v", err)
	}
	var got []string
	rows, err := pool.Query(ctx, `SELECT msg_id::text || ' ' || styp || ' ' || scope_end::text FROM schd_snap_log ORDER BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if want := "1 DNLD 2021-01-23,4 RESP 2026-12-02"; strings.Join(got, ",") != want {
		t.Errorf("schd_snap_log holds %q, want %q", strings.Join(got, ","), want)
	}
}
