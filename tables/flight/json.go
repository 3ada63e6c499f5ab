package flight

import (
	"bytes"
	"encoding/json"
	"strconv"

	"msgx/tables/message"
)

// The flight state is encoded and decoded at every transition (the goka
// table value, the row, the event), so its JSON is written and read by
// hand here rather than through encoding/json's reflection, which took a
// fifth of the flights processor's CPU. The bytes are exactly
// encoding/json's: State's field order and tags, map keys sorted, strings
// escaped as it escapes them (HTML characters, U+2028 and U+2029, invalid
// UTF-8 as U+FFFD). Decoding reads the shape the encoder writes, in any key
// order; whatever else it meets — an unknown or repeated key, null, a
// number that is not a plain integer, an escaped surrogate, invalid UTF-8,
// a state that is not empty — is handed to encoding/json whole, so the
// result is always encoding/json's value, or its error (which names the
// type plainState).
// TestStateJSONIsEncodingJSON holds both to it.

// plainState is State without its methods: what encoding/json reads and
// writes for it.
type plainState State

// MarshalJSON encodes s with empty (never null) fields, collections and mafl,
// so that the flight JSON always has the same shape.
func (s State) MarshalJSON() ([]byte, error) {
	return s.AppendJSON(make([]byte, 0, 1024))
}

