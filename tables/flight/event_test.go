package flight

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

func TestEventJSON(t *testing.T) {
	r := mustApply(t, richState(t), del(30, "100"), Options{})
	if got, want := keysOf(t, lastEvent(r)), []string{"changed", "eventType", "flid", "flight", "msgId", "source", "stateVersion"}; !slices.Equal(got, want) {
		t.Fatalf("event keys %v", got)
	}
	var e struct {
		EventType string          `json:"eventType"`
		Changed   []string        `json:"changed"`
		Flight    json.RawMessage `json:"flight"`
	}
	b, _ := json.Marshal(lastEvent(r))
	_ = json.Unmarshal(b, &e)
	if e.EventType != "TOMBSTONE" || !slices.Equal(e.Changed, []string{"MAFL", "STATE"}) {
		t.Fatalf("%s", b)
	}
	var flight map[string]json.RawMessage
	_ = json.Unmarshal(e.Flight, &flight)
	if got := slices.Sorted(maps.Keys(flight)); !slices.Equal(got, specFlightKeys) {
		t.Fatalf("event flight keys %v", got)
	}
}

// TestEncodeEventIsTheEventJSON: the event record spliced from a version's
// document is byte for byte the JSON of its Event, for a live flight with
// characters encoding/json escapes, a deleted one and one without
// provenance.
func TestEncodeEventIsTheEventJSON(t *testing.T) {
	rich := richState(t)
	rich.Fields["REMC"] = `<a & "b"> ` + "\u2028 é \x01"
	deleted := rich.Clone()
	deleted.State = StateDeleted
	bare := rich.Clone()
	bare.Last = nil
	for name, s := range map[string]*State{"live": rich, "deleted": deleted, "without provenance": bare} {
		doc, err := s.Doc()
		if err != nil {
			t.Fatal(err)
		}
		view, err := json.Marshal(s.View())
		if err != nil {
			t.Fatal(err)
		}
		if string(doc) != string(view) {
			t.Fatalf("%s: Doc differs from the View's JSON:\n%s\n%s", name, doc, view)
		}
		got, err := EncodeEvent(s, string(doc))
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(eventOf(s, true))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%s: EncodeEvent:\n%s\nwant\n%s", name, got, want)
		}
	}
}
