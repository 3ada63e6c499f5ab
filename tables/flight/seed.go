package flight

import "sort"

// Placeholders derives the placeholder entries a table holding flights
// would have: one per master that live children name but that is not among
// flights, with the children's links as the LINKs they reported would have
// left them (applyLink). msgx reseed writes them with the flights when it
// seeds a table from PostgreSQL, which never stores placeholders, so that a
// master created after the move starts with its complete MAFL. Pure; the
// result is ordered by FLID.
func Placeholders(flights []*State) []*State {
	known := make(map[string]bool, len(flights))
	for _, s := range flights {
		known[s.FLID] = true
	}
	byMaster := map[string]*State{}
	for _, s := range flights {
		if s.IsPlaceholder() || s.State != StateActive {
			continue
		}
		m := masterOf(s)
		if m == "" || known[m] {
			continue
		}
		p := byMaster[m]
		if p == nil {
			p = &State{FLID: m, State: StatePlaceholder, Links: map[string]ChildLink{}}
			byMaster[m] = p
		}
		l := linkOf(s)
		p.Links[s.FLID] = ChildLink{FLNO: l.flno, Live: true, Version: s.StateVersion, Since: l.since}
	}
	out := make([]*State, 0, len(byMaster))
	for _, p := range byMaster {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FLID < out[j].FLID })
	return out
}

// Redelivered reports whether s, a flight's table value, has applied the
// flight's own transition t already (a redelivery by the rule of
// docs/design.md#i4-exactly-once-effect); false for an unknown flight and a
// placeholder.
func Redelivered(s *State, t Transition) bool {
	return s != nil && !s.IsPlaceholder() && applied(s, t)
}

// PlaceholderOf is the placeholder master would have in a table holding
// children (Placeholders), or nil when no live child names it.
func PlaceholderOf(master string, children []*State) *State {
	for _, p := range Placeholders(children) {
		if p.FLID == master {
			return p
		}
	}
	return nil
}
