package flight

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSupportedFLOP(t *testing.T) {
	supported := []string{
		// The SIS FLOP set (docs/design.md#flop) ...
		"ABTM", "DELY", "ACFT", "ACTT", "BOTM", "CHOT", "FLTY", "CKDT", "CLDT", "CHDT", "CNCL", "ESTT", "FDEL",
		"FDIV", "FINT", "FLIN", "FRET", "GTDT", "LACL", "MAXP", "HNAG", "PSDT", "RENO", "ROUT", "TAOP", "TRML", "VIPP",
		// ... the legacy ones and the other modeled samples.
		"PADT", "FTSS", "STND", "REMC", "APPT", "EGSR", "EGST", "NAAT", "NEAT", "PEDT", "EXSS", "SRVT", "VIPF", "ERUT",
		"lowercase-ok:estt",
	}
	for _, styp := range supported {
		styp = strings.TrimPrefix(styp, "lowercase-ok:")
		if !SupportedFLOP(styp) {
			t.Errorf("SupportedFLOP(%q) = false, want true", styp)
		}
	}
	// Every scalar and collection of the vocabulary is a FLOP STYP.
	for _, tag := range Scalars {
		if !SupportedFLOP(tag) {
			t.Errorf("scalar %s not a supported FLOP STYP", tag)
		}
	}
	for _, c := range Collections {
		if !SupportedFLOP(c.Name) {
			t.Errorf("collection %s not a supported FLOP STYP", c.Name)
		}
	}
	// The families of the AODB's sample files added later (issue 12).
	for _, styp := range []string{"COBT", "CTOT", "EOBT", "TOBT", "IEST", "RUNW", "FLAB", "PORT", "PSHT", "TIPT"} {
		if !SupportedFLOP(styp) {
			t.Errorf("SupportedFLOP(%q) = false, want true", styp)
		}
	}
	unsupported := []string{"BDPB", "SCHS", "DDES", "REID", "ARES", "BDST", "LCST", "MAFL", ""}
	for _, styp := range unsupported {
		if SupportedFLOP(styp) {
			t.Errorf("SupportedFLOP(%q) = true, want false", styp)
		}
	}
}

// TestFLOPEveryScalar sets and clears every scalar through the FLOP of the
// same name.
func TestFLOPEveryScalar(t *testing.T) {
	base := map[string]string{"SODT": "23JAN210535"}
	flag := map[string]string{"BOTM": "BDST", "LACL": "LCST"}
	for _, tag := range Scalars {
		t.Run(tag, func(t *testing.T) {
			s := created(t, "15", base, nil)
			set := mustApply(t, s, flop(11, "15", tag, map[string]string{tag: "V" + tag}, nil), Options{})
			want := with(s.Fields, tag, "V"+tag)
			wantChanged := []string{tag}
			if f, ok := flag[tag]; ok {
				want[f] = "Y"
				wantChanged = append(wantChanged, f)
			}
			if tag == "SODT" {
				wantChanged = []string{tag}
			}
			if !set.Applied || !equalFields(set.State.Fields, want) || !slices.Equal(set.Changed, wantChanged) {
				t.Fatalf("set: applied=%v fields=%v changed=%v; want fields %v changed %v", set.Applied, set.State.Fields, set.Changed, want, wantChanged)
			}
			clr := mustApply(t, set.State, flop(12, "15", tag, map[string]string{tag: ""}, nil), Options{})
			want = without(set.State.Fields, tag, flag[tag])
			if !clr.Applied || !equalFields(clr.State.Fields, want) || !slices.Equal(clr.Changed, wantChanged) {
				t.Fatalf("clear: applied=%v fields=%v changed=%v; want fields %v changed %v", clr.Applied, clr.State.Fields, clr.Changed, want, wantChanged)
			}
			if clr.State.StateVersion != 3 || lastEvent(clr) == nil || lastEvent(clr).Source != "FLOP-"+tag {
				t.Fatalf("clear: version %d event %+v", clr.State.StateVersion, lastEvent(clr))
			}
		})
	}
}

