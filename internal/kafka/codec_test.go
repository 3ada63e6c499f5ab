package kafka

import (
	"reflect"
	"strings"
	"testing"

	"msgx/tables/flight"
)

type codecValue struct {
	A string `json:"a"`
	N int    `json:"n"`
}

func TestJSONCodec(t *testing.T) {
	c := JSON[codecValue]{}
	v := codecValue{A: "<x>", N: 3}
	byValue, err := c.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	byPointer, err := c.Encode(&v)
	if err != nil {
		t.Fatal(err)
	}
	if string(byValue) != string(byPointer) || !strings.Contains(string(byValue), `"n":3`) {
		t.Fatalf("Encode(T) = %s, Encode(*T) = %s", byValue, byPointer)
	}
	back, err := c.Decode(byValue)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := back.(*codecValue); !ok || !reflect.DeepEqual(*p, v) {
		t.Fatalf("Decode = %#v, want *codecValue %+v", back, v)
	}
	if _, err := c.Encode("x"); err == nil {
		t.Error("encoded a string")
	}
	if _, err := c.Decode([]byte("nope")); err == nil || !strings.Contains(err.Error(), "kafka.codecValue") {
		t.Errorf("Decode of garbage: %v", err)
	}
}

// A type with its own JSON methods is encoded and decoded by them, and
// still refuses what is not JSON.
func TestJSONCodecUsesTheTypesMethods(t *testing.T) {
	c := JSON[flight.Transition]{}
	tr := flight.Transition{MsgID: 7, Source: "FLOP-ESTT", Kind: flight.KindFLOP, FLID: "100", Fields: map[string]string{"ESTT": "<x>"}}
	b, err := c.Encode(tr)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := tr.MarshalJSON(); string(b) != string(want) {
		t.Fatalf("Encode = %s, want MarshalJSON's %s", b, want)
	}
	back, err := c.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if p := back.(*flight.Transition); p.MsgID != 7 || p.Fields["ESTT"] != "<x>" {
		t.Fatalf("Decode = %+v", p)
	}
	for _, bad := range []string{"nope", `{"msgId":7`, `{"msgId":7} x`, ``} {
		if _, err := c.Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) succeeded", bad)
		}
	}
}
