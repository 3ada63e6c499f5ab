package event

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"msgx/sink"
)

func row(id int64, topic, key string, v int64) sink.OutboxRow {
	e := sink.Event{Topic: topic, Key: key}
	if v > 0 {
		e.Value, e.MsgID, e.StateVersion = fmt.Appendf(nil, "v%d", v), 1000+v, v
	}
	return sink.OutboxRow{ID: id, Event: e}
}

func TestPositionRoundTrip(t *testing.T) {
	// Ids 7..9 and 12, a tombstone on another topic in between, row 9 a
	// duplicate skipped; offsets contiguous except after the tombstone.
	all := []sink.OutboxRow{row(7, "msg", "A", 1), row(8, "schd", "B", 0), row(9, "msg", "A", 1), row(12, "msg", "A", 2), row(13, "msg", "C", 1)}
	produced := []sink.Produced{
		{ID: 7, Event: all[0].Event, Partition: 0, Offset: 40},
		{ID: 8, Event: all[1].Event, Partition: 2, Offset: 5},
		{ID: 12, Event: all[3].Event, Partition: 0, Offset: 41},
		{ID: 13, Event: all[4].Event, Partition: 0, Offset: 42},
	}
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	p := newPosition(all, produced, at)
	if p.LastID != 13 || fmt.Sprint(p.Rows) != "[[7 9] [12 13]]" || fmt.Sprint(p.Topics) != "[msg schd]" {
		t.Fatalf("position %+v", p)
	}
	// 12 and 13 share a run: consecutive ids and offsets.
	if got := fmt.Sprint(p.Events); got != "[{7 1 0 0 40} {8 1 1 2 5} {12 2 0 0 41}]" {
		t.Fatalf("runs %s", got)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back position
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back.ids()) != "[7 8 9 12 13]" {
		t.Fatalf("ids %v", back.ids())
	}
	if err := back.check(all); err != nil {
		t.Fatal(err)
	}
	gotProduced, skipped, err := back.split(all)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gotProduced) != fmt.Sprint(produced) || fmt.Sprint(skipped) != "[9]" {
		t.Fatalf("split: %v skipped %v", gotProduced, skipped)
	}

	changed := append([]sink.OutboxRow(nil), all...)
	changed[3].Event.Value = []byte("other")
	for name, rows := range map[string][]sink.OutboxRow{
		"a row missing":     all[:4],
		"a row changed":     changed,
		"another tombstone": {row(7, "msg", "A", 1), row(8, "schd", "X", 0), row(9, "msg", "A", 1), row(12, "msg", "A", 2), row(13, "msg", "C", 1)},
	} {
		if err := back.check(rows); err == nil {
			t.Errorf("%s: check passed", name)
		}
	}
	// A nil value (tombstone) and an empty one differ.
	empty := append([]sink.OutboxRow(nil), all...)
	empty[1].Event.Value = []byte{}
	if digest(empty) == digest(all) {
		t.Error("an empty value hashes like a tombstone")
	}
}

// TestPositionSize: the widest position a transaction of
// maxTransactionRows rows can have (every number at its widest, every row
// its own range and run) fits the record limit.
func TestPositionSize(t *testing.T) {
	for _, limit := range []int{65536, 1000000} {
		n := maxTransactionRows(limit)
		var all []sink.OutboxRow
		var produced []sink.Produced
		for i := range n {
			id := int64(math.MaxInt64 - 2*(n-i)) // never consecutive
			r := row(id, strings.Repeat("t", 249), "K", 1)
			all = append(all, r)
			produced = append(produced, sink.Produced{ID: id, Event: r.Event, Partition: math.MaxInt32, Offset: math.MaxInt64 - int64(2*i)})
		}
		b, err := json.Marshal(newPosition(all, produced, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > limit {
			t.Errorf("limit %d: %d rows make a position of %d bytes", limit, n, len(b))
		}
	}
}

func TestDedupe(t *testing.T) {
	rows := []sink.OutboxRow{row(1, "msg", "A", 1), row(2, "msg", "A", 2), row(3, "msg", "A", 2), row(4, "schd", "A", 0),
		row(5, "schd", "A", 0), row(6, "msg", "B", 4), row(7, "msg", "B", 5)}
	published := map[sink.Version]bool{{FLID: "B", StateVersion: 4}: true, {FLID: "A", StateVersion: 9}: true}
	publish, skip := dedupe(rows, published)
	ids := func(rs []sink.OutboxRow) string {
		var s []string
		for _, r := range rs {
			s = append(s, fmt.Sprint(r.ID))
		}
		return strings.Join(s, " ")
	}
	if got, want := ids(publish), "1 2 4 5 7"; got != want {
		t.Errorf("published %s, want %s", got, want)
	}
	if got, want := ids(skip), "3 6"; got != want {
		t.Errorf("skipped %s, want %s (the second A v2, B v4 published before)", got, want)
	}
}
