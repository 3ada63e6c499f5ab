package refdata

import (
	"testing"
	"time"
)

func TestSeedState(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := map[string]Entry{
		"CA": {Attrs: Record{"ITOP": "CA"}, UpdatedAt: t0, LastMsgID: 7, Version: 2},
		"MU": {Attrs: Record{"ITOP": "MU"}, UpdatedAt: t0.Add(time.Hour), LastMsgID: 5, Version: 3},
	}
	s := SeedState("AIRL", "", recs)
	if s.KeyTag != "ITOP" || s.Version != 3 || s.LastMsgID != 7 || !s.UpdatedAt.Equal(t0.Add(time.Hour)) || len(s.Records) != 2 {
		t.Fatalf("SeedState = %+v", s)
	}
	if s := SeedState(RSTA, "", nil); s.KeyTag != StatusKey(TagRTYP, TagRSID) {
		t.Fatalf("RSTA key tag %q", s.KeyTag)
	}
	if s := SeedState("ABDG", "ABCD", nil); s.KeyTag != "ABCD" {
		t.Fatalf("first-child key tag %q", s.KeyTag)
	}
	// The seeded state takes an older message for a redelivery and a
	// newer one for new, as the table it replaces would.
	upd := func(id int64) Transition {
		return Transition{MsgID: id, RType: "AIRL", STYP: STYPUPD, Records: []Record{{"ITOP": "CA", "NAME": "Air China"}}}
	}
	if res, err := Apply(SeedState("AIRL", "", recs), upd(6)); err != nil || !res.Replay {
		t.Fatalf("older message: %+v %v", res, err)
	}
	if res, err := Apply(SeedState("AIRL", "", recs), upd(8)); err != nil || res.Replay || len(res.Upserts) != 1 {
		t.Fatalf("new message: %+v %v", res, err)
	}
}
