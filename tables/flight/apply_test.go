package flight

import (
	"errors"
	"slices"
	"testing"
)

var fltr15 = map[string]string{
	"ALCD": "YG", "FLNO": "YG9028", "MVIN": "D", "SODT": "23JAN210535", "FLTY": "W", "FLIN": "D", "ACFT": "733",
	"RENO": "B2574", "TAOP": "YG", "TAFL": "YG9061", "TAID": "16", "TRML": "T2", "MAXP": "300", "STND": "504",
	"PHAG": "110009", "FHAG": "110009", "MHAG": "110009", "EXSC": "RCFLOP", "FTSS": "RCFLOP",
}

var fltr15Colls = map[string][]Element{
	"ROUT": {{"RTNO": "1", "APCD": "XIY", "SCAT": "23JAN210710"}},
	"PSDT": {{"PSNO": "1", "PSST": "504", "STST": "23JAN210237", "STET": "23JAN210549"}},
	"ERUT": {{"RTNO": "1", "APCD": "CTU", "SCDT": "23JAN210535"}, {"RTNO": "2", "APCD": "XIY", "SCAT": "23JAN210710"}},
}

func TestScheduleCreate(t *testing.T) {
	r := mustApply(t, nil, sched(10, "15", fltr15, fltr15Colls), Options{})
	s := r.State
	if !r.Applied || r.Outcome != OutcomeApplied || r.Replay {
		t.Fatalf("outcome %s applied %v", r.Outcome, r.Applied)
	}
	if s.FLID != "15" || s.State != StateActive || s.StateVersion != 1 || s.LastMsgID != 10 || !s.UpdatedAt.Equal(at(10)) || s.OperationDay != "2026-01-23" {
		t.Fatalf("state header %+v", s)
	}
	if !equalFields(s.Fields, fltr15) || !equalColls(s.Collections, fltr15Colls) {
		t.Fatalf("content %v %v", s.Fields, s.Collections)
	}
	var want []string
	for _, tag := range ChangeOrder {
		if _, ok := fltr15[tag]; ok {
			want = append(want, tag)
		} else if _, ok := fltr15Colls[tag]; ok {
			want = append(want, tag)
		}
	}
	want = append(want, ChangedState)
	if !slices.Equal(r.Changed, want) {
		t.Fatalf("changed %v, want %v", r.Changed, want)
	}
	e := lastEvent(r)
	if e == nil || e.EventType != EventUpsert || e.FLID != "15" || e.StateVersion != 1 || e.MsgID != 10 || e.Source != "SCHD-DNLD" || !slices.Equal(e.Changed, want) {
		t.Fatalf("event %+v", e)
	}
	if e.Flight.Last != nil || e.Flight.Links != nil || !equalFields(e.Flight.Fields, fltr15) {
		t.Fatalf("event flight must be the plain view: %+v", e.Flight)
	}
}

