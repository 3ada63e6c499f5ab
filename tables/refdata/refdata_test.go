package refdata

import (
	"encoding/json"
	"errors"
	"msgx/internal/kafka"
	"reflect"
	"testing"
	"time"
)

// Records below are hand-built the way the SIS codec builds them from
// testdata/sis-samples (INSERT_CMINMSGS_AIRL.sql, _ABDG.sql, _CLST.sql, _CHLT.sql).

func airlUA() Record {
	return Record{
		"ITOP": "UA", "ICOP": "UAL", "ONAM": "UNITED AIRLINES", "ONMC": "UNITED 航空公司", "CTRY": "USA",
		"TRML": map[string]any{"@MVIN": "", "@FLIN": ""},
		"OGRP": "STAR ALLIANCE",
		"SUBC": []any{
			map[string]any{"CODE": "001", "NAME": "First Subcompany", "NAMC": "第一子公司"},
			map[string]any{"CODE": "002", "NAME": "Second Subcompany", "NAMC": "第二子公司"},
		},
		"DORI": "I",
	}
}

func airlAA() Record {
	return Record{
		"ITOP": "AA", "ICOP": "AAL", "ONAM": "AMERICAN AIRLINES", "ONMC": "美国航空公司", "CTRY": "USA",
		"TRML": map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T2"},
		"OGRP": "ONE WORLD", "DORI": "I",
	}
}

func airlCX() Record {
	return Record{
		"ITOP": "CX", "ICOP": "CPA", "ONAM": "CATHAY PACIFIC", "ONMC": "香港航空公司", "CTRY": "HKG",
		"TRML": []any{
			map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T3A"},
			map[string]any{"@MVIN": "D", "@FLIN": "I", "#text": "T3B"},
		},
		"OGRP": []any{"ONE WORLD", "CHINA WORLD"},
		"DORI": "I",
	}
}

func abdg212() Record {
	return Record{"ABCD": "212", "DESC": "Airbridge 212", "CDSC": "登机桥 212", "AHGT": "", "ATML": "T2",
		"ATHE": "N", "STND": "212", "GATE": "21", "AMNO": "1"}
}

func abdg112() Record {
	return Record{"ABCD": "112", "DESC": "Airbridge 112", "CDSC": "登机桥 112", "AHGT": "", "ATML": "T1",
		"ATHE": "Y", "STND": []any{"112", "111"}, "GATE": []any{"11A", "11B"}, "AMNO": "2"}
}

func abdg213() Record {
	return Record{"ABCD": "213", "DESC": "Airbridge 213", "CDSC": "登机桥 213", "AHGT": "", "ATML": "T2",
		"ATHE": "N", "STND": []any{"213", "", "613"}, "GATE": []any{"23", "", "223"}, "AMNO": ""}
}

func clstC11() Record {
	return Record{"CCOD": "C11", "CTNM": "Desk 11 North side", "CNMC": "北方柜台十一", "CCAT": "D", "CTML": "T3A", "CTRA": "Y"}
}

func chltC11() Record {
	return Record{"CCOD": "C11", "CHNM": "Chute 11 North side", "CNMC": "北方行李传送带十一", "CTML": "T3A", "CCAT": "D"}
}

func rsta(rtyp, rsid, stat, strt, endt string) Record {
	r := Record{TagRTYP: rtyp, TagRSID: rsid, TagSTAT: stat}
	if strt != "" {
		r[TagSTRT] = strt
	}
	if endt != "" {
		r[TagENDT] = endt
	}
	return r
}

// season is a seasonal-schedule record as the router builds it.
func season(name, flno string) Record {
	return Record{"SNAM": name, "SDAT": "10SEP20", "FLTR": []any{map[string]any{"FLNO": flno, "ROUT": []any{map[string]any{"APCD": "HKG"}}}}}
}

var t0 = time.Date(2026, 3, 14, 2, 0, 0, 0, time.UTC)

// tr builds a transition; FirstChild is set from the sample convention for
// FirstChildTypes (ABDG → ABCD).
func tr(id int64, rtype, styp string, recs ...Record) Transition {
	t := Transition{MsgID: id, RType: rtype, STYP: styp, At: t0.Add(time.Duration(id) * time.Minute), Records: recs}
	switch rtype {
	case "ABDG":
		t.FirstChild = "ABCD"
	case Season:
		t.FirstChild = "SNAM"
	}
	return t
}

