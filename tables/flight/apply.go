package flight

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"msgx/tables/message"
)

// Options are the configuration knobs of Apply.
type Options struct {
	// ScheduleMissing says what a SCHEDULE does with tags its FLTR does not
	// carry: ScheduleMissingKeep ("" too) or ScheduleMissingClear
	// (MSGX_SCHEDULE_MISSING, docs/design.md#schedule-merge). The router
	// (Expand) and the flights processor (Apply) must use the same.
	ScheduleMissing string

	// linkOnly stops an update before commit: LinkAfter needs only the
	// state's link (State, MAID, FLNO), which commit's derived fields,
	// MAFL projection and change list never touch.
	linkOnly bool
}

// Values of Options.ScheduleMissing.
const (
	// ScheduleMissingKeep keeps the stored value of a tag the FLTR omits.
	ScheduleMissingKeep = "keep"
	// ScheduleMissingClear clears every scalar and collection the FLTR omits.
	ScheduleMissingClear = "clear"
)

// Outcomes of Apply.
const (
	// OutcomeApplied: the flight changed; its version was bumped.
	OutcomeApplied = "applied"
	// OutcomePurged: a PURGE took the flight out of the table.
	OutcomePurged = "purged"
	// OutcomeNotEligible: a PURGE for a flight whose day is not past.
	OutcomeNotEligible = "not-eligible"
	// OutcomeReplay: the transition was already applied (I4): nothing
	// changes and nothing is announced again.
	OutcomeReplay = "replay"
	// OutcomeNoChange: applied, but nothing visible changed.
	OutcomeNoChange = "no-change"
	// OutcomeNoMatch: the flight is unknown (or only a placeholder), or a
	// LINK reports a child gone from a master that is not a flight.
	OutcomeNoMatch = "no-match"
	// OutcomePlaceholder: a LINK for a master that is not a flight (yet)
	// was recorded on its placeholder (or, its last live child gone, the
	// placeholder leaves the table: Result.Drop).
	OutcomePlaceholder = "placeholder"
	// OutcomeDeletedFlight: a FLOP, DELETE or LINK for a deleted flight.
	OutcomeDeletedFlight = "deleted-flight"
)

// ErrInvalid is wrapped by every error of Apply: the transition or the
// options break the contract, or the transition disagrees with the flight
// it reaches (a cascade to a flight that is not the master's live child, a
// step whose Expect the result does not meet) — a bug upstream, not bad
// data.
var ErrInvalid = errors.New("flight: invalid transition")

// Result is the outcome of one Apply.
type Result struct {
	// State is the table value after the transition (a fresh copy): nil
	// when the FLID has no entry (an unknown flight stays unknown; a
	// placeholder left, Drop). It may differ from the input even when
	// nothing visible changed (lastMsgId, links). It may be a placeholder
	// (State.IsPlaceholder), which is not a flight. For a purge it is the
	// flight's last state, to archive.
	State *State
	// Versions are the flight's states after each new version the
	// transition made, in order: each is a line of the change history and
	// a msg event (Events).
	Versions []*State
	// Applied is true when the transition made at least one version.
	Applied bool
	// Changed lists the tags the last new version changed, in ChangeOrder
	// (nil unless Applied).
	Changed []string
	// Replay is true when the transition had been applied already (a
	// redelivery): nothing changes, nothing is announced again.
	Replay bool
	// Outcome is OutcomePurged for a purge, OutcomeApplied when the
	// transition made a version, else the outcome of its first step.
	Outcome string
	// Purge says the flight leaves the table (KindPurge): State is its last
	// state, to archive; the processor deletes the table entry and the
	// read-model rows.
	Purge bool
	// Drop says the table entry, a placeholder, leaves the table: no child
	// names it any more. There is nothing to archive (State is nil).
	Drop bool
}

