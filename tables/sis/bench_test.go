package sis

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecode decodes the SCHD DNLD sample (two flights).
func BenchmarkDecode(b *testing.B) {
	raw := sampleXML(b, "INSERT_CMINMSGS_SCHD.sql", 0)
	loc := shanghai(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw, loc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeLargeSchedule decodes a 1,000-flight schedule built from
// the SCHD DNLD sample, the size of a large airport's day.
func BenchmarkDecodeLargeSchedule(b *testing.B) {
	s := string(sampleXML(b, "INSERT_CMINMSGS_SCHD.sql", 0))
	start, end := strings.Index(s, "<FLTR>"), strings.LastIndex(s, "</SCHD>")
	raw := []byte(s[:start] + strings.Repeat(s[start:end], 500) + s[end:])
	loc := shanghai(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := Decode(raw, loc)
		if err != nil {
			b.Fatal(err)
		}
		if len(m.Schedule.Flights) != 1000 {
			b.Fatalf("%d flights", len(m.Schedule.Flights))
		}
	}
}

// BenchmarkDecodeFLOP decodes the FLOP GTDT sample, the most frequent kind
// of message.
func BenchmarkDecodeFLOP(b *testing.B) {
	raw := sampleXML(b, "INSERT_CMINMSGS_GTDT.sql", 0)
	loc := shanghai(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw, loc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHostileInputs times the inputs of TestHostileInputs that would
// expose a quadratic path (150,000 distinct tags, 100,000 attributes).
func BenchmarkHostileInputs(b *testing.B) {
	var distinct, attrs strings.Builder
	for i := range 150_000 {
		fmt.Fprintf(&distinct, "<T%d/>", i)
	}
	for i := range 100_000 {
		fmt.Fprintf(&attrs, ` a%d="%d"`, i, i)
	}
	for _, in := range []struct{ name, raw string }{
		{"distinct-tags", envelope(metaOf("FLOP", "X"), "<FLOP><FLID>1</FLID>"+distinct.String()+"</FLOP>")},
		{"attributes", envelope(metaOf("FLOP", "SRVT"), "<FLOP><FLID>1</FLID><SRVT"+attrs.String()+"/></FLOP>")},
	} {
		b.Run(in.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Decode([]byte(in.raw), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
