package flight

import (
	"testing"
	"time"
)

func TestPurge(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 30, 0, 0, time.UTC)
	create := func(state string) *State {
		r, err := Apply(nil, Transition{MsgID: 1, Kind: KindSchedule, FLID: "7", OperationDay: "2026-10-01", At: at.Add(-1000 * time.Hour),
			Fields: map[string]string{"FLNO": "CA7"}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if state == StateDeleted {
			r, err = Apply(r.State, Transition{MsgID: 2, Kind: KindDelete, FLID: "7"}, Options{})
			if err != nil {
				t.Fatal(err)
			}
		}
		return r.State
	}
	purge := Transition{Kind: KindPurge, FLID: "7", PurgeBefore: "2026-11-01", At: at}

	active := create(StateActive)
	r, err := Apply(active, purge, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Purge || r.Outcome != OutcomePurged || lastEvent(r) == nil || lastEvent(r).EventType != EventTombstone ||
		lastEvent(r).StateVersion != active.StateVersion+1 || lastEvent(r).Source != SourceHistory || r.State.State != StateDeleted {
		t.Fatalf("purging a live flight: %+v event %+v", r, lastEvent(r))
	}
	if active.State != StateActive {
		t.Fatal("Apply changed its input")
	}

	deleted := create(StateDeleted)
	if r, _ := Apply(deleted, purge, Options{}); !r.Purge || lastEvent(r) != nil || r.State.StateVersion != deleted.StateVersion {
		t.Fatalf("purging a deleted flight emits again: %+v", r)
	}
	recent := purge
	recent.PurgeBefore = "2026-10-01"
	if r, _ := Apply(active, recent, Options{}); r.Purge || r.Outcome != OutcomeNotEligible || r.State.StateVersion != active.StateVersion {
		t.Fatalf("a flight of the cut-off day itself was purged: %+v", r)
	}
	if r, _ := Apply(nil, purge, Options{}); r.Purge || r.Outcome != OutcomeNoMatch {
		t.Fatalf("purging an unknown flight: %+v", r)
	}
	bad := purge
	bad.PurgeBefore = "soon"
	if _, err := Apply(active, bad, Options{}); err == nil {
		t.Fatal("a PURGE without a day was accepted")
	}
}
