package flight

import (
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 23, 5, 0, 0, 0, time.UTC)

// at is the enqueue time of message n in the tests.
func at(n int64) time.Time { return t0.Add(time.Duration(n) * time.Second) }

func sched(msg int64, flid string, fields map[string]string, colls map[string][]Element) Transition {
	return Transition{MsgID: msg, Source: "SCHD-DNLD", Kind: KindSchedule, FLID: flid, OperationDay: "2026-01-23", At: at(msg), Fields: fields, Collections: colls}
}

func adft(msg int64, flid string, fields map[string]string, colls map[string][]Element) Transition {
	return Transition{MsgID: msg, Source: "SCHD-ADFT", Kind: KindADFT, FLID: flid, OperationDay: "2026-01-23", At: at(msg), Fields: fields, Collections: colls}
}

func flop(msg int64, flid, styp string, fields map[string]string, colls map[string][]Element) Transition {
	return Transition{MsgID: msg, Source: "FLOP-" + styp, Kind: KindFLOP, STYP: styp, FLID: flid, At: at(msg), Fields: fields, Collections: colls}
}

func del(msg int64, flid string) Transition {
	return Transition{MsgID: msg, Source: "FDEL", Kind: KindDelete, FLID: flid, At: at(msg)}
}

// link is a child's LINK of message msg to master.
func link(msg int64, master, child, flno string, live bool) Transition {
	return Transition{MsgID: msg, Source: SourceLink, Kind: KindLink, FLID: master, At: at(msg),
		Link: &Link{Child: child, FLNO: flno, Live: live}}
}

// lastEvent is the event of the last version r made, nil when none.
func lastEvent(r Result) *Event {
	if len(r.Versions) == 0 {
		return nil
	}
	return eventOf(r.Versions[len(r.Versions)-1], true)
}

func mustApply(t *testing.T, s *State, tr Transition, o Options) Result {
	t.Helper()
	r, err := Apply(s, tr, o)
	if err != nil {
		t.Fatalf("Apply(%s %s msg %d): %v", tr.Kind, tr.FLID, tr.MsgID, err)
	}
	return r
}

// created builds an ACTIVE flight by a SCHEDULE at message 10.
func created(t *testing.T, flid string, fields map[string]string, colls map[string][]Element) *State {
	t.Helper()
	r := mustApply(t, nil, sched(10, flid, fields, colls), Options{})
	if !r.Applied {
		t.Fatalf("create %s: outcome %s", flid, r.Outcome)
	}
	return r.State
}

func with(base map[string]string, kv ...string) map[string]string {
	m := maps.Clone(base)
	if m == nil {
		m = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func without(base map[string]string, keys ...string) map[string]string {
	m := maps.Clone(base)
	for _, k := range keys {
		delete(m, k)
	}
	return m
}

func equalFields(a, b map[string]string) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}

func equalColls(a, b map[string][]Element) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !slices.EqualFunc(v, w, maps.Equal) {
			return false
		}
	}
	return true
}

func sameState(a, b *State) bool {
	norm := func(s *State) *State {
		c := s.Clone()
		if c == nil {
			return nil
		}
		if len(c.Fields) == 0 {
			c.Fields = nil
		}
		if len(c.Collections) == 0 {
			c.Collections = nil
		}
		if len(c.MAFL) == 0 {
			c.MAFL = nil
		}
		if len(c.Links) == 0 {
			c.Links = nil
		}
		return c
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
