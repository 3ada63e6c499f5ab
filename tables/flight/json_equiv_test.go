package flight

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"msgx/tables/message"
)

// encodingJSON is State's JSON as encoding/json writes it, with the empty
// defaults State's JSON promises: what the hand-written encoder must equal.
func encodingJSON(s *State) ([]byte, error) {
	p := plainState(*s)
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

// decodeBoth decodes b with the hand-written decoder and with
// encoding/json, and fails when they disagree.
func decodeBoth(t *testing.T, b []byte) {
	t.Helper()
	var fast State
	fastErr := json.Unmarshal(b, &fast)
	var direct State
	directErr := direct.UnmarshalJSON(b)
	var want plainState
	wantErr := json.Unmarshal(b, &want)
	if (fastErr == nil) != (wantErr == nil) || (directErr == nil) != (wantErr == nil) {
		t.Fatalf("decoding %q: error %v (direct %v), encoding/json %v", b, fastErr, directErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if !reflect.DeepEqual(plainState(fast), want) || !reflect.DeepEqual(plainState(direct), want) {
		t.Fatalf("decoding %q:\n got %#v\nwant %#v", b, fast, want)
	}
}

// awkward are strings encoding/json escapes or replaces.
var awkward = []string{"", "CA1234", `a"b`, `back\slash`, "tab\tnew\nline\r", "\x00\x01\x1f\x7f", "<tag> & </tag>",
	"é 中文 🛫", "\u2028\u2029", "bad \xff utf8 \xc3", "\ufffd", "/slash/", `\u0041`, "surrogate \U0001F600"}

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return awkward[r.IntN(len(awkward))]
	}
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -:"
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

func randStringMap(r *rand.Rand, n int) map[string]string {
	switch r.IntN(6) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	m := map[string]string{}
	for range r.IntN(n) + 1 {
		m[randString(r)] = randString(r)
	}
	return m
}

func randState(r *rand.Rand) *State {
	zones := []*time.Location{time.UTC, time.FixedZone("CST", 8*3600), time.FixedZone("", -90*60)}
	s := &State{FLID: randString(r), OperationDay: randString(r), State: randString(r),
		StateVersion: r.Int64N(1 << 40), LastMsgID: r.Int64N(1<<62) - r.Int64N(10),
		UpdatedAt: time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))]),
		Fields:    randStringMap(r, 30)}
	if r.IntN(5) == 0 {
		s.UpdatedAt = time.Time{}
	}
	if r.IntN(6) > 0 {
		s.Collections = map[string][]Element{}
		for range r.IntN(4) {
			var elems []Element
			if r.IntN(5) > 0 {
				elems = []Element{}
				for range r.IntN(4) {
					elems = append(elems, Element(randStringMap(r, 6)))
				}
			}
			s.Collections[randString(r)] = elems
		}
	}
	if r.IntN(3) > 0 {
		s.MAFL = []MAFLEntry{}
		for range r.IntN(4) {
			s.MAFL = append(s.MAFL, MAFLEntry{FLID: randString(r), FLNO: randString(r)})
		}
	}
	if r.IntN(3) == 0 {
		s.Links = map[string]ChildLink{}
		for range r.IntN(4) {
			s.Links[randString(r)] = ChildLink{FLNO: randString(r), Live: r.IntN(2) == 0}
		}
	}
	if r.IntN(3) > 0 {
		s.Last = &Provenance{MsgID: r.Int64N(1 << 50), Source: randString(r)}
		if r.IntN(4) > 0 {
			s.Last.Changed = []string{}
			for range r.IntN(5) {
				s.Last.Changed = append(s.Last.Changed, randString(r))
			}
		}
	}
	if r.IntN(4) == 0 {
		s.Replayed = &message.ReplayMark{Gen: r.Int64N(100), MsgID: r.Int64N(1 << 40)}
	}
	return s
}

