package flight

import (
	"reflect"
	"testing"
)

func TestPlaceholders(t *testing.T) {
	flights := []*State{
		{FLID: "1", State: StateActive, StateVersion: 3, LastMsgID: 7, Fields: map[string]string{"FLNO": "MU1", "MAID": "9"}},
		{FLID: "2", State: StateActive, StateVersion: 1, LastMsgID: 8, Fields: map[string]string{"FLNO": "CA2", "MAID": "9"}},
		// deleted: not a live child
		{FLID: "3", State: StateDeleted, StateVersion: 2, Fields: map[string]string{"MAID": "8"}},
		// its master is a flight: the master's own Links hold the link
		{FLID: "4", State: StateActive, StateVersion: 1, Fields: map[string]string{"MAID": "5"}},
		{FLID: "5", State: StateActive, StateVersion: 1, Fields: map[string]string{}},
		// MAID naming itself is no master
		{FLID: "6", State: StateActive, StateVersion: 1, Fields: map[string]string{"MAID": "6"}},
	}
	got := Placeholders(flights)
	want := []*State{{FLID: "9", State: StatePlaceholder, LastMsgID: 8, Links: map[string]ChildLink{
		"1": {FLNO: "MU1", Live: true},
		"2": {FLNO: "CA2", Live: true},
	}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Placeholders = %+v, want %+v", got, want)
	}
	if n := len(Placeholders(nil)); n != 0 {
		t.Fatalf("no flights: %d placeholders", n)
	}
}

// A placeholder seeded this way turns into the master with the children's
// MAFL, as one built from the LINKs does.
func TestPlaceholderSeedBecomesMaster(t *testing.T) {
	child := &State{FLID: "1", State: StateActive, StateVersion: 1, LastMsgID: 5, Fields: map[string]string{"FLNO": "MU1", "MAID": "9"}}
	ph := Placeholders([]*State{child})[0]
	res, err := Apply(ph, Transition{MsgID: 10, Source: "SCHD-ADFT", Kind: KindADFT, FLID: "9", OperationDay: "2026-01-01",
		Fields: map[string]string{"FLNO": "CA9"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []MAFLEntry{{FLID: "1", FLNO: "MU1"}}; !reflect.DeepEqual(res.State.MAFL, want) {
		t.Fatalf("master MAFL = %+v, want %+v", res.State.MAFL, want)
	}
}