func TestScheduleMerge(t *testing.T) {
	stored := with(fltr15, "ESTT", "23JAN210600", "FFID", "YG-9028")
	storedColls := with2(fltr15Colls, "GTDT", []Element{{"GTNO": "1", "GATE": "G28"}})
	fltr := without(fltr15, "MAXP", "MHAG")
	fltr["STND"] = ""      // present but empty: cleared in both modes
	fltr["ACFT"] = "320"   // changed
	fltr["FDIV"] = "WX"    // attributed parts in a FLTR
	fltr["DDES"] = "HKG"   //
	fltr["BOTM"] = "T1645" // drives BDST
	colls := map[string][]Element{"PSDT": {{"PSNO": "1", "PSST": "505"}}, "ROUT": {{"RTNO": "0"}}}

	tests := []struct {
		name        string
		mode        string
		wantFields  map[string]string
		wantColls   map[string][]Element
		wantChanged []string
	}{
		{"keep (default) keeps what the FLTR omits", "",
			with(without(stored, "STND"), "ACFT", "320", "FDIV", "WX", "DDES", "HKG", "BOTM", "T1645", "BDST", "Y"),
			map[string][]Element{"PSDT": {{"PSNO": "1", "PSST": "505"}}, "ERUT": fltr15Colls["ERUT"], "GTDT": storedColls["GTDT"]},
			[]string{"ACFT", "BOTM", "STND", "FDIV", "DDES", "BDST", "PSDT", "ROUT"}},
		{"keep explicitly", ScheduleMissingKeep,
			with(without(stored, "STND"), "ACFT", "320", "FDIV", "WX", "DDES", "HKG", "BOTM", "T1645", "BDST", "Y"),
			map[string][]Element{"PSDT": {{"PSNO": "1", "PSST": "505"}}, "ERUT": fltr15Colls["ERUT"], "GTDT": storedColls["GTDT"]},
			[]string{"ACFT", "BOTM", "STND", "FDIV", "DDES", "BDST", "PSDT", "ROUT"}},
		{"clear clears what the FLTR omits", ScheduleMissingClear,
			with(without(fltr15, "STND", "MAXP", "MHAG"), "ACFT", "320", "FDIV", "WX", "DDES", "HKG", "BOTM", "T1645", "BDST", "Y"),
			map[string][]Element{"PSDT": {{"PSNO": "1", "PSST": "505"}}},
			[]string{"ACFT", "ESTT", "BOTM", "STND", "MHAG", "MAXP", "FFID", "FDIV", "DDES", "BDST", "GTDT", "PSDT", "ROUT", "ERUT"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := created(t, "15", stored, storedColls)
			r := mustApply(t, s, sched(20, "15", fltr, colls), Options{ScheduleMissing: tc.mode})
			if !equalFields(r.State.Fields, tc.wantFields) {
				t.Errorf("fields %v\nwant   %v", r.State.Fields, tc.wantFields)
			}
			if !equalColls(r.State.Collections, tc.wantColls) {
				t.Errorf("collections %v\nwant        %v", r.State.Collections, tc.wantColls)
			}
			if !slices.Equal(r.Changed, tc.wantChanged) {
				t.Errorf("changed %v\nwant    %v", r.Changed, tc.wantChanged)
			}
			if r.State.StateVersion != 2 || r.State.LastMsgID != 20 || !r.State.UpdatedAt.Equal(at(20)) {
				t.Errorf("header %+v", r.State)
			}
		})
	}
}

func TestScheduleClearKeepsAttributedWhenPresent(t *testing.T) {
	s := created(t, "15", map[string]string{"FRET": "FAULT", "REID": "G", "FLNO": "A"}, nil)
	r := mustApply(t, s, sched(20, "15", map[string]string{"FLNO": "A", "REID": "H"}, nil), Options{ScheduleMissing: ScheduleMissingClear})
	// FRET's element is present (REID): it replaces the stored one, so its
	// missing text is cleared; nothing else is missing.
	if want := map[string]string{"FLNO": "A", "REID": "H"}; !equalFields(r.State.Fields, want) {
		t.Fatalf("fields %v, want %v", r.State.Fields, want)
	}
}

func TestScheduleRevivesDeleted(t *testing.T) {
	s := created(t, "15", fltr15, nil)
	s = mustApply(t, s, del(11, "15"), Options{}).State
	r := mustApply(t, s, sched(12, "15", fltr15, nil), Options{})
	if !r.Applied || r.State.State != StateActive || r.State.StateVersion != 3 || !slices.Equal(r.Changed, []string{ChangedState}) {
		t.Fatalf("revive: %s %+v changed %v", r.Outcome, r.State, r.Changed)
	}
	if lastEvent(r).EventType != EventUpsert {
		t.Fatalf("event %+v", lastEvent(r))
	}
}

func TestNoChangeNoBump(t *testing.T) {
	s := created(t, "15", fltr15, fltr15Colls)
	r := mustApply(t, s, sched(20, "15", fltr15, fltr15Colls), Options{})
	if r.Applied || lastEvent(r) != nil || r.Changed != nil || r.Outcome != OutcomeNoChange {
		t.Fatalf("no-change result %+v", r)
	}
	// The version stays, lastMsgId moves so that a replay of 20 is a replay.
	if r.State.StateVersion != 1 || r.State.LastMsgID != 20 || !r.State.UpdatedAt.Equal(at(10)) {
		t.Fatalf("state %+v", r.State)
	}
	again := mustApply(t, r.State, sched(20, "15", fltr15, fltr15Colls), Options{})
	if !again.Replay || len(again.Versions) != 0 {
		t.Fatalf("replay after no-change: %+v", again)
	}
}

