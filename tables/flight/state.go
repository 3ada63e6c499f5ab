package flight

import (
	"maps"
	"slices"
	"time"

	"msgx/tables/message"
)

// Lifecycle states of a flight.
const (
	// StateActive is a live flight.
	StateActive = "ACTIVE"
	// StateDeleted is a flight deleted by FDEL, an absent-from-schedule
	// delete or a cascade; it is physically removed only by the history
	// sweep.
	StateDeleted = "DELETED"
	// StatePlaceholder is a table entry that is not a flight: the links of
	// children that name a master the table does not hold (yet), so that
	// the master's MAFL is complete the moment it is created, whichever
	// arrives first (see IsPlaceholder).
	StatePlaceholder = "PLACEHOLDER"
)

// State is the value of the msgx-flights goka table for one FLID (JSON). Its
// first nine keys are the flight JSON (docs/design.md#events); Links, Last
// and Replayed are bookkeeping that View strips before a flight leaves the
// processor.
//
// An entry whose State is StatePlaceholder is not a flight but the Links of a
// master that children named before it existed: it has no version, fields or
// operation day, Apply never derives an event from it, and the processor
// keeps it in PostgreSQL's flight_placeholder, never in the read model
// (IsPlaceholder).
type State struct {
	// FLID is AODB's flight id.
	FLID string `json:"flid"`
	// OperationDay (YYYY-MM-DD) is fixed once set; "" when unknown.
	OperationDay string `json:"operationDay"`
	// State is StateActive or StateDeleted (StatePlaceholder for an entry
	// that is not a flight).
	State string `json:"state"`
	// StateVersion grows by exactly one with every visible change.
	StateVersion int64 `json:"stateVersion"`
	// LastMsgID is the highest message whose transition the flight applied
	// (I4) — its own change, a child's LINK or its master's cascade alike; a
	// transition at or below it is a redelivery, unless it is a replayed one
	// (Replayed). It never goes back, also when a replayed older message is
	// applied.
	LastMsgID int64 `json:"lastMsgId"`
	// UpdatedAt is the At of the transition that made the last visible
	// change.
	UpdatedAt time.Time `json:"updatedAt"`
	// Fields holds the scalars by SIS tag (FieldTags); a cleared scalar is
	// absent.
	Fields map[string]string `json:"fields"`
	// Collections holds the non-empty collections by SIS name.
	Collections map[string][]Element `json:"collections"`
	// MAFL lists the live children of a master, ordered by FLID; empty for
	// shared flights (MAID set) and for deleted flights.
	MAFL []MAFLEntry `json:"mafl"`

	// Links records, per child FLID, the child's live link to this flight
	// as its last LINK reported it (a child that left is removed), from
	// which MAFL is projected. Bookkeeping.
	Links map[string]ChildLink `json:"links,omitempty"`
	// Last describes the change that produced StateVersion, so that a
	// replay re-emits exactly the event of that version. Bookkeeping.
	Last *Provenance `json:"lastChange,omitempty"`
	// Replayed is the last replayed transition applied to the flight
	// (message.ReplayMark): with LastMsgID, what tells a redelivery of a
	// replayed transition from the next one (message.Applied). Bookkeeping.
	Replayed *message.ReplayMark `json:"replayed,omitempty"`
}

// MAFLEntry is one child in a master's MAFL (docs/design.md#codeshare).
type MAFLEntry struct {
	// FLID is the child's flight id.
	FLID string `json:"FLID"`
	// FLNO is the child's flight number.
	FLNO string `json:"FLNO"`
}

// ChildLink is a master's record of one child's link.
type ChildLink struct {
	// FLNO is the child's flight number.
	FLNO string `json:"flno,omitempty"`
	// Live is true for a linked child. Only live children are recorded;
	// table values written by earlier versions may hold children that left
	// (false), which count for nothing.
	Live bool `json:"live"`
}

// Provenance identifies the change that produced a flight's current
// StateVersion.
type Provenance struct {
	// MsgID is the transition's message id.
	MsgID int64 `json:"msgId"`
	// Source is the transition's source.
	Source string `json:"source"`
	// Changed is the change list of that version.
	Changed []string `json:"changed"`
}

// Clone returns a deep copy of s (nil for nil).
func (s *State) Clone() *State {
	if s == nil {
		return nil
	}
	c := *s
	c.Fields = maps.Clone(s.Fields)
	if s.Collections != nil {
		c.Collections = make(map[string][]Element, len(s.Collections))
		for name, elems := range s.Collections {
			c.Collections[name] = cloneElements(elems)
		}
	}
	c.MAFL = slices.Clone(s.MAFL)
	c.Links = maps.Clone(s.Links)
	if s.Last != nil {
		last := *s.Last
		last.Changed = slices.Clone(s.Last.Changed)
		c.Last = &last
	}
	if s.Replayed != nil {
		r := *s.Replayed
		c.Replayed = &r
	}
	return &c
}

// View returns a deep copy of s without bookkeeping: exactly the flight JSON of
// docs/design.md#events, as carried by events and served to readers.
func (s *State) View() *State {
	v := s.Clone()
	if v == nil {
		return nil
	}
	v.Links, v.Last, v.Replayed = nil, nil, nil
	return v
}

// Doc is the flight JSON of s (docs/design.md#events): the encoding of
// View, without copying the state first.
func (s *State) Doc() ([]byte, error) {
	v := *s
	v.Links, v.Last, v.Replayed = nil, nil, nil
	return v.MarshalJSON()
}

// IsPlaceholder reports whether s is a placeholder: link bookkeeping for a
// master that is not a flight yet. It is false for nil.
func (s *State) IsPlaceholder() bool { return s != nil && s.State == StatePlaceholder }

// LinkOf is what the router's flight index holds of the flight s
// (message.FlightLink): its state and raw MAID and FLNO; the zero value for
// nil and a placeholder, which are no flight.
func LinkOf(s *State) message.FlightLink {
	if s == nil || s.IsPlaceholder() {
		return message.FlightLink{}
	}
	return message.FlightLink{State: s.State, MAID: s.Fields["MAID"], FLNO: s.Fields["FLNO"]}
}

// PlaceholderView is what an operator sees of a placeholder.
type PlaceholderView struct {
	// FLID is the master the children name.
	FLID string `json:"flid"`
	// State is StatePlaceholder.
	State string `json:"state"`
	// Note says why there is no flight.
	Note string `json:"note"`
	// PendingMAFL is the MAFL the flight will have when it is created.
	PendingMAFL []MAFLEntry `json:"pendingMafl"`
}

// Inspect returns what an operator sees of a table entry (`msgx table get
// flights`): the View of a flight, or a PlaceholderView.
func (s *State) Inspect() any {
	if !s.IsPlaceholder() {
		return s.View()
	}
	v := PlaceholderView{FLID: s.FLID, State: s.State, PendingMAFL: []MAFLEntry{},
		Note: "not a flight yet: shared flights name it as their master (MAID); its MAFL will list them when it is created"}
	for _, child := range sortedFLIDs(s.Links) {
		if l := s.Links[child]; l.Live {
			v.PendingMAFL = append(v.PendingMAFL, MAFLEntry{FLID: child, FLNO: l.FLNO})
		}
	}
	return v
}

func cloneElements(elems []Element) []Element {
	if elems == nil {
		return nil
	}
	out := make([]Element, len(elems))
	for i, e := range elems {
		out[i] = maps.Clone(e)
	}
	return out
}
