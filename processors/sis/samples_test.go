package sis

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"msgx/internal/sample"
)

var (
	samplesOnce sync.Once
	samplesAll  []sample.Sample
	samplesErr  error
)

// loadSamples loads the sample messages once per test binary.
func loadSamples(tb testing.TB) []sample.Sample {
	tb.Helper()
	samplesOnce.Do(func() { samplesAll, samplesErr = sample.Load(sample.Dir()) })
	if samplesErr != nil {
		tb.Fatal(samplesErr)
	}
	return samplesAll
}

// sampleXML returns the sample with the given file and index.
func sampleXML(tb testing.TB, file string, index int) []byte {
	tb.Helper()
	for _, s := range loadSamples(tb) {
		if s.File == file && s.Index == index {
			return []byte(s.XML)
		}
	}
	tb.Fatalf("no sample %s#%d", file, index)
	return nil
}

// decodeSample decodes a sample that must decode.
func decodeSample(t *testing.T, file string, index int) *Message {
	t.Helper()
	m, err := Decode(sampleXML(t, file, index), shanghai(t))
	if err != nil {
		t.Fatalf("%s#%d: %v", file, index, err)
	}
	return m
}

func shanghai(tb testing.TB) *time.Location {
	tb.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		tb.Fatal(err)
	}
	return loc
}

