package sis

import (
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