// Apply applies transition t — every step one message makes on one flight,
// t and t.Then, in order — to the flight state s (nil = unknown flight) and
// returns the new state and the versions it made. It is pure: s and t are
// never modified and no clock, Kafka or database is touched.
//
// The router sends every flight its transitions in inbox order, the derived
// ones (a child's LINK to its master, a master's cascade to its children)
// included, computed from its flight index (Expand); so Apply needs no
// guard against reordering, and a transition the flight applied already is
// recognised by its message alone (I4).
//
// Choices the contract leaves open, in one place:
//   - A transition that changes nothing visible keeps the version and
//     announces nothing, but still advances lastMsgId, so that its
//     redelivery is recognised too.
//   - A redelivered transition changes nothing and announces nothing: the
//     events of the versions it made were committed with them (the outbox,
//     docs/design.md#outbox).
//   - FLOP or DELETE on a deleted flight changes nothing ("deleted-flight");
//     SCHEDULE and ADFT revive it (a schedule or an added flight states
//     that the flight exists again).
//   - A flight created without an operation day (ADFT without SODT) takes
//     the first one a later transition carries; an established one never
//     changes.
//   - Lifecycle changes list "STATE" in Changed; creation lists it too.
//   - A LINK for a FLID the table does not hold creates a placeholder that
//     keeps the links until the master is created (SCHEDULE or ADFT: its
//     first version lists them in MAFL). FLOP, DELETE and PURGE treat a
//     placeholder as an unknown flight.
//   - A LINK to a deleted master is recorded: a revived master lists the
//     children linked to it since.
//   - A cascade deletes an ACTIVE flight that names the deleting master;
//     reaching any other is a disagreement between the router's index and
//     the table, and rejected (ErrInvalid), like a step whose Expect the
//     result does not meet.
//   - A replayed transition (t.Replay, docs/design.md#replay) is applied to
//     the current state like a new one, although its message is older than
//     what the flight applied since: a new version and a normal event. Its
//     redelivery is recognised by Replayed, never by lastMsgId, which it
//     does not move back.
func Apply(s *State, t Transition, o Options) (Result, error) {
	steps := t.Steps()
	for i, st := range steps {
		if err := check(s, st, o); err != nil {
			return Result{}, err
		}
		if i > 0 && (st.MsgID != t.MsgID || st.FLID != t.FLID || st.Replay != t.Replay || len(st.Then) > 0) {
			return Result{}, fmt.Errorf("%w: step %d of message #%d for %s belongs to another transition", ErrInvalid, i, t.MsgID, t.FLID)
		}
	}
	if t.MsgID > 0 && s != nil && applied(s, t) {
		return Result{State: s.Clone(), Replay: true, Outcome: OutcomeReplay}, nil
	}
	var res Result
	cur := s
	for i, st := range steps {
		r, err := applyStep(cur, st, o)
		if err != nil {
			return Result{}, err
		}
		if st.Expect != nil {
			got := LinkOf(r.state)
			if r.purge {
				got = message.FlightLink{}
			}
			if got != *st.Expect {
				return Result{}, fmt.Errorf("%w: the router's flight index expects flight %s to be %s after message #%d, the flights table makes it %s",
					ErrInvalid, t.FLID, describeLink(*st.Expect), t.MsgID, describeLink(got))
			}
		}
		if i == 0 {
			res.Outcome = r.outcome
		}
		if r.version {
			res.Versions = append(res.Versions, r.state)
			res.Changed = r.changed
		}
		if r.purge {
			if i != len(steps)-1 {
				return Result{}, fmt.Errorf("%w: steps after the purge of %s", ErrInvalid, t.FLID)
			}
			res.Purge, res.State = true, r.state
		} else {
			cur = r.state
		}
	}
	if res.Applied = len(res.Versions) > 0; res.Applied && !res.Purge {
		res.Outcome = OutcomeApplied
	}
	if !res.Purge {
		res.State = cur
		res.Drop = s != nil && cur == nil
	}
	return res, nil
}

