package flight

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// A JSON scanner and writer of the shapes encoding/json writes: strings
// escaped as it escapes them, maps with their keys sorted, times as
// time.Time marshals them; read back in any key order, each reader
// reporting false when the input leaves the shape (the caller then hands
// it to encoding/json). It knows nothing of flights: json.go writes and
// reads State and Transition with it.

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

// decoder reads the JSON the writers here write. Each method reports false when
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
