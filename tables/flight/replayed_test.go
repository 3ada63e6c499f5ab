package flight

import (
	"slices"
	"testing"

	"msgx/tables/message"
)

// replayed is transition tr re-injected by the replay of generation gen.
func replayed(tr Transition, gen int64) Transition {
	tr.Replay = gen
	return tr
}

// A replayed transition is applied to the current state although newer
// messages changed the flight since (docs/design.md#replay); a redelivery of
// it is recognised by (generation, msgId), never by lastMsgId, which does not
// go back; normal transitions keep the lastMsgId rule.
func TestReplayedTransitionApplies(t *testing.T) {
	s := created(t, "15", fltr15, nil)                                                                          // v1, msg 10
	s = mustApply(t, s, flop(20, "15", "ESTT", map[string]string{"ESTT": "23JAN211600"}, nil), Options{}).State // v2
	s = mustApply(t, s, flop(30, "15", "ESTT", map[string]string{"ESTT": "23JAN211700"}, nil), Options{}).State // v3

	type step struct {
		name        string
		tr          Transition
		wantApplied bool
		wantOutcome string
		wantVersion int64
		wantEvent   *Event // the event's version, msgId, source and changed list
		wantESTT    string
		wantLast    int64
		wantMark    *message.ReplayMark
	}
	e := func(v, msg int64, source string, changed ...string) *Event {
		return &Event{StateVersion: v, MsgID: msg, Source: source, Changed: changed}
	}
	steps := []step{
		{"a replayed older FLOP applies over the newer state", replayed(flop(15, "15", "ESTT", map[string]string{"ESTT": "23JAN210900"}, nil), 7),
			true, OutcomeApplied, 4, e(4, 15, "FLOP-ESTT", "ESTT"), "23JAN210900", 30, &message.ReplayMark{Gen: 7, MsgID: 15}},
		{"its redelivery changes and announces nothing", replayed(flop(15, "15", "ESTT", map[string]string{"ESTT": "23JAN210900"}, nil), 7),
			false, OutcomeReplay, 4, nil, "23JAN210900", 30, &message.ReplayMark{Gen: 7, MsgID: 15}},
		{"a redelivery of the newest normal message stays a no-op", flop(30, "15", "ESTT", map[string]string{"ESTT": "23JAN211700"}, nil),
			false, OutcomeReplay, 4, nil, "23JAN210900", 30, &message.ReplayMark{Gen: 7, MsgID: 15}},
		{"a second message of the same replay batch applies after the first", replayed(flop(25, "15", "ESTT", map[string]string{"ESTT": "23JAN211000"}, nil), 7),
			true, OutcomeApplied, 5, e(5, 25, "FLOP-ESTT", "ESTT"), "23JAN211000", 30, &message.ReplayMark{Gen: 7, MsgID: 25}},
		{"then the first one again is a redelivery", replayed(flop(15, "15", "ESTT", map[string]string{"ESTT": "23JAN210900"}, nil), 7),
			false, OutcomeReplay, 5, nil, "23JAN211000", 30, &message.ReplayMark{Gen: 7, MsgID: 25}},
		{"a later replay applies even for a lower message id", replayed(flop(12, "15", "ESTT", map[string]string{"ESTT": "23JAN210800"}, nil), 8),
			true, OutcomeApplied, 6, e(6, 12, "FLOP-ESTT", "ESTT"), "23JAN210800", 30, &message.ReplayMark{Gen: 8, MsgID: 12}},
		{"an earlier generation after it is a redelivery", replayed(flop(25, "15", "ESTT", map[string]string{"ESTT": "23JAN211000"}, nil), 7),
			false, OutcomeReplay, 6, nil, "23JAN210800", 30, &message.ReplayMark{Gen: 8, MsgID: 12}},
		{"a replayed message equal to the state changes nothing visible, and is remembered", replayed(flop(14, "15", "ESTT", map[string]string{"ESTT": "23JAN210800"}, nil), 9),
			false, OutcomeNoChange, 6, nil, "23JAN210800", 30, &message.ReplayMark{Gen: 9, MsgID: 14}},
		{"a new message keeps the normal rule", flop(40, "15", "ESTT", map[string]string{"ESTT": "23JAN211800"}, nil),
			true, OutcomeApplied, 7, e(7, 40, "FLOP-ESTT", "ESTT"), "23JAN211800", 40, &message.ReplayMark{Gen: 9, MsgID: 14}},
		{"the earlier replay redelivered after it is still a no-op", replayed(flop(12, "15", "ESTT", map[string]string{"ESTT": "23JAN210800"}, nil), 8),
			false, OutcomeReplay, 7, nil, "23JAN211800", 40, &message.ReplayMark{Gen: 9, MsgID: 14}},
		{"a replayed delete deletes", replayed(del(5, "15"), 10),
			true, OutcomeApplied, 8, &Event{EventType: EventTombstone, StateVersion: 8, MsgID: 5, Source: "FDEL", Changed: []string{ChangedState}},
			"23JAN211800", 40, &message.ReplayMark{Gen: 10, MsgID: 5}},
		{"its redelivery changes and announces nothing", replayed(del(5, "15"), 10),
			false, OutcomeReplay, 8, nil,
			"23JAN211800", 40, &message.ReplayMark{Gen: 10, MsgID: 5}},
		{"a replayed FLOP on the deleted flight changes nothing, and is remembered", replayed(flop(6, "15", "ESTT", map[string]string{"ESTT": "23JAN210700"}, nil), 11),
			false, OutcomeDeletedFlight, 8, nil, "23JAN211800", 40, &message.ReplayMark{Gen: 11, MsgID: 6}},
		{"a replayed SCHEDULE revives it", replayed(sched(7, "15", map[string]string{"ESTT": "23JAN210700"}, nil), 12),
			true, OutcomeApplied, 9, e(9, 7, "SCHD-DNLD", "ESTT", ChangedState), "23JAN210700", 40, &message.ReplayMark{Gen: 12, MsgID: 7}},
	}
	for _, st := range steps {
		before := s.Clone()
		r := mustApply(t, s, st.tr, Options{})
		if r.Applied != st.wantApplied || r.Outcome != st.wantOutcome || r.Replay != (st.wantOutcome == OutcomeReplay) {
			t.Fatalf("%s: applied %v outcome %s replay %v", st.name, r.Applied, r.Outcome, r.Replay)
		}
		if !sameState(s, before) {
			t.Fatalf("%s: Apply modified its input", st.name)
		}
		next := r.State
		if next.StateVersion != st.wantVersion || next.Fields["ESTT"] != st.wantESTT || next.LastMsgID != st.wantLast ||
			next.Replayed == nil || *next.Replayed != *st.wantMark {
			t.Fatalf("%s: v%d ESTT %s lastMsgId %d replayed %+v", st.name, next.StateVersion, next.Fields["ESTT"], next.LastMsgID, next.Replayed)
		}
		switch {
		case st.wantEvent == nil && lastEvent(r) != nil:
			t.Fatalf("%s: unexpected event %+v", st.name, lastEvent(r))
		case st.wantEvent != nil:
			want := st.wantEvent
			if want.EventType == "" {
				want.EventType = EventUpsert
			}
			if lastEvent(r) == nil || lastEvent(r).EventType != want.EventType || lastEvent(r).StateVersion != want.StateVersion ||
				lastEvent(r).MsgID != want.MsgID || lastEvent(r).Source != want.Source || !slices.Equal(lastEvent(r).Changed, want.Changed) {
				t.Fatalf("%s: event %+v, want %+v", st.name, lastEvent(r), want)
			}
			if lastEvent(r).Flight.Replayed != nil || lastEvent(r).Flight.LastMsgID != st.wantLast {
				t.Fatalf("%s: event flight %+v (the replay mark is bookkeeping; lastMsgId never goes back)", st.name, lastEvent(r).Flight)
			}
		}
		s = next
	}
}