type step struct {
	t       Transition
	want    Result
	wantErr Reason // non-empty: Apply must fail with a *RecordError of this reason
	errIdx  int
}

func TestApply(t *testing.T) {
	uaNoName := airlUA()
	uaNoName["ONAM"] = "" // <ONAM></ONAM>: unavailable, not deleted
	aaMoved := airlAA()
	aaMoved["TRML"] = map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T3"}
	abdg213Upd := Record{"ABCD": "213", "DESC": "T2 Airbridge 213", "CDSC": "登机桥 213", "AHGT": "", "ATML": "T2",
		"ATHE": "N", "STND": []any{"213", "256"}, "GATE": []any{"123", "233"}, "AMNO": ""}
	noKey := airlAA()
	delete(noKey, "ITOP")
	blankKey := airlAA()
	blankKey["ITOP"] = "  "

	cases := []struct {
		name  string
		rtype string
		steps []step
		want  map[string]Record // final records
	}{
		{
			name:  "DNLD replaces the category, absent records are deletions",
			rtype: "AIRL",
			steps: []step{
				{t: tr(1, "AIRL", STYPDNLD, airlUA(), airlAA(), airlCX()),
					want: Result{Upserts: []string{"AA", "CX", "UA"}, Changed: true}},
				{t: tr(2, "AIRL", STYPDNLD, airlAA(), Record{"ITOP": "ZZ", "ONAM": "ZED"}),
					want: Result{Upserts: []string{"ZZ"}, Deletes: []string{"CX", "UA"}, Changed: true}},
			},
			want: map[string]Record{"AA": airlAA(), "ZZ": {"ITOP": "ZZ", "ONAM": "ZED"}},
		},
		{
			name:  "a seasonal schedule replaces the season it names, not the category",
			rtype: Season,
			steps: []step{
				{t: tr(1, Season, STYPDNLD, season("Winter", "LH724")), want: Result{Upserts: []string{"Winter"}, Changed: true}},
				{t: tr(2, Season, STYPDNLD, season("Summer", "CA002")), want: Result{Upserts: []string{"Summer"}, Changed: true}},
				{t: tr(3, Season, STYPRESP, season("Winter", "LH725")), want: Result{Upserts: []string{"Winter"}, Changed: true}},
				{t: tr(4, Season, STYPRESP, season("Winter", "LH725")), want: Result{}},
			},
			want: map[string]Record{"Summer": season("Summer", "CA002"), "Winter": season("Winter", "LH725")},
		},
		{
			name:  "RESP replaces like DNLD; an identical package changes nothing",
			rtype: "AIRL",
			steps: []step{
				{t: tr(1, "AIRL", STYPRESP, airlUA(), airlAA()), want: Result{Upserts: []string{"AA", "UA"}, Changed: true}},
				{t: tr(2, "AIRL", STYPRESP, airlAA(), airlUA()), want: Result{}},
			},
			want: map[string]Record{"AA": airlAA(), "UA": airlUA()},
		},
		{
			name:  "an empty package empties the category",
			rtype: "AIRL",
			steps: []step{
				{t: tr(1, "AIRL", STYPDNLD, airlUA()), want: Result{Upserts: []string{"UA"}, Changed: true}},
				{t: tr(2, "AIRL", STYPDNLD), want: Result{Deletes: []string{"UA"}, Changed: true}},
			},
			want: map[string]Record{},
		},
		{
			name:  "incremental ADD, UPD, DEL keep the other records",
			rtype: "AIRL",
			steps: []step{
				{t: tr(1, "AIRL", STYPDNLD, airlUA(), airlAA(), airlCX()),
					want: Result{Upserts: []string{"AA", "CX", "UA"}, Changed: true}},
				{t: tr(2, "AIRL", STYPADD, Record{"ITOP": "AB", "ICOP": "AB"}),
					want: Result{Upserts: []string{"AB"}, Changed: true}},
				{t: tr(3, "AIRL", STYPUPD, aaMoved), want: Result{Upserts: []string{"AA"}, Changed: true}},
				{t: tr(4, "AIRL", STYPDEL, Record{"ITOP": "CX"}), want: Result{Deletes: []string{"CX"}, Changed: true}},
			},
			want: map[string]Record{"AA": aaMoved, "AB": {"ITOP": "AB", "ICOP": "AB"}, "UA": airlUA()},
		},
		{
			name:  "ADD of an existing key upserts, UPD of a missing key creates, DEL of a missing key is a no-op",
			rtype: "AIRL",
			steps: []step{
				{t: tr(1, "AIRL", STYPUPD, airlUA()), want: Result{Upserts: []string{"UA"}, Changed: true}},
				{t: tr(2, "AIRL", STYPADD, uaNoName), want: Result{Upserts: []string{"UA"}, Changed: true}},
				{t: tr(3, "AIRL", STYPDEL, Record{"ITOP": "XX"}), want: Result{}},
			},
			want: map[string]Record{"UA": uaNoName},
		},
		{
			name:  "an empty tag is kept as unavailable, the record stays",
			rtype: "AIRL",
			steps: []step{
				{t: tr(1, "AIRL", STYPDNLD, airlUA()), want: Result{Upserts: []string{"UA"}, Changed: true}},
				{t: tr(2, "AIRL", STYPUPD, uaNoName), want: Result{Upserts: []string{"UA"}, Changed: true}},
			},
			want: map[string]Record{"UA": uaNoName},
		},
		{
			name:  "DEL carrying only the key",
			rtype: "AIRL",
			steps: []step{
				{t: tr(1, "AIRL", STYPDNLD, airlUA(), airlAA()), want: Result{Upserts: []string{"AA", "UA"}, Changed: true}},
				{t: tr(2, "AIRL", STYPDEL, Record{"ITOP": "AA"}), want: Result{Deletes: []string{"AA"}, Changed: true}},
			},
			want: map[string]Record{"UA": airlUA()},
		},
		{
			name:  "a key sent twice in one message: the later record wins",
			rtype: "AIRL",
			steps: []step{
				{t: tr(1, "AIRL", STYPDNLD, airlAA(), aaMoved), want: Result{Upserts: []string{"AA"}, Changed: true}},
			},
			want: map[string]Record{"AA": aaMoved},
		},
		{
			name:  "replays of the last and of an older message change nothing and repeat current writes",
			rtype: "AIRL",
			steps: []step{
				{t: tr(5, "AIRL", STYPDNLD, airlUA(), airlAA(), airlCX()),
					want: Result{Upserts: []string{"AA", "CX", "UA"}, Changed: true}},
				{t: tr(6, "AIRL", STYPDNLD, airlUA(), aaMoved),
					want: Result{Upserts: []string{"AA"}, Deletes: []string{"CX"}, Changed: true}},
				// Same message again: the table write survived, the PG write maybe not.
				{t: tr(6, "AIRL", STYPDNLD, airlUA(), aaMoved),
					want: Result{Upserts: []string{"AA"}, Deletes: []string{"CX"}, Replay: true}},
				// An older one: only its writes that are still current (UA).
				{t: tr(5, "AIRL", STYPDNLD, airlCX()), want: Result{Upserts: []string{"UA"}, Replay: true}},
				{t: tr(4, "AIRL", STYPDEL, Record{"ITOP": "UA"}), want: Result{Replay: true}},
			},
			want: map[string]Record{"AA": aaMoved, "UA": airlUA()},
		},
		{
			name:  "CLST keyed by CCOD",
			rtype: "CLST",
			steps: []step{
				{t: tr(1, "CLST", STYPDNLD, clstC11()), want: Result{Upserts: []string{"C11"}, Changed: true}},
				{t: tr(2, "CLST", STYPADD, Record{"CCOD": "C12"}), want: Result{Upserts: []string{"C12"}, Changed: true}},
			},
			want: map[string]Record{"C11": clstC11(), "C12": {"CCOD": "C12"}},
		},
		{
			name:  "ABDG keyed by its first child ABCD (sample DNLD, ADD, UPD, DEL)",
			rtype: "ABDG",
			steps: []step{
				{t: tr(1, "ABDG", STYPDNLD, abdg212(), abdg112()), want: Result{Upserts: []string{"112", "212"}, Changed: true}},
				{t: tr(2, "ABDG", STYPADD, abdg213()), want: Result{Upserts: []string{"213"}, Changed: true}},
				{t: tr(3, "ABDG", STYPUPD, abdg213Upd), want: Result{Upserts: []string{"213"}, Changed: true}},
				{t: tr(4, "ABDG", STYPDEL, Record{"ABCD": "212", "DESC": "whatever"}),
					want: Result{Deletes: []string{"212"}, Changed: true}},
			},
			want: map[string]Record{"112": abdg112(), "213": abdg213Upd},
		},
		{
			name:  "ABDG increment keyed by another first child is refused",
			rtype: "ABDG",
			steps: []step{
				{t: tr(1, "ABDG", STYPDNLD, abdg212()), want: Result{Upserts: []string{"212"}, Changed: true}},
				{t: func() Transition {
					x := tr(2, "ABDG", STYPADD, Record{"DESC": "x", "ABCD": "9"})
					x.FirstChild = "DESC"
					return x
				}(), wantErr: ReasonKeyTag},
			},
			want: map[string]Record{"212": abdg212()},
		},
		{
			name:  "a record without key fails the whole message and changes nothing",
			rtype: "AIRL",
			steps: []step{
				{t: tr(1, "AIRL", STYPDNLD, airlUA()), want: Result{Upserts: []string{"UA"}, Changed: true}},
				{t: tr(2, "AIRL", STYPDNLD, airlCX(), noKey), wantErr: ReasonMissingKey, errIdx: 1},
				{t: tr(3, "AIRL", STYPADD, blankKey), wantErr: ReasonMissingKey},
				{t: tr(4, "AIRL", STYPDEL, Record{"ICOP": "UAL"}), wantErr: ReasonMissingKey},
			},
			want: map[string]Record{"UA": airlUA()},
		},
		{
			name:  "RSTA: DNLD single, RESP many, nothing removed by absence, DEL restores the default",
			rtype: RSTA,
			steps: []step{
				{t: tr(1, RSTA, STYPDNLD, rsta("GATE", "21", "D", "", "")),
					want: Result{Upserts: []string{"GATE|21"}, Changed: true}},
				{t: tr(2, RSTA, STYPRESP, rsta("BELT", "3", "D", "14MAR261000", "14MAR261200"), rsta("STND", "212", "E", "", "")),
					want: Result{Upserts: []string{"BELT|3", "STND|212"}, Changed: true}},
				{t: tr(3, RSTA, STYPDNLD, rsta("GATE", "21", "E", "", "")),
					want: Result{Upserts: []string{"GATE|21"}, Changed: true}},
				{t: tr(4, RSTA, STYPDEL, Record{TagRTYP: "STND", TagRSID: "212"}),
					want: Result{Deletes: []string{"STND|212"}, Changed: true}},
			},
			want: map[string]Record{
				"GATE|21": rsta("GATE", "21", "E", "", ""),
				"BELT|3":  rsta("BELT", "3", "D", "14MAR261000", "14MAR261200"),
			},
		},
		{
			name:  "RSTA: bad records are refused",
			rtype: RSTA,
			steps: []step{
				{t: tr(1, RSTA, STYPDNLD, rsta("LIFT", "1", "D", "", "")), wantErr: ReasonBadValue},
				{t: tr(2, RSTA, STYPDNLD, rsta("GATE", "", "D", "", "")), wantErr: ReasonMissingKey},
				{t: tr(3, RSTA, STYPDNLD, rsta("GATE", "21", "X", "", "")), wantErr: ReasonBadValue},
				{t: tr(4, RSTA, STYPDNLD, rsta("GATE", "21", "", "", "")), wantErr: ReasonBadValue},
				{t: tr(5, RSTA, STYPRESP, rsta("GATE", "1", "E", "", ""), rsta("GATE", "21", "D", "2026-03-14 10:00", "")),
					wantErr: ReasonBadTime, errIdx: 1},
				{t: tr(6, RSTA, STYPDNLD, rsta("GATE", "21", "D", "14MAR261200", "14MAR261000")), wantErr: ReasonBadValue},
			},
			want: map[string]Record{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState(tc.rtype)
			for i, st := range tc.steps {
				before := mustJSON(t, s)
				got, err := Apply(s, st.t)
				if st.wantErr != "" {
					var re *RecordError
					if !errors.As(err, &re) || re.Reason != st.wantErr || re.Index != st.errIdx {
						t.Fatalf("step %d: err = %v, want *RecordError %s at record %d", i, err, st.wantErr, st.errIdx)
					}
					if after := mustJSON(t, s); after != before {
						t.Fatalf("step %d: failed Apply changed the state:\n%s\n%s", i, before, after)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if !reflect.DeepEqual(got, st.want) {
					t.Fatalf("step %d: result = %+v, want %+v", i, got, st.want)
				}
				if got.Replay && mustJSON(t, s) != before {
					t.Fatalf("step %d: replay changed the state", i)
				}
			}
			gotRecs := map[string]Record{}
			for k, e := range s.Records {
				gotRecs[k] = e.Attrs
			}
			if !reflect.DeepEqual(gotRecs, tc.want) {
				t.Fatalf("records = %v\nwant %v", gotRecs, tc.want)
			}
		})
	}
}

func TestApplyBookkeeping(t *testing.T) {
	s := NewState("AIRL")
	mustApply(t, s, tr(10, "AIRL", STYPDNLD, airlUA(), airlAA()))
	mustApply(t, s, tr(11, "AIRL", STYPUPD, airlAA())) // no change
	if s.Version != 1 || s.LastMsgID != 11 || !s.UpdatedAt.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("after a no-op: version %d lastMsgId %d updatedAt %v", s.Version, s.LastMsgID, s.UpdatedAt)
	}
	if e := s.Records["AA"]; e.LastMsgID != 10 {
		t.Fatalf("unchanged record rewritten: %+v", e)
	}
	shanghai := time.FixedZone("CST", 8*3600)
	x := tr(12, "AIRL", STYPDEL, Record{"ITOP": "UA"})
	x.At = x.At.In(shanghai)
	mustApply(t, s, x)
	if s.Version != 2 || s.UpdatedAt.Location() != time.UTC || len(s.LastDeletes) != 1 {
		t.Fatalf("after DEL: %+v", s)
	}
	// The state never aliases the caller's record.
	rec := airlCX()
	mustApply(t, s, tr(13, "AIRL", STYPADD, rec))
	rec["OGRP"].([]any)[0] = "CHANGED"
	if s.Records["CX"].Attrs["OGRP"].([]any)[0] != "ONE WORLD" {
		t.Fatal("state aliases the transition's record")
	}
}

func TestApplyRefusesMisrouted(t *testing.T) {
	cases := []struct {
		name        string
		s           *State
		t           Transition
		unsupported bool
	}{
		{"nil state", nil, tr(1, "AIRL", STYPDNLD), false},
		{"CHLT transition on the CLST state", NewState("CLST"), tr(1, "CHLT", STYPDNLD, chltC11()), false},
		{"not reference data", NewState("FLOP"), tr(1, "FLOP", "ACFT"), true},
		{"unknown STYP", NewState("AIRL"), tr(1, "AIRL", "FDEL"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Apply(tc.s, tc.t)
			if err == nil || errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Fatalf("err = %v, unsupported want %v", err, tc.unsupported)
			}
		})
	}
}

