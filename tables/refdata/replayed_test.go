package refdata

import (
	"reflect"
	"testing"
	"time"

	"msgx/tables/message"
)

// A replayed reference message is applied to the current category although
// newer messages were applied since (docs/design.md#replay); its redelivery
// is recognised by (generation, msgId) and repeats only its own writes; the
// category's LastMsgID never goes back; the records it writes carry the
// category version the sink orders writes by.
func TestReplayedTransitionApplies(t *testing.T) {
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	upd := func(msg int64, name string) Transition {
		return Transition{MsgID: msg, RType: "AIRL", STYP: STYPUPD, At: at.Add(time.Duration(msg) * time.Minute),
			Records: []Record{{"ITOP": "CA", "ONAM": name}}}
	}
	s := NewState("AIRL")
	for _, tr := range []Transition{
		{MsgID: 10, RType: "AIRL", STYP: STYPDNLD, At: at, Records: []Record{{"ITOP": "CA", "ONAM": "AIR CHINA"}, {"ITOP": "MU", "ONAM": "EASTERN"}}},
		upd(20, "AIR CHINA 20"),
	} {
		if _, err := Apply(s, tr); err != nil {
			t.Fatal(err)
		}
	}
	if s.Version != 2 || s.Records["CA"].Version != 2 || s.Records["MU"].Version != 1 {
		t.Fatalf("versions: category %d, CA %d, MU %d", s.Version, s.Records["CA"].Version, s.Records["MU"].Version)
	}

	// Message 15, replayed by generation 7: applied over message 20.
	r, err := Apply(s, replayedRef(upd(15, "AIR CHINA 15"), 7))
	if err != nil || r.Replay || !r.Changed || !reflect.DeepEqual(r.Upserts, []string{"CA"}) {
		t.Fatalf("replayed UPD: %+v %v", r, err)
	}
	ca := s.Records["CA"]
	if ca.Attrs["ONAM"] != "AIR CHINA 15" || ca.LastMsgID != 15 || ca.Version != 3 || s.Version != 3 || s.LastMsgID != 20 ||
		s.Replayed == nil || *s.Replayed != (message.ReplayMark{Gen: 7, MsgID: 15}) {
		t.Fatalf("after the replay: CA %+v, state v%d last %d replayed %+v", ca, s.Version, s.LastMsgID, s.Replayed)
	}
	// Its redelivery changes nothing and repeats its write.
	r, err = Apply(s, replayedRef(upd(15, "AIR CHINA 15"), 7))
	if err != nil || !r.Replay || r.Changed || !reflect.DeepEqual(r.Upserts, []string{"CA"}) || s.Version != 3 {
		t.Fatalf("redelivered replay: %+v %v (v%d)", r, err, s.Version)
	}
	// The newest normal message, redelivered, stays a no-op with nothing
	// of its own left to write.
	if r, err = Apply(s, upd(20, "AIR CHINA 20")); err != nil || !r.Replay || r.Upserts != nil || s.Records["CA"].Attrs["ONAM"] != "AIR CHINA 15" {
		t.Fatalf("redelivered message 20: %+v %v", r, err)
	}

	// A replayed full replace (generation 8) deletes what it does not
	// carry, and its redelivery repeats the deletes; a normal redelivery
	// of message 20 does not take them for its own.
	dnld := Transition{MsgID: 12, RType: "AIRL", STYP: STYPDNLD, At: at, Records: []Record{{"ITOP": "MU", "ONAM": "EASTERN 12"}}}
	if r, err = Apply(s, replayedRef(dnld, 8)); err != nil || !reflect.DeepEqual(r.Deletes, []string{"CA"}) || !reflect.DeepEqual(r.Upserts, []string{"MU"}) {
		t.Fatalf("replayed DNLD: %+v %v", r, err)
	}
	if r, err = Apply(s, replayedRef(dnld, 8)); err != nil || !r.Replay || !reflect.DeepEqual(r.Deletes, []string{"CA"}) {
		t.Fatalf("redelivered replayed DNLD: %+v %v", r, err)
	}
	if r, err = Apply(s, upd(20, "AIR CHINA 20")); err != nil || !r.Replay || r.Deletes != nil {
		t.Fatalf("redelivered message 20 after the replayed DNLD: %+v %v", r, err)
	}
	// An earlier generation is a redelivery, a normal new message applies.
	if r, err = Apply(s, replayedRef(upd(15, "AIR CHINA 15"), 7)); err != nil || !r.Replay {
		t.Fatalf("generation 7 after 8: %+v %v", r, err)
	}
	if r, err = Apply(s, upd(30, "AIR CHINA 30")); err != nil || r.Replay || !r.Changed || s.LastMsgID != 30 || s.Records["CA"].Version != s.Version {
		t.Fatalf("message 30: %+v %v", r, err)
	}
}

func replayedRef(tr Transition, gen int64) Transition {
	tr.Replay = gen
	return tr
}

func TestTouches(t *testing.T) {
	for _, tc := range []struct {
		tr   Transition
		keys []string
		all  bool
	}{
		{Transition{RType: "AIRL", STYP: STYPUPD, Records: []Record{{"ITOP": "MU"}, {"ITOP": "CA"}, {"ITOP": "MU"}}}, []string{"CA", "MU"}, false},
		{Transition{RType: "AIRL", STYP: STYPDNLD, Records: []Record{{"ITOP": "CA"}}}, []string{"CA"}, true},
		{Transition{RType: "AIRL", STYP: STYPRESP}, nil, true},
		{Transition{RType: RSTA, STYP: STYPRESP, Records: []Record{{"RTYP": "GATE", "RSID": "21", "STAT": "D"}}}, []string{"GATE|21"}, false},
	} {
		keys, all, err := Touches(tc.tr)
		if err != nil || !reflect.DeepEqual(keys, tc.keys) || all != tc.all {
			t.Errorf("%s-%s: %v %v %v, want %v %v", tc.tr.RType, tc.tr.STYP, keys, all, err, tc.keys, tc.all)
		}
	}
	if _, _, err := Touches(Transition{RType: "AIRL", STYP: STYPUPD, Records: []Record{{"ONAM": "X"}}}); err == nil {
		t.Error("a record without its key touches nothing")
	}
}