// A replayed change of a child's link is applied like any change, with its
// LINK to the master (replayed too), and a replayed master deletion
// cascades to the children linked now.
func TestReplayedCodeshare(t *testing.T) {
	w := newWorld(t)
	w.send(sched(10, "1", map[string]string{"FLNO": "CA1"}, nil), sched(10, "2", map[string]string{"FLNO": "ZH1"}, nil))
	w.send(flop(20, "2", "FLNO", map[string]string{"FLNO": "ZH2"}, nil))

	out := w.send(replayed(flop(15, "2", "MAID", map[string]string{"MAID": "1"}, nil), 7))
	if len(out) != 2 || out[1].Kind != KindLink || out[1].FLID != "1" || out[1].Replay != 7 || out[1].MsgID != 15 {
		t.Fatalf("replayed MAID: %+v", out)
	}
	if c := w.states["2"]; c.LastMsgID != 20 || c.Replayed == nil || c.Replayed.Gen != 7 {
		t.Fatalf("child after the replayed MAID: %+v", c)
	}
	if m := w.states["1"]; len(m.MAFL) != 1 || m.MAFL[0] != (MAFLEntry{"2", "ZH2"}) || m.LastMsgID != 15 {
		t.Fatalf("master after the replayed child's LINK: %+v", m)
	}
	// The master's FDEL of message 16, replayed: the child is deleted by
	// the cascade, which is a redelivery the second time.
	out = w.send(replayed(del(16, "1"), 8))
	if len(out) != 2 || !out[1].Cascade || out[1].FLID != "2" || out[1].Replay != 8 {
		t.Fatalf("replayed master deletion: %+v", out)
	}
	if c := w.states["2"]; c.State != StateDeleted || c.LastMsgID != 20 {
		t.Fatalf("cascade of the replayed deletion: %+v", c)
	}
	if again := mustApply(t, w.states["2"], out[1], Options{}); !again.Replay {
		t.Fatalf("second delivery of the cascade: %s", again.Outcome)
	}
}