func TestADFT(t *testing.T) {
	stored := map[string]string{"FLNO": "CA101", "ESTT": "1600", "TAOP": "CA", "TAFL": "CA201", "TAID": "7",
		"FDIV": "WX", "DDES": "HKG", "DDIR": "TO", "FRET": "FAULT", "REID": "G"}
	storedColls := map[string][]Element{"GTDT": {{"GTNO": "1", "GATE": "G1"}}, "DELY": {{"CODE": "YY"}}}
	tests := []struct {
		name       string
		fields     map[string]string
		colls      map[string][]Element
		wantFields map[string]string
		wantColls  map[string][]Element
	}{
		{"absent keeps", map[string]string{"ACFT": "320"}, nil, with(stored, "ACFT", "320"), storedColls},
		{"present empty never clears", map[string]string{"ESTT": "", "TAFL": "", "CNCL": ""}, nil, stored, storedColls},
		{"present non-empty sets", map[string]string{"ESTT": "1700"}, nil, with(stored, "ESTT", "1700"), storedColls},
		{"FDIV clear request ignored", map[string]string{"FDIV": "WX", "DDES": ""}, nil, stored, storedColls},
		{"FRET clear request ignored", map[string]string{"FRET": ""}, nil, stored, storedColls},
		{"attributed parts set, empty ones kept", map[string]string{"FDIV": "", "DDES": "CAN", "DDIR": ""}, nil,
			with(stored, "DDES", "CAN"), storedColls},
		{"collection markers never clear", nil, map[string][]Element{"GTDT": {{"GTNO": "0"}}, "DELY": {{}}}, stored, storedColls},
		{"non-empty collection replaces", nil, map[string][]Element{"GTDT": {{"GTNO": "2", "GATE": "G2"}}}, stored,
			with2(storedColls, "GTDT", []Element{{"GTNO": "2", "GATE": "G2"}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := created(t, "15", stored, storedColls)
			r := mustApply(t, s, adft(20, "15", tc.fields, tc.colls), Options{})
			if !equalFields(r.State.Fields, tc.wantFields) || !equalColls(r.State.Collections, tc.wantColls) {
				t.Fatalf("got %v %v\nwant %v %v", r.State.Fields, r.State.Collections, tc.wantFields, tc.wantColls)
			}
		})
	}

	t.Run("creates an unknown flight", func(t *testing.T) {
		r := mustApply(t, nil, adft(5, "99", map[string]string{"FLNO": "MU1", "ESTT": ""}, nil), Options{})
		if !r.Applied || r.State.State != StateActive || r.State.OperationDay != "2026-01-23" || !equalFields(r.State.Fields, map[string]string{"FLNO": "MU1"}) {
			t.Fatalf("%+v", r.State)
		}
		if !slices.Equal(r.Changed, []string{"FLNO", ChangedState}) || lastEvent(r).Source != "SCHD-ADFT" {
			t.Fatalf("changed %v event %+v", r.Changed, lastEvent(r))
		}
	})
	t.Run("revives a deleted flight", func(t *testing.T) {
		s := mustApply(t, created(t, "15", stored, nil), del(11, "15"), Options{}).State
		r := mustApply(t, s, adft(12, "15", map[string]string{"ESTT": "1800"}, nil), Options{})
		if r.State.State != StateActive || !slices.Equal(r.Changed, []string{"ESTT", ChangedState}) {
			t.Fatalf("%+v %v", r.State, r.Changed)
		}
	})
}

func TestDelete(t *testing.T) {
	s := created(t, "15", fltr15, fltr15Colls)
	for _, tr := range []Transition{
		del(20, "15"),
		flop(20, "15", "FDEL", map[string]string{"FFID": "X"}, nil),                // FLOP-FDEL given as a FLOP
		{MsgID: 20, Source: "SCHD-DNLD", Kind: KindDelete, FLID: "15", At: at(20)}, // absent from the schedule
	} {
		t.Run(tr.Source, func(t *testing.T) {
			r := mustApply(t, s, tr, Options{})
			if !r.Applied || r.State.State != StateDeleted || r.State.StateVersion != 2 || r.State.LastMsgID != 20 {
				t.Fatalf("%s %+v", r.Outcome, r.State)
			}
			// Fields stay; only the lifecycle changed.
			if !equalFields(r.State.Fields, fltr15) || !equalColls(r.State.Collections, fltr15Colls) || !slices.Equal(r.Changed, []string{ChangedState}) {
				t.Fatalf("content changed: %v %v", r.State.Fields, r.Changed)
			}
			e := lastEvent(r)
			if e.EventType != EventTombstone || e.StateVersion != 2 || e.MsgID != 20 || e.Source != tr.Source || e.Flight.State != StateDeleted {
				t.Fatalf("event %+v", e)
			}
		})
	}

	deleted := mustApply(t, s, del(20, "15"), Options{}).State
	tests := []struct {
		name    string
		s       *State
		tr      Transition
		outcome string
	}{
		{"delete unknown", nil, del(30, "15"), OutcomeNoMatch},
		{"delete deleted", deleted, del(30, "15"), OutcomeDeletedFlight},
		{"FLOP unknown", nil, flop(30, "15", "ESTT", map[string]string{"ESTT": "1"}, nil), OutcomeNoMatch},
		{"FLOP deleted", deleted, flop(30, "15", "ESTT", map[string]string{"ESTT": "1"}, nil), OutcomeDeletedFlight},
		{"FLOP-FDEL unknown", nil, flop(30, "15", "FDEL", nil, nil), OutcomeNoMatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustApply(t, tc.s, tc.tr, Options{})
			if r.Outcome != tc.outcome || r.Applied || lastEvent(r) != nil {
				t.Fatalf("%+v", r)
			}
			if tc.s == nil {
				if r.State != nil {
					t.Fatalf("no-match created a state: %+v", r.State)
				}
				return
			}
			if r.State.StateVersion != tc.s.StateVersion || r.State.LastMsgID != 30 || !equalFields(r.State.Fields, tc.s.Fields) {
				t.Fatalf("state %+v", r.State)
			}
		})
	}
}