// TestAllSamples decodes every sample: each one decodes to the Kind its
// TYPE/STYP implies, or fails with the expected class.
func TestAllSamples(t *testing.T) {
	// The samples that must fail, by sample name, with their class and the
	// start of their reason.
	failures := map[string]struct {
		class  Class
		reason string
	}{
		// A doubled </MSG> closing tag.
		"INSERT_CMINMSGS_ABNR.sql#2(ADD)": {Malformed, "not well-formed XML: XML syntax error on line 17: unexpected end element </MSG>"},
	}
	samples := loadSamples(t)
	if len(samples) != 172 {
		t.Fatalf("%d samples, want 172", len(samples))
	}
	seen := 0
	for _, s := range samples {
		t.Run(s.Name(), func(t *testing.T) {
			m, err := Decode([]byte(s.XML), shanghai(t))
			if want, ok := failures[s.Name()]; ok {
				seen++
				var de *DecodeError
				if !errors.As(err, &de) || de.Class != want.class || !strings.HasPrefix(de.Reason, want.reason) {
					t.Fatalf("err = %v, want %s %q", err, want.class, want.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Meta.SNDR != "AODB" || m.Meta.SEQN == "" || m.Meta.DTTM.IsZero() {
				t.Errorf("meta = %+v", m.Meta)
			}
			var want Kind
			switch {
			case m.Meta.TYPE == "SCHD":
				want = KindSchedule
			case m.Meta.TYPE == "FLOP" && m.Meta.STYP == "FDEL":
				want = KindFlightDelete
			case m.Meta.TYPE == "FLOP":
				want = KindFlightOp
			case m.Meta.TYPE == "SCHS":
				want = KindUnknown
			default:
				want = KindRefData
			}
			if m.Kind != want {
				t.Fatalf("kind = %s, want %s", m.Kind, want)
			}
			switch m.Kind {
			case KindSchedule:
				if len(m.Schedule.Flights) == 0 {
					t.Error("schedule without flights")
				}
			case KindFlightOp, KindFlightDelete:
				if m.Flight.FLID == "" || m.Flight.Fields["FFID"] == "" {
					t.Errorf("flight = %+v", m.Flight)
				}
			case KindRefData:
				rd := m.RefData
				if rd.Type != m.Meta.TYPE || !rd.DeclaredPresent || len(rd.Records) == 0 {
					t.Errorf("refdata = %+v", rd)
				}
			case KindUnknown:
				if len(m.Body) == 0 {
					t.Error("unknown kind without body")
				}
			}
		})
	}
	if seen != len(failures) {
		t.Errorf("%d of %d expected failures seen", seen, len(failures))
	}
}

// TestSampleScheduleDNLD checks the content of the SCHD DNLD package.
func TestSampleScheduleDNLD(t *testing.T) {
	m := decodeSample(t, "INSERT_CMINMSGS_SCHD.sql", 0)
	loc := shanghai(t)
	wantMeta := Meta{SNDR: "AODB", SEQN: "345935", SEQNNum: 345935, SEQNIsNum: true,
		DTTMRaw: "20181105223126", DTTM: time.Date(2018, 11, 5, 22, 31, 26, 0, loc), TYPE: "SCHD", STYP: "DNLD"}
	if !reflect.DeepEqual(m.Meta, wantMeta) {
		t.Errorf("meta = %+v\nwant   %+v", m.Meta, wantMeta)
	}
	s := m.Schedule
	if !s.DeclaredPresent || s.Declared != 2 || len(s.Flights) != 2 || len(s.Other) != 0 {
		t.Fatalf("schedule = %+v", s)
	}
	f15, f16 := s.Flights[0], s.Flights[1]
	if f15.FLID != "15" || f16.FLID != "16" {
		t.Fatalf("FLIDs = %q, %q", f15.FLID, f16.FLID)
	}
	wantFields := map[string]string{
		"ALCD": "YG", "FLNO": "YG9028", "MVIN": "D", "SODT": "23JAN210535", "FLTY": "W", "FLIN": "D",
		"ACFT": "733", "RENO": "B2574", "TAOP": "YG", "TAFL": "YG9061", "TAID": "16", "TRML": "T2",
		"MAXP": "300", "STND": "504", "PHAG": "110009", "FHAG": "110009", "MHAG": "110009",
		"EXSC": "RCFLOP", "FTSS": "RCFLOP",
	}
	if !reflect.DeepEqual(f15.Fields, wantFields) {
		t.Errorf("fields = %v\nwant     %v", f15.Fields, wantFields)
	}
	wantColl := map[string][]map[string]string{
		"ROUT": {{"RTNO": "1", "APCD": "XIY", "SCAT": "23JAN210710"}},
		"PSDT": {{"PSNO": "1", "PSST": "504", "STST": "23JAN210237", "STET": "23JAN210549"}},
		"ERUT": {
			{"RTNO": "1", "APCD": "CTU", "SCDT": "23JAN210535"},
			{"RTNO": "2", "APCD": "XIY", "SCAT": "23JAN210710"},
		},
	}
	if !reflect.DeepEqual(f15.Collections, wantColl) {
		t.Errorf("collections = %v\nwant          %v", f15.Collections, wantColl)
	}
	if got := f16.Collections["ROUT"]; len(got) != 1 || got[0]["APCD"] != "HGH" || got[0]["SCDT"] != "23JAN210010" {
		t.Errorf("FLID 16 ROUT = %v", got)
	}
	if len(f15.Other) != 0 || len(f16.Other) != 0 {
		t.Errorf("other = %v / %v", f15.Other, f16.Other)
	}
	sodt, err := ParseTime(f15.Fields["SODT"], loc)
	if err != nil || !sodt.Equal(time.Date(2021, 1, 23, 5, 35, 0, 0, loc)) {
		t.Errorf("SODT = %v, %v", sodt, err)
	}
}

// TestSampleFlightOps checks representative FLOP samples.
func TestSampleFlightOps(t *testing.T) {
	tests := []struct {
		file        string
		index       int
		kind        Kind
		flid        string
		fields      map[string]string // FFID excluded
		collections map[string][]map[string]string
		other       []string
		del         bool
	}{
		{
			file: "INSERT_CMINMSGS_GTDT.sql", kind: KindFlightOp, flid: "121112312",
			collections: map[string][]map[string]string{"GTDT": {
				{"GTNO": "1", "GATE": "G28", "PGOT": "15DEC031805", "PGCT": "15DEC031925", "GOTM": "15DEC031825", "GTYP": "D"},
				{"GTNO": "2", "GATE": "G33", "PGOT": "15DEC031805", "PGCT": "15DEC031925", "GTYP": "I"},
				{"GTNO": "3", "GATE": "G23", "PGOT": "15DEC031805", "PGCT": "15DEC031925", "GTYP": "D"},
			}},
		},
		{
			// ASNO="1" with a space before ">".
			file: "INSERT_CMINMSGS_ABTM.sql", kind: KindFlightOp, flid: "121112312",
			collections: map[string][]map[string]string{"ABTM": {
				{"ASNO": "1", "ABDG": "212", "ABOP": "D", "AOTM": "10DEC061343"},
			}},
		},
		{
			file: "INSERT_CMINMSGS_DELY.sql", kind: KindFlightOp, flid: "15",
			collections: map[string][]map[string]string{"DELY": {
				{"CODE": "YY", "STRT": "15DEC031605", "DURA": "0200", "TEXT": "YYYYYYY"},
				{"CODE": "XX", "STRT": "15DEC031605", "DURA": "0201", "TEXT": "XXXXXXX"},
				{"CODE": "ZZ", "STRT": "15DEC031605", "DURA": "0202", "TEXT": "ZZZZZZZ"},
			}},
		},
		{
			// <DELY></DELY>: present, one empty element ("no delay now").
			file: "INSERT_CMINMSGS_DELY.sql", index: 1, kind: KindFlightOp, flid: "15",
			collections: map[string][]map[string]string{"DELY": {{}}},
		},
		{
			file: "INSERT_CMINMSGS_FDIV.sql", kind: KindFlightOp, flid: "15",
			fields: map[string]string{"FDIV": "INCLEMENT WEATHER", "DDES": "HKG", "DDIR": "TO"},
		},
		{
			// DDES="" is present and empty (clears the diversion flag).
			file: "INSERT_CMINMSGS_FDIV.sql", index: 1, kind: KindFlightOp, flid: "15",
			fields: map[string]string{"FDIV": "INCLEMENT WEATHER", "DDES": "", "DDIR": "TO"},
		},
		{
			file: "INSERT_CMINMSGS_FRET.sql", index: 1, kind: KindFlightOp, flid: "15",
			fields: map[string]string{"FRET": "", "REID": "G"},
		},
		{
			// <FRET></FRET>: REID absent, not empty.
			file: "INSERT_CMINMSGS_FRET.sql", index: 2, kind: KindFlightOp, flid: "15",
			fields: map[string]string{"FRET": ""},
		},
		{
			file: "INSERT_CMINMSGS_HNAG.sql", index: 1, kind: KindFlightOp, flid: "15",
			fields: map[string]string{"FHAG": "", "PHAG": "", "MHAG": ""},
		},
		{
			file: "INSERT_CMINMSGS_CNCL.sql", index: 1, kind: KindFlightOp, flid: "15",
			fields: map[string]string{"CNCL": ""},
		},
		{
			file: "INSERT_CMINMSGS_FDEL.sql", kind: KindFlightDelete, flid: "15", del: true,
		},
		{
			file: "INSERT_CMINMSGS_COBT.sql", kind: KindFlightOp, flid: "121112312", other: []string{"COBT"},
		},
		{
			// Two TIPT elements, reported once.
			file: "INSERT_CMINMSGS_TIPT.sql", kind: KindFlightOp, flid: "15", other: []string{"TIPT"},
		},
		{
			// FLOP-TOBT without a TOBT element: nothing but the identity.
			file: "INSERT_CMINMSGS_TOBT.sql", kind: KindFlightOp, flid: "121112312",
		},
		{
			file: "INSERT_CMINMSGS_VIPF.sql", kind: KindFlightOp, flid: "7610151",
			collections: map[string][]map[string]string{"VIPF": {
				{RawKey: "<VIPF><VPCD>VC11030</VPCD><VFES>3</VFES></VIPF>"},
			}},
		},
		{
			file: "INSERT_CMINMSGS_SRVT.sql", kind: KindFlightOp, flid: "15",
			collections: map[string][]map[string]string{"SRVT": {
				{RawKey: "<SRVT><SRTC>ATN</SRTC><SRQT>2</SRQT><SRST>12DEC211400</SRST><SRET>12DEC211430</SRET><SRPR></SRPR><SANR>MACHINE</SANR><SARR>由于机器问题延误服务事务</SARR></SRVT>"},
			}},
		},
		{
			file: "INSERT_CMINMSGS_SRVT.sql", index: 2, kind: KindFlightOp, flid: "15",
			collections: map[string][]map[string]string{"SRVT": {{RawKey: "<SRVT></SRVT>"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file[16:len(tc.file)-4]+"#"+string(rune('0'+tc.index)), func(t *testing.T) {
			m := decodeSample(t, tc.file, tc.index)
			if m.Kind != tc.kind {
				t.Fatalf("kind = %s, want %s", m.Kind, tc.kind)
			}
			f := m.Flight
			if f.FLID != tc.flid || f.Delete != tc.del {
				t.Errorf("FLID = %q delete = %v", f.FLID, f.Delete)
			}
			if f.Fields["FFID"] == "" {
				t.Error("FFID missing")
			}
			fields := map[string]string{}
			for k, v := range f.Fields {
				if k != "FFID" {
					fields[k] = v
				}
			}
			if tc.fields == nil {
				tc.fields = map[string]string{}
			}
			if !reflect.DeepEqual(fields, tc.fields) {
				t.Errorf("fields = %q\nwant     %q", fields, tc.fields)
			}
			if tc.collections == nil {
				tc.collections = map[string][]map[string]string{}
			}
			if !reflect.DeepEqual(f.Collections, tc.collections) {
				t.Errorf("collections = %q\nwant          %q", f.Collections, tc.collections)
			}
			if !reflect.DeepEqual(f.Other, tc.other) {
				t.Errorf("other = %q, want %q", f.Other, tc.other)
			}
		})
	}
}

// TestSampleSRVTMultiple checks three raw SRVT elements in document order and
// that every RAW re-parses to the same element.
func TestSampleSRVTMultiple(t *testing.T) {
	m := decodeSample(t, "INSERT_CMINMSGS_SRVT.sql", 1)
	srvt := m.Flight.Collections["SRVT"]
	if len(srvt) != 3 {
		t.Fatalf("%d SRVT, want 3", len(srvt))
	}
	for i, want := range []string{"<SRTC>ATN</SRTC>", "<SRTC>ATL</SRTC>", "<SRTC>ACCN</SRTC>"} {
		raw := srvt[i][RawKey]
		if !strings.HasPrefix(raw, "<SRVT>"+want) {
			t.Errorf("SRVT %d = %s", i, raw)
		}
		n, derr := parseTree([]byte(raw))
		if derr != nil || n.XML() != raw {
			t.Errorf("SRVT %d does not round-trip: %v", i, derr)
		}
	}
	if !strings.Contains(srvt[0][RawKey], "<SARR>由于机器问题</SARR>") {
		t.Errorf("Chinese text lost: %s", srvt[0][RawKey])
	}
}

// TestSampleAIRL checks reference data records: arrays, attributes, text.
func TestSampleAIRL(t *testing.T) {
	m := decodeSample(t, "INSERT_CMINMSGS_AIRL.sql", 0)
	rd := m.RefData
	if rd.FirstChild != "ITOP" {
		t.Errorf("FirstChild = %q, want ITOP", rd.FirstChild)
	}
	if m.Kind != KindRefData || rd.Type != "AIRL" || rd.Declared != 3 || !rd.DeclaredPresent || len(rd.Records) != 3 {
		t.Fatalf("refdata = %+v", rd)
	}
	want := []RefRecord{
		{
			"ITOP": "UA", "ICOP": "UAL", "ONAM": "UNITED AIRLINES", "ONMC": "UNITED 航空公司", "CTRY": "USA",
			"TRML": map[string]any{"@MVIN": "", "@FLIN": ""},
			"OGRP": "STAR ALLIANCE",
			"SUBC": []any{
				map[string]any{"CODE": "001", "NAME": "First Subcompany", "NAMC": "第一子公司"},
				map[string]any{"CODE": "002", "NAME": "Second Subcompany", "NAMC": "第二子公司"},
			},
			"DORI": "I",
		},
		{
			"ITOP": "AA", "ICOP": "AAL", "ONAM": "AMERICAN AIRLINES", "ONMC": "美国航空公司", "CTRY": "USA",
			"TRML": map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T2"},
			"OGRP": "ONE WORLD", "DORI": "I",
		},
		{
			"ITOP": "CX", "ICOP": "CPA", "ONAM": "CATHAY PACIFIC", "ONMC": "香港航空公司", "CTRY": "HKG",
			"TRML": []any{
				map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T3A"},
				map[string]any{"@MVIN": "D", "@FLIN": "I", "#text": "T3B"},
			},
			"OGRP": []any{"ONE WORLD", "CHINA WORLD"},
			"DORI": "I",
		},
	}
	for i := range want {
		if !reflect.DeepEqual(rd.Records[i], want[i]) {
			t.Errorf("record %d = %#v\nwant %#v", i, rd.Records[i], want[i])
		}
	}
}

// TestSampleABDGInSCHDFile checks the ABDG messages stored in the SCHD file:
// Chinese text, present-but-empty leaves and repeated tags.
func TestSampleABDGInSCHDFile(t *testing.T) {
	m := decodeSample(t, "INSERT_CMINMSGS_SCHD.sql", 1)
	if m.Kind != KindRefData || m.Meta.TYPE != "ABDG" || m.Meta.STYP != "RESP" || len(m.RefData.Records) != 2 {
		t.Fatalf("message = %+v", m)
	}
	r0, r1 := m.RefData.Records[0], m.RefData.Records[1]
	if r0["CDSC"] != "登机桥 212" || r0["AHGT"] != "" || r0["STND"] != "212" {
		t.Errorf("record 0 = %v", r0)
	}
	if _, ok := r0["AHGT"]; !ok {
		t.Error("empty AHGT is absent, want present")
	}
	if !reflect.DeepEqual(r1["STND"], []any{"112", "111"}) || !reflect.DeepEqual(r1["GATE"], []any{"11A", "11B"}) {
		t.Errorf("record 1 = %v", r1)
	}
}

// TestSampleSCHS checks that a seasonal schedule is not taken for reference
// data and keeps its body.
func TestSampleSCHS(t *testing.T) {
	m := decodeSample(t, "INSERT_CMINMSGS_SCHS.sql", 0)
	if m.Kind != KindUnknown || m.RefData != nil || len(m.Body) != 1 || m.Body[0].Name != "SCHS" {
		t.Fatalf("message = %+v", m)
	}
	if got := len(m.Body[0].ChildrenNamed("FLTR")); got != 2 {
		t.Errorf("%d FLTR in body, want 2", got)
	}
}