// Steps lists t's steps in order: t without its Then, then each of Then.
func (t Transition) Steps() []Transition {
	head := t
	head.Then = nil
	return append([]Transition{head}, t.Then...)
}

// describeLink words a link for an error.
func describeLink(l message.FlightLink) string {
	if !l.IsFlight() {
		return "no flight"
	}
	return fmt.Sprintf("%s (MAID %q, FLNO %q)", l.State, l.MAID, l.FLNO)
}

// step is what one step did.
type step struct {
	// state is the entry after the step (nil: none); a purge's is the last
	// state, to archive.
	state   *State
	version bool
	changed []string
	outcome string
	purge   bool
}

func applyStep(s *State, t Transition, o Options) (step, error) {
	// FLOP-FDEL is a delete whichever kind the router gave it.
	if t.Kind == KindFLOP && strings.EqualFold(strings.TrimSpace(t.STYP), STYPDelete) {
		t.Kind = KindDelete
	}
	switch t.Kind {
	case KindPurge:
		return applyPurge(s, t), nil
	case KindLink:
		return applyLink(s, t), nil
	case KindDelete:
		if t.Cascade {
			return applyCascade(s, t)
		}
		return applyDelete(s, t), nil
	default:
		return applyUpdate(s, t, o), nil
	}
}

func check(s *State, t Transition, o Options) error {
	switch o.ScheduleMissing {
	case "", ScheduleMissingKeep, ScheduleMissingClear:
	default:
		return fmt.Errorf("%w: ScheduleMissing %q (want keep or clear)", ErrInvalid, o.ScheduleMissing)
	}
	if t.FLID == "" {
		return fmt.Errorf("%w: empty FLID", ErrInvalid)
	}
	if s != nil && s.FLID != t.FLID {
		return fmt.Errorf("%w: transition for FLID %s applied to state of FLID %s", ErrInvalid, t.FLID, s.FLID)
	}
	// Only the history sweep's transitions carry no message: its PURGE and
	// the LINK of a purged child.
	sweep := t.Kind == KindPurge || t.Kind == KindLink && t.Source == SourceHistory
	if t.MsgID < 0 || t.MsgID == 0 && !sweep {
		return fmt.Errorf("%w: msgId %d (must be positive)", ErrInvalid, t.MsgID)
	}
	if t.Cascade && t.Kind != KindDelete {
		return fmt.Errorf("%w: cascade on kind %s", ErrInvalid, t.Kind)
	}
	switch t.Kind {
	case KindSchedule, KindADFT:
	case KindFLOP:
		if !SupportedFLOP(t.STYP) {
			return fmt.Errorf("%w: unsupported FLOP STYP %q", ErrInvalid, t.STYP)
		}
	case KindDelete:
		if t.Cascade && t.Fields["MAID"] == "" {
			return fmt.Errorf("%w: cascade DELETE without the master in fields.MAID", ErrInvalid)
		}
	case KindPurge:
		if _, err := time.Parse(time.DateOnly, t.PurgeBefore); err != nil {
			return fmt.Errorf("%w: PURGE without a valid purgeBefore day: %q", ErrInvalid, t.PurgeBefore)
		}
	case KindLink:
		if t.Link == nil || t.Link.Child == "" {
			return fmt.Errorf("%w: LINK without a child", ErrInvalid)
		}
		if t.Link.Child == t.FLID {
			return fmt.Errorf("%w: LINK of flight %s to itself", ErrInvalid, t.FLID)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrInvalid, t.Kind)
	}
	return nil
}

// applied reports whether t was applied to s already (a redelivery;
// docs/design.md#i4-exactly-once-effect): a normal transition at or below
// lastMsgId, a replayed one (t.Replay) not above the last replayed
// transition applied (message.Applied).
func applied(s *State, t Transition) bool {
	return message.Applied(s.LastMsgID, s.Replayed, t.Replay, t.MsgID)
}

