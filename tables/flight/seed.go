package flight

import "sort"

// Placeholders derives the placeholder entries a table holding flights
// would have: one per master that live children name but that is not among
// flights, with the children's links as their LINKs left them
// (applyLink). It fills the placeholders of a database written by a
// version of msgx that did not store them (flight_placeholder, migration
// 0028) and of msgx reseed from one. Pure; the result is ordered by FLID.
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
		p.Links[s.FLID] = ChildLink{FLNO: s.Fields["FLNO"], Live: true}
		p.LastMsgID = max(p.LastMsgID, s.LastMsgID)
	}
	out := make([]*State, 0, len(byMaster))
	for _, p := range byMaster {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FLID < out[j].FLID })
	return out
}

// Redelivered reports whether s, a flight's (or a placeholder's) table
// value, has applied transition t already (a redelivery by the rule of
// docs/design.md#i4-exactly-once-effect); false for an unknown flight and
// for the history sweep's transitions, which carry no message.
func Redelivered(s *State, t Transition) bool {
	return s != nil && t.MsgID > 0 && applied(s, t)
}
