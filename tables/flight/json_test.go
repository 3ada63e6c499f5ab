package flight

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"
)

func keysOf(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(m))
}

var specFlightKeys = []string{"collections", "fields", "flid", "lastMsgId", "mafl", "operationDay", "state", "stateVersion", "updatedAt"}

// richState is a master with a child, collections, bookkeeping and a
// non-UTC time.
func richState(t *testing.T) *State {
	t.Helper()
	s := created(t, "100", with(fltr15, "FDIV", "WX", "DDES", "HKG", "BOTM", "1645"), with2(fltr15Colls, "SRVT", []Element{{"RAW": "<SRVT><SRTC>ATN</SRTC></SRVT>"}}))
	s = mustApply(t, s, link(11, "100", "101", "CA101", true), Options{}).State
	s = mustApply(t, s, link(12, "100", "102", "CA102", false), Options{}).State
	tr := flop(13, "100", "ESTT", map[string]string{"ESTT": "1700"}, nil)
	tr.At = time.Date(2026, 1, 23, 13, 0, 0, 123456789, time.FixedZone("CST", 8*3600))
	return mustApply(t, s, tr, Options{}).State
}

func TestStateJSON(t *testing.T) {
	s := richState(t)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.UpdatedAt.Equal(s.UpdatedAt) {
		t.Fatalf("updatedAt %v != %v", back.UpdatedAt, s.UpdatedAt)
	}
	back.UpdatedAt = s.UpdatedAt // same instant; the location pointer differs
	if !reflect.DeepEqual(&back, s) {
		t.Fatalf("round trip:\n%+v\n%+v", &back, s)
	}
	b2, _ := json.Marshal(&back)
	if string(b) != string(b2) {
		t.Fatalf("JSON not stable:\n%s\n%s", b, b2)
	}
	// The writers call MarshalJSON directly (no second compaction pass):
	// the same bytes as json.Marshal, HTML escaping included.
	s.Fields["REMK"] = "<a & b>\u2028"
	marshalled, _ := json.Marshal(s)
	if direct, err := s.MarshalJSON(); err != nil || string(direct) != string(marshalled) {
		t.Fatalf("MarshalJSON %v:\n%s\njson.Marshal:\n%s", err, direct, marshalled)
	}

	// The table value is the flight JSON (docs/design.md#events) plus
	// bookkeeping keys only.
	want := slices.Sorted(slices.Values(append(slices.Clone(specFlightKeys), "lastChange", "linkSince", "links")))
	if got := keysOf(t, s); !slices.Equal(got, want) && !slices.Equal(got, without1(want, "linkSince")) {
		t.Fatalf("table value keys %v", got)
	}
	// The view (the event's flight) is exactly the flight JSON.
	if got := keysOf(t, s.View()); !slices.Equal(got, specFlightKeys) {
		t.Fatalf("view keys %v, want %v", got, specFlightKeys)
	}
	if got := keysOf(t, s.MAFL[0]); !slices.Equal(got, []string{"FLID", "FLNO"}) {
		t.Fatalf("mafl entry keys %v", got)
	}
	var raw struct {
		State       string               `json:"state"`
		Fields      map[string]string    `json:"fields"`
		Collections map[string][]Element `json:"collections"`
	}
	_ = json.Unmarshal(b, &raw)
	if raw.State != "ACTIVE" || raw.Fields["ALCD"] != "YG" || raw.Collections["PSDT"][0]["PSNO"] != "1" {
		t.Fatalf("shape %+v", raw)
	}
}

func without1(keys []string, k string) []string {
	return slices.DeleteFunc(slices.Clone(keys), func(x string) bool { return x == k })
}

func TestEmptyStateJSONShape(t *testing.T) {
	b, err := json.Marshal(State{FLID: "1", State: StateActive})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"flid":"1","operationDay":"","state":"ACTIVE","stateVersion":0,"lastMsgId":0,"updatedAt":"0001-01-01T00:00:00Z","fields":{},"collections":{},"mafl":[]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestTransitionJSON(t *testing.T) {
	tests := []Transition{
		flop(20, "15", "FDIV", map[string]string{"FDIV": "WX", "DDES": "", "DDIR": "TO"}, map[string][]Element{"DELY": {{}}, "GTDT": {{"GTNO": "0"}}}),
		link(21, "M", "C", "MU1", true),
		{MsgID: 22, Source: SourceCascade, Kind: KindDelete, FLID: "C", At: at(22), Fields: map[string]string{"MAID": "M"}, Cascade: true},
		sched(23, "15", fltr15, fltr15Colls),
	}
	for _, tr := range tests {
		t.Run(tr.Source, func(t *testing.T) {
			b, err := json.Marshal(tr)
			if err != nil {
				t.Fatal(err)
			}
			var back Transition
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tr) {
				t.Fatalf("round trip:\n%+v\n%+v\n%s", back, tr, b)
			}
		})
	}

	full := Transition{MsgID: 1, Source: "S", Kind: KindLink, STYP: "X", FLID: "1", OperationDay: "2026-01-23", At: t0,
		Fields: map[string]string{"A": ""}, Collections: map[string][]Element{"GTDT": nil}, Link: &Link{Child: "2"}, Cascade: true}
	if got, want := keysOf(t, full), []string{"at", "cascade", "collections", "fields", "flid", "kind", "link", "msgId", "operationDay", "source", "styp"}; !slices.Equal(got, want) {
		t.Fatalf("transition keys %v", got)
	}
	if got := keysOf(t, Link{}); !slices.Equal(got, []string{"flid", "flno", "live"}) {
		t.Fatalf("link keys %v", got)
	}
	// Optional keys stay off the wire.
	if got := keysOf(t, Transition{}); !slices.Equal(got, []string{"at", "flid", "kind", "msgId", "source"}) {
		t.Fatalf("minimal transition keys %v", got)
	}
}
