package sis

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// envelope builds a message from META children and body XML.
func envelope(meta, body string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><MSG><META>` + meta + `</META>` + body + `</MSG>`
}

// metaOf builds the META children for TYPE/STYP with a valid header.
func metaOf(typ, styp string) string {
	return `<SNDR>AODB</SNDR><SEQN>42</SEQN><DTTM>20210123053500</DTTM><TYPE>` + typ + `</TYPE><STYP>` + styp + `</STYP>`
}

// TestDecodeErrors checks the class and exact reason of broken messages.
func TestDecodeErrors(t *testing.T) {
	deep := strings.Repeat("<A>", MaxDepth) + strings.Repeat("</A>", MaxDepth)
	many := strings.Repeat("<X/>", MaxElements)
	tests := []struct {
		name   string
		raw    string
		class  Class
		reason string // exact, or a prefix when it ends with "…"
	}{
		{"empty", "", Malformed, "empty message"},
		{"blank", " \r\n\t", Malformed, "empty message"},
		{"not XML", "hello world", Malformed, "not XML: text before the root element"},
		{"JSON", `{"TYPE":"SCHD"}`, Malformed, "not XML: text before the root element"},
		{"only a declaration", `<?xml version="1.0"?>`, Malformed, "no root element"},
		{"BOM only", "\xEF\xBB\xBF", Malformed, "no root element"},
		{"truncated", envelope(metaOf("SCHD", "DNLD"), "<SCHD><RECS>1</RECS><FLTR><FLID>1")[:90], Malformed, "not well-formed XML: XML syntax error on line 1: unexpected EOF"},
		{"mismatched tags", "<MSG><META></MSG>", Malformed, "not well-formed XML: XML syntax error on line 1: element <META> closed by </MSG>"},
		{"undefined entity", envelope(metaOf("FLOP", "ESTT"), "<FLOP><FLID>&nbsp;</FLID></FLOP>"), Malformed, "not well-formed XML: XML syntax error on line 1: invalid character entity &nbsp;"},
		{"second root", envelope(metaOf("FLOP", "ESTT"), "<FLOP><FLID>1</FLID></FLOP>") + "<MSG/>", Malformed, "content after the root element: <MSG>"},
		{"text after root", "<MSG/>junk", Malformed, "text after the root element"},
		{"root not MSG", "<MESSAGE><META/></MESSAGE>", Malformed, "root element is <MESSAGE>, want <MSG>"},
		{"no META", "<MSG><SCHD/></MSG>", Malformed, "no META element"},
		{"two META", "<MSG><META/><META/></MSG>", Malformed, "MSG/META repeated"},
		{"missing SNDR", envelope(`<SEQN>1</SEQN><TYPE>SCHD</TYPE><STYP>DNLD</STYP>`, ""), Malformed, "META/SNDR missing"},
		{"missing SEQN", envelope(`<SNDR>AODB</SNDR><TYPE>SCHD</TYPE><STYP>DNLD</STYP>`, ""), Malformed, "META/SEQN missing"},
		{"missing TYPE", envelope(`<SNDR>AODB</SNDR><SEQN>1</SEQN><STYP>DNLD</STYP>`, ""), Malformed, "META/TYPE missing"},
		{"empty TYPE", envelope(`<SNDR>AODB</SNDR><SEQN>1</SEQN><TYPE> </TYPE><STYP>DNLD</STYP>`, ""), Malformed, "META/TYPE empty"},
		{"missing STYP", envelope(`<SNDR>AODB</SNDR><SEQN>1</SEQN><TYPE>SCHD</TYPE>`, ""), Malformed, "META/STYP missing"},
		{"repeated TYPE", envelope(`<SNDR>AODB</SNDR><SEQN>1</SEQN><TYPE>SCHD</TYPE><TYPE>FLOP</TYPE><STYP>DNLD</STYP>`, ""), Malformed, "META/TYPE repeated"},
		{"SCHD without SCHD", envelope(metaOf("SCHD", "DNLD"), "<RECS>0</RECS>"), Malformed, "TYPE=SCHD without <SCHD> element"},
		{"two SCHD", envelope(metaOf("SCHD", "DNLD"), "<SCHD/><SCHD/>"), Malformed, "MSG/SCHD repeated"},
		{"FLOP without FLOP", envelope(metaOf("FLOP", "ESTT"), ""), Malformed, "TYPE=FLOP without <FLOP> element"},
		{"FLOP without FLID", envelope(metaOf("FLOP", "ESTT"), "<FLOP><ESTT>23JAN210535</ESTT></FLOP>"), Malformed, "FLOP without FLID"},
		{"FLOP with empty FLID", envelope(metaOf("FLOP", "ESTT"), "<FLOP><FLID> </FLID><ESTT/></FLOP>"), Malformed, "FLOP/FLID empty"},
		{"FLOP with two FLIDs", envelope(metaOf("FLOP", "ESTT"), "<FLOP><FLID>1</FLID><FLID>2</FLID></FLOP>"), Malformed, `FLOP: conflicting FLID values "1" and "2"`},
		{"FDEL without body", envelope(metaOf("FDEL", "NONE"), ""), Malformed, "TYPE=FDEL without <FDEL> element"},
		{"RQRD without RQRD", envelope(metaOf("RQRD", "AIRL"), ""), Malformed, "TYPE=RQRD without <RQRD> element"},
		{"RQRD without RTYP", envelope(metaOf("RQRD", "AIRL"), "<RQRD/>"), Malformed, "RQRD without RTYP"},
		{"RQFD without STDE", envelope(metaOf("RQFD", "NONE"), "<RQFD><STDB>23JAN210000</STDB></RQFD>"), Malformed, "RQFD without STDE"},
		{"refdata RECS without records", envelope(metaOf("AIRL", "DNLD"), "<RECS>2</RECS>"), Malformed, "TYPE=AIRL: RECS=2 but no <AIRL> record"},
		{"too deep", envelope(metaOf("LDM", "X"), deep), Malformed, fmt.Sprintf("elements nested deeper than %d", MaxDepth)},
		{"too many elements", envelope(metaOf("LDM", "X"), many), Malformed, fmt.Sprintf("more than %d elements", MaxElements)},
		{"too large", envelope(metaOf("LDM", "X"), strings.Repeat(" ", MaxMessageSize)), Malformed, "message too large (…"},

		{"bad DTTM", envelope(`<SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>2006-12-10</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP>`, "<SCHD/>"), CodecError, `META/DTTM "2006-12-10": unknown date format`},
		{"DTTM month 13", envelope(`<SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20181305223126</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP>`, "<SCHD/>"), CodecError, `META/DTTM "20181305223126": date or time out of range`},
		{"bad SCHD RECS", envelope(metaOf("SCHD", "DNLD"), "<SCHD><RECS>two</RECS></SCHD>"), CodecError, `SCHD/RECS "two": not a non-negative integer`},
		{"empty SCHD RECS", envelope(metaOf("SCHD", "DNLD"), "<SCHD><RECS></RECS></SCHD>"), CodecError, `SCHD/RECS "": not a non-negative integer`},
		{"negative MSG RECS", envelope(metaOf("AIRL", "DNLD"), "<RECS>-1</RECS><AIRL/>"), CodecError, `MSG/RECS "-1": not a non-negative integer`},
		{"huge RECS", envelope(metaOf("AIRL", "DNLD"), "<RECS>99999999999999999999</RECS><AIRL/>"), CodecError, `MSG/RECS "99999999999999999999": out of range`},
		{"bad RQFD time", envelope(metaOf("RQFD", "NONE"), "<RQFD><STDB>2021-01-23</STDB><STDE/></RQFD>"), CodecError, `RQFD/STDB "2021-01-23": unknown date format`},
		{"unsupported encoding", `<?xml version="1.0" encoding="ISO-8859-1"?><MSG>` + "\xE9" + `</MSG>`, CodecError, `unsupported encoding "ISO-8859-1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode([]byte(tc.raw), nil)
			if m != nil {
				t.Errorf("message = %+v, want nil", m)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %#v, want *DecodeError", err)
			}
			ok := de.Reason == tc.reason
			if prefix, cut := strings.CutSuffix(tc.reason, "…"); cut {
				ok = strings.HasPrefix(de.Reason, prefix)
			}
			if de.Class != tc.class || !ok {
				t.Errorf("got %s %q\nwant %s %q", de.Class, de.Reason, tc.class, tc.reason)
			}
			if de.Error() != string(de.Class)+": "+de.Reason {
				t.Errorf("Error() = %q", de.Error())
			}
		})
	}
}