// remember records t as applied: lastMsgId moves to t's message unless it
// is higher (a replayed older message never moves it back: the read model's
// never-backwards guard and every later redelivery rest on it), and a
// replayed transition becomes the last replay applied. The history sweep's
// transitions (no message) leave both alone.
func remember(next *State, t Transition) {
	if t.MsgID <= 0 {
		return
	}
	next.LastMsgID = max(next.LastMsgID, t.MsgID)
	if t.Replay != 0 {
		next.Replayed = &message.ReplayMark{Gen: t.Replay, MsgID: t.MsgID}
	}
}

func applyUpdate(s *State, t Transition, o Options) step {
	placeholder := s.IsPlaceholder()
	if (s == nil || placeholder) && t.Kind == KindFLOP {
		return step{state: s, outcome: OutcomeNoMatch}
	}
	if s != nil && s.State == StateDeleted && t.Kind == KindFLOP {
		next := s.Clone()
		remember(next, t)
		return step{state: next, outcome: OutcomeDeletedFlight}
	}
	var next *State
	before := s
	switch {
	case s == nil:
		next = &State{FLID: t.FLID, OperationDay: t.OperationDay}
	case placeholder:
		// The master's creation: a new flight that starts with the links
		// its children reported before it existed, so its first version
		// already lists them in MAFL, and with the placeholder's record of
		// the messages it applied.
		next = &State{FLID: t.FLID, OperationDay: t.OperationDay, Links: maps.Clone(s.Links), LastMsgID: s.LastMsgID}
		if s.Replayed != nil {
			r := *s.Replayed
			next.Replayed = &r
		}
		before = nil
	default:
		next = s.Clone()
	}
	remember(next, t)
	if next.Fields == nil {
		next.Fields = map[string]string{}
	}
	if next.Collections == nil {
		next.Collections = map[string][]Element{}
	}
	// Only SCHEDULE and ADFT get here for a deleted flight: both revive it.
	next.State = StateActive
	switch t.Kind {
	case KindADFT:
		setOnly(next, t)
	case KindSchedule:
		replace(next, t)
		if o.ScheduleMissing == ScheduleMissingClear {
			clearMissing(next, t)
		}
	case KindFLOP:
		replace(next, t)
		flopSpecials(next, t)
	}
	if o.linkOnly {
		return step{state: next}
	}
	return commit(before, next, t)
}

func applyDelete(s *State, t Transition) step {
	if s == nil || s.IsPlaceholder() {
		return step{state: s, outcome: OutcomeNoMatch}
	}
	next := s.Clone()
	remember(next, t)
	if s.State == StateDeleted {
		return step{state: next, outcome: OutcomeDeletedFlight}
	}
	next.State = StateDeleted
	return commit(s, next, t)
}

// applyCascade deletes a child because its master was deleted by the same
// message. The router sends it only to a flight its index holds ACTIVE and
// naming that master (Expand); anything else here means the index and the
// table disagree.
func applyCascade(s *State, t Transition) (step, error) {
	master := t.Fields["MAID"]
	if s == nil || s.IsPlaceholder() || s.State != StateActive || masterOf(s) != master {
		return step{}, fmt.Errorf("%w: the cascade of master %s's deletion (message #%d) reaches flight %s, which is %s: the router's flight index and the flights table disagree",
			ErrInvalid, master, t.MsgID, t.FLID, describeLink(LinkOf(s)))
	}
	next := s.Clone()
	remember(next, t)
	next.State = StateDeleted
	return commit(s, next, t), nil
}

