package refdata

import (
	"encoding/json"
	"testing"

	"msgx/tables/refdata"
)

// The table codec writes what kafka.JSON[refdata.State] writes, passes a
// value encoded by the callback through, and hands a kept state over only
// for the very value it was kept with, once.
func TestTableCodec(t *testing.T) {
	c := tableCodec{states: newOwnedStates()}
	s := refdata.NewState("AIRL")
	s.Version, s.LastMsgID = 3, 12
	s.Records["CA"] = refdata.Entry{Attrs: refdata.Record{"ALCD": "CA"}, LastMsgID: 12, Version: 3}
	want, _ := json.Marshal(s)
	if b, err := c.Encode(s); err != nil || string(b) != string(want) {
		t.Fatalf("encoding: %v %s, want %s", err, b, want)
	}
	if b, err := c.Encode(encodedState(want)); err != nil || string(b) != string(want) {
		t.Fatalf("encoded state: %v %s", err, b)
	}

	c.states.keep(s, want)
	other := refdata.NewState("APCD")
	otherValue, _ := json.Marshal(other)
	c.states.keep(other, otherValue)
	if v, err := c.Decode(append([]byte(nil), want...)); err != nil || v.(*refdata.State) != s {
		t.Fatalf("a kept value (a copy of its bytes) decoded to %p, %v; want the kept state %p", v, err, s)
	}
	v, err := c.Decode(want)
	if err != nil || v.(*refdata.State) == s {
		t.Fatalf("a state handed over twice (%v)", err)
	}
	if again, _ := json.Marshal(v); string(again) != string(want) {
		t.Fatalf("decoded after the hand-over: %s, want %s", again, want)
	}
	s.Version++ // the callback applies the next transition to it...
	newer, _ := json.Marshal(s)
	if v, _ := c.Decode(newer); v.(*refdata.State) == s {
		t.Fatal("a value never kept handed over a state")
	}
	if v, _ := c.Decode(otherValue); v.(*refdata.State) != other {
		t.Fatal("the other category's kept state was not handed over")
	}

	// A kept state changed behind the cache's back is caught in tests.
	c.states.keep(s, newer)
	s.LastMsgID++
	defer func() {
		if recover() == nil {
			t.Fatal("a kept state modified after it was kept was handed over")
		}
	}()
	c.Decode(newer)
}

// Zero codec decodes always.
func TestTableCodecWithoutStates(t *testing.T) {
	var c tableCodec
	b, _ := c.Encode(refdata.NewState("AIRL"))
	if v, err := c.Decode(b); err != nil || v.(*refdata.State).RType != "AIRL" {
		t.Fatalf("decoding: %v %v", v, err)
	}
	if _, err := c.Decode([]byte("{")); err == nil {
		t.Fatal("bad JSON decoded")
	}
}