// TestClassOf checks ClassOf and errors.As through wrapping.
func TestClassOf(t *testing.T) {
	_, err := Decode([]byte("<MSG/>"), nil)
	wrapped := fmt.Errorf("router: decoding message 7: %w", err)
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"direct", err, Malformed},
		{"wrapped", wrapped, Malformed},
		{"codec", &DecodeError{Class: CodecError, Reason: "x"}, CodecError},
		{"nil", nil, ""},
		{"foreign", errors.New("boom"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClassOf(tc.err); got != tc.want {
				t.Errorf("ClassOf = %q, want %q", got, tc.want)
			}
		})
	}
	var de *DecodeError
	if !errors.As(wrapped, &de) || de.Reason != "no META element" {
		t.Errorf("errors.As = %v", de)
	}
	// The parse error stays reachable for callers that want the detail.
	_, err = Decode([]byte(envelope(`<SNDR>A</SNDR><SEQN>1</SEQN><DTTM>x</DTTM><TYPE>LDM</TYPE><STYP>X</STYP>`, "")), nil)
	if !errors.Is(err, ErrTimeFormat) {
		t.Errorf("errors.Is(%v, ErrTimeFormat) = false", err)
	}
}

// TestDecodeMeta checks META normalisation and the optional tags.
func TestDecodeMeta(t *testing.T) {
	loc := shanghai(t)
	tests := []struct {
		name string
		meta string
		want Meta
	}{
		{
			name: "trimmed and upper-cased, optional tags",
			meta: "<SNDR> AODB </SNDR><RCVR>MSGX</RCVR><SEQN>\n007\n</SEQN><DTTM> 20181105223126 </DTTM><DDTM>20181105223000</DDTM><TYPE> flop</TYPE><STYP>estt </STYP><XTRA>ignored</XTRA>",
			want: Meta{SNDR: "AODB", RCVR: "MSGX", SEQN: "007", SEQNNum: 7, SEQNIsNum: true,
				DTTMRaw: "20181105223126", DTTM: time.Date(2018, 11, 5, 22, 31, 26, 0, loc),
				DDTMRaw: "20181105223000", TYPE: "FLOP", STYP: "ESTT"},
		},
		{
			name: "non-numeric SEQN, no DTTM",
			meta: "<SNDR>AODB</SNDR><SEQN>A-17</SEQN><TYPE>LDM</TYPE><STYP>X</STYP>",
			want: Meta{SNDR: "AODB", SEQN: "A-17", TYPE: "LDM", STYP: "X"},
		},
		{
			name: "empty DTTM tolerated",
			meta: "<SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM></DTTM><TYPE>LDM</TYPE><STYP>X</STYP>",
			want: Meta{SNDR: "AODB", SEQN: "1", SEQNNum: 1, SEQNIsNum: true, TYPE: "LDM", STYP: "X"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := "<FLOP><FLID>1</FLID></FLOP>"
			m, err := Decode([]byte(envelope(tc.meta, body)), loc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m.Meta, tc.want) {
				t.Errorf("meta = %+v\nwant   %+v", m.Meta, tc.want)
			}
		})
	}
}

