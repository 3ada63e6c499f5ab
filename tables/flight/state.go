package flight

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// Lifecycle states of a flight.
const (
	// StateActive is a live flight.
	StateActive = "ACTIVE"
	// StateDeleted is a flight deleted by FDEL, an absent-from-schedule
	// delete or a cascade; it is physically removed only by the history
	// sweep.
	StateDeleted = "DELETED"
)

// State is the value of the msgx-flights goka table for one FLID (JSON). Its
// first nine keys are the flight JSON (docs/design.md#events); LinkSince, Links
// and Last are bookkeeping that View strips before a flight leaves the
// processor.
type State struct {
	// FLID is AODB's flight id.
	FLID string `json:"flid"`
	// OperationDay (YYYY-MM-DD) is fixed once set; "" when unknown.
	OperationDay string `json:"operationDay"`
	// State is StateActive or StateDeleted.
	State string `json:"state"`
	// StateVersion grows by exactly one with every visible change.
	StateVersion int64 `json:"stateVersion"`
	// LastMsgID is the highest own message applied (I4); a transition at or
	// below it is a replay.
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

	// LinkSince is the message at which the flight's current live link to
	// its master began (creation, revival or a MAID change); a cascade from
	// an older master deletion must not delete it. Bookkeeping.
	LinkSince int64 `json:"linkSince,omitempty"`
	// Links records, per child FLID, the last LINK report accepted, removed
	// children included, so that stale reports are ignored. Bookkeeping.
	Links map[string]ChildLink `json:"links,omitempty"`
	// Last describes the change that produced StateVersion, so that a
	// replay re-emits exactly the event of that version. Bookkeeping.
	Last *Provenance `json:"lastChange,omitempty"`
}

// MAFLEntry is one child in a master's MAFL (docs/design.md#codeshare).
type MAFLEntry struct {
	// FLID is the child's flight id.
	FLID string `json:"FLID"`
	// FLNO is the child's flight number.
	FLNO string `json:"FLNO"`
}

// ChildLink is a master's record of one child's last accepted LINK.
type ChildLink struct {
	// FLNO is the child's flight number.
	FLNO string `json:"flno,omitempty"`
	// Live is true while the child is ACTIVE and linked to this master.
	Live bool `json:"live"`
	// Version is the child's StateVersion of the report.
	Version int64 `json:"version"`
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
	// Unlinked is the master that the flight's last own change left, if
	// any; a replay tells it again.
	Unlinked string `json:"unlinked,omitempty"`
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
	return &c
}

// View returns a deep copy of s without bookkeeping: exactly the flight JSON of
// docs/design.md#events, as carried by events and served to readers.
func (s *State) View() *State {
	v := s.Clone()
	if v == nil {
		return nil
	}
	v.LinkSince, v.Links, v.Last = 0, nil, nil
	return v
}

// MarshalJSON encodes s with empty (never null) fields, collections and mafl,
// so that the flight JSON always has the same shape.
func (s State) MarshalJSON() ([]byte, error) {
	// plain drops the method set, so json.Marshal does not recurse here.
	type plain State
	p := plain(s)
	if p.Fields == nil {
		p.Fields = map[string]string{}
	}
	if p.Collections == nil {
		p.Collections = map[string][]Element{}
	}
	if p.MAFL == nil {
		p.MAFL = []MAFLEntry{}
	}
	return json.Marshal(p)
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
