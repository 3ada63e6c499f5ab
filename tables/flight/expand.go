package flight

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"msgx/tables/message"
)

// Expand returns every transition a message makes on flights, in the order
// the message causes them, from its own transitions own (in message order:
// the router's SCHEDULE, ADFT, FLOP and DELETE; or the history sweep's
// PURGEs) and links, the router's flight index entries of every flight the
// message may touch: the flights of own and the live descendants (children,
// their children, …) of every flight own may delete or purge; a FLID
// missing from links is no flight. It returns one transition per flight —
// its first step, the others in Then — in the order the flights are first
// touched, and the index entries after the message of the flights whose
// link changed. Pure: links is not modified.
//
// This is the one place of the codeshare rules (docs/design.md#codeshare):
// each step is followed at once by what it causes, depth first:
//   - a step that changes a flight's own link (an own change, a cascade, a
//     purge; LinkAfter) tells the old master that its child left, the new
//     master that it is linked and under which FLNO, and the same master
//     when the child's FLNO or liveness changed: a LINK step each;
//   - the deletion of an ACTIVE flight deletes every live child naming it,
//     ordered by FLID: a cascade step each, which causes the same in turn;
//   - a LINK changes only its master's MAFL, so it causes nothing.
//
// Every step but a LINK carries Expect, the flight's link after it, which
// the flights processor checks (Apply): the router's index and the flights
// table are derived from the same transitions by the same rules, and the
// check makes any disagreement stop the processor instead of forking them.
// The transition of the flight that carries FirstSeen on its own step
// carries it on its first step too.
//
// The error is a transition Apply would reject (a bug upstream).
func Expand(own []Transition, links map[string]message.FlightLink, o Options) ([]Transition, map[string]message.FlightLink, error) {
	e := &expander{links: links, changed: map[string]message.FlightLink{}, o: o, at: map[string]int{}}
	for _, t := range own {
		if t.Kind == KindLink || t.Cascade || len(t.Then) > 0 {
			return nil, nil, fmt.Errorf("%w: Expand takes own transitions, not a %s", ErrInvalid, t.Kind)
		}
		if err := e.step(t); err != nil {
			return nil, nil, err
		}
	}
	return e.out, e.changed, nil
}

type expander struct {
	links, changed map[string]message.FlightLink
	o              Options
	out            []Transition
	at             map[string]int // FLID → its transition in out
}

// link is the flight's index entry as the message left it so far.
func (e *expander) link(flid string) message.FlightLink {
	if l, ok := e.changed[flid]; ok {
		return l
	}
	return e.links[flid]
}

// add appends t as the next step of its flight's transition.
func (e *expander) add(t Transition) {
	i, ok := e.at[t.FLID]
	if !ok {
		e.at[t.FLID] = len(e.out)
		e.out = append(e.out, t)
		return
	}
	e.out[i].Then = append(e.out[i].Then, t)
	if t.FirstSeen {
		e.out[i].FirstSeen = true
	}
}

func (e *expander) step(t Transition) error {
	before := e.link(t.FLID)
	var after message.FlightLink
	if t.Kind == KindPurge {
		// The router sends a PURGE only for a flight its index holds past
		// the retention: it leaves the table, and the index.
		if before.IsFlight() {
			after = message.FlightLink{}
		}
	} else {
		var err error
		if after, err = LinkAfter(before, t, e.o); err != nil {
			return err
		}
	}
	t.Expect = &after
	e.add(t)
	if after != before {
		e.changed[t.FLID] = after
	}
	b, n := master(t.FLID, before), master(t.FLID, after)
	bLive, nLive := before.State == StateActive, after.State == StateActive
	report := func(to string, l message.FlightLink, live bool) {
		src := SourceLink
		if t.Kind == KindPurge {
			src = SourceHistory
		}
		e.add(Transition{MsgID: t.MsgID, Replay: t.Replay, Source: src, Kind: KindLink, FLID: to, At: t.At,
			Link: &Link{Child: t.FLID, FLNO: l.FLNO, Live: live}})
	}
	switch {
	case b == n:
		if n != "" && (before.FLNO != after.FLNO || bLive != nLive) {
			report(n, after, nLive)
		}
	default:
		if b != "" && bLive {
			report(b, before, false)
		}
		if n != "" && nLive {
			report(n, after, true)
		}
	}
	if bLive && after.State == StateDeleted {
		for _, child := range e.children(t.FLID) {
			c := Transition{MsgID: t.MsgID, Replay: t.Replay, Source: SourceCascade, Kind: KindDelete, FLID: child, At: t.At,
				Fields: map[string]string{"MAID": t.FLID}, Cascade: true}
			if err := e.step(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// children lists the live flights naming flid as their master, as the
// message left them so far, ordered by FLID.
func (e *expander) children(flid string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range []map[string]message.FlightLink{e.changed, e.links} {
		for c := range m {
			if seen[c] {
				continue
			}
			seen[c] = true
			if l := e.link(c); l.State == StateActive && master(c, l) == flid {
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, compareFLIDs)
	return out
}

// master is the master a flight's link names: its MAID, unless that names
// the flight itself (no link).
func master(flid string, l message.FlightLink) string {
	if l.MAID == flid {
		return ""
	}
	return l.MAID
}

// LinkAfter is the flight's link after step t, given its link before (the
// zero value: no flight): what Apply makes of it, computed by Apply's own
// rules on a state that holds only the link, so that the router's flight
// index follows the flights table exactly. t is a SCHEDULE, ADFT, FLOP or
// DELETE (a cascade too); a LINK never changes the flight's own link.
func LinkAfter(before message.FlightLink, t Transition, o Options) (message.FlightLink, error) {
	t.Then, t.Expect = nil, nil
	if t.Kind == KindLink || t.Kind == KindPurge {
		return message.FlightLink{}, fmt.Errorf("%w: LinkAfter of a %s", ErrInvalid, t.Kind)
	}
	var s *State
	if before.IsFlight() {
		s = &State{FLID: t.FLID, State: before.State, Fields: map[string]string{}}
		if before.MAID != "" {
			s.Fields["MAID"] = before.MAID
		}
		if before.FLNO != "" {
			s.Fields["FLNO"] = before.FLNO
		}
	}
	if err := check(s, t, o); err != nil {
		return message.FlightLink{}, err
	}
	o.linkOnly = true
	r, err := applyStep(s, t, o)
	if err != nil {
		return message.FlightLink{}, err
	}
	return LinkOf(r.state), nil
}

// compareFLIDs orders FLIDs numerically (they are digit strings), falling
// back to byte order for equal lengths.
func compareFLIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// sortedFLIDs lists the keys of m ordered by compareFLIDs.
func sortedFLIDs(m map[string]ChildLink) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, compareFLIDs)
	return keys
}
