package ingest

import (
	"testing"
	"time"

	"msgx/sink"
)

func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	delay := 5 * time.Minute
	for _, tc := range []struct {
		name    string
		cursor  sink.Cursor
		ids     []int64
		now     time.Time
		run     int
		next    sink.Cursor
		gap     *sink.Gap
		release bool
	}{
		{name: "nothing new", cursor: sink.Cursor{Watermark: 10}, now: t0, next: sink.Cursor{Watermark: 10}},
		{name: "contiguous batch", cursor: sink.Cursor{Watermark: 10}, ids: []int64{11, 12, 13}, now: t0,
			run: 3, next: sink.Cursor{Watermark: 13}},
		{name: "first gap starts the timer", cursor: sink.Cursor{Watermark: 10}, ids: []int64{11, 13, 14}, now: t0,
			run: 1, next: sink.Cursor{Watermark: 11, HoleSince: t0, HoleEnd: 12}, gap: &sink.Gap{From: 12, To: 12}},
		{name: "gap right after W", cursor: sink.Cursor{Watermark: 10}, ids: []int64{14}, now: t0,
			next: sink.Cursor{Watermark: 10, HoleSince: t0, HoleEnd: 13}, gap: &sink.Gap{From: 11, To: 13}},
		{name: "same hole keeps its timer", cursor: sink.Cursor{Watermark: 10, HoleSince: t0, HoleEnd: 13}, ids: []int64{14}, now: t0.Add(time.Minute),
			next: sink.Cursor{Watermark: 10, HoleSince: t0, HoleEnd: 13}, gap: &sink.Gap{From: 11, To: 13}},
		{name: "partly filled hole keeps its timer", cursor: sink.Cursor{Watermark: 10, HoleSince: t0, HoleEnd: 13}, ids: []int64{11, 14}, now: t0.Add(2 * time.Minute),
			run: 1, next: sink.Cursor{Watermark: 11, HoleSince: t0, HoleEnd: 13}, gap: &sink.Gap{From: 12, To: 13}},
		{name: "hole aged out is released", cursor: sink.Cursor{Watermark: 10, HoleSince: t0, HoleEnd: 13}, ids: []int64{14, 15}, now: t0.Add(delay),
			next: sink.Cursor{Watermark: 10, HoleSince: t0, HoleEnd: 13}, gap: &sink.Gap{From: 11, To: 13}, release: true},
		{name: "filled hole clears the timer", cursor: sink.Cursor{Watermark: 10, HoleSince: t0, HoleEnd: 11}, ids: []int64{11, 12}, now: t0.Add(time.Minute),
			run: 2, next: sink.Cursor{Watermark: 12}},
		{name: "new hole after a filled one starts a fresh timer", cursor: sink.Cursor{Watermark: 10, HoleSince: t0, HoleEnd: 11}, ids: []int64{11, 12, 14}, now: t0.Add(4 * time.Minute),
			run: 2, next: sink.Cursor{Watermark: 12, HoleSince: t0.Add(4 * time.Minute), HoleEnd: 13}, gap: &sink.Gap{From: 13, To: 13}},
		{name: "a fresh hole is not released by an old timer", cursor: sink.Cursor{Watermark: 10, HoleSince: t0, HoleEnd: 11}, ids: []int64{11, 13}, now: t0.Add(10 * time.Minute),
			run: 1, next: sink.Cursor{Watermark: 11, HoleSince: t0.Add(10 * time.Minute), HoleEnd: 12}, gap: &sink.Gap{From: 12, To: 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.cursor, tc.ids, tc.now, delay)
			if got.Run != tc.run || got.Next != tc.next || got.Release != tc.release {
				t.Fatalf("Plan = run %d next %+v release %v; want run %d next %+v release %v",
					got.Run, got.Next, got.Release, tc.run, tc.next, tc.release)
			}
			if (got.Gap == nil) != (tc.gap == nil) || (got.Gap != nil && *got.Gap != *tc.gap) {
				t.Fatalf("gap = %+v, want %+v", got.Gap, tc.gap)
			}
		})
	}
}

func TestParseCutover(t *testing.T) {
	for _, tc := range []struct {
		in   string
		mode string
		id   int64
		bad  bool
	}{{"", SeedNone, 0, false}, {"MIN", SeedMin, 0, false}, {"zero", SeedZero, 0, false}, {"max", SeedMax, 0, false},
		{"4711", SeedID, 4711, false}, {"-1", "", 0, true}, {"latest", "", 0, true}} {
		mode, id, err := ParseCutover(tc.in)
		if (err != nil) != tc.bad || mode != tc.mode || id != tc.id {
			t.Errorf("ParseCutover(%q) = %q %d %v", tc.in, mode, id, err)
		}
	}
}
