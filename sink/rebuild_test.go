package sink_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"msgx/sink"
)

// TestTruncateDerivedDropsWaitingMsgEvents: a rebuild queues every version's
// msg event again, as new, so the ones still waiting go with the derived
// tables; a purged flight's schd tombstone, which no rebuild makes again,
// stays.
func TestTruncateDerivedDropsWaitingMsgEvents(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return sink.QueueEvents(ctx, tx, []sink.Event{
			{Topic: "msgx.msg", Key: "a", Value: []byte(`{}`), MsgID: 1, StateVersion: 1},
			{Topic: "msgx.msg", Key: "a", Value: []byte(`{}`), MsgID: 2, StateVersion: 2, New: true},
			{Topic: "msgx.schd", Key: "b"},
		}, flT0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.TruncateDerived(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if got := flRows(t, pool, `SELECT topic, key FROM event_outbox ORDER BY id`); len(got) != 1 || got[0] != "msgx.schd|b" {
		t.Fatalf("outbox after the truncate: %q", got)
	}
}