func TestReplay(t *testing.T) {
	s := created(t, "15", fltr15, nil)
	s = mustApply(t, s, flop(20, "15", "ESTT", map[string]string{"ESTT": "1600"}, nil), Options{}).State
	deleted := mustApply(t, s, del(30, "15"), Options{}).State

	tests := []struct {
		name      string
		s         *State
		tr        Transition
		wantEvent Event
	}{
		{"FLOP same msg", s, flop(20, "15", "ESTT", map[string]string{"ESTT": "1600"}, nil),
			Event{EventType: EventUpsert, StateVersion: 2, MsgID: 20, Source: "FLOP-ESTT", Changed: []string{"ESTT"}}},
		{"older FLOP with other data is not re-applied", s, flop(15, "15", "ESTT", map[string]string{"ESTT": "0900"}, nil),
			Event{EventType: EventUpsert, StateVersion: 2, MsgID: 20, Source: "FLOP-ESTT", Changed: []string{"ESTT"}}},
		{"SCHEDULE", s, sched(10, "15", map[string]string{"FLNO": "X"}, nil),
			Event{EventType: EventUpsert, StateVersion: 2, MsgID: 20, Source: "FLOP-ESTT", Changed: []string{"ESTT"}}},
		{"ADFT", s, adft(20, "15", map[string]string{"ACFT": "X"}, nil),
			Event{EventType: EventUpsert, StateVersion: 2, MsgID: 20, Source: "FLOP-ESTT", Changed: []string{"ESTT"}}},
		{"DELETE", deleted, del(30, "15"),
			Event{EventType: EventTombstone, StateVersion: 3, MsgID: 30, Source: "FDEL", Changed: []string{ChangedState}}},
		{"SCHEDULE of a deleted flight does not revive on replay", deleted, sched(25, "15", fltr15, nil),
			Event{EventType: EventTombstone, StateVersion: 3, MsgID: 30, Source: "FDEL", Changed: []string{ChangedState}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustApply(t, tc.s, tc.tr, Options{})
			if !r.Replay || r.Applied || r.Outcome != OutcomeReplay || r.Changed != nil {
				t.Fatalf("%+v", r)
			}
			if !sameState(r.State, tc.s) {
				t.Fatalf("replay changed the state:\n%+v\n%+v", r.State, tc.s)
			}
			// Nothing is announced again: the versions' events were
			// committed with them (docs/design.md#outbox).
			if len(r.Versions) != 0 {
				t.Fatalf("a redelivery made versions: %+v", r.Versions)
			}
		})
	}
}

