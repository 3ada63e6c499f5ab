package flight

import (
	"encoding/json"
	"fmt"
	"slices"
)

// The msg topic's record format (docs/design.md#msg-topic): one event per
// new version of a flight, keyed by FLID. Apply makes the versions; this
// is how each is announced.

// Event types of the msg topic.
const (
	// EventUpsert announces a new version of a live flight.
	EventUpsert = "UPSERT"
	// EventTombstone announces a new version of a deleted flight.
	EventTombstone = "TOMBSTONE"
)

// Events are the msg-topic events of the new versions, in order.
func (r Result) Events() []*Event {
	out := make([]*Event, len(r.Versions))
	for i, v := range r.Versions {
		out[i] = eventOf(v, true)
	}
	return out
}

// Event is one msg-topic record (docs/design.md#msg-topic), keyed by FLID.
type Event struct {
	// EventType is EventUpsert or EventTombstone.
	EventType string `json:"eventType"`
	// FLID is the flight.
	FLID string `json:"flid"`
	// StateVersion is the flight's version after the change.
	StateVersion int64 `json:"stateVersion"`
	// MsgID is the message of the change (0: the history sweep's).
	MsgID int64 `json:"msgId"`
	// Source is the transition's source, e.g. "FLOP-ESTT".
	Source string `json:"source"`
	// Changed lists the changed tags in ChangeOrder.
	Changed []string `json:"changed"`
	// Flight is the full flight after the change, without bookkeeping.
	Flight *State `json:"flight"`
}

// EncodeEvent is the msg-topic record of the version s (the JSON of the
// Event that Events makes of it), given doc, the flight JSON of s (Doc):
// a version's document is encoded once, for its row and its event.
func EncodeEvent(s *State, doc string) ([]byte, error) {
	e := eventOf(s, false)
	head, err := json.Marshal(eventHead{EventType: e.EventType, FLID: e.FLID, StateVersion: e.StateVersion,
		MsgID: e.MsgID, Source: e.Source, Changed: e.Changed})
	if err != nil {
		return nil, fmt.Errorf("encoding the event of %s v%d: %w", s.FLID, s.StateVersion, err)
	}
	// Flight is Event's last field: the record is the head with it
	// appended, as encoding/json writes it (doc is compact and escaped
	// alike).
	const key = `,"flight":`
	out := make([]byte, 0, len(head)+len(key)+len(doc)+1)
	out = append(out, head[:len(head)-1]...)
	out = append(out, key...)
	out = append(out, doc...)
	return append(out, '}'), nil
}

// eventHead is Event without Flight, in Event's order.
type eventHead struct {
	EventType    string   `json:"eventType"`
	FLID         string   `json:"flid"`
	StateVersion int64    `json:"stateVersion"`
	MsgID        int64    `json:"msgId"`
	Source       string   `json:"source"`
	Changed      []string `json:"changed"`
}

// EventMsgID is the msgId of the event of version s: the message of its
// change.
func EventMsgID(s *State) int64 {
	if s.Last != nil {
		return s.Last.MsgID
	}
	return s.LastMsgID
}

// eventOf is the msg-topic event of version s, with the flight or without
// it (EncodeEvent appends the document it was given).
func eventOf(s *State, withFlight bool) *Event {
	e := &Event{EventType: EventUpsert, FLID: s.FLID, StateVersion: s.StateVersion, MsgID: EventMsgID(s)}
	if withFlight {
		e.Flight = s.View()
	}
	if s.State == StateDeleted {
		e.EventType = EventTombstone
	}
	if s.Last != nil {
		e.Source, e.Changed = s.Last.Source, slices.Clone(s.Last.Changed)
	}
	if e.Changed == nil {
		e.Changed = []string{}
	}
	return e
}
