package flight

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

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

// appendStringMap appends m as encoding/json writes a map[string]string:
// null when nil, keys sorted.
func appendStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	var buf [64]string
	for i, k := range sortedKeys(buf[:0], m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, m[k])
	}
	return append(b, '}')
}

// sortedKeys appends m's keys to keys and sorts them.
func sortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendStrings appends ss as encoding/json writes a []string: null when
// nil.
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as encoding/json quotes a string, with its
// HTML escaping (json.Marshal's default).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
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

// decoder reads the JSON this file writes. Each method reports false when
// the input leaves that shape (or is not JSON): the caller then decodes
// with encoding/json instead.
type decoder struct {
	b []byte
	i int
	// s is b as one string, made at the first string value read: every
	// value without escapes is a slice of it, not an allocation of its
	// own (a flight's value holds dozens). The decoded value keeps s
	// alive, as it would its strings.
	s string
}

// sub returns b[i:j] as a string, sharing s's memory.
func (d *decoder) sub(i, j int) string {
	if d.s == "" {
		d.s = string(d.b)
	}
	return d.s[i:j]
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// byte consumes c, after white space.
func (d *decoder) byte(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// peek reports whether c is next, after white space, without consuming it.
func (d *decoder) peek(c byte) bool {
	d.ws()
	return d.i < len(d.b) && d.b[d.i] == c
}

// end reports whether only white space is left.
func (d *decoder) end() bool {
	d.ws()
	return d.i == len(d.b)
}

// object reads an object, calling field for each key after its colon. A
// key given twice is the last one's value for a map, as with
// encoding/json; a struct reads its keys through fields.
func (d *decoder) object(field func(key string) bool) bool {
	if !d.byte('{') {
		return false
	}
	if d.byte('}') {
		return true
	}
	for {
		k, ok := d.key()
		if !ok || !d.byte(':') || !field(k) {
			return false
		}
		if d.byte('}') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

// fields reads a struct's object: a key given twice leaves the shape
// (encoding/json would merge the second value into the first).
func (d *decoder) fields(field func(key string) bool) bool {
	var seen []string
	return d.object(func(k string) bool {
		if slices.Contains(seen, k) {
			return false
		}
		seen = append(seen, k)
		return field(k)
	})
}

// array reads an array, calling elem for each element.
func (d *decoder) array(elem func() bool) bool {
	if !d.byte('[') {
		return false
	}
	if d.byte(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if d.byte(']') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

// string reads a string: plain characters and the escapes encoding/json
// writes but surrogates.
func (d *decoder) string() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start, ascii := d.i, true
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			end := d.i
			d.i++
			if !ascii && !utf8.Valid(d.b[start:end]) {
				return "", false
			}
			return d.sub(start, end), true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return "", false
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

// escaped reads the rest of a string that started at start and holds an
// escape at d.i.
func (d *decoder) escaped(start int) (string, bool) {
	out := append(make([]byte, 0, d.i-start+16), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return "", false
		}
		switch e := d.b[d.i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if d.i+6 > len(d.b) {
				return "", false
			}
			r, err := strconv.ParseUint(string(d.b[d.i+2:d.i+6]), 16, 16)
			if err != nil || r >= 0xD800 && r < 0xE000 {
				return "", false
			}
			out = utf8.AppendRune(out, rune(r))
			d.i += 6
			continue
		default:
			return "", false
		}
		d.i += 2
	}
	return "", false
}

// int reads an integer as JSON writes one (no fraction or exponent).
func (d *decoder) int() (int64, bool) {
	d.ws()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || d.b[digits] == '0' && d.i > digits+1 {
		return 0, false
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	return n, err == nil
}

// bool reads true or false.
func (d *decoder) bool() (bool, bool) {
	d.ws()
	switch {
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
		return true, true
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
		return false, true
	}
	return false, false
}

// stringMap reads an object of strings into a new map.
func (d *decoder) stringMap() (map[string]string, bool) {
	m := map[string]string{}
	ok := d.object(func(k string) bool {
		v, ok := d.string()
		m[k] = v
		return ok
	})
	return m, ok
}

func (d *decoder) strings() ([]string, bool) {
	out := []string{}
	ok := d.array(func() bool {
		s, ok := d.string()
		out = append(out, s)
		return ok
	})
	return out, ok
}

// time reads a string as time.Time's UnmarshalJSON does (encoding/json
// hands it the literal).
func (d *decoder) time(t *time.Time) bool {
	if !d.peek('"') {
		return false
	}
	start := d.i
	if _, ok := d.string(); !ok {
		return false
	}
	return t.UnmarshalJSON(d.b[start:d.i]) == nil
}

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

// appendTime appends t as encoding/json writes a time.Time.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	v, err := t.MarshalJSON()
	if err != nil {
		// encoding/json's error for the same value.
		_, err = json.Marshal(t)
		return nil, err
	}
	return append(b, v...), nil
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