// TestDecodeFamilies checks the payload of each family on small messages.
func TestDecodeFamilies(t *testing.T) {
	loc := shanghai(t)
	t.Run("refdata without RECS", func(t *testing.T) {
		m, err := Decode([]byte(envelope(metaOf("RSTA", "DNLD"), `<RSTA a="1"><RTYP>GATE</RTYP><RSID>G1</RSID><STAT>D</STAT></RSTA>`)), loc)
		if err != nil {
			t.Fatal(err)
		}
		want := &RefData{Type: "RSTA", FirstChild: "RTYP", Records: []RefRecord{{"@a": "1", "RTYP": "GATE", "RSID": "G1", "STAT": "D"}}}
		if m.Kind != KindRefData || !reflect.DeepEqual(m.RefData, want) {
			t.Errorf("refdata = %+v", m.RefData)
		}
	})
	t.Run("refdata with RECS 0", func(t *testing.T) {
		m, err := Decode([]byte(envelope(metaOf("GLST", "DNLD"), `<RECS>0</RECS>`)), loc)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != KindRefData || !m.RefData.DeclaredPresent || m.RefData.Declared != 0 || len(m.RefData.Records) != 0 {
			t.Errorf("refdata = %+v", m.RefData)
		}
	})
	t.Run("refdata nested values", func(t *testing.T) {
		m, err := Decode([]byte(envelope(metaOf("XXXX", "ADD"),
			`<RECS>1</RECS><XXXX><A><B>1</B><B>2</B></A><C k=" v ">  t  </C><D>x<E/></D></XXXX>`)), loc)
		if err != nil {
			t.Fatal(err)
		}
		want := RefRecord{
			"A": map[string]any{"B": []any{"1", "2"}},
			"C": map[string]any{"@k": "v", "#text": "t"},
			"D": map[string]any{"#text": "x", "E": ""},
		}
		if !reflect.DeepEqual(m.RefData.Records[0], want) {
			t.Errorf("record = %#v", m.RefData.Records[0])
		}
	})
	t.Run("unknown type without shape", func(t *testing.T) {
		m, err := Decode([]byte(envelope(metaOf("ZZZZ", "UPD"), `<OTHER>1</OTHER>`)), loc)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != KindUnknown || len(m.Body) != 1 || m.Body[0].Name != "OTHER" || m.RefData != nil {
			t.Errorf("message = %+v", m)
		}
	})
	t.Run("LDM", func(t *testing.T) {
		m, err := Decode([]byte(envelope(metaOf("LDM", "DNLD"), `<LDM><LINE>CA101/10</LINE></LDM>`)), loc)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != KindLDM || len(m.Body) != 1 || m.Body[0].Child("LINE").Text != "CA101/10" {
			t.Errorf("message = %+v", m)
		}
	})
	t.Run("EROR", func(t *testing.T) {
		m, err := Decode([]byte(envelope(metaOf("EROR", "RQFD"),
			`<EROR><ORIG><SEQN>17</SEQN><TYPE>RQFD</TYPE><STYP>NONE</STYP></ORIG><ECOD>E12</ECOD><ETXT> bad request </ETXT></EROR>`)), loc)
		if err != nil {
			t.Fatal(err)
		}
		ea := m.ErrorAnswer
		if m.Kind != KindError || ea.RefSEQN != "17" || ea.RefTYPE != "RQFD" || ea.RefSTYP != "NONE" ||
			ea.Fields["ECOD"] != "E12" || ea.Fields["ETXT"] != "bad request" || len(m.Body) != 1 ||
			ea.Code != "E12" || ea.Text != "bad request" {
			t.Errorf("error answer = %+v", ea)
		}
		// Without a text tag, the other leaves are the text.
		m, err = Decode([]byte(envelope(metaOf("EROR", "RQFD"),
			`<EROR><TYPE>RQFD</TYPE><REASON>window too wide</REASON><LIMIT>3d</LIMIT><CODE/></EROR>`)), loc)
		if err != nil {
			t.Fatal(err)
		}
		if ea := m.ErrorAnswer; ea.Code != "" || ea.Text != "REASON=window too wide; LIMIT=3d" || ea.RefSEQN != "" {
			t.Errorf("error answer without text tag = %+v", ea)
		}
	})
	t.Run("TYPE FDEL", func(t *testing.T) {
		m, err := Decode([]byte(envelope(metaOf("FDEL", "NONE"), `<FDEL><FLID>9</FLID><FFID>x</FFID></FDEL>`)), loc)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != KindFlightDelete || m.Flight.FLID != "9" || m.Flight.Fields["FFID"] != "x" {
			t.Errorf("flight = %+v", m.Flight)
		}
	})
	t.Run("TYPE FDEL with FLOP body", func(t *testing.T) {
		m, err := Decode([]byte(envelope(metaOf("FDEL", "NONE"), `<FLOP><FLID>9</FLID><FDEL/></FLOP>`)), loc)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != KindFlightDelete || m.Flight.FLID != "9" || !m.Flight.Delete {
			t.Errorf("flight = %+v", m.Flight)
		}
	})
	t.Run("flight record details", func(t *testing.T) {
		body := `<FLOP><FLID> 5 </FLID><FLID>5</FLID>
			<ESTT>1</ESTT><ESTT> 23JAN210535 </ESTT>
			<GTDT GTNO="0"/>
			<CKDT CKNO = " 1 " > <CHKC> 01 </CHKC><NEST><X>1</X></NEST></CKDT>
			<FDIV DDES="HKG">A</FDIV><FDIV DDIR="TO">B</FDIV>
			<PORT><POID>O</POID></PORT><PORT><POTM> 10AUG181855 </POTM></PORT>
			<BDPB>36L</BDPB><FDEL/></FLOP>`
		m, err := Decode([]byte(envelope(metaOf("FLOP", "GTDT"), body)), loc)
		if err != nil {
			t.Fatal(err)
		}
		f := m.Flight
		// The last ESTT wins; the second FDIV and PORT replace the first
		// entirely (a part a PORT lacks is present and empty).
		wantFields := map[string]string{"ESTT": "23JAN210535", "FDIV": "B", "DDIR": "TO", "POTM": "10AUG181855", "POID": ""}
		wantColl := map[string][]map[string]string{
			"GTDT": {{"GTNO": "0"}},
			"CKDT": {{"CKNO": "1", "CHKC": "01"}},
		}
		if f.FLID != "5" || !reflect.DeepEqual(f.Fields, wantFields) || !reflect.DeepEqual(f.Collections, wantColl) {
			t.Errorf("flight = %+v", f)
		}
		// FDEL outside STYP=FDEL is still the delete marker of a FLOP body;
		// the router decides by STYP.
		if !f.Delete || !reflect.DeepEqual(f.Other, []string{"BDPB"}) {
			t.Errorf("delete = %v, other = %v", f.Delete, f.Other)
		}
	})
	t.Run("schedule without RECS, other children, FDEL in FLTR", func(t *testing.T) {
		body := `<SCHD><NOTE>x</NOTE><FLTR><FLID>1</FLID><FDEL/></FLTR><FLTR/></SCHD>`
		m, err := Decode([]byte(envelope(metaOf("SCHD", "ADFT"), body)), loc)
		if err != nil {
			t.Fatal(err)
		}
		s := m.Schedule
		if s.DeclaredPresent || len(s.Flights) != 2 || !reflect.DeepEqual(s.Other, []string{"NOTE"}) {
			t.Fatalf("schedule = %+v", s)
		}
		if !reflect.DeepEqual(s.Flights[0].Other, []string{"FDEL"}) || s.Flights[1].FLID != "" {
			t.Errorf("flights = %+v", s.Flights)
		}
	})
}

// TestRawEscaping checks that raw collection entries escape what needs it
// and re-parse to the same content.
func TestRawEscaping(t *testing.T) {
	body := `<FLOP><FLID>1</FLID><SRVT OPER="a&quot;b&lt;c&#9;"><SARR>x &amp; y &lt; z &gt; 1&#xD;</SARR><![CDATA[<raw>]]></SRVT></FLOP>`
	m, err := Decode([]byte(envelope(metaOf("FLOP", "SRVT"), body)), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := m.Flight.Collections["SRVT"][0][RawKey]
	want := `<SRVT OPER="a&quot;b&lt;c&#x9;">&lt;raw&gt;<SARR>x &amp; y &lt; z &gt; 1&#xD;</SARR></SRVT>`
	if raw != want {
		t.Errorf("raw = %s\nwant  %s", raw, want)
	}
	n, derr := parseTree([]byte(raw))
	if derr != nil {
		t.Fatal(derr)
	}
	if v, _ := n.Attr("OPER"); v != "a\"b<c\t" || n.Child("SARR").Text != "x & y < z > 1\r" || n.Text != "<raw>" {
		t.Errorf("re-parsed = %+v", n)
	}
}