// TestFLOPSpecials covers the per-STYP rules of docs/design.md#flop, using the
// payload shapes of testdata/sis-samples.
func TestFLOPSpecials(t *testing.T) {
	full := map[string]string{
		"FLNO": "CA101", "ESTT": "15DEC031600", "ACTT": "15DEC031610", "FINT": "15DEC031620", "CNCL": "15DEC031722",
		"BOTM": "15DEC031645", "LACL": "15DEC031755", "TAOP": "CA", "TAFL": "CA201", "TAID": "6213345",
		"FHAG": "234523", "PHAG": "22313", "MHAG": "234523", "VIPP": "2", "VIPR": "3", "EXSC": "DELAY", "EXSR": "one hour",
		"FDIV": "INCLEMENT WEATHER", "DDES": "HKG", "DDIR": "TO", "FRET": "EXIT DOOR FAULT", "REID": "G",
		"FLAB": "POOR VISIBILITY", "ARES": "G", "POTM": "10AUG181855", "POID": "O",
		"BDST": "Y", "LCST": "Y", // derived from BOTM and LACL
	}
	tests := []struct {
		name        string
		before      map[string]string
		styp        string
		fields      map[string]string
		want        map[string]string
		wantChanged []string
	}{
		{"ESTT set", nil, "ESTT", map[string]string{"ESTT": "15DEC031600"}, map[string]string{"ESTT": "15DEC031600"}, []string{"ESTT"}},
		{"ESTT empty deletes the estimate", full, "ESTT", map[string]string{"ESTT": ""}, without(full, "ESTT"), []string{"ESTT"}},
		{"ACTT empty clears the actual time", full, "ACTT", map[string]string{"ACTT": ""}, without(full, "ACTT"), []string{"ACTT"}},
		{"FINT empty deletes the final time", full, "FINT", map[string]string{"FINT": ""}, without(full, "FINT"), []string{"FINT"}},
		{"CNCL set cancels", nil, "CNCL", map[string]string{"CNCL": "15DEC031722"}, map[string]string{"CNCL": "15DEC031722"}, []string{"CNCL"}},
		{"CNCL empty revokes the cancellation", full, "CNCL", map[string]string{"CNCL": ""}, without(full, "CNCL"), []string{"CNCL"}},
		{"BOTM set sets boarding status", nil, "BOTM", map[string]string{"BOTM": "15DEC031645"},
			map[string]string{"BOTM": "15DEC031645", "BDST": "Y"}, []string{"BOTM", "BDST"}},
		{"BOTM new time keeps boarding status", full, "BOTM", map[string]string{"BOTM": "15DEC031650"},
			with(full, "BOTM", "15DEC031650"), []string{"BOTM"}},
		{"BOTM empty clears time and resets status", full, "BOTM", map[string]string{"BOTM": ""},
			without(full, "BOTM", "BDST"), []string{"BOTM", "BDST"}},
		{"LACL set sets last-call status", nil, "LACL", map[string]string{"LACL": "15DEC031755"},
			map[string]string{"LACL": "15DEC031755", "LCST": "Y"}, []string{"LACL", "LCST"}},
		{"LACL empty clears time and resets status", full, "LACL", map[string]string{"LACL": ""},
			without(full, "LACL", "LCST"), []string{"LACL", "LCST"}},
		{"TAOP sets the connection", nil, "TAOP", map[string]string{"TAOP": "CA", "TAFL": "CA201", "TAID": "6213345"},
			map[string]string{"TAOP": "CA", "TAFL": "CA201", "TAID": "6213345"}, []string{"TAOP", "TAFL", "TAID"}},
		{"TAOP all empty breaks the connection", full, "TAOP", map[string]string{"TAOP": "", "TAFL": "", "TAID": ""},
			without(full, "TAOP", "TAFL", "TAID"), []string{"TAOP", "TAFL", "TAID"}},
		{"TAOP one empty breaks the whole connection", full, "TAOP", map[string]string{"TAOP": "CA", "TAFL": "", "TAID": "999"},
			without(full, "TAOP", "TAFL", "TAID"), []string{"TAOP", "TAFL", "TAID"}},
		{"TAID alone empty breaks the connection", full, "TAOP", map[string]string{"TAID": ""},
			without(full, "TAOP", "TAFL", "TAID"), []string{"TAOP", "TAFL", "TAID"}},
		{"TAOP partial set keeps the rest", full, "TAOP", map[string]string{"TAFL": "CA203"},
			with(full, "TAFL", "CA203"), []string{"TAFL"}},
		{"HNAG sets the three agents", nil, "HNAG", map[string]string{"FHAG": "1", "PHAG": "2", "MHAG": "3"},
			map[string]string{"FHAG": "1", "PHAG": "2", "MHAG": "3"}, []string{"PHAG", "FHAG", "MHAG"}},
		{"HNAG without MHAG keeps MHAG", full, "HNAG", map[string]string{"FHAG": "9", "PHAG": "8"},
			with(full, "FHAG", "9", "PHAG", "8"), []string{"PHAG", "FHAG"}},
		{"HNAG empty FHAG deletes that agent", full, "HNAG", map[string]string{"FHAG": "", "PHAG": "22313"},
			without(full, "FHAG"), []string{"FHAG"}},
		{"HNAG all empty", full, "HNAG", map[string]string{"FHAG": "", "PHAG": "", "MHAG": ""},
			without(full, "FHAG", "PHAG", "MHAG"), []string{"PHAG", "FHAG", "MHAG"}},
		{"FDIV sets the diversion", nil, "FDIV", map[string]string{"FDIV": "INCLEMENT WEATHER", "DDES": "HKG", "DDIR": "TO"},
			map[string]string{"FDIV": "INCLEMENT WEATHER", "DDES": "HKG", "DDIR": "TO"}, []string{"FDIV", "DDES", "DDIR"}},
		{"FDIV DDES empty clears the diversion", full, "FDIV", map[string]string{"FDIV": "INCLEMENT WEATHER", "DDES": "", "DDIR": "TO"},
			without(full, "FDIV", "DDES", "DDIR"), []string{"FDIV", "DDES", "DDIR"}},
		{"FDIV without DDES clears the diversion", full, "FDIV", map[string]string{"FDIV": "X"},
			without(full, "FDIV", "DDES", "DDIR"), []string{"FDIV", "DDES", "DDIR"}},
		{"FDIV other direction", full, "FDIV", map[string]string{"FDIV": "INCLEMENT WEATHER", "DDES": "HKG", "DDIR": "TOO"},
			with(full, "DDIR", "TOO"), []string{"DDIR"}},
		{"FDIV empty DDIR clears only the direction", full, "FDIV", map[string]string{"FDIV": "INCLEMENT WEATHER", "DDES": "HKG", "DDIR": ""},
			without(full, "DDIR"), []string{"DDIR"}},
		{"FDIV replaces the element: a missing attribute is cleared", full, "FDIV", map[string]string{"FDIV": "FOG", "DDES": "CAN"},
			with(without(full, "DDIR"), "FDIV", "FOG", "DDES", "CAN"), []string{"FDIV", "DDES", "DDIR"}},
		{"FRET sets the return", nil, "FRET", map[string]string{"FRET": "EXIT DOOR FAULT", "REID": "G"},
			map[string]string{"FRET": "EXIT DOOR FAULT", "REID": "G"}, []string{"FRET", "REID"}},
		{"FRET with REID and no text keeps the return reason id", full, "FRET", map[string]string{"FRET": "", "REID": "G"},
			without(full, "FRET"), []string{"FRET"}},
		{"FRET empty clears the return", full, "FRET", map[string]string{"FRET": ""},
			without(full, "FRET", "REID"), []string{"FRET", "REID"}},
		// FLAB as the samples send it: set, ARES="" with no text, empty.
		{"FLAB sets the label", nil, "FLAB", map[string]string{"FLAB": "POOR VISIBILITY", "ARES": "G"},
			map[string]string{"FLAB": "POOR VISIBILITY", "ARES": "G"}, []string{"FLAB", "ARES"}},
		{"FLAB with an empty ARES and no text clears", full, "FLAB", map[string]string{"FLAB": "", "ARES": ""},
			without(full, "FLAB", "ARES"), []string{"FLAB", "ARES"}},
		{"FLAB empty clears", full, "FLAB", map[string]string{"FLAB": ""}, without(full, "FLAB", "ARES"), []string{"FLAB", "ARES"}},
		{"FLAB replaces the element: a missing ARES is cleared", full, "FLAB", map[string]string{"FLAB": "FOG"},
			with(without(full, "ARES"), "FLAB", "FOG"), []string{"FLAB", "ARES"}},
		// PORT reaches Apply by its parts, all present (the codec reports a
		// missing part as empty).
		{"PORT sets the group", nil, "PORT", map[string]string{"POTM": "10AUG181855", "POID": "O"},
			map[string]string{"POTM": "10AUG181855", "POID": "O"}, []string{"POTM", "POID"}},
		{"PORT empty clears the group", full, "PORT", map[string]string{"POTM": "", "POID": ""},
			without(full, "POTM", "POID"), []string{"POTM", "POID"}},
		{"A-CDM time set", nil, "TOBT", map[string]string{"TOBT": "10AUG181850"}, map[string]string{"TOBT": "10AUG181850"}, []string{"TOBT"}},
		{"FLOP-TOBT without its element changes nothing", full, "TOBT", nil, full, nil},
		{"VIPP sets both", nil, "VIPP", map[string]string{"VIPP": "2", "VIPR": "3"},
			map[string]string{"VIPP": "2", "VIPR": "3"}, []string{"VIPP", "VIPR"}},
		{"VIPP empty deletes VIPP", full, "VIPP", map[string]string{"VIPP": "", "VIPR": "3"}, without(full, "VIPP"), []string{"VIPP"}},
		{"VIPR empty deletes VIPR", full, "VIPP", map[string]string{"VIPP": "2", "VIPR": ""}, without(full, "VIPR"), []string{"VIPR"}},
		{"VIPP both empty", full, "VIPP", map[string]string{"VIPP": "", "VIPR": ""}, without(full, "VIPP", "VIPR"), []string{"VIPP", "VIPR"}},
		{"EXSS sets both", nil, "EXSS", map[string]string{"EXSC": "DELAY", "EXSR": "delay for one hour"},
			map[string]string{"EXSC": "DELAY", "EXSR": "delay for one hour"}, []string{"EXSC", "EXSR"}},
		{"EXSS empty clears", full, "EXSS", map[string]string{"EXSC": "", "EXSR": ""}, without(full, "EXSC", "EXSR"), []string{"EXSC", "EXSR"}},
		{"FFID rides along every FLOP", nil, "ESTT", map[string]string{"FFID": "CA-CA101-A-12DEC031345-D", "ESTT": "1"},
			map[string]string{"FFID": "CA-CA101-A-12DEC031345-D", "ESTT": "1"}, []string{"ESTT", "FFID"}},
		{"every modeled tag of the payload is applied", nil, "ESTT", map[string]string{"ESTT": "1", "ACTT": "2"},
			map[string]string{"ESTT": "1", "ACTT": "2"}, []string{"ESTT", "ACTT"}},
		{"unmodeled and derived tags are ignored", nil, "ESTT", map[string]string{"ESTT": "1", "XXXX": "1", "BDST": "Y", "FLID": "15"},
			map[string]string{"ESTT": "1"}, []string{"ESTT"}},
		{"same value is no change", full, "ESTT", map[string]string{"ESTT": full["ESTT"]}, full, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := created(t, "15", nil, nil)
			if tc.before != nil {
				s = mustApply(t, s, adft(11, "15", tc.before, nil), Options{}).State
			}
			r := mustApply(t, s, flop(20, "15", tc.styp, tc.fields, nil), Options{})
			if !equalFields(r.State.Fields, tc.want) {
				t.Errorf("fields = %v\nwant     %v", r.State.Fields, tc.want)
			}
			if !slices.Equal(r.Changed, tc.wantChanged) {
				t.Errorf("changed = %v, want %v", r.Changed, tc.wantChanged)
			}
			if r.Applied != (tc.wantChanged != nil) {
				t.Errorf("applied = %v", r.Applied)
			}
		})
	}
}