// TestStateJSONIsEncodingJSON holds the hand-written JSON of State to
// encoding/json's, byte for byte when encoding and value for value (or
// error for error) when decoding: random states with every string
// encoding/json escapes or replaces, nil and empty maps and slices, and
// the inputs of FuzzStateJSON.
func TestStateJSONIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		s := randState(r)
		got, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := encodingJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("state %d:\n got %s\nwant %s", i, got, want)
		}
		bk := s.AppendBookkeeping(nil)
		wantBK, _ := json.Marshal(struct {
			Links    map[string]ChildLink `json:"links,omitempty"`
			Last     *Provenance          `json:"lastChange,omitempty"`
			Replayed *message.ReplayMark  `json:"replayed,omitempty"`
		}{s.Links, s.Last, s.Replayed})
		if string(bk) != string(wantBK) {
			t.Fatalf("bookkeeping of state %d:\n got %s\nwant %s", i, bk, wantBK)
		}
		decodeBoth(t, got)
		// encoding/json's own encoding of the state, nulls included.
		raw, _ := json.Marshal(plainState(*s))
		decodeBoth(t, raw)
	}
	for _, in := range stateJSONSeeds() {
		decodeBoth(t, []byte(in))
	}
	// A state that is not empty is decoded into as encoding/json does.
	s := &State{FLID: "1", Fields: map[string]string{"ALCD": "CA"}}
	if err := json.Unmarshal([]byte(`{"fields":{"FLNO":"1"}}`), s); err != nil || s.FLID != "1" || len(s.Fields) != 2 {
		t.Fatalf("decoding into a state: %v %+v", err, s)
	}
}

// stateJSONSeeds are inputs around the shape the decoder reads: key orders,
// white space, nulls, repeated keys, numbers, escapes, truncations.
func stateJSONSeeds() []string {
	base := `{"flid":"100","operationDay":"2021-01-23","state":"ACTIVE","stateVersion":3,"lastMsgId":12,` +
		`"updatedAt":"2026-01-23T13:00:00.123456789+08:00","fields":{"ALCD":"CA","FLNO":"CA1"},` +
		`"collections":{"GTDT":[{"GATE":"G1","GTNO":"1"}],"DELY":[]},"mafl":[{"FLID":"101","FLNO":"CA101"}],` +
		`"links":{"101":{"flno":"CA101","live":true},"102":{"live":false}},"lastChange":{"msgId":12,"source":"FLOP-ESTT","changed":["ESTT"]},` +
		`"replayed":{"gen":2,"msgId":9}}`
	seeds := []string{base, " \n" + base + "\t ", strings.ReplaceAll(base, ",", " , "), strings.ReplaceAll(base, ":", " :\n "),
		`{}`, `null`, `[]`, `{"flid":null}`, `{"fields":null}`, `{"collections":{"A":null}}`, `{"collections":{"A":[null]}}`,
		`{"mafl":null}`, `{"mafl":[null]}`, `{"lastChange":null}`, `{"replayed":null}`, `{"links":{"1":null}}`,
		`{"flid":"1","flid":"2"}`, `{"fields":{"A":"1"},"fields":{"B":"2"}}`, `{"fields":{"A":"1","A":"2"}}`,
		`{"FLID":"1"}`, `{"Fields":{"A":"1"}}`, `{"mafl":[{"flid":"1"}]}`, `{"unknown":1}`, `{"stateVersion":1.0}`,
		`{"stateVersion":1e3}`, `{"stateVersion":-0}`, `{"stateVersion":01}`, `{"stateVersion":9223372036854775808}`,
		`{"stateVersion":"1"}`, `{"stateVersion":true}`, `{"links":{"1":{"live":"true"}}}`, `{"links":{"1":{"live":truex}}}`,
		`{"flid":"a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u4e2d"}`, `{"flid":"\ud83d\ude00"}`, `{"flid":"\ud83d"}`, `{"flid":"\x"}`,
		`{"flid":"\'"}`, "{\"flid\":\"\x01\"}", "{\"flid\":\"\xff\"}", `{"flid":"é"}`, `{"updatedAt":"not a time"}`,
		`{"updatedAt":null}`, `{"updatedAt":"2026-01-23T13:00:00Z"}`, `{"updatedAt":"2026-01-23T13:00:00\u005a"}`,
		`{"flid":"1"} x`, `{"flid":"1"}}`, `{"flid":"1",}`, `{,}`, `{"flid" "1"}`, `{"fields":{"A":1}}`, ``, ` `,
		`{"lastChange":{"changed":null}}`, `{"lastChange":{"changed":[]}}`, `{"lastChange":{}}`, `{"replayed":{"gen":1,"gen":2}}`,
	}
	for n := 1; n < len(base); n += 7 {
		seeds = append(seeds, base[:n])
	}
	return seeds
}

