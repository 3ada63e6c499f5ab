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
				want = KindSeason
			default:
				want = KindRefData
			}
			if m.Kind != want {
				t.Fatalf("kind = %s, want %s", m.Kind, want)
			}
			// Every tag of a flight record is modelled, and every time it
			// carries is in a format the router accepts.
			checkRecord := func(fr *FlightRecord) {
				t.Helper()
				if len(fr.Other) != 0 {
					t.Errorf("FLID %s: tags not modelled: %v", fr.FLID, fr.Other)
				}
				if err := fr.CheckTimes(); err != nil {
					t.Errorf("FLID %s: %v", fr.FLID, err)
				}
			}
			switch m.Kind {
			case KindSchedule:
				if len(m.Schedule.Flights) == 0 {
					t.Error("schedule without flights")
				}
				for i := range m.Schedule.Flights {
					checkRecord(&m.Schedule.Flights[i])
				}
			case KindFlightOp, KindFlightDelete:
				if m.Flight.FLID == "" || m.Flight.Fields["FFID"] == "" {
					t.Errorf("flight = %+v", m.Flight)
				}
				checkRecord(&m.Flight.FlightRecord)
			case KindSeason:
				if m.Season.Name() == "" || len(m.Season.Records) == 0 || len(m.Season.Other) != 0 {
					t.Errorf("season = %+v", m.Season)
				}
				if err := m.Season.CheckTimes(); err != nil {
					t.Error(err)
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
			file: "INSERT_CMINMSGS_COBT.sql", kind: KindFlightOp, flid: "121112312",
			fields: map[string]string{"COBT": "10AUG181840"},
		},
		{
			file: "INSERT_CMINMSGS_CTOT.sql", kind: KindFlightOp, flid: "121112312",
			fields: map[string]string{"CTOT": "10AUG181855"},
		},
		{
			file: "INSERT_CMINMSGS_EOBT.sql", kind: KindFlightOp, flid: "121112312",
			fields: map[string]string{"EOBT": "10AUG181335"},
		},
		{
			file: "INSERT_CMINMSGS_IEST.sql", kind: KindFlightOp, flid: "121112312",
			fields: map[string]string{"IEST": "10AUG181855"},
		},
		{
			file: "INSERT_CMINMSGS_RUNW.sql", kind: KindFlightOp, flid: "121112312",
			fields: map[string]string{"RUNW": "02L"},
		},
		{
			file: "INSERT_CMINMSGS_FLAB.sql", kind: KindFlightOp, flid: "15",
			fields: map[string]string{"FLAB": "POOR VISIBILITY", "ARES": "G"},
		},
		{
			// ARES="" is present and empty.
			file: "INSERT_CMINMSGS_FLAB.sql", index: 1, kind: KindFlightOp, flid: "15",
			fields: map[string]string{"FLAB": "", "ARES": ""},
		},
		{
			// <FLAB></FLAB>: ARES absent, not empty.
			file: "INSERT_CMINMSGS_FLAB.sql", index: 2, kind: KindFlightOp, flid: "15",
			fields: map[string]string{"FLAB": ""},
		},
		{
			// PORT is stored by its parts.
			file: "INSERT_CMINMSGS_PORT.sql", kind: KindFlightOp, flid: "121112312",
			fields: map[string]string{"POTM": "10AUG181855", "POID": "O"},
		},
		{
			file: "INSERT_CMINMSGS_PSHT.sql", kind: KindFlightOp, flid: "121112312",
			collections: map[string][]map[string]string{"PSHT": {
				{"PSHN": "1", "PSTM": "10AUG181346", "PSID": "IN", "PUST": "504"},
			}},
		},
		{
			// Two TIPT elements, in message order.
			file: "INSERT_CMINMSGS_TIPT.sql", kind: KindFlightOp, flid: "15",
			collections: map[string][]map[string]string{"TIPT": {
				{"TRTM": "10AUG181350", "TRST": "503"},
				{"TRTM": "10AUG181344", "TRST": "504"},
			}},
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

// TestSampleSCHS checks the seasonal schedule: its header, its FLTR records
// with their routes, and the reference record it is stored as.
func TestSampleSCHS(t *testing.T) {
	m := decodeSample(t, "INSERT_CMINMSGS_SCHS.sql", 0)
	if m.Kind != KindSeason || m.RefData != nil || m.Body != nil {
		t.Fatalf("message = %+v", m)
	}
	se := m.Season
	wantHeader := map[string]string{"SNAM": "Winter", "APCD": "CTU", "SDAT": "10SEP20", "EDAT": "10JUN21"}
	if !reflect.DeepEqual(se.Fields, wantHeader) || se.Name() != "Winter" || !se.DeclaredPresent || se.Declared != 2 || len(se.Records) != 2 {
		t.Fatalf("season = %+v", se)
	}
	lh, ca := se.Records[0], se.Records[1]
	wantLH := map[string]string{"ALCD": "LH", "FLNO": "LH724", "MVIN": "D", "STDT": "14NOV21", "EDDT": "14MAR21",
		"DYOP": "1200560", "SCHT": "1023", "FLTY": "P", "FLIN": "I", "ACFT": "747", "RENO": "A56729", "TAOP": "LH",
		"TAFL": "LH647", "TRML": "3", "MAXP": "320", "CSOP": "HK", "CSFT": "HK001"}
	if !reflect.DeepEqual(lh.Fields, wantLH) {
		t.Errorf("FLTR 1 fields = %v\nwant %v", lh.Fields, wantLH)
	}
	wantRoutes := map[string][]map[string]string{
		"ROUT": {{"RTNO": "1", "APCD": "HKG", "SCAT": "1125", "SCDT": "1330"}, {"RTNO": "2", "APCD": "LON", "SCAT": "1125", "SCDT": ""}},
		"ERUT": {
			{"RTNO": "1", "APCD": "CTU", "SCAT": "14MAR211023", "SADC": "+1", "SCDT": "14MAR211023", "SDDC": "-2"},
			{"RTNO": "2", "APCD": "HKG", "SCAT": "14MAR211023", "SADC": "+1", "SCDT": "14MAR211023", "SDDC": "-2"},
			{"RTNO": "3", "APCD": "LON", "SCAT": "14MAR211023", "SADC": "+1", "SCDT": "14MAR211023", "SDDC": "-2"},
		},
	}
	if !reflect.DeepEqual(lh.Collections, wantRoutes) {
		t.Errorf("FLTR 1 routes = %v\nwant %v", lh.Collections, wantRoutes)
	}
	if len(ca.Collections["ROUT"]) != 1 || ca.Collections["ROUT"][0]["SCDT"] != "0730" || len(ca.Collections["ERUT"]) != 2 {
		t.Errorf("FLTR 2 routes = %v", ca.Collections)
	}
	if err := se.CheckTimes(); err != nil {
		t.Fatal(err)
	}

	// The stored record: lists stay lists, one route point or many.
	rec := se.Record()
	if rec["SNAM"] != "Winter" || rec["SDAT"] != "10SEP20" {
		t.Errorf("record header = %v", rec)
	}
	fltr, ok := rec["FLTR"].([]any)
	if !ok || len(fltr) != 2 {
		t.Fatalf("record FLTR = %#v", rec["FLTR"])
	}
	second := fltr[1].(map[string]any)
	if rout, ok := second["ROUT"].([]any); !ok || len(rout) != 1 || rout[0].(map[string]any)["APCD"] != "CAN" {
		t.Errorf("FLTR 2 ROUT = %#v", second["ROUT"])
	}
	if second["FLNO"] != "CA002" || second["STDT"] != "11OCT19" {
		t.Errorf("FLTR 2 = %v", second)
	}
}

// TestCheckTimes checks the time formats of flight records and seasons:
// every time-valued tag parses in the format the samples use for it, or is
// empty.
func TestCheckTimes(t *testing.T) {
	flightTests := []struct {
		name   string
		rec    FlightRecord
		reason string // "" = valid
	}{
		{"valid", FlightRecord{Fields: map[string]string{"ESTT": "23JAN210600", "COBT": "", "RUNW": "02L"}}, ""},
		{"not a date", FlightRecord{Fields: map[string]string{"ESTT": "notadate"}}, `ESTT "notadate": unknown date format`},
		{"impossible date", FlightRecord{Fields: map[string]string{"ACTT": "31NOV210600"}}, `ACTT "31NOV210600": date or time out of range`},
		{"hour 24", FlightRecord{Fields: map[string]string{"TOBT": "23JAN212400"}}, `TOBT "23JAN212400": date or time out of range`},
		{"date only", FlightRecord{Fields: map[string]string{"POTM": "23JAN21"}}, `POTM "23JAN21": unknown date format`},
		{"not a time tag", FlightRecord{Fields: map[string]string{"FTSS": "RCFLOP", "EXSR": "delay"}}, ""},
		{"in a collection", FlightRecord{Collections: map[string][]map[string]string{"GTDT": {
			{"GTNO": "1", "PGOT": "15DEC031805"}, {"GTNO": "2", "PGOT": "1805"}}}}, `GTDT[2]/PGOT "1805": unknown date format`},
		{"in an attribute", FlightRecord{Collections: map[string][]map[string]string{"DELY": {{"STRT": "soon", "DURA": "0200"}}}},
			`DELY[1]/STRT "soon": unknown date format`},
		{"new collection", FlightRecord{Collections: map[string][]map[string]string{"TIPT": {{"TRTM": "10AUG18"}}}},
			`TIPT[1]/TRTM "10AUG18": unknown date format`},
		{"raw collection is not read", FlightRecord{Collections: map[string][]map[string]string{"SRVT": {{RawKey: "<SRVT><SRST>x</SRST></SRVT>"}}}}, ""},
	}
	for _, tc := range flightTests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rec.CheckTimes()
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.reason || !(errors.Is(err, ErrTimeFormat) || errors.Is(err, ErrTimeRange)) {
				t.Fatalf("err = %v, want %q", err, tc.reason)
			}
		})
	}

	season := func(header map[string]string, fields map[string]string, colls map[string][]map[string]string) *Season {
		return &Season{Fields: header, Records: []SeasonRecord{{Fields: fields, Collections: colls}}}
	}
	seasonTests := []struct {
		name   string
		s      *Season
		reason string
	}{
		{"valid", season(map[string]string{"SNAM": "W", "SDAT": "10SEP20"}, map[string]string{"STDT": "14NOV20", "SCHT": "0000"},
			map[string][]map[string]string{"ROUT": {{"SCAT": "2359", "SADC": "+1"}}, "ERUT": {{"SCDT": "23NOV200325", "SDDC": "-2"}}}), ""},
		{"header date", season(map[string]string{"EDAT": "2021-06-10"}, nil, nil), `SCHS/EDAT "2021-06-10": unknown date format`},
		{"FLTR date", season(nil, map[string]string{"EDDT": "14MAR211023"}, nil), `SCHS/FLTR[1]/EDDT "14MAR211023": unknown date format`},
		{"FLTR time of day", season(nil, map[string]string{"SCHT": "2460"}, nil), `SCHS/FLTR[1]/SCHT "2460": date or time out of range`},
		{"ROUT takes times of day", season(nil, nil, map[string][]map[string]string{"ROUT": {{"SCAT": "14MAR211023"}}}),
			`SCHS/FLTR[1]/ROUT[1]/SCAT "14MAR211023": unknown date format`},
		{"ERUT takes full times", season(nil, nil, map[string][]map[string]string{"ERUT": {{"SCDT": "1023"}}}),
			`SCHS/FLTR[1]/ERUT[1]/SCDT "1023": unknown date format`},
		{"day offset", season(nil, nil, map[string][]map[string]string{"ERUT": {{"SADC": "next"}}}),
			`SCHS/FLTR[1]/ERUT[1]/SADC "next": unknown date format`},
	}
	for _, tc := range seasonTests {
		t.Run("season "+tc.name, func(t *testing.T) {
			err := tc.s.CheckTimes()
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.reason {
				t.Fatalf("err = %v, want %q", err, tc.reason)
			}
		})
	}
}

// TestDecodeSeasonErrors checks the broken seasonal schedules the codec
// itself rejects.
func TestDecodeSeasonErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		class      Class
		reason     string
	}{
		{"no SCHS element", "<SCHD/>", Malformed, "TYPE=SCHS without <SCHS> element"},
		{"SNAM twice", "<SCHS><SNAM>A</SNAM><SNAM>B</SNAM></SCHS>", Malformed, "SCHS/SNAM repeated"},
		{"RECS not a number", "<SCHS><SNAM>A</SNAM><RECS>two</RECS></SCHS>", CodecError, `SCHS/RECS "two": not a non-negative integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(envelope(metaOf("SCHS", "DNLD"), tc.body)), nil)
			var de *DecodeError
			if !errors.As(err, &de) || de.Class != tc.class || de.Reason != tc.reason {
				t.Fatalf("err = %v, want %s %q", err, tc.class, tc.reason)
			}
		})
	}
}