func TestFLOPCollections(t *testing.T) {
	gt := func(no, gate string) Element { return Element{"GTNO": no, "GATE": gate} }
	seqOf := func(n int, attr string) []Element {
		var out []Element
		for i := 1; i <= n; i++ {
			out = append(out, Element{attr: strconv.Itoa(i), "APCD": "P" + strconv.Itoa(i)})
		}
		return out
	}
	stored := map[string][]Element{
		"GTDT": {gt("1", "G1")},
		"ROUT": {{"RTNO": "1", "APCD": "XIY"}},
		"DELY": {{"CODE": "YY", "TEXT": "Y"}},
		"SRVT": {{"RAW": "<SRVT><SRTC>ATN</SRTC></SRVT>"}},
		"CHOT": {{"CSNO": "1", "CHTM": "15DEC031350", "CHID": "ON"}},
	}
	tests := []struct {
		name  string
		styp  string
		colls map[string][]Element
		want  map[string][]Element
	}{
		{"replace in message order", "GTDT", map[string][]Element{"GTDT": {gt("2", "G33"), gt("1", "G28")}},
			with2(stored, "GTDT", []Element{gt("2", "G33"), gt("1", "G28")})},
		{"sequence 0 means no allocation now", "GTDT", map[string][]Element{"GTDT": {{"GTNO": "0"}}}, without2(stored, "GTDT")},
		{"sequence 0 with empty leaves", "PSDT", map[string][]Element{"PSDT": {{"PSNO": "0", "PSST": ""}}}, stored},
		{"a marker beside real entries is dropped", "GTDT", map[string][]Element{"GTDT": {{"GTNO": "0"}, gt("1", "G9")}},
			with2(stored, "GTDT", []Element{gt("1", "G9")})},
		{"empty DELY clears delays", "DELY", map[string][]Element{"DELY": {{}}}, without2(stored, "DELY")},
		{"DELY elements with attributes and text", "DELY", map[string][]Element{"DELY": {
			{"CODE": "YY", "STRT": "15DEC031605", "DURA": "0200", "TEXT": "YYYYYYY"},
			{"CODE": "XX", "STRT": "15DEC031605", "DURA": "0201", "TEXT": "XXXXXXX"}}},
			with2(stored, "DELY", []Element{
				{"CODE": "YY", "STRT": "15DEC031605", "DURA": "0200", "TEXT": "YYYYYYY"},
				{"CODE": "XX", "STRT": "15DEC031605", "DURA": "0201", "TEXT": "XXXXXXX"}})},
		{"no de-duplication by resource number", "GTDT", map[string][]Element{"GTDT": {gt("1", "G28"), gt("1", "G28"), gt("2", "G28")}},
			with2(stored, "GTDT", []Element{gt("1", "G28"), gt("1", "G28"), gt("2", "G28")})},
		{"empty leaves are no value", "GTDT", map[string][]Element{"GTDT": {{"GTNO": "1", "GATE": "G28", "GOTM": "", "GCTM": " "}}},
			with2(stored, "GTDT", []Element{gt("1", "G28")})},
		{"CHOT empty CHTM deletes that chock time", "CHOT", map[string][]Element{"CHOT": {{"CSNO": "1", "CHTM": "", "CHID": "ON", "CHST": "S211"}}},
			with2(stored, "CHOT", []Element{{"CSNO": "1", "CHID": "ON", "CHST": "S211"}})},
		{"ROUT capped at 4 in message order", "ROUT", map[string][]Element{"ROUT": seqOf(6, "RTNO")},
			with2(stored, "ROUT", seqOf(4, "RTNO"))},
		{"ERUT capped at 4 and separate from ROUT", "ERUT", map[string][]Element{"ERUT": seqOf(7, "RTNO")},
			with2(stored, "ERUT", seqOf(4, "RTNO"))},
		{"PSDT capped at 9", "PSDT", map[string][]Element{"PSDT": seqOf(11, "PSNO")},
			with2(stored, "PSDT", seqOf(9, "PSNO"))},
		{"markers do not count against the cap", "ROUT", map[string][]Element{"ROUT": append([]Element{{"RTNO": "0"}}, seqOf(5, "RTNO")...)},
			with2(stored, "ROUT", seqOf(4, "RTNO"))},
		{"SRVT stored raw", "SRVT", map[string][]Element{"SRVT": {{"RAW": "<SRVT><SRTC>ATL</SRTC><SRPR></SRPR></SRVT>"}, {"RAW": "<SRVT><SRTC>ACCN</SRTC></SRVT>"}}},
			with2(stored, "SRVT", []Element{{"RAW": "<SRVT><SRTC>ATL</SRTC><SRPR></SRPR></SRVT>"}, {"RAW": "<SRVT><SRTC>ACCN</SRTC></SRVT>"}})},
		{"empty SRVT clears", "SRVT", map[string][]Element{"SRVT": {{"RAW": "<SRVT>\n\t\t</SRVT>"}}}, without2(stored, "SRVT")},
		{"VIPF stored raw", "VIPF", map[string][]Element{"VIPF": {{"RAW": "<VIPF><VPCD>VC11030</VPCD><VFES>3</VFES></VIPF>"}}},
			with2(stored, "VIPF", []Element{{"RAW": "<VIPF><VPCD>VC11030</VPCD><VFES>3</VFES></VIPF>"}})},
		{"present but no elements clears", "ABTM", map[string][]Element{"ABTM": {}, "GTDT": nil}, without2(stored, "GTDT")},
		{"absent collections are kept", "ESTT", nil, stored},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := created(t, "15", nil, stored)
			r := mustApply(t, s, flop(20, "15", tc.styp, nil, tc.colls), Options{})
			if !equalColls(r.State.Collections, tc.want) {
				t.Errorf("collections = %v\nwant          %v", r.State.Collections, tc.want)
			}
			var wantChanged []string
			for _, c := range Collections {
				if !slices.EqualFunc(stored[c.Name], tc.want[c.Name], func(a, b Element) bool { return equalFields(a, b) }) {
					wantChanged = append(wantChanged, c.Name)
				}
			}
			if !slices.Equal(r.Changed, wantChanged) {
				t.Errorf("changed = %v, want %v", r.Changed, wantChanged)
			}
		})
	}
}

