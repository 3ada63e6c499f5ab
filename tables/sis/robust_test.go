package sis

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// hostileBound is the slowest a hostile input may decode in a test.
const hostileBound = 60 * time.Second

// TestHostileInputs checks that inputs built to hit quadratic paths or huge
// reasons decode (or fail) with bounded reasons and without going quadratic.
// Each input decodes in well under a second on an idle machine (see
// BenchmarkHostileInputs); a quadratic path over 10^5 elements takes many
// minutes, so the generous bound below tells the two apart even on a loaded
// machine running the race detector, where a tight bound would be flaky.
func TestHostileInputs(t *testing.T) {
	var distinct, attrs strings.Builder
	for i := range 150_000 {
		fmt.Fprintf(&distinct, "<T%d/>", i)
	}
	for i := range 100_000 {
		fmt.Fprintf(&attrs, ` a%d="%d"`, i, i)
	}
	longName := strings.Repeat("N", 10_000)
	tests := []struct {
		name   string
		raw    string
		class  Class  // "" = must decode
		reason string // prefix
	}{
		{"text split by comments", envelope(metaOf("LDM", "X"), "<T>"+strings.Repeat("x<!---->", 450_000)+"</T>"), "", ""},
		{"text split by CDATA", envelope(metaOf("FLOP", "ESTT"), "<FLOP><FLID>1</FLID><ESTT>"+strings.Repeat("<![CDATA[x]]>", 250_000)+"</ESTT></FLOP>"), "", ""},
		{"many distinct unknown tags", envelope(metaOf("FLOP", "X"), "<FLOP><FLID>1</FLID>"+distinct.String()+"</FLOP>"), "", ""},
		{"many attributes", envelope(metaOf("FLOP", "SRVT"), "<FLOP><FLID>1</FLID><SRVT"+attrs.String()+"/></FLOP>"), "", ""},
		{"many repeated refdata tags", envelope(metaOf("AIRL", "DNLD"), "<RECS>1</RECS><AIRL>"+strings.Repeat("<SUBC>x</SUBC>", 150_000)+"</AIRL>"), "", ""},
		{"depth limit exactly", envelope(metaOf("LDM", "X"), strings.Repeat("<A>", MaxDepth-1)+strings.Repeat("</A>", MaxDepth-1)), "", ""},
		{"duplicate attribute", envelope(metaOf("FLOP", "GTDT"), `<FLOP><FLID>1</FLID><GTDT GTNO="1" GTNO="2"/></FLOP>`), Malformed, "not well-formed XML: XML syntax error on line 1: attribute GTNO repeated in <GTDT>"},
		{"duplicate attribute among many", envelope(metaOf("FLOP", "SRVT"), "<FLOP><FLID>1</FLID><SRVT"+attrs.String()+` a5="x"/></FLOP>`), Malformed, "not well-formed XML: XML syntax error on line 1: attribute a5 repeated in <SRVT>"},
		{"long root name", "<" + longName + "/>", Malformed, "root element is <NNNN"},
		{"long TYPE", envelope(metaOf(longName, "X"), "<RECS>1</RECS>"), Malformed, "TYPE=NNNN"},
		{"long undefined entity", envelope(metaOf("LDM", "X"), "<A>&"+longName+";</A>"), Malformed, "not well-formed XML"},
		{"long DTTM", envelope(`<SNDR>A</SNDR><SEQN>1</SEQN><DTTM>`+longName+`</DTTM><TYPE>LDM</TYPE><STYP>X</STYP>`, ""), CodecError, `META/DTTM "NNNN`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.raw) > MaxMessageSize {
				t.Fatalf("input of %d bytes is over the size limit", len(tc.raw))
			}
			start := time.Now()
			_, err := Decode([]byte(tc.raw), nil)
			if d := time.Since(start); d > hostileBound {
				t.Errorf("took %v", d)
			}
			if tc.class == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			de, ok := err.(*DecodeError)
			if !ok || de.Class != tc.class || !strings.HasPrefix(de.Reason, tc.reason) {
				t.Fatalf("err = %v, want %s %q…", err, tc.class, tc.reason)
			}
			if len(de.Reason) > maxReason+len("…") {
				t.Errorf("reason of %d bytes", len(de.Reason))
			}
		})
	}
}

// TestNamespacedAttributes checks that prefixed attributes with the same
// local name are not a duplicate and keep the last value.
func TestNamespacedAttributes(t *testing.T) {
	body := `<FLOP xmlns:a="urn:a" xmlns:b="urn:b"><FLID>1</FLID><GTDT a:GTNO="1" b:GTNO="2"/></FLOP>`
	m, err := Decode([]byte(envelope(metaOf("FLOP", "GTDT"), body)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Flight.Collections["GTDT"]; len(got) != 1 || got[0]["GTNO"] != "2" || len(got[0]) != 1 {
		t.Errorf("GTDT = %v", got)
	}
}