// AppendJSON appends the JSON of s (MarshalJSON's) to b.
func (s *State) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"flid":`...)
	b = appendString(b, s.FLID)
	b = append(b, `,"operationDay":`...)
	b = appendString(b, s.OperationDay)
	b = append(b, `,"state":`...)
	b = appendString(b, s.State)
	b = append(b, `,"stateVersion":`...)
	b = strconv.AppendInt(b, s.StateVersion, 10)
	b = append(b, `,"lastMsgId":`...)
	b = strconv.AppendInt(b, s.LastMsgID, 10)
	b = append(b, `,"updatedAt":`...)
	b, err := appendTime(b, s.UpdatedAt)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"fields":`...)
	if s.Fields == nil {
		b = append(b, "{}"...)
	} else {
		b = appendStringMap(b, s.Fields)
	}
	b = append(b, `,"collections":`...)
	if s.Collections == nil {
		b = append(b, "{}"...)
	} else {
		b = appendCollections(b, s.Collections)
	}
	b = append(b, `,"mafl":[`...)
	for i, m := range s.MAFL {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"FLID":`...)
		b = appendString(b, m.FLID)
		b = append(b, `,"FLNO":`...)
		b = appendString(b, m.FLNO)
		b = append(b, '}')
	}
	b = append(b, ']')
	b = s.appendBookkeeping(b, false)
	return append(b, '}'), nil
}

// AppendBookkeeping appends to b the JSON object of the table value's
// bookkeeping alone: links, lastChange and replayed as State's JSON
// carries them (each left out when empty), as encoding/json writes a
// struct of those three fields.
func (s *State) AppendBookkeeping(b []byte) []byte {
	b = append(b, '{')
	b = s.appendBookkeeping(b, true)
	return append(b, '}')
}

// appendBookkeeping appends State's last three fields, each left out when
// empty (omitempty), each after a comma unless it is the first of an
// object (first).
func (s *State) appendBookkeeping(b []byte, first bool) []byte {
	key := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, name...)
	}
	if len(s.Links) > 0 {
		key(`"links":{`)
		var buf [16]string
		for i, child := range sortedKeys(buf[:0], s.Links) {
			if i > 0 {
				b = append(b, ',')
			}
			l := s.Links[child]
			b = appendString(b, child)
			b = append(b, ":{"...)
			if l.FLNO != "" {
				b = append(b, `"flno":`...)
				b = appendString(b, l.FLNO)
				b = append(b, ',')
			}
			b = append(b, `"live":`...)
			b = strconv.AppendBool(b, l.Live)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if s.Last != nil {
		key(`"lastChange":{"msgId":`)
		b = strconv.AppendInt(b, s.Last.MsgID, 10)
		b = append(b, `,"source":`...)
		b = appendString(b, s.Last.Source)
		b = append(b, `,"changed":`...)
		b = appendStrings(b, s.Last.Changed)
		b = append(b, '}')
	}
	if s.Replayed != nil {
		key(`"replayed":{"gen":`)
		b = strconv.AppendInt(b, s.Replayed.Gen, 10)
		b = append(b, `,"msgId":`...)
		b = strconv.AppendInt(b, s.Replayed.MsgID, 10)
		b = append(b, '}')
	}
	return b
}

// UnmarshalJSON decodes the JSON of a State into s (see the comment at the
// top of this file).
func (s *State) UnmarshalJSON(b []byte) error {
	if s.isZero() {
		d := decoder{b: b}
		if d.state(s) && d.end() {
			return nil
		}
		*s = State{}
	}
	return json.Unmarshal(b, (*plainState)(s))
}

func (s *State) isZero() bool {
	return s.FLID == "" && s.OperationDay == "" && s.State == "" && s.StateVersion == 0 && s.LastMsgID == 0 &&
		s.UpdatedAt.IsZero() && s.Fields == nil && s.Collections == nil && s.MAFL == nil && s.Links == nil &&
		s.Last == nil && s.Replayed == nil
}

// key reads an object's key: the vocabulary's tags are not allocated
// again for every state.
func (d *decoder) key() (string, bool) {
	if d.peek('"') {
		if end := bytes.IndexByte(d.b[d.i+1:], '"'); end >= 0 {
			if k, ok := vocabulary[string(d.b[d.i+1:d.i+1+end])]; ok {
				d.i += end + 2
				return k, true
			}
		}
	}
	return d.string()
}

// vocabulary are the keys a flight's JSON repeats: its tags, collections
// and the element keys the vocabulary names.
var vocabulary = func() map[string]string {
	m := map[string]string{}
	add := func(keys ...string) {
		for _, k := range keys {
			m[k] = k
		}
	}
	add(FieldTags...)
	add(TextKey, RawKey)
	for _, c := range Collections {
		add(c.Name)
		add(c.Times...)
		if c.SeqAttr != "" {
			add(c.SeqAttr)
		}
	}
	return m
}()

func (d *decoder) state(s *State) bool {
	return d.fields(func(k string) bool {
		ok := true
		switch k {
		case "flid":
			s.FLID, ok = d.string()
		case "operationDay":
			s.OperationDay, ok = d.string()
		case "state":
			s.State, ok = d.string()
		case "stateVersion":
			s.StateVersion, ok = d.int()
		case "lastMsgId":
			s.LastMsgID, ok = d.int()
		case "updatedAt":
			ok = d.time(&s.UpdatedAt)
		case "fields":
			s.Fields, ok = d.stringMap()
		case "collections":
			s.Collections, ok = d.collections()
		case "mafl":
			s.MAFL = []MAFLEntry{}
			ok = d.array(func() bool {
				var m MAFLEntry
				ok := d.fields(func(k string) bool {
					var ok bool
					switch k {
					case "FLID":
						m.FLID, ok = d.string()
					case "FLNO":
						m.FLNO, ok = d.string()
					}
					return ok
				})
				s.MAFL = append(s.MAFL, m)
				return ok
			})
		case "links":
			s.Links = map[string]ChildLink{}
			ok = d.object(func(child string) bool {
				var l ChildLink
				ok := d.fields(func(k string) bool {
					var ok bool
					switch k {
					case "flno":
						l.FLNO, ok = d.string()
					case "live":
						l.Live, ok = d.bool()
					}
					return ok
				})
				s.Links[child] = l
				return ok
			})
		case "lastChange":
			s.Last = &Provenance{}
			ok = d.fields(func(k string) bool {
				var ok bool
				switch k {
				case "msgId":
					s.Last.MsgID, ok = d.int()
				case "source":
					s.Last.Source, ok = d.string()
				case "changed":
					s.Last.Changed, ok = d.strings()
				}
				return ok
			})
		case "replayed":
			s.Replayed = &message.ReplayMark{}
			ok = d.fields(func(k string) bool {
				var ok bool
				switch k {
				case "gen":
					s.Replayed.Gen, ok = d.int()
				case "msgId":
					s.Replayed.MsgID, ok = d.int()
				}
				return ok
			})
		default:
			return false
		}
		return ok
	})
}

// plainTransition is Transition without its methods.
type plainTransition Transition

// MarshalJSON encodes t as encoding/json encodes its fields (the router
// writes every transition it sends).
func (t Transition) MarshalJSON() ([]byte, error) {
	return t.appendJSON(make([]byte, 0, 512))
}

func (t *Transition) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"msgId":`...)
	b = strconv.AppendInt(b, t.MsgID, 10)
	b = append(b, `,"source":`...)
	b = appendString(b, t.Source)
	b = append(b, `,"kind":`...)
	b = appendString(b, string(t.Kind))
	if t.STYP != "" {
		b = append(b, `,"styp":`...)
		b = appendString(b, t.STYP)
	}
	b = append(b, `,"flid":`...)
	b = appendString(b, t.FLID)
	if t.OperationDay != "" {
		b = append(b, `,"operationDay":`...)
		b = appendString(b, t.OperationDay)
	}
	b = append(b, `,"at":`...)
	var err error
	if b, err = appendTime(b, t.At); err != nil {
		return nil, err
	}
	if len(t.Fields) > 0 {
		b = append(b, `,"fields":`...)
		b = appendStringMap(b, t.Fields)
	}
	if len(t.Collections) > 0 {
		b = append(b, `,"collections":`...)
		b = appendCollections(b, t.Collections)
	}
	if t.Link != nil {
		b = append(b, `,"link":{"flid":`...)
		b = appendString(b, t.Link.Child)
		b = append(b, `,"flno":`...)
		b = appendString(b, t.Link.FLNO)
		b = append(b, `,"live":`...)
		b = strconv.AppendBool(b, t.Link.Live)
		b = append(b, '}')
	}
	if t.Cascade {
		b = append(b, `,"cascade":true`...)
	}
	if t.Expect != nil {
		b = append(b, `,"expect":{`...)
		first := true
		for _, f := range [...]struct{ key, v string }{{`"state":`, t.Expect.State}, {`"maid":`, t.Expect.MAID}, {`"flno":`, t.Expect.FLNO}} {
			if f.v == "" {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, f.key...)
			b = appendString(b, f.v)
		}
		b = append(b, '}')
	}
	if len(t.Then) > 0 {
		b = append(b, `,"then":[`...)
		for i := range t.Then {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = t.Then[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if t.PurgeBefore != "" {
		b = append(b, `,"purgeBefore":`...)
		b = appendString(b, t.PurgeBefore)
	}
	if !t.MsgDTTM.IsZero() {
		b = append(b, `,"msgDttm":`...)
		if b, err = appendTime(b, t.MsgDTTM); err != nil {
			return nil, err
		}
	}
	if t.Replay != 0 {
		b = append(b, `,"replay":`...)
		b = strconv.AppendInt(b, t.Replay, 10)
	}
	if t.FirstSeen {
		b = append(b, `,"firstSeen":true`...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes the JSON of a Transition into t, as State's
// UnmarshalJSON does.
func (t *Transition) UnmarshalJSON(b []byte) error {
	if t.isZero() {
		d := decoder{b: b}
		if d.transition(t) && d.end() {
			return nil
		}
		*t = Transition{}
	}
	return json.Unmarshal(b, (*plainTransition)(t))
}

func (t *Transition) isZero() bool {
	return t.MsgID == 0 && t.Source == "" && t.Kind == "" && t.STYP == "" && t.FLID == "" && t.OperationDay == "" &&
		t.At.IsZero() && t.Fields == nil && t.Collections == nil && t.Link == nil && !t.Cascade && t.Expect == nil &&
		t.Then == nil && t.PurgeBefore == "" && t.MsgDTTM.IsZero() && t.Replay == 0 && !t.FirstSeen
}

func (d *decoder) transition(t *Transition) bool {
	return d.fields(func(k string) bool {
		ok := true
		switch k {
		case "msgId":
			t.MsgID, ok = d.int()
		case "source":
			t.Source, ok = d.string()
		case "kind":
			var s string
			s, ok = d.string()
			t.Kind = Kind(s)
		case "styp":
			t.STYP, ok = d.string()
		case "flid":
			t.FLID, ok = d.string()
		case "operationDay":
			t.OperationDay, ok = d.string()
		case "at":
			ok = d.time(&t.At)
		case "fields":
			t.Fields, ok = d.stringMap()
		case "collections":
			t.Collections, ok = d.collections()
		case "link":
			t.Link = &Link{}
			ok = d.fields(func(k string) bool {
				var ok bool
				switch k {
				case "flid":
					t.Link.Child, ok = d.string()
				case "flno":
					t.Link.FLNO, ok = d.string()
				case "live":
					t.Link.Live, ok = d.bool()
				}
				return ok
			})
		case "cascade":
			t.Cascade, ok = d.bool()
		case "expect":
			t.Expect = &message.FlightLink{}
			ok = d.fields(func(k string) bool {
				var ok bool
				switch k {
				case "state":
					t.Expect.State, ok = d.string()
				case "maid":
					t.Expect.MAID, ok = d.string()
				case "flno":
					t.Expect.FLNO, ok = d.string()
				}
				return ok
			})
		case "then":
			t.Then = []Transition{}
			ok = d.array(func() bool {
				var step Transition
				ok := d.transition(&step)
				t.Then = append(t.Then, step)
				return ok
			})
		case "purgeBefore":
			t.PurgeBefore, ok = d.string()
		case "msgDttm":
			ok = d.time(&t.MsgDTTM)
		case "replay":
			t.Replay, ok = d.int()
		case "firstSeen":
			t.FirstSeen, ok = d.bool()
		default:
			return false
		}
		return ok
	})
}

// appendCollections appends collections as encoding/json writes a
// map[string][]Element.
func appendCollections(b []byte, collections map[string][]Element) []byte {
	if collections == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	var buf [16]string
	for i, name := range sortedKeys(buf[:0], collections) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, name)
		b = append(b, ':')
		elems := collections[name]
		if elems == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, e := range elems {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendStringMap(b, e)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// collections reads a map[string][]Element.
func (d *decoder) collections() (map[string][]Element, bool) {
	out := map[string][]Element{}
	ok := d.object(func(name string) bool {
		elems := []Element{}
		ok := d.array(func() bool {
			e, ok := d.stringMap()
			elems = append(elems, e)
			return ok
		})
		out[name] = elems
		return ok
	})
	return out, ok
}
