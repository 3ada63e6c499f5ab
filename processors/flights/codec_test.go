package flights

import (
	"encoding/json"
	"fmt"
	"testing"

	"msgx/tables/flight"
)

// The table codec hands out the value it encoded for the same bytes, and
// decodes any other bytes as kafka.JSON would; its cache stays bounded.
func TestTableCodecCachesWhatItEncoded(t *testing.T) {
	c := newTableCodec()
	s := &flight.State{FLID: "7", State: flight.StateActive, StateVersion: 3, LastMsgID: 12, Fields: map[string]string{"FLNO": "CA1"}}
	b, err := c.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode(append([]byte(nil), b...))
	if err != nil || got.(*flight.State) != s {
		t.Fatalf("decoding what it encoded: %v, %p, want the same value %p", err, got, s)
	}
	// Other bytes of the same flight: decoded, not the cached value.
	s2 := *s
	s2.LastMsgID = 13
	b2, _ := json.Marshal(&s2)
	got, err = c.Decode(b2)
	if again, _ := json.Marshal(got); err != nil || got.(*flight.State) == s || string(again) != string(b2) {
		t.Fatalf("decoding other bytes: %v %+v", err, got)
	}
	// A value encoded by the caller passes through.
	b3, _ := json.Marshal(s)
	if out, err := c.Encode(encodedState{s: s, b: b3}); err != nil || string(out) != string(b3) {
		t.Fatalf("encoded state: %v %q", err, out)
	}
	if _, err := c.Decode([]byte("{")); err == nil {
		t.Fatal("bad JSON decoded")
	}
	if _, err := c.Encode(42); err == nil {
		t.Fatal("an int encoded")
	}
	for i := range 3 * stateCacheSize {
		if _, err := c.Encode(&flight.State{FLID: fmt.Sprint(i), State: flight.StateActive}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.cur) + len(c.old); n > 2*stateCacheSize {
		t.Fatalf("%d values cached, bound %d", n, 2*stateCacheSize)
	}
}