// TestEveryCollection replaces and empties every collection.
func TestEveryCollection(t *testing.T) {
	for _, spec := range Collections {
		t.Run(spec.Name, func(t *testing.T) {
			one := Element{"X": "1"}
			if spec.SeqAttr != "" {
				one[spec.SeqAttr] = "1"
			}
			if spec.Raw {
				one = Element{"RAW": "<" + spec.Name + "><A>1</A></" + spec.Name + ">"}
			}
			s := created(t, "15", nil, nil)
			r := mustApply(t, s, flop(11, "15", spec.Name, nil, map[string][]Element{spec.Name: {one, one}}), Options{})
			if got := r.State.Collections[spec.Name]; len(got) != 2 || !equalFields(got[0], one) || !slices.Equal(r.Changed, []string{spec.Name}) {
				t.Fatalf("set: %v changed %v", got, r.Changed)
			}
			empty := Element{}
			if spec.SeqAttr != "" {
				empty = Element{spec.SeqAttr: "0"}
			}
			r = mustApply(t, r.State, flop(12, "15", spec.Name, nil, map[string][]Element{spec.Name: {empty}}), Options{})
			if _, ok := r.State.Collections[spec.Name]; ok || !slices.Equal(r.Changed, []string{spec.Name}) {
				t.Fatalf("empty: %v changed %v", r.State.Collections, r.Changed)
			}
		})
	}
}

