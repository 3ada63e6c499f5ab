package flight

import "slices"

// Touches lists, in ChangeOrder, the tags transition t may change on a
// flight: what it sets or clears (the change list of its version is a
// subset, the tags whose value really changes). The replay dry run compares
// it with the change lists of the versions that newer messages made
// (docs/design.md#replay): what a replayed message overwrites.
//
//   - FLOP and SCHEDULE: the scalars, attributed elements (all their parts)
//     and collections present, the group of a TAOP connection, the derived
//     status of BOTM and LACL, MAFL when MAID is present (a flight that
//     names a master lists no children); a SCHEDULE also STATE (it may
//     revive the flight), and with ScheduleMissingClear every scalar and
//     collection;
//   - ADFT: the non-empty values only (set-only), and STATE;
//   - DELETE: STATE and MAFL (a deleted master lists no children);
//   - LINK: MAFL; PURGE: STATE.
//
// A transition with further steps (Then) touches what any of them does.
func Touches(t Transition, o Options) []string {
	set := map[string]bool{}
	for _, st := range t.Steps() {
		touch(set, st, o)
	}
	var out []string
	for _, tag := range ChangeOrder {
		if set[tag] {
			out = append(out, tag)
		}
	}
	return out
}

// touch adds to set what step t may change.
func touch(set map[string]bool, t Transition, o Options) {
	if t.Kind == KindFLOP && t.STYP == STYPDelete {
		t.Kind = KindDelete
	}
	switch t.Kind {
	case KindDelete:
		set[ChangedState], set[ChangedMAFL] = true, true
	case KindLink:
		set[ChangedMAFL] = true
	case KindPurge:
		set[ChangedState] = true
	case KindSchedule, KindADFT, KindFLOP:
		setOnly := t.Kind == KindADFT
		for tag, v := range t.Fields {
			if IsScalar(tag) && (!setOnly || !blank(v)) {
				set[tag] = true
			}
		}
		for _, name := range attributedNames {
			if attributedPresent(t.Fields, name) && (!setOnly || !attributedCleared(t.Fields, name)) {
				set[name] = true
				for _, p := range Attributed[name] {
					set[p] = true
				}
			}
		}
		for name, elems := range t.Collections {
			spec, ok := Collection(name)
			if ok && (!setOnly || len(normalize(spec, elems)) > 0) {
				set[name] = true
			}
		}
		if t.Kind == KindSchedule && o.ScheduleMissing == ScheduleMissingClear {
			for _, tag := range Scalars {
				set[tag] = true
			}
			for _, tag := range AttributedTags {
				set[tag] = true
			}
			for _, c := range Collections {
				set[c.Name] = true
			}
		}
		if !setOnly && slices.ContainsFunc(FLOPGroups["TAOP"], func(tag string) bool { return set[tag] }) {
			for _, tag := range FLOPGroups["TAOP"] {
				set[tag] = true
			}
		}
		set["BDST"], set["LCST"] = set["BDST"] || set["BOTM"], set["LCST"] || set["LACL"]
		set[ChangedMAFL] = set[ChangedMAFL] || set["MAID"]
		set[ChangedState] = set[ChangedState] || t.Kind != KindFLOP
	}
}
