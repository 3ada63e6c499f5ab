package kafka

import (
	"reflect"
	"strings"
	"testing"
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
