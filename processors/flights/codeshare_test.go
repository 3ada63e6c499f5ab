package flights

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"msgx/internal/kafka"
	"msgx/tables/flight"
	"msgx/tables/message"
)

func (rg *rig) table(flid string) *flight.State {
	s, _ := rg.tt.TableValue(Config{}.Table(), flid).(*flight.State)
	return s
}

func schedule(msg int64, flid string, fields map[string]string) flight.Transition {
	return flight.Transition{MsgID: msg, Source: "SCHD-DNLD", Kind: flight.KindSchedule, FLID: flid, OperationDay: "2026-11-30", Fields: fields}
}

// placeholderRow is PostgreSQL's placeholder of flid (nil: none).
func (rg *rig) placeholderRow(flid string) *flight.State {
	rg.t.Helper()
	var raw []byte
	err := rg.pool.QueryRow(context.Background(), `SELECT table_state FROM flight_placeholder WHERE flid = $1`, flid).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		rg.t.Fatal(err)
	}
	v, err := kafka.JSON[flight.State]{}.Decode(raw)
	if err != nil {
		rg.t.Fatal(err)
	}
	return v.(*flight.State)
}

// TestCodeshareChildFirst: a shared flight that arrives before its master
// is in the master's first version. Until then the master's table entry is
// a placeholder, kept in flight_placeholder but never in the read model nor
// on the msg topic; the child's LINK to it is one of the message's
// transitions, so the message completes only with it.
func TestCodeshareChildFirst(t *testing.T) {
	rg := newRig(t)
	out := rg.send(1, schedule(0, "20", map[string]string{"FLNO": "MU20", "MAID": "10"}))
	if len(out) != 2 || out[1].FLID != "10" || out[1].Kind != flight.KindLink || rg.state(1) != message.StateSucceeded {
		t.Fatalf("transitions %+v, message %s", out, rg.state(1))
	}
	if p := rg.table("10"); !p.IsPlaceholder() || p.LastMsgID != 1 {
		t.Fatalf("master's table entry %+v", p)
	}
	if p := rg.placeholderRow("10"); p == nil || !p.IsPlaceholder() || !p.Links["20"].Live {
		t.Fatalf("PostgreSQL's placeholder %+v", p)
	}
	if ev := rg.events_(); len(ev) != 1 || ev[0].FLID != "20" {
		t.Fatalf("events %+v: a placeholder is announced nowhere", ev)
	}
	rg.send(2, schedule(0, "10", map[string]string{"FLNO": "CA10"}))
	ev := rg.events_()
	if len(ev) != 1 || ev[0].FLID != "10" || ev[0].StateVersion != 1 || len(ev[0].Flight.MAFL) != 1 || ev[0].Flight.MAFL[0].FLID != "20" {
		t.Fatalf("master's first version %+v", ev)
	}
	if p := rg.placeholderRow("10"); p != nil {
		t.Fatalf("placeholder row kept after the master's creation: %+v", p)
	}
}

// TestCascadeIsCounted: a master's deletion is SUCCEEDED only once the
// cascade to each of its children is applied.
func TestCascadeIsCounted(t *testing.T) {
	rg := newRig(t)
	rg.send(1, schedule(0, "10", map[string]string{"FLNO": "CA10"}), schedule(0, "20", map[string]string{"FLNO": "MU20", "MAID": "10"}),
		schedule(0, "21", map[string]string{"FLNO": "ZH21", "MAID": "10"}))
	rg.events_()
	own := []flight.Transition{{MsgID: 2, Source: "FDEL", Kind: flight.KindDelete, FLID: "10", At: rg.t0}}
	out, changed, err := flight.Expand(own, rg.links, rg.p.opts)
	if err != nil {
		t.Fatal(err)
	}
	for flid, l := range changed {
		rg.links[flid] = l
	}
	if len(out) != 3 {
		t.Fatalf("transitions %+v", out)
	}
	rg.routed(2, len(out))
	rg.apply(out[0])
	if rg.state(2) != message.StateRouted {
		t.Fatal("the master's FDEL SUCCEEDED before its cascade")
	}
	rg.apply(out[1])
	rg.apply(out[2])
	if rg.state(2) != message.StateSucceeded {
		t.Fatalf("message 2 %s after its cascade", rg.state(2))
	}
	for _, f := range []string{"10", "20", "21"} {
		if _, st := rg.pgVersion(f); st != flight.StateDeleted {
			t.Fatalf("flight %s %s", f, st)
		}
	}
}

// TestPlaceholderAheadOfPostgreSQL: a crash lost the transaction that
// created a placeholder (the table has it, PostgreSQL not): the redelivered
// LINK the table claims applied is applied again to PostgreSQL's state,
// nothing, and the placeholder row is written.
func TestPlaceholderAheadOfPostgreSQL(t *testing.T) {
	rg := newRig(t)
	out, _, err := flight.Expand([]flight.Transition{schedule(1, "20", map[string]string{"FLNO": "MU20", "MAID": "10"})}, rg.links, rg.p.opts)
	if err != nil {
		t.Fatal(err)
	}
	rg.routed(1, 2)
	link := out[1]
	rg.tt.SetTableValue(Config{}.Table(), "10", aheadOf(t, nil, link))
	rg.apply(out[0])
	rg.apply(link) // redelivered
	if p := rg.placeholderRow("10"); p == nil || !p.Links["20"].Live || rg.state(1) != message.StateSucceeded || rg.p.Stats().Recovered != 1 {
		t.Fatalf("placeholder row %+v, message %s, recovered %d", p, rg.state(1), rg.p.Stats().Recovered)
	}
}

// TestLostDropIsRecovered: the last child left a placeholder; the table
// dropped it, the crash lost the transaction that deleted its row. The
// redelivered LINK finds no table entry and starts from PostgreSQL's
// placeholder, which it drops.
func TestLostDropIsRecovered(t *testing.T) {
	rg := newRig(t)
	rg.send(1, schedule(0, "20", map[string]string{"FLNO": "MU20", "MAID": "10"}))
	own := []flight.Transition{{MsgID: 2, Source: "FLOP-MAID", Kind: flight.KindFLOP, STYP: "MAID", FLID: "20", At: rg.t0,
		Fields: map[string]string{"MAID": ""}}}
	out, _, err := flight.Expand(own, rg.links, rg.p.opts)
	if err != nil || len(out) != 2 || out[1].FLID != "10" {
		t.Fatalf("transitions %+v (%v)", out, err)
	}
	rg.routed(2, 2)
	// The crash: the table dropped it, PostgreSQL not.
	st, err := rg.tt.StorageBuilder()(string(Config{}.Table()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete("10"); err != nil {
		t.Fatal(err)
	}
	rg.apply(out[0])
	rg.apply(out[1])
	if p := rg.placeholderRow("10"); p != nil || rg.state(2) != message.StateSucceeded {
		t.Fatalf("placeholder row %+v kept, message %s", p, rg.state(2))
	}
}