// FuzzStateJSON: whatever the input, the hand-written decoder answers as
// encoding/json does.
func FuzzStateJSON(f *testing.F) {
	for _, s := range stateJSONSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeBoth(t, b)
	})
}

func ExampleState_MarshalJSON() {
	s := State{FLID: "100", State: StateActive, StateVersion: 1, Fields: map[string]string{"REMC": "A<B"}}
	b, _ := s.MarshalJSON()
	fmt.Println(string(b))
	// Output: {"flid":"100","operationDay":"","state":"ACTIVE","stateVersion":1,"lastMsgId":0,"updatedAt":"0001-01-01T00:00:00Z","fields":{"REMC":"A\u003cB"},"collections":{},"mafl":[]}
}

// BenchmarkStateJSON compares the hand-written encoding and decoding of a
// flight's table value with encoding/json's.
func BenchmarkStateJSON(b *testing.B) {
	s := &State{FLID: "100002", OperationDay: "2021-01-23", State: StateActive, StateVersion: 7, LastMsgID: 4526,
		UpdatedAt: time.Date(2026, 12, 5, 3, 27, 30, 682170000, time.UTC),
		Fields: map[string]string{"ACFT": "320", "ALCD": "CA", "FLIN": "D", "FLNO": "CA0002", "FLTY": "W", "MVIN": "D",
			"RENO": "B9493", "SODT": "23JAN212054", "STND": "296", "TRML": "T1", "ESTT": "23JAN212101"},
		Collections: map[string][]Element{"PSDT": {{"PSNO": "1", "PSST": "170", "STET": "23JAN212054", "STST": "23JAN211954"}},
			"ROUT": {{"APCD": "PEK", "RTNO": "1", "SCAT": "23JAN212254"}}},
		Last: &Provenance{MsgID: 4526, Source: "FLOP-ESTT", Changed: []string{"ESTT"}}}
	enc, _ := s.MarshalJSON()
	b.Run("encode", func(b *testing.B) {
		for range b.N {
			if _, err := s.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode-encoding/json", func(b *testing.B) {
		for range b.N {
			if _, err := encodingJSON(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for range b.N {
			var d State
			if err := d.UnmarshalJSON(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-encoding/json", func(b *testing.B) {
		for range b.N {
			var d plainState
			if err := json.Unmarshal(enc, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// refTransition is Transition with the same JSON and no methods at any
// depth: what encoding/json alone makes of a transition.
type refTransition struct {
	MsgID        int64                `json:"msgId"`
	Source       string               `json:"source"`
	Kind         Kind                 `json:"kind"`
	STYP         string               `json:"styp,omitempty"`
	FLID         string               `json:"flid"`
	OperationDay string               `json:"operationDay,omitempty"`
	At           time.Time            `json:"at"`
	Fields       map[string]string    `json:"fields,omitempty"`
	Collections  map[string][]Element `json:"collections,omitempty"`
	Link         *Link                `json:"link,omitempty"`
	Cascade      bool                 `json:"cascade,omitempty"`
	Expect       *message.FlightLink  `json:"expect,omitempty"`
	Then         []refTransition      `json:"then,omitempty"`
	PurgeBefore  string               `json:"purgeBefore,omitempty"`
	MsgDTTM      time.Time            `json:"msgDttm,omitzero"`
	Replay       int64                `json:"replay,omitempty"`
	FirstSeen    bool                 `json:"firstSeen,omitempty"`
}

func toRef(t Transition) refTransition {
	r := refTransition{t.MsgID, t.Source, t.Kind, t.STYP, t.FLID, t.OperationDay, t.At, t.Fields, t.Collections, t.Link,
		t.Cascade, t.Expect, nil, t.PurgeBefore, t.MsgDTTM, t.Replay, t.FirstSeen}
	if t.Then != nil {
		r.Then = []refTransition{}
		for _, s := range t.Then {
			r.Then = append(r.Then, toRef(s))
		}
	}
	return r
}

func randTransition(r *rand.Rand, depth int) Transition {
	s := randState(r)
	t := Transition{MsgID: r.Int64N(1 << 40), Source: randString(r), Kind: Kind(randString(r)), FLID: randString(r),
		At: s.UpdatedAt, Fields: s.Fields, Collections: s.Collections}
	if r.IntN(2) == 0 {
		t.STYP = randString(r)
	}
	if r.IntN(2) == 0 {
		t.OperationDay = randString(r)
	}
	if r.IntN(3) == 0 {
		t.Link = &Link{Child: randString(r), FLNO: randString(r), Live: r.IntN(2) == 0}
	}
	t.Cascade = r.IntN(4) == 0
	if r.IntN(3) == 0 {
		t.Expect = &message.FlightLink{}
		if r.IntN(2) == 0 {
			t.Expect.State = randString(r)
		}
		if r.IntN(2) == 0 {
			t.Expect.MAID = randString(r)
		}
		if r.IntN(2) == 0 {
			t.Expect.FLNO = randString(r)
		}
	}
	if depth > 0 && r.IntN(3) == 0 {
		t.Then = []Transition{}
		for range r.IntN(3) {
			t.Then = append(t.Then, randTransition(r, depth-1))
		}
	}
	if r.IntN(4) == 0 {
		t.PurgeBefore = randString(r)
	}
	if r.IntN(3) == 0 {
		t.MsgDTTM = time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC()
	}
	if r.IntN(4) == 0 {
		t.Replay = r.Int64N(100) - 3
	}
	t.FirstSeen = r.IntN(3) == 0
	return t
}

// decodeTransitionBoth is decodeBoth for a Transition.
func decodeTransitionBoth(t *testing.T, b []byte) {
	t.Helper()
	var fast Transition
	fastErr := json.Unmarshal(b, &fast)
	var direct Transition
	directErr := direct.UnmarshalJSON(b)
	var want refTransition
	wantErr := json.Unmarshal(b, &want)
	if (fastErr == nil) != (wantErr == nil) || (directErr == nil) != (wantErr == nil) {
		t.Fatalf("decoding %q: error %v (direct %v), encoding/json %v", b, fastErr, directErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if got := toRef(fast); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(toRef(direct), want) {
		t.Fatalf("decoding %q:\n got %#v\nwant %#v", b, got, want)
	}
}

// TestTransitionJSONIsEncodingJSON is TestStateJSONIsEncodingJSON for the
// transitions the router sends: omitted empty fields, nested steps.
func TestTransitionJSONIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		tr := randTransition(r, 2)
		got, err := tr.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(toRef(tr))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("transition %d:\n got %s\nwant %s", i, got, want)
		}
		decodeTransitionBoth(t, got)
	}
	for _, in := range transitionJSONSeeds() {
		decodeTransitionBoth(t, []byte(in))
	}
}

func transitionJSONSeeds() []string {
	base := `{"msgId":12,"source":"SCHD-DNLD","kind":"SCHEDULE","flid":"100","operationDay":"2021-01-23","at":"2026-01-23T13:00:00+08:00",` +
		`"fields":{"FLNO":"CA1","MAID":"99"},"collections":{"ROUT":[{"APCD":"PEK","RTNO":"1"}]},"expect":{"state":"ACTIVE","maid":"99"},` +
		`"then":[{"msgId":0,"source":"DERIVED-LINK","kind":"LINK","flid":"","at":"0001-01-01T00:00:00Z","link":{"flid":"101","flno":"MU1","live":true}},` +
		`{"msgId":12,"source":"CASCADE","kind":"DELETE","flid":"100","at":"2026-01-23T13:00:00Z","cascade":true}],` +
		`"purgeBefore":"2021-01-01","msgDttm":"2021-01-23T09:00:00Z","replay":3,"firstSeen":true}`
	seeds := []string{base, strings.ReplaceAll(base, ",", " ,\n"), `{}`, `null`, `{"then":null}`, `{"then":[null]}`, `{"then":[]}`,
		`{"link":null}`, `{"expect":{}}`, `{"expect":{"state":""}}`, `{"fields":{}}`, `{"collections":{}}`, `{"cascade":false}`,
		`{"msgDttm":"0001-01-01T00:00:00Z"}`, `{"kind":1}`, `{"then":[{"then":[{"flid":"x"}]}]}`, `{"then":[{"flid":"a","flid":"b"}]}`,
		`{"Kind":"LINK"}`, `{"link":{"FLID":"1"}}`, `{"replay":-1}`, `{"firstSeen":"true"}`}
	for n := 1; n < len(base); n += 11 {
		seeds = append(seeds, base[:n])
	}
	return seeds
}

// FuzzTransitionJSON: whatever the input, the hand-written decoder answers
// as encoding/json does.
func FuzzTransitionJSON(f *testing.F) {
	for _, s := range transitionJSONSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeTransitionBoth(t, b)
	})
}
