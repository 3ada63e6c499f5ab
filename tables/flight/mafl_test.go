package flight

import (
	"reflect"
	"slices"
	"testing"
)

func linkOfTransition(t *testing.T, tr Transition) (master string, l Link) {
	t.Helper()
	if tr.Kind != KindLink || tr.Link == nil || tr.Source != SourceLink {
		t.Fatalf("not a derived LINK: %+v", tr)
	}
	return tr.FLID, *tr.Link
}

type wantLink struct {
	master string
	link   Link
}

func checkLinks(t *testing.T, derived []Transition, want []wantLink, msg int64) {
	t.Helper()
	if len(derived) != len(want) {
		t.Fatalf("derived %d transitions %+v, want %d", len(derived), derived, len(want))
	}
	for i, tr := range derived {
		m, l := linkOfTransition(t, tr)
		if m != want[i].master || l != want[i].link || tr.MsgID != msg || !tr.At.Equal(at(msg)) {
			t.Fatalf("derived[%d] = to %s %+v msg %d, want to %s %+v msg %d", i, m, l, tr.MsgID, want[i].master, want[i].link, msg)
		}
	}
}

// TestChildDerivesLinks: every change of a child's MAID, FLNO or liveness is
// reported to the master(s) concerned, with the child's new version.
func TestChildDerivesLinks(t *testing.T) {
	r := mustApply(t, nil, sched(10, "C", map[string]string{"FLNO": "MU1", "MAID": "M1"}, nil), Options{})
	checkLinks(t, r.Derived, []wantLink{{"M1", Link{Child: "C", FLNO: "MU1", Live: true, ChildVersion: 1, Since: 10}}}, 10)
	c := r.State

	tests := []struct {
		name string
		tr   Transition
		want []wantLink
	}{
		{"FLNO change", flop(20, "C", "FLNO", map[string]string{"FLNO": "MU2"}, nil),
			[]wantLink{{"M1", Link{Child: "C", FLNO: "MU2", Live: true, ChildVersion: 2, Since: 10}}}},
		{"unrelated change", flop(20, "C", "ESTT", map[string]string{"ESTT": "1"}, nil), nil},
		{"move to another master", flop(20, "C", "MAID", map[string]string{"MAID": "M2"}, nil),
			[]wantLink{
				{"M1", Link{Child: "C", FLNO: "MU1", Live: false, ChildVersion: 2}},
				{"M2", Link{Child: "C", FLNO: "MU1", Live: true, ChildVersion: 2, Since: 20}}}},
		{"MAID cleared", flop(20, "C", "MAID", map[string]string{"MAID": ""}, nil),
			[]wantLink{{"M1", Link{Child: "C", FLNO: "MU1", Live: false, ChildVersion: 2}}}},
		{"MAID naming itself is no link", flop(20, "C", "MAID", map[string]string{"MAID": "C"}, nil),
			[]wantLink{{"M1", Link{Child: "C", FLNO: "MU1", Live: false, ChildVersion: 2}}}},
		{"delete", del(20, "C"),
			[]wantLink{{"M1", Link{Child: "C", FLNO: "MU1", Live: false, ChildVersion: 2}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustApply(t, c, tc.tr, Options{})
			checkLinks(t, r.Derived, tc.want, 20)
		})
	}

	t.Run("revive", func(t *testing.T) {
		d := mustApply(t, c, del(20, "C"), Options{}).State
		r := mustApply(t, d, sched(30, "C", map[string]string{"FLNO": "MU1", "MAID": "M1"}, nil), Options{})
		checkLinks(t, r.Derived, []wantLink{{"M1", Link{Child: "C", FLNO: "MU1", Live: true, ChildVersion: 3, Since: 30}}}, 30)
		if r.State.LinkSince != 30 {
			t.Fatalf("linkSince %d", r.State.LinkSince)
		}
	})
	t.Run("a flight without MAID derives nothing", func(t *testing.T) {
		r := mustApply(t, nil, sched(10, "M1", map[string]string{"FLNO": "MU9"}, nil), Options{})
		if r.Derived != nil {
			t.Fatalf("%+v", r.Derived)
		}
	})
}

func TestLinkOnMaster(t *testing.T) {
	m := created(t, "M", map[string]string{"FLNO": "MU9"}, nil)
	m = mustApply(t, m, flop(50, "M", "ESTT", map[string]string{"ESTT": "1"}, nil), Options{}).State // lastMsgId 50

	// A LINK is exempt from the lastMsgId rule: message 20 < 50.
	r := mustApply(t, m, link(20, "M", "10", "MU1", true, 1), Options{})
	if !r.Applied || !slices.Equal(r.Changed, []string{ChangedMAFL}) || r.State.StateVersion != 3 || r.State.LastMsgID != 50 || !r.State.UpdatedAt.Equal(at(20)) {
		t.Fatalf("add: %s %+v %v", r.Outcome, r.State, r.Changed)
	}
	if want := []MAFLEntry{{"10", "MU1"}}; !slices.Equal(r.State.MAFL, want) {
		t.Fatalf("mafl %v", r.State.MAFL)
	}
	if e := r.Event; e.EventType != EventUpsert || e.Source != SourceLink || e.MsgID != 20 || e.StateVersion != 3 || !slices.Equal(e.Flight.MAFL, r.State.MAFL) {
		t.Fatalf("event %+v", e)
	}
	m = r.State
	noSource := link(21, "M", "9", "MU0", true, 1)
	noSource.Source = ""
	r = mustApply(t, m, noSource, Options{})
	if r.Event.Source != SourceLink {
		t.Fatalf("LINK source defaults to %s: %+v", SourceLink, r.Event)
	}
	m = r.State
	if want := []MAFLEntry{{"9", "MU0"}, {"10", "MU1"}}; !slices.Equal(m.MAFL, want) {
		t.Fatalf("mafl must be ordered by FLID numerically: %v", m.MAFL)
	}

	tests := []struct {
		name     string
		tr       Transition
		outcome  string
		wantMAFL []MAFLEntry
	}{
		{"FLNO update", link(22, "M", "10", "MU2", true, 2), OutcomeApplied, []MAFLEntry{{"9", "MU0"}, {"10", "MU2"}}},
		{"removal", link(22, "M", "10", "MU1", false, 2), OutcomeApplied, []MAFLEntry{{"9", "MU0"}}},
		{"stale: same version", since(link(22, "M", "10", "MU2", true, 1), 20), OutcomeStaleLink, []MAFLEntry{{"9", "MU0"}, {"10", "MU1"}}},
		{"stale: same version, older start", since(link(22, "M", "10", "MU2", true, 1), 19), OutcomeStaleLink, []MAFLEntry{{"9", "MU0"}, {"10", "MU1"}}},
		{"stale: older version", link(22, "M", "10", "MU2", false, 0), OutcomeStaleLink, []MAFLEntry{{"9", "MU0"}, {"10", "MU1"}}},
		{"newer report without visible change", link(22, "M", "10", "MU1", true, 5), OutcomeNoChange, []MAFLEntry{{"9", "MU0"}, {"10", "MU1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustApply(t, m, tc.tr, Options{})
			if r.Outcome != tc.outcome || !slices.Equal(r.State.MAFL, tc.wantMAFL) {
				t.Fatalf("%s mafl %v", r.Outcome, r.State.MAFL)
			}
			switch tc.outcome {
			case OutcomeApplied:
				if r.State.StateVersion != m.StateVersion+1 || !slices.Equal(r.Changed, []string{ChangedMAFL}) {
					t.Fatalf("%+v", r)
				}
			case OutcomeStaleLink:
				// Ignored, but the master's current event is re-emitted.
				if !r.Replay || r.Event == nil || r.Event.StateVersion != m.StateVersion || !sameState(r.State, m) {
					t.Fatalf("%+v", r)
				}
			case OutcomeNoChange:
				if r.Event != nil || r.State.StateVersion != m.StateVersion || r.State.Links["10"].Version != 5 {
					t.Fatalf("%+v", r)
				}
			}
		})
	}

	t.Run("removed child's version is kept", func(t *testing.T) {
		gone := mustApply(t, m, link(22, "M", "10", "MU1", false, 2), Options{}).State
		r := mustApply(t, gone, link(23, "M", "10", "MU1", true, 2), Options{}) // late duplicate
		if r.Outcome != OutcomeStaleLink || len(r.State.MAFL) != 1 {
			t.Fatalf("%s %v", r.Outcome, r.State.MAFL)
		}
	})
	t.Run("unknown master: a placeholder keeps the link", func(t *testing.T) {
		r := mustApply(t, nil, link(22, "X", "10", "MU1", true, 1), Options{})
		if r.Outcome != OutcomePlaceholder || !r.State.IsPlaceholder() || r.Event != nil || r.Derived != nil || r.Applied ||
			r.State.StateVersion != 0 || r.State.Links["10"] != (ChildLink{FLNO: "MU1", Live: true, Version: 1, Since: 22}) {
			t.Fatalf("%+v", r)
		}
		// A report that a child left a master that is not a flight is
		// nothing to remember.
		if r := mustApply(t, nil, link(22, "X", "10", "MU1", false, 1), Options{}); r.Outcome != OutcomeNoMatch || r.State != nil || r.Drop {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("shared flight carries no MAFL", func(t *testing.T) {
		shared := created(t, "S", map[string]string{"MAID": "M"}, nil)
		r := mustApply(t, shared, link(22, "S", "10", "MU1", true, 1), Options{})
		if r.Outcome != OutcomeNoChange || len(r.State.MAFL) != 0 || r.State.Links["10"].Version != 1 {
			t.Fatalf("%s %+v", r.Outcome, r.State)
		}
		// Once it becomes a master (MAID cleared) the recorded child shows.
		r = mustApply(t, r.State, flop(23, "S", "MAID", map[string]string{"MAID": ""}, nil), Options{})
		if !slices.Equal(r.State.MAFL, []MAFLEntry{{"10", "MU1"}}) || !slices.Equal(r.Changed, []string{"MAID", ChangedMAFL}) {
			t.Fatalf("%v %v", r.State.MAFL, r.Changed)
		}
	})
	t.Run("deleted master records but shows nothing until revived", func(t *testing.T) {
		dr := mustApply(t, m, del(60, "M"), Options{})
		if len(dr.Derived) != 2 || dr.Derived[0].FLID != "9" || dr.Derived[1].FLID != "10" || dr.State.DeletedBy != 60 {
			t.Fatalf("cascades %+v", dr.Derived)
		}
		d := dr.State
		// 11 linked after the deletion: recorded, not deleted.
		r := mustApply(t, d, link(61, "M", "11", "MU3", true, 1), Options{})
		if r.Outcome != OutcomeDeletedFlight || r.Event != nil || r.Derived != nil || len(r.State.MAFL) != 0 || r.State.StateVersion != d.StateVersion {
			t.Fatalf("%s %+v", r.Outcome, r.State)
		}
		// The revived master lists 11 but not 9 and 10: the deletion's
		// cascade deletes them (their removal reports are still on the way).
		rev := mustApply(t, r.State, sched(62, "M", map[string]string{"FLNO": "MU9"}, nil), Options{})
		want := []MAFLEntry{{"11", "MU3"}}
		if !slices.Equal(rev.State.MAFL, want) || !slices.Equal(rev.Changed, []string{ChangedMAFL, ChangedState}) {
			t.Fatalf("%v %v", rev.State.MAFL, rev.Changed)
		}
	})
}

func TestMasterDeleteCascades(t *testing.T) {
	m := created(t, "M", map[string]string{"FLNO": "MU9"}, nil)
	for i, child := range []string{"12", "11", "13"} {
		m = mustApply(t, m, link(int64(11+i), "M", child, "MU"+child, true, 1), Options{}).State
	}
	m = mustApply(t, m, link(14, "M", "13", "MU13", false, 2), Options{}).State // 13 left

	r := mustApply(t, m, del(40, "M"), Options{})
	if !r.Applied || !slices.Equal(r.Changed, []string{ChangedMAFL, ChangedState}) || len(r.State.MAFL) != 0 || r.Event.EventType != EventTombstone {
		t.Fatalf("%+v", r)
	}
	var got []string
	for _, tr := range r.Derived {
		if tr.Kind != KindDelete || !tr.Cascade || tr.Source != SourceCascade || tr.MsgID != 40 || !tr.At.Equal(at(40)) || tr.Fields["MAID"] != "M" {
			t.Fatalf("cascade %+v", tr)
		}
		got = append(got, tr.FLID)
	}
	if !slices.Equal(got, []string{"11", "12"}) {
		t.Fatalf("cascade to %v, want the live children 11, 12", got)
	}

	// The replay of the delete re-derives the cascade for children still live.
	rp := mustApply(t, r.State, del(40, "M"), Options{})
	if !rp.Replay || len(rp.Derived) != 2 || rp.Derived[0].FLID != "11" || rp.Derived[0].MsgID != 40 || !rp.Derived[0].Cascade {
		t.Fatalf("replay %+v", rp.Derived)
	}
}

func TestCascadeOnChild(t *testing.T) {
	cascade := Transition{MsgID: 40, Source: SourceCascade, Kind: KindDelete, FLID: "C", At: at(40), Fields: map[string]string{"MAID": "M"}, Cascade: true}
	child := created(t, "C", map[string]string{"FLNO": "MU1", "MAID": "M"}, nil) // linked at 10
	// Messages after the master's deletion reached the child first.
	later := mustApply(t, child, flop(45, "C", "ESTT", map[string]string{"ESTT": "1"}, nil), Options{}).State

	r := mustApply(t, later, cascade, Options{})
	if !r.Applied || r.State.State != StateDeleted || r.State.LastMsgID != 45 || r.State.StateVersion != 3 {
		t.Fatalf("cascade despite lastMsgId: %s %+v", r.Outcome, r.State)
	}
	if e := r.Event; e.EventType != EventTombstone || e.MsgID != 40 || e.Source != SourceCascade {
		t.Fatalf("event %+v", e)
	}
	checkLinks(t, r.Derived, []wantLink{{"M", Link{Child: "C", FLNO: "MU1", Live: false, ChildVersion: 3}}}, 40)

	t.Run("redelivery is a replay", func(t *testing.T) {
		again := mustApply(t, r.State, cascade, Options{})
		if !again.Replay || again.Event.EventType != EventTombstone || again.Event.StateVersion != 3 || !sameState(again.State, r.State) {
			t.Fatalf("%+v", again)
		}
	})
	t.Run("a cascade raises lastMsgId but never lowers it", func(t *testing.T) {
		c := cascade
		c.MsgID = 60
		got := mustApply(t, child, c, Options{})
		if got.State.LastMsgID != 60 {
			t.Fatalf("lastMsgId %d", got.State.LastMsgID)
		}
	})

	// answer is the LINK a child left alone sends to the master that still
	// has it: its link to the master began at msg 41, after the deletion.
	answer := []wantLink{{"M", Link{Child: "C", FLNO: "MU1", Live: true, ChildVersion: 3, Since: 41}}}
	tests := []struct {
		name    string
		s       *State
		outcome string
		answer  []wantLink
	}{
		{"unknown child", nil, OutcomeNoMatch, nil},
		{"moved to another master", mustApply(t, child, flop(41, "C", "MAID", map[string]string{"MAID": "M2"}, nil), Options{}).State, OutcomeNotLinked, nil},
		{"MAID cleared", mustApply(t, child, flop(41, "C", "MAID", map[string]string{"MAID": ""}, nil), Options{}).State, OutcomeNotLinked, nil},
		{"relinked after the deletion", mustApply(t, mustApply(t, child, flop(30, "C", "MAID", map[string]string{"MAID": "M2"}, nil), Options{}).State,
			flop(41, "C", "MAID", map[string]string{"MAID": "M"}, nil), Options{}).State, OutcomeNotLinked, answer},
		{"revived after the deletion", mustApply(t, mustApply(t, child, del(30, "C"), Options{}).State,
			sched(41, "C", map[string]string{"FLNO": "MU1", "MAID": "M"}, nil), Options{}).State, OutcomeNotLinked, answer},
		// A schedule after the deletion states the child anew, as it would
		// have revived it had the cascade come first.
		{"restated by a schedule after the deletion", mustApply(t, child, sched(41, "C", map[string]string{"FLNO": "MU1", "MAID": "M", "ESTT": "1"}, nil), Options{}).State,
			OutcomeNotLinked, []wantLink{{"M", Link{Child: "C", FLNO: "MU1", Live: true, ChildVersion: 2, Since: 41}}}},
		{"already deleted by its own FDEL", mustApply(t, child, del(30, "C"), Options{}).State, OutcomeDeletedFlight, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mustApply(t, tc.s, cascade, Options{})
			if got.Outcome != tc.outcome || got.Applied || got.Event != nil || !sameState(got.State, tc.s) {
				t.Fatalf("%+v", got)
			}
			checkLinks(t, got.Derived, tc.answer, 41)
		})
	}
}

// TestReplayRederivesLinks: a crash between the table write and the emits
// loses derived transitions; the replay emits them again.
func TestReplayRederivesLinks(t *testing.T) {
	c := created(t, "C", map[string]string{"FLNO": "MU1", "MAID": "M1"}, nil)
	moved := mustApply(t, c, flop(20, "C", "MAID", map[string]string{"MAID": "M2"}, nil), Options{}).State
	r := mustApply(t, moved, flop(20, "C", "MAID", map[string]string{"MAID": "M2"}, nil), Options{})
	checkLinks(t, r.Derived, []wantLink{
		{"M1", Link{Child: "C", FLNO: "MU1", Live: false, ChildVersion: 2}},
		{"M2", Link{Child: "C", FLNO: "MU1", Live: true, ChildVersion: 2, Since: 20}},
	}, 20)
}

// bus plays transitions through Apply in FIFO order, feeding derived
// transitions back behind the ones already queued, as the flights
// processor does through msgx.flight-transitions.
type bus struct {
	states map[string]*State
	events []Event
}

func (b *bus) run(t *testing.T, queue ...Transition) {
	t.Helper()
	for len(queue) > 0 {
		tr := queue[0]
		queue = queue[1:]
		r := mustApply(t, b.states[tr.FLID], tr, Options{})
		if r.State != nil {
			b.states[tr.FLID] = r.State
		}
		if r.Event != nil {
			b.events = append(b.events, *r.Event)
		}
		queue = append(queue, r.Derived...)
	}
}

func TestMAFLEndToEnd(t *testing.T) {
	b := &bus{states: map[string]*State{}}
	script := []Transition{
		sched(1, "100", map[string]string{"FLNO": "MU100"}, nil),
		sched(1, "101", map[string]string{"FLNO": "CA101", "MAID": "100"}, nil),
		sched(1, "102", map[string]string{"FLNO": "FM102", "MAID": "100"}, nil),
		sched(1, "200", map[string]string{"FLNO": "MU200"}, nil),
		flop(2, "102", "FLNO", map[string]string{"FLNO": "FM902"}, nil),
		flop(3, "101", "MAID", map[string]string{"MAID": "200"}, nil),
		flop(4, "102", "ESTT", map[string]string{"ESTT": "0900"}, nil),
	}
	b.run(t, script...)
	if got := b.states["100"].MAFL; !slices.Equal(got, []MAFLEntry{{"102", "FM902"}}) {
		t.Fatalf("100 mafl %v", got)
	}
	if got := b.states["200"].MAFL; !slices.Equal(got, []MAFLEntry{{"101", "CA101"}}) {
		t.Fatalf("200 mafl %v", got)
	}

	// Master 100 is deleted; a later FLOP for its child is already queued
	// ahead of the cascade.
	b.run(t, del(5, "100"), flop(6, "102", "ESTT", map[string]string{"ESTT": "1000"}, nil))
	if s := b.states["102"]; s.State != StateDeleted || s.Fields["ESTT"] != "1000" || s.LastMsgID != 6 {
		t.Fatalf("child after cascade %+v", s)
	}
	if s := b.states["101"]; s.State != StateActive {
		t.Fatalf("moved child must survive: %+v", s)
	}
	if l := b.states["100"].Links["102"]; l.Live {
		t.Fatalf("master still records 102 live: %+v", l)
	}

	// Replaying everything (at-least-once redelivery) changes nothing.
	before := map[string]*State{}
	for k, v := range b.states {
		before[k] = v.Clone()
	}
	b.run(t, append(script, del(5, "100"), flop(6, "102", "ESTT", map[string]string{"ESTT": "1000"}, nil))...)
	if !reflect.DeepEqual(before, b.states) {
		for k := range before {
			if !sameState(before[k], b.states[k]) {
				t.Errorf("%s changed on replay:\n%+v\n%+v", k, before[k], b.states[k])
			}
		}
	}
}
