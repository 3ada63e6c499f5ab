package flights

import (
	"encoding/json"
	"testing"

	"msgx/tables/flight"
)

// The table codec writes what kafka.JSON[flight.State] writes, passes a
// value encoded by the callback through, and refuses anything else.
func TestTableCodec(t *testing.T) {
	var c tableCodec
	s := &flight.State{FLID: "7", State: flight.StateActive, StateVersion: 3, LastMsgID: 12, Fields: map[string]string{"FLNO": "CA1"}}
	want, _ := json.Marshal(s)
	b, err := c.Encode(s)
	if err != nil || string(b) != string(want) {
		t.Fatalf("encoding: %v %s, want %s", err, b, want)
	}
	if out, err := c.Encode(encodedState(want)); err != nil || string(out) != string(want) {
		t.Fatalf("encoded state: %v %s", err, out)
	}
	got, err := c.Decode(b)
	if again, _ := json.Marshal(got); err != nil || string(again) != string(want) {
		t.Fatalf("decoding: %v %s", err, again)
	}
	if _, err := c.Decode([]byte("{")); err == nil {
		t.Fatal("bad JSON decoded")
	}
	if _, err := c.Encode(42); err == nil {
		t.Fatal("an int encoded")
	}
}