// CLST and CHLT share CCOD, CNMC, CTML, CCAT: only the RTYPE, hence the state
// value, separates them.
func TestCLSTAndCHLTAreSeparate(t *testing.T) {
	clst, chlt := NewState("CLST"), NewState("CHLT")
	mustApply(t, clst, tr(1, "CLST", STYPDNLD, clstC11()))
	mustApply(t, chlt, tr(2, "CHLT", STYPDNLD, chltC11()))
	mustApply(t, chlt, tr(3, "CHLT", STYPDEL, Record{"CCOD": "C11"}))
	if len(chlt.Records) != 0 {
		t.Fatalf("CHLT C11 not deleted: %v", chlt.Records)
	}
	if !reflect.DeepEqual(clst.Records["C11"].Attrs, clstC11()) {
		t.Fatalf("CLST C11 = %v", clst.Records["C11"].Attrs)
	}
	if KeyTag("CLST") != "CCOD" || KeyTag("CHLT") != "CCOD" {
		t.Fatal("CLST/CHLT key tags")
	}
}

func TestKeyOf(t *testing.T) {
	cases := []struct {
		name       string
		rtype      string
		rec        Record
		firstChild string
		want       string
		wantErr    Reason
		wantTag    string
	}{
		{"fixed key tag", "AIRL", airlUA(), "", "UA", "", ""},
		{"fixed key tag ignores first child", "AIRL", airlUA(), "ICOP", "UA", "", ""},
		{"key trimmed", "COUL", Record{"COUC": " PRC\n"}, "", "PRC", "", ""},
		{"key element with attributes", "TLST", Record{"TCOD": map[string]any{"@X": "1", "#text": "T2"}}, "", "T2", "", ""},
		{"missing key tag", "AIRL", Record{"ICOP": "UAL"}, "", "", ReasonMissingKey, "ITOP"},
		{"empty key tag", "AIRC", Record{"ITAT": ""}, "", "", ReasonMissingKey, "ITAT"},
		{"repeated key tag", "ARPT", Record{"ITCD": []any{"SHA", "PVG"}}, "", "", ReasonBadValue, "ITCD"},
		{"CLST and CHLT by CCOD", "CHLT", chltC11(), "", "C11", "", ""},
		{"RSTA composite", RSTA, rsta("GATE", "21", "D", "", ""), "", "GATE|21", "", ""},
		{"RSTA without RSID", RSTA, Record{TagRTYP: "GATE"}, "", "", ReasonMissingKey, TagRSID},
		{"RSTA unknown RTYP", RSTA, Record{TagRTYP: "LIFT", TagRSID: "1"}, "", "", ReasonBadValue, TagRTYP},
		{"first child of ABDG", "ABDG", abdg112(), "ABCD", "112", "", ""},
		{"first child of CITY", "CITY", Record{"ITCD": "SHA", "CNAM": "SHANGHAI"}, "ITCD", "SHA", "", ""},
		{"first-child type without first child", "ABDG", abdg112(), "", "", ReasonMissingKey, ""},
		{"record lacks the message's first child", "ABNR", Record{"ANRD": "Bad Weather"}, "ANRC", "", ReasonMissingKey, "ANRC"},
		{"not reference data", "SCHD", Record{"FLID": "1"}, "FLID", "", ReasonUnsupported, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KeyOf(tc.rtype, tc.rec, tc.firstChild)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("KeyOf = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			var re *RecordError
			if !errors.As(err, &re) || re.Reason != tc.wantErr || re.Tag != tc.wantTag {
				t.Fatalf("err = %#v, want reason %s tag %q", err, tc.wantErr, tc.wantTag)
			}
			if errors.Is(err, ErrUnsupported) != (tc.wantErr == ReasonUnsupported) {
				t.Fatalf("errors.Is(%v, ErrUnsupported) wrong", err)
			}
		})
	}
}