func with2(base map[string][]Element, name string, elems []Element) map[string][]Element {
	m := map[string][]Element{}
	for k, v := range base {
		m[k] = v
	}
	m[name] = elems
	return m
}

func without2(base map[string][]Element, name string) map[string][]Element {
	m := map[string][]Element{}
	for k, v := range base {
		if k != name {
			m[k] = v
		}
	}
	return m
}

func TestRawEmpty(t *testing.T) {
	tests := []struct {
		e    Element
		want bool
	}{
		{Element{}, true},
		{Element{"RAW": "  "}, true},
		{Element{"RAW": "<SRVT></SRVT>"}, true},
		{Element{"RAW": "<SRVT/>"}, true},
		{Element{"RAW": "<SRVT>\n\t</SRVT>"}, true},
		{Element{"RAW": `<SRVT OPER=""></SRVT>`}, true},
		{Element{"RAW": `<SRVT OPER="X"></SRVT>`}, false},
		{Element{"RAW": "<SRVT><SRPR></SRPR></SRVT>"}, false}, // a child, even empty, is content: stored verbatim
		{Element{"RAW": "<VIPF>text</VIPF>"}, false},
		{Element{"RAW": "not xml at all"}, false},
		{Element{"RAW": "<SRVT><unclosed></SRVT>"}, false}, // unparsable: kept verbatim
		{Element{"SRTC": ""}, true},                        // decoded instead of raw: judged by its values
		{Element{"SRTC": "ATN"}, false},
	}
	for _, tc := range tests {
		if got := rawEmpty(tc.e); got != tc.want {
			t.Errorf("rawEmpty(%v) = %v, want %v", tc.e, got, tc.want)
		}
	}
}