// applyLink records a child's link report on its master: a live child under
// its flight number, a child that left removed. A LINK may arrive before
// its master exists (the child came first, or was listed first in one
// package): it is kept on a placeholder, which the master's creation turns
// into the flight (applyUpdate). A placeholder whose last live child left is
// dropped from the table, so that placeholders are bounded by the live
// children naming them; a report that a child left a master that is not a
// flight is nothing to remember.
func applyLink(s *State, t Transition) step {
	l := *t.Link
	base := s
	if s == nil {
		if !l.Live {
			return step{outcome: OutcomeNoMatch}
		}
		base = &State{FLID: t.FLID, State: StatePlaceholder}
	}
	next := base.Clone()
	remember(next, t)
	if next.Links == nil {
		next.Links = map[string]ChildLink{}
	}
	if l.Live {
		next.Links[l.Child] = ChildLink{FLNO: l.FLNO, Live: true}
	} else {
		delete(next.Links, l.Child)
	}
	if next.IsPlaceholder() {
		for _, c := range next.Links {
			if c.Live {
				return step{state: next, outcome: OutcomePlaceholder}
			}
		}
		return step{outcome: OutcomePlaceholder}
	}
	if t.Source == "" {
		t.Source = SourceLink
	}
	r := commit(s, next, t)
	if !r.version && s.State == StateDeleted {
		// Recorded, so that a revived master shows the child, but a
		// deleted flight has no MAFL to change.
		r.outcome = OutcomeDeletedFlight
	}
	return r
}

// commit finishes a change: derived fields, MAFL projection, change list,
// version and provenance. before is nil for a new flight.
func commit(before, next *State, t Transition) step {
	deriveFlags(next)
	// The operation day is fixed once known; a flight created without one
	// (ADFT without SODT) takes the first one offered, as the router's
	// FLID → day index does.
	if next.OperationDay == "" && t.Kind != KindLink {
		next.OperationDay = t.OperationDay
	}
	projectMAFL(next)
	changed := diff(before, next)
	if len(changed) == 0 {
		return step{state: next, outcome: OutcomeNoChange}
	}
	var prev int64
	if before != nil {
		prev = before.StateVersion
	}
	next.StateVersion = prev + 1
	next.UpdatedAt = t.At
	next.Last = &Provenance{MsgID: t.MsgID, Source: t.Source, Changed: changed}
	return step{state: next, version: true, changed: slices.Clone(changed), outcome: OutcomeApplied}
}

// replace applies present scalars, attributed elements and collections with
// overwrite semantics (SCHEDULE, FLOP): present sets, present-empty clears.
func replace(s *State, t Transition) {
	for _, tag := range Scalars {
		if v, ok := t.Fields[tag]; ok {
			setOrClear(s.Fields, tag, v)
		}
	}
	for _, name := range attributedNames {
		if !attributedPresent(t.Fields, name) {
			continue
		}
		parts := append([]string{name}, Attributed[name]...)
		if attributedCleared(t.Fields, name) {
			for _, p := range parts {
				delete(s.Fields, p)
			}
			continue
		}
		// The element replaces the stored one as a whole: a part it lacks
		// is cleared, not kept from an older diversion or return.
		for _, p := range parts {
			setOrClear(s.Fields, p, t.Fields[p])
		}
	}
	for _, spec := range Collections {
		elems, ok := t.Collections[spec.Name]
		if !ok {
			continue
		}
		if norm := normalize(spec, elems); len(norm) > 0 {
			s.Collections[spec.Name] = norm
		} else {
			delete(s.Collections, spec.Name)
		}
	}
}

// setOnly applies ADFT: non-empty values set, nothing is ever cleared.
func setOnly(s *State, t Transition) {
	for _, tag := range Scalars {
		if v := t.Fields[tag]; !blank(v) {
			s.Fields[tag] = v
		}
	}
	for _, name := range attributedNames {
		// An element that would clear (FDIV with empty DDES, empty FRET) is
		// a clear request, and set-only never clears.
		if !attributedPresent(t.Fields, name) || attributedCleared(t.Fields, name) {
			continue
		}
		for _, p := range append([]string{name}, Attributed[name]...) {
			if v := t.Fields[p]; !blank(v) {
				s.Fields[p] = v
			}
		}
	}
	for _, spec := range Collections {
		if norm := normalize(spec, t.Collections[spec.Name]); len(norm) > 0 {
			s.Collections[spec.Name] = norm
		}
	}
}

