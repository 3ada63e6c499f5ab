package refdata

import (
	"context"
	"testing"
	"time"

	"msgx/sink"
	"msgx/tables/message"
	"msgx/tables/refdata"
)

// TestTableAheadOfPostgreSQLIsRecovered: a crash between the table write
// and the group commit leaves the category's table value at messages
// PostgreSQL never got. The redelivered transitions, which the table claims
// as applied, are applied again to PostgreSQL's value (ref_table_state):
// the deletion of the first is not lost although the table's bookkeeping
// only remembers the last message's deletions.
func TestTableAheadOfPostgreSQLIsRecovered(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	pool, msgs := routedPool(t, t0, 1, 2, 3)
	p, tt := testerProcessor(t, pool, t0)

	tr := func(id int64, styp string, recs ...refdata.Record) refdata.Transition {
		return refdata.Transition{MsgID: id, RType: "AIRL", STYP: styp, At: t0.Add(time.Duration(id) * time.Minute), Records: recs}
	}
	load := tr(1, refdata.STYPDNLD, refdata.Record{"ITOP": "CA", "NAME": "Air China"}, refdata.Record{"ITOP": "MU", "NAME": "China Eastern"})
	del := tr(2, refdata.STYPDEL, refdata.Record{"ITOP": "CA"})
	add := tr(3, refdata.STYPADD, refdata.Record{"ITOP": "CZ", "NAME": "China Southern"})
	tt.Consume("msgx.refdata-transitions", "AIRL", load)

	// The crash: messages 2 and 3 reached the table, not PostgreSQL.
	ahead, _ := tt.TableValue(Config{}.Table(), "AIRL").(*refdata.State)
	if ahead == nil {
		t.Fatal("no table value after the first message")
	}
	for _, x := range []refdata.Transition{del, add} {
		if _, err := refdata.Apply(ahead, x); err != nil {
			t.Fatal(err)
		}
	}
	tt.SetTableValue(Config{}.Table(), "AIRL", ahead)

	tt.Consume("msgx.refdata-transitions", "AIRL", del) // redelivered
	tt.Consume("msgx.refdata-transitions", "AIRL", add) // redelivered

	rows, err := pool.Query(ctx, `SELECT rkey FROM ref_master WHERE rtype = 'AIRL' ORDER BY rkey`)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		keys = append(keys, k)
	}
	rows.Close()
	if len(keys) != 2 || keys[0] != "CZ" || keys[1] != "MU" {
		t.Fatalf("ref_master AIRL keys %v, want [CZ MU]: a lost deletion or addition", keys)
	}
	for id := int64(1); id <= 3; id++ {
		if m, _, _ := msgs.Get(ctx, id); m.State != message.StateSucceeded {
			t.Errorf("message %d %s", id, m.State)
		}
	}
	if n := p.Stats().Recovered; n != 1 {
		t.Errorf("Recovered = %d, want 1", n)
	}
	st, found, _, err := sink.RefTableState(ctx, pool, "AIRL")
	if err != nil || !found || st.LastMsgID != 3 || len(st.Records) != 2 {
		t.Fatalf("ref_table_state %+v (found %v, %v)", st, found, err)
	}
}