func TestOperationDay(t *testing.T) {
	s := created(t, "15", fltr15, nil)
	tr := sched(20, "15", with(fltr15, "ACFT", "320"), nil)
	tr.OperationDay = "2026-01-24"
	r := mustApply(t, s, tr, Options{})
	if r.State.OperationDay != "2026-01-23" || !slices.Equal(r.Changed, []string{"ACFT"}) {
		t.Fatalf("operation day moved: %q %v", r.State.OperationDay, r.Changed)
	}
	a := adft(21, "15", map[string]string{"ESTT": "1"}, nil)
	a.OperationDay = "2026-02-01"
	if r = mustApply(t, r.State, a, Options{}); r.State.OperationDay != "2026-01-23" {
		t.Fatalf("ADFT moved the day: %q", r.State.OperationDay)
	}

	// A flight created without a day (ADFT without SODT) takes the first one.
	a = adft(5, "16", map[string]string{"FLNO": "MU1"}, nil)
	a.OperationDay = ""
	s = mustApply(t, nil, a, Options{}).State
	if s.OperationDay != "" {
		t.Fatalf("day %q", s.OperationDay)
	}
	tr = sched(6, "16", map[string]string{"FLNO": "MU1", "SODT": "24JAN260900"}, nil)
	tr.OperationDay = "2026-01-24"
	r = mustApply(t, s, tr, Options{})
	if r.State.OperationDay != "2026-01-24" || !slices.Equal(r.Changed, []string{"SODT", ChangedOperationDay}) {
		t.Fatalf("fill-in: %q %v", r.State.OperationDay, r.Changed)
	}
}

func TestApplyRejectsBadInput(t *testing.T) {
	s := created(t, "15", nil, nil)
	tests := []struct {
		name string
		s    *State
		tr   Transition
		o    Options
	}{
		{"empty FLID", nil, sched(1, "", nil, nil), Options{}},
		{"FLID mismatch", s, sched(20, "16", nil, nil), Options{}},
		{"msgId zero", nil, sched(0, "15", nil, nil), Options{}},
		{"unknown kind", nil, Transition{MsgID: 1, FLID: "15", Kind: "PATCH"}, Options{}},
		{"unsupported STYP", s, flop(20, "15", "BDPB", nil, nil), Options{}},
		{"FLOP without STYP", s, flop(20, "15", "", nil, nil), Options{}},
		{"LINK without link", s, Transition{MsgID: 20, FLID: "15", Kind: KindLink}, Options{}},
		{"LINK to itself", s, link(20, "15", "15", "X", true), Options{}},
		{"cascade without master", s, Transition{MsgID: 20, FLID: "15", Kind: KindDelete, Cascade: true}, Options{}},
		{"cascade on a FLOP", s, Transition{MsgID: 20, FLID: "15", Kind: KindFLOP, STYP: "ESTT", Cascade: true}, Options{}},
		{"bad ScheduleMissing", s, sched(20, "15", nil, nil), Options{ScheduleMissing: "drop"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Apply(tc.s, tc.tr, tc.o)
			if !errors.Is(err, ErrInvalid) || r.State != nil {
				t.Fatalf("err %v result %+v", err, r)
			}
		})
	}
}

// TestApplyDoesNotMutateInput guards the table value the processor still
// holds: Apply must work on copies.
func TestApplyDoesNotMutateInput(t *testing.T) {
	s := created(t, "15", fltr15, fltr15Colls)
	s = mustApply(t, s, link(11, "15", "16", "MU1", true), Options{}).State
	keep := s.Clone()
	trs := []Transition{
		sched(20, "15", map[string]string{"FLNO": ""}, map[string][]Element{"ROUT": {{"RTNO": "0"}}}),
		flop(20, "15", "CHOT", map[string]string{"TAOP": ""}, map[string][]Element{"CHOT": {{"CSNO": "1", "CHTM": ""}}}),
		adft(20, "15", map[string]string{"ESTT": "1"}, nil),
		del(20, "15"),
		link(20, "15", "17", "MU2", true),
	}
	for _, tr := range trs {
		in := tr
		in.Fields = with(tr.Fields)
		r := mustApply(t, s, tr, Options{ScheduleMissing: ScheduleMissingClear})
		r.State.Fields["ZZZZ"] = "x"
		if len(r.State.Collections["PSDT"]) > 0 {
			r.State.Collections["PSDT"][0]["PSST"] = "x"
		}
		if !sameState(s, keep) {
			t.Fatalf("%s mutated the input state", tr.Kind)
		}
		if !equalFields(tr.Fields, in.Fields) {
			t.Fatalf("%s mutated the transition", tr.Kind)
		}
		if tr.Kind == KindFLOP && tr.Collections["CHOT"][0]["CHTM"] != "" {
			t.Fatalf("normalisation mutated the transition's elements")
		}
	}
}