// TestVocabularyConsistent checks that the lists describing one element
// agree: every attributed and grouped part is a field tag, every FLOP group
// names stored tags, every time is a field tag or an element key with a
// column somewhere.
func TestVocabularyConsistent(t *testing.T) {
	fields := map[string]bool{}
	for _, tag := range FieldTags {
		if fields[tag] {
			t.Errorf("%s twice in FieldTags", tag)
		}
		fields[tag] = true
	}
	if len(attributedNames) != len(Attributed) {
		t.Errorf("attributedNames %v, Attributed %v", attributedNames, Attributed)
	}
	for _, name := range attributedNames {
		for _, p := range append([]string{name}, Attributed[name]...) {
			if !slices.Contains(AttributedTags, p) {
				t.Errorf("attributed part %s not in AttributedTags", p)
			}
		}
	}
	for name, parts := range Grouped {
		if IsScalar(name) {
			t.Errorf("grouped element %s is a scalar too", name)
		}
		for _, p := range parts {
			if !IsScalar(p) {
				t.Errorf("grouped part %s.%s is not a scalar", name, p)
			}
		}
	}
	for styp, tags := range FLOPGroups {
		for _, tag := range tags {
			if !fields[tag] {
				t.Errorf("FLOP group %s names %s, not a field tag", styp, tag)
			}
		}
	}
	for _, tag := range TimeScalars {
		if !IsScalar(tag) {
			t.Errorf("time %s is not a scalar", tag)
		}
	}
	for styp := range OptionalPayload {
		if !IsScalar(styp) {
			t.Errorf("optional-payload STYP %s is not a scalar", styp)
		}
	}
	for _, c := range Collections {
		if c.Raw && len(c.Times) > 0 {
			t.Errorf("raw collection %s lists times", c.Name)
		}
	}
}