func TestTouches(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   Transition
		o    Options
		want []string
	}{
		{"FLOP scalar", flop(1, "1", "ESTT", map[string]string{"ESTT": "23JAN210900"}, nil), Options{}, []string{"ESTT"}},
		{"FLOP clearing BOTM resets its status", flop(1, "1", "BOTM", map[string]string{"BOTM": ""}, nil), Options{}, []string{"BOTM", "BDST"}},
		{"FLOP TAOP touches the connection", flop(1, "1", "TAOP", map[string]string{"TAOP": ""}, nil), Options{}, []string{"TAOP", "TAFL", "TAID"}},
		{"FLOP FDIV touches the element", flop(1, "1", "FDIV", map[string]string{"DDES": ""}, nil), Options{}, []string{"FDIV", "DDES", "DDIR"}},
		{"FLOP MAID touches MAFL", flop(1, "1", "MAID", map[string]string{"MAID": "9"}, nil), Options{}, []string{"MAID", "MAFL"}},
		{"FLOP collection", flop(1, "1", "GTDT", nil, map[string][]Element{"GTDT": {{"GTNO": "0"}}}), Options{}, []string{"GTDT"}},
		{"FLOP-FDEL", flop(1, "1", "FDEL", nil, nil), Options{}, []string{ChangedMAFL, ChangedState}},
		{"DELETE", del(1, "1"), Options{}, []string{ChangedMAFL, ChangedState}},
		{"SCHEDULE keep", sched(1, "1", map[string]string{"FLNO": "CA1", "STND": ""}, map[string][]Element{"ROUT": nil}), Options{},
			[]string{"FLNO", "STND", "ROUT", ChangedState}},
		{"SCHEDULE clear touches everything", sched(1, "1", map[string]string{"FLNO": "CA1"}, nil), Options{ScheduleMissing: ScheduleMissingClear},
			func() []string {
				var all []string
				for _, tag := range ChangeOrder {
					if tag != ChangedOperationDay {
						all = append(all, tag)
					}
				}
				return all
			}()},
		{"ADFT sets only", adft(1, "1", map[string]string{"FLNO": "CA1", "STND": "", "FRET": ""},
			map[string][]Element{"GTDT": {{"GTNO": "0"}}, "CKDT": {{"CKNO": "1", "CHKC": "A1"}}}), Options{},
			[]string{"FLNO", "CKDT", ChangedState}},
	} {
		if got := Touches(tc.tr, tc.o); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