func TestRecordErrorMessage(t *testing.T) {
	_, err := Apply(NewState("AIRL"), tr(1, "AIRL", STYPADD, Record{"ICOP": "UAL"}))
	if got, want := err.Error(), "refdata AIRL record 0: missing key tag ITOP"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

func TestVocabulary(t *testing.T) {
	cases := []struct {
		rtype     string
		supported bool
		keyTag    string
	}{
		{"COUL", true, "COUC"}, {"ARPT", true, "ITCD"}, {"AIRL", true, "ITOP"}, {"AIRC", true, "ITAT"},
		{"REGN", true, "RNUM"}, {"ORGN", true, "OGID"}, {"FLTL", true, "FTYP"}, {"TLST", true, "TCOD"},
		{"GLST", true, "GCOD"}, {"SLST", true, "SCOD"}, {"CLST", true, "CCOD"}, {"BLST", true, "BCOD"},
		{"CHLT", true, "CCOD"},
		{RSTA, true, ""},
		{"ABDG", true, ""}, {"CITY", true, ""}, {"VIPS", true, ""},
		{"FLOP", false, ""}, {"SCHD", false, ""}, {"EROR", false, ""}, {"airl", false, ""},
	}
	for _, tc := range cases {
		if Supported(tc.rtype) != tc.supported || KeyTag(tc.rtype) != tc.keyTag {
			t.Errorf("%s: Supported %v KeyTag %q", tc.rtype, Supported(tc.rtype), KeyTag(tc.rtype))
		}
	}
	if len(Categories) != 13 {
		t.Fatalf("%d categories", len(Categories))
	}
	for _, st := range []string{"DNLD", "RESP", "ADD", "UPD", "DEL"} {
		if !SupportedSTYP(st) {
			t.Errorf("STYP %s", st)
		}
	}
	if SupportedSTYP("ADFT") {
		t.Error("STYP ADFT")
	}
}

func TestStatusAt(t *testing.T) {
	shanghai := time.FixedZone("Asia/Shanghai", 8*3600)
	local := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, shanghai) }
	ptr := func(t time.Time) *time.Time { return &t }
	window := rsta("GATE", "21", "D", "14MAR261000", "14MAR261200") // 10:00–12:00 local
	cases := []struct {
		name      string
		rec       Record
		at        time.Time
		wantStat  string
		wantUntil *time.Time
	}{
		{"no entry: available", nil, local(14, 11, 0), "E", nil},
		{"E", rsta("GATE", "21", "E", "", ""), local(14, 11, 0), "E", nil},
		{"E ignores a window", rsta("GATE", "21", "E", "14MAR261000", "14MAR261200"), local(14, 11, 0), "E", nil},
		{"window: before", window, local(14, 9, 59), "E", ptr(local(14, 10, 0))},
		{"window: at start", window, local(14, 10, 0), "D", ptr(local(14, 12, 0))},
		{"window: inside", window, local(14, 11, 30), "D", ptr(local(14, 12, 0))},
		{"window: inside, instant given in UTC", window, time.Date(2026, 3, 14, 3, 30, 0, 0, time.UTC), "D", ptr(local(14, 12, 0))},
		{"window: at end, auto-restored", window, local(14, 12, 0), "E", nil},
		{"window: after", window, local(15, 8, 0), "E", nil},
		{"D without window", rsta("GATE", "21", "D", "", ""), local(20, 0, 0), "D", nil},
		{"D with start, no end: before", rsta("GATE", "21", "D", "14MAR261000", ""), local(14, 9, 0), "E", ptr(local(14, 10, 0))},
		{"D with start, no end: long after", rsta("GATE", "21", "D", "14MAR261000", ""), local(30, 9, 0), "D", nil},
		{"D with end only: before end", rsta("GATE", "21", "D", "", "14MAR261200"), local(14, 11, 0), "D", ptr(local(14, 12, 0))},
		{"D with end only: after end", rsta("GATE", "21", "D", "", "14MAR261200"), local(14, 13, 0), "E", nil},
		{"empty window tags count as missing", Record{TagSTAT: "D", TagSTRT: "", TagENDT: ""}, local(14, 11, 0), "D", nil},
		{"upper-case month", rsta("BELT", "1", "D", "01JAN271000", "01JAN271100"), time.Date(2027, 1, 1, 10, 30, 0, 0, shanghai), "D",
			ptr(time.Date(2027, 1, 1, 11, 0, 0, 0, shanghai))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stat, until := StatusAt(Entry{Attrs: tc.rec}, tc.at, shanghai)
			if stat != tc.wantStat || (until == nil) != (tc.wantUntil == nil) ||
				(until != nil && !until.Equal(*tc.wantUntil)) {
				t.Fatalf("StatusAt = %s, %v; want %s, %v", stat, until, tc.wantStat, tc.wantUntil)
			}
		})
	}
}