// clearMissing implements ScheduleMissingClear: what the FLTR does not carry
// is cleared (docs/design.md#schedule-merge).
func clearMissing(s *State, t Transition) {
	for _, tag := range Scalars {
		if _, ok := t.Fields[tag]; !ok {
			delete(s.Fields, tag)
		}
	}
	for _, name := range attributedNames {
		if !attributedPresent(t.Fields, name) {
			delete(s.Fields, name)
			for _, p := range Attributed[name] {
				delete(s.Fields, p)
			}
		}
	}
	for _, spec := range Collections {
		if _, ok := t.Collections[spec.Name]; !ok {
			delete(s.Collections, spec.Name)
		}
	}
}

// flopSpecials applies the FLOP rules that go beyond one tag
// (docs/design.md#flop). TAOP/TAFL/TAID describe one onward connection: any of
// them present but empty means the connection is broken, so all three go.
func flopSpecials(s *State, t Transition) {
	group := FLOPGroups["TAOP"]
	for _, tag := range group {
		if v, ok := t.Fields[tag]; ok && blank(v) {
			for _, g := range group {
				delete(s.Fields, g)
			}
			return
		}
	}
}

// deriveFlags recomputes DerivedScalars from the times they follow.
func deriveFlags(s *State) {
	for flag, source := range map[string]string{"BDST": "BOTM", "LCST": "LACL"} {
		if blank(s.Fields[source]) {
			delete(s.Fields, flag)
		} else {
			s.Fields[flag] = "Y"
		}
	}
}

// attributedNames is Attributed's keys in canonical order.
var attributedNames = []string{"FDIV", "FRET", "FLAB"}

// attributedClearKey names the attribute whose emptiness alone clears the
// element: DDES="" clears a diversion (docs/design.md#flop).
var attributedClearKey = map[string]string{"FDIV": "DDES"}

func attributedPresent(fields map[string]string, name string) bool {
	if _, ok := fields[name]; ok {
		return true
	}
	for _, p := range Attributed[name] {
		if _, ok := fields[p]; ok {
			return true
		}
	}
	return false
}

// attributedCleared reports whether a present attributed element means
// "clear": all of its parts empty (<FRET></FRET>), or its clearing
// attribute empty (<FDIV DDES="">).
func attributedCleared(fields map[string]string, name string) bool {
	if key, ok := attributedClearKey[name]; ok && blank(fields[key]) {
		return true
	}
	if !blank(fields[name]) {
		return false
	}
	for _, p := range Attributed[name] {
		if !blank(fields[p]) {
			return false
		}
	}
	return true
}