func TestParseSISTime(t *testing.T) {
	cases := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"14MAR211023", time.Date(2021, 3, 14, 10, 23, 0, 0, time.UTC), false},
		{" 01jan991200\n", time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC), false},
		{"2021-03-14", time.Time{}, true},
		{"32JAN211000", time.Time{}, true},
		{"14MAR212460", time.Time{}, true},
	}
	for _, tc := range cases {
		got, err := ParseSISTime(tc.in, nil)
		if (err != nil) != tc.wantErr || (!tc.wantErr && !got.Equal(tc.want)) {
			t.Errorf("ParseSISTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestList(t *testing.T) {
	s := NewState("AIRL")
	mustApply(t, s, tr(1, "AIRL", STYPDNLD, airlUA(), airlCX(), airlAA()))
	views := s.List()
	var keys []string
	for _, v := range views {
		keys = append(keys, v.Key)
	}
	if !reflect.DeepEqual(keys, []string{"AA", "CX", "UA"}) {
		t.Fatalf("keys %v", keys)
	}
	if !reflect.DeepEqual(views[1].Attrs, map[string]any(airlCX())) || views[1].LastMsgID != 1 {
		t.Fatalf("view %+v", views[1])
	}
	views[1].Attrs["OGRP"].([]any)[0] = "CHANGED"
	if s.Records["CX"].Attrs["OGRP"].([]any)[0] != "ONE WORLD" {
		t.Fatal("List aliases the state")
	}
	b, err := json.Marshal(views[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"key":"AA","attrs":{"CTRY":"USA","DORI":"I","ICOP":"AAL","ITOP":"AA","OGRP":"ONE WORLD",` +
		`"ONAM":"AMERICAN AIRLINES","ONMC":"美国航空公司","TRML":{"#text":"T2","@FLIN":"I","@MVIN":"A"}},` +
		`"updatedAt":"2026-03-14T02:01:00Z","lastMsgId":1}`
	if string(b) != want {
		t.Fatalf("view JSON\n%s\nwant\n%s", b, want)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	transitions := []Transition{
		tr(1, "ABDG", STYPDNLD, abdg212(), abdg112()),
		tr(2, "ABDG", STYPADD, abdg213()),
		tr(3, "ABDG", STYPDEL, Record{"ABCD": "212"}),
	}
	s := NewState("ABDG")
	for _, x := range transitions {
		// The transition as it travels on msgx.refdata-transitions.
		b, err := kafka.JSON[Transition]{}.Encode(x)
		if err != nil {
			t.Fatal(err)
		}
		v, err := kafka.JSON[Transition]{}.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*v.(*Transition), x) {
			t.Fatalf("transition round trip\n%+v\nwant %+v", v, x)
		}
		mustApply(t, s, *v.(*Transition))
	}

	b, err := kafka.JSON[State]{}.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := kafka.JSON[State]{}.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	back := v.(*State)
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("state round trip\n%+v\nwant %+v", back, s)
	}
	// A restored state behaves like the original: a resent identical record is
	// still recognised as unchanged, and the replay guard holds.
	next := tr(4, "ABDG", STYPUPD, abdg213())
	r1, _ := Apply(s, next)
	r2, _ := Apply(back, next)
	if r2.Changed || !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(back, s) {
		t.Fatalf("restored state diverged: %+v vs %+v", r1, r2)
	}
	if r, _ := Apply(back, transitions[0]); !r.Replay {
		t.Fatal("replay guard lost in the round trip")
	}

	empty, err := kafka.JSON[State]{}.Decode([]byte(`{"rtype":"AIRL"}`))
	if err != nil || empty.(*State).Records == nil {
		t.Fatalf("decoded state without records: %v %v", empty, err)
	}
	if _, err := (kafka.JSON[State]{}).Encode("x"); err == nil {
		t.Fatal("the state codec encoded a string")
	}
}

func mustApply(t *testing.T, s *State, x Transition) Result {
	t.Helper()
	r, err := Apply(s, x)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A write's subset keeps what the sink writes — the scalars and the
// upserted records — and stays as it was while the category's next
// transitions change the state in place.
func TestSubsetOutlivesTheNextTransition(t *testing.T) {
	s := NewState("AIRL")
	res, err := Apply(s, tr(1, "AIRL", STYPDNLD, airlUA(), airlAA()))
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Subset(append(res.Upserts, "XX")) // a key the state lacks is left out
	want := map[string]Entry{"AA": s.Records["AA"], "UA": s.Records["UA"]}
	if sub.RType != "AIRL" || sub.Version != s.Version || sub.LastMsgID != 1 || !reflect.DeepEqual(sub.Records, want) {
		t.Fatalf("subset: %+v, want the scalars of %+v and records %v", sub, s, want)
	}
	if _, err := Apply(s, tr(2, "AIRL", STYPDNLD, Record{"ITOP": "ZZ", "ONAM": "ZED"})); err != nil {
		t.Fatal(err)
	}
	if sub.Version == s.Version || sub.LastMsgID != 1 || !reflect.DeepEqual(sub.Records, want) {
		t.Fatalf("the subset changed with the state: %+v", sub)
	}
	if _, ok := s.Records["AA"]; ok {
		t.Fatal("the next transition did not delete AA (the test proves nothing)")
	}
}