// normalize turns a message's elements into the stored collection: copies in
// message order, empty leaves dropped (an empty CHTM deletes that chock
// time), "no allocation now" markers dropped, capped at spec.Max. Equal
// resource numbers are kept: they are different allocations.
func normalize(spec CollectionSpec, elems []Element) []Element {
	out := make([]Element, 0, len(elems))
	for _, e := range elems {
		if spec.Max > 0 && len(out) == spec.Max {
			// Keep the first Max in message order (ROUT/ERUT: 4,
			// docs/design.md#flight-state).
			break
		}
		var c Element
		if spec.Raw {
			if rawEmpty(e) {
				continue
			}
			c = maps.Clone(e)
		} else {
			c = Element{}
			for k, v := range e {
				if !blank(v) {
					c[k] = v
				}
			}
			// <DELY></DELY> (nothing left) and <GTDT GTNO="0"/> both mean
			// "no allocation now". A marker next to real entries is dropped
			// and the real entries kept: they are still allocations.
			if len(c) == 0 || (spec.SeqAttr != "" && zeroSeq(c[spec.SeqAttr])) {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

func zeroSeq(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && strings.Trim(v, "0") == ""
}

// rawEmpty reports whether a raw element (SRVT, VIPF) has no content: no
// keys, a blank RAW, or XML whose root has no attribute value, child or
// text (<SRVT></SRVT>, which clears the collection like <DELY></DELY>).
// Unparsable XML counts as content: it is stored verbatim.
func rawEmpty(e Element) bool {
	raw, ok := e[RawKey]
	if !ok {
		for _, v := range e {
			if !blank(v) {
				return false
			}
		}
		return true
	}
	if blank(raw) {
		return true
	}
	d := xml.NewDecoder(strings.NewReader(raw))
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if depth > 0 {
				return false
			}
			for _, a := range tk.Attr {
				if !blank(a.Value) {
					return false
				}
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if !blank(string(tk)) {
				return false
			}
		}
	}
}

// masterOf returns the flight's master FLID; a MAID naming the flight
// itself is no link.
func masterOf(s *State) string {
	if m := s.Fields["MAID"]; m != s.FLID {
		return m
	}
	return ""
}

// projectMAFL recomputes the MAFL of a flight from its link records: the
// live children of an ACTIVE master (MAID empty), ordered by FLID.
func projectMAFL(s *State) {
	s.MAFL = nil
	if s.State != StateActive || masterOf(s) != "" {
		return
	}
	for _, child := range sortedFLIDs(s.Links) {
		if l := s.Links[child]; l.Live {
			s.MAFL = append(s.MAFL, MAFLEntry{FLID: child, FLNO: l.FLNO})
		}
	}
}

// diff lists what differs between before (nil = no flight) and next, in
// ChangeOrder.
func diff(before, next *State) []string {
	if before == nil {
		before = &State{}
	}
	var changed []string
	for _, tag := range FieldTags {
		bv, bok := before.Fields[tag]
		nv, nok := next.Fields[tag]
		if bok != nok || bv != nv {
			changed = append(changed, tag)
		}
	}
	for _, spec := range Collections {
		if !slices.EqualFunc(before.Collections[spec.Name], next.Collections[spec.Name], maps.Equal) {
			changed = append(changed, spec.Name)
		}
	}
	if !slices.Equal(before.MAFL, next.MAFL) {
		changed = append(changed, ChangedMAFL)
	}
	if before.State != next.State {
		changed = append(changed, ChangedState)
	}
	if before.FLID != "" && before.OperationDay != next.OperationDay {
		changed = append(changed, ChangedOperationDay)
	}
	return changed
}

// applyPurge takes a flight of a past operation day out of the table. A
// flight that was never deleted gets a last version, DELETED, whose
// TOMBSTONE event consumers see before it disappears; a deleted one already
// had its tombstone. A flight whose day is not (yet) past, or that has no
// day, stays; so does a placeholder, which has neither a day nor a row the
// sweep could find. The router tells the master of a purged live child
// (Expand).
func applyPurge(s *State, t Transition) step {
	if s == nil || s.IsPlaceholder() {
		return step{state: s, outcome: OutcomeNoMatch}
	}
	if s.OperationDay == "" || s.OperationDay >= t.PurgeBefore {
		return step{state: s.Clone(), outcome: OutcomeNotEligible}
	}
	last := s.Clone()
	r := step{state: last, purge: true, outcome: OutcomePurged}
	if last.State != StateDeleted {
		last.State = StateDeleted
		last.MAFL = nil
		last.StateVersion++
		last.UpdatedAt = t.At
		last.Last = &Provenance{MsgID: last.LastMsgID, Source: SourceHistory, Changed: []string{ChangedState}}
		r.version, r.changed = true, []string{ChangedState}
	}
	return r
}

func setOrClear(fields map[string]string, tag, v string) {
	if blank(v) {
		delete(fields, tag)
	} else {
		fields[tag] = v
	}
}

func blank(v string) bool { return strings.TrimSpace(v) == "" }
