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
	// (MSGX_SCHEDULE_MISSING, docs/design.md#schedule-merge).
	ScheduleMissing string
}

// Values of Options.ScheduleMissing.
const (
	// ScheduleMissingKeep keeps the stored value of a tag the FLTR omits.
	ScheduleMissingKeep = "keep"
	// ScheduleMissingClear clears every scalar and collection the FLTR omits.
	ScheduleMissingClear = "clear"
)

// Event types of the msg topic.
const (
	// EventUpsert announces a new version of a live flight.
	EventUpsert = "UPSERT"
	// EventTombstone announces a new version of a deleted flight.
	EventTombstone = "TOMBSTONE"
)

// Outcomes of Apply.
const (
	// OutcomeApplied: the flight changed; its version was bumped.
	OutcomeApplied = "applied"
	// OutcomePurged: a PURGE took the flight out of the table.
	OutcomePurged = "purged"
	// OutcomeNotEligible: a PURGE for a flight whose day is not past.
	OutcomeNotEligible = "not-eligible"
	// OutcomeReplay: the transition was already applied (I4); Result.Event
	// and Result.Derived are what the current state implies.
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
	// OutcomeStaleLink: a LINK not newer than the one recorded for the
	// child; treated as a replay.
	OutcomeStaleLink = "stale-link"
	// OutcomeNotLinked: a cascade DELETE for a flight that no longer belongs
	// to the deleting master (moved, or relinked after the deletion).
	OutcomeNotLinked = "not-linked"
)

// ErrInvalid is wrapped by every error of Apply: the transition or the
// options break the contract, which is a bug upstream, not bad data.
var ErrInvalid = errors.New("flight: invalid transition")

// Result is the outcome of one Apply.
type Result struct {
	// State is the value to store in the table (a fresh copy; nil when the
	// flight stays unknown or the table entry stays as it is). It may differ
	// from the input even when nothing visible changed (lastMsgId, link
	// bookkeeping). It may be a placeholder (State.IsPlaceholder), which is
	// stored in the table only: it is not a flight.
	State *State
	// Applied is true when the flight changed and its version was bumped.
	Applied bool
	// Replay is true when the transition had already been applied; Event
	// and Derived then repeat what the current state implies.
	Replay bool
	// Changed lists the changed tags in ChangeOrder (nil unless Applied).
	Changed []string
	// Event is the msg-topic event to emit; nil when nothing is to emit.
	Event *Event
	// Derived are transitions for other flights: LINKs to masters and
	// cascade DELETEs to children, to be emitted on the transitions topic.
	Derived []Transition
	// Outcome is one of the Outcome constants.
	Outcome string
	// Purge says the flight leaves the table (KindPurge): State is its last
	// state, to archive; the processor deletes the table entry and the
	// read-model rows.
	Purge bool
	// Drop says a placeholder leaves the table: no child names it any more.
	// There is nothing to archive or write (State is nil).
	Drop bool
}

// Event is one msg-topic record (docs/design.md#msg-topic), keyed by FLID.
// Consumers de-duplicate by (FLID, StateVersion).
type Event struct {
	// EventType is EventUpsert or EventTombstone.
	EventType string `json:"eventType"`
	// FLID is the flight.
	FLID string `json:"flid"`
	// StateVersion is the flight's version after the change.
	StateVersion int64 `json:"stateVersion"`
	// MsgID is the message of the change.
	MsgID int64 `json:"msgId"`
	// Source is the transition's source, e.g. "FLOP-ESTT".
	Source string `json:"source"`
	// Changed lists the changed tags in ChangeOrder.
	Changed []string `json:"changed"`
	// Flight is the full flight after the change, without bookkeeping.
	Flight *State `json:"flight"`
}

// Apply applies transition t to the flight state s (nil = unknown flight)
// and returns the new state, the event to emit and the derived transitions.
// It is pure: s and t are never modified and no clock, Kafka or database is
// touched.
//
// Choices the contract leaves open, in one place:
//   - A transition that changes nothing visible keeps the version, emits no
//     event, but still advances lastMsgId, so that its replay is a no-op too.
//   - FLOP or DELETE on a deleted flight changes nothing ("deleted-flight");
//     SCHEDULE and ADFT revive it (a schedule or an added flight states
//     that the flight exists again).
//   - A flight created without an operation day (ADFT without SODT) takes
//     the first one a later transition carries; an established one never
//     changes.
//   - Lifecycle changes list "STATE" in Changed; creation lists it too.
//   - LINK changes never move lastMsgId: it tracks the flight's own
//     messages, while a LINK carries its child's message id.
//   - A LINK for a FLID the table does not hold creates a placeholder that
//     keeps the links until the master is created (SCHEDULE or ADFT: its
//     first version lists them in MAFL). FLOP, DELETE and PURGE treat a
//     placeholder as an unknown flight.
//   - A master's deletion deletes every child whose live link began at or
//     before it, also when the child's LINK arrives after the deletion or
//     after a revival (DeletedBy). A revived master's MAFL shows the
//     children linked to it since its last deletion.
//   - A replayed transition (t.Replay, docs/design.md#replay) is applied to
//     the current state like a new one, although its message is older than
//     what the flight applied since: a new version and a normal event. Its
//     redelivery is recognised by Replayed, never by lastMsgId, which it
//     does not move back. The codeshare bookkeeping (LinkSince, DeletedBy)
//     records its message id like any change's, so the codeshare rules
//     judge a replayed change by its message's place in the inbox: a
//     replayed master deletion cascades to the children linked at or
//     before that message, as it would have at its place.
func Apply(s *State, t Transition, o Options) (Result, error) {
	if err := check(s, t, o); err != nil {
		return Result{}, err
	}
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
			return applyCascade(s, t), nil
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
	if t.MsgID <= 0 && t.Kind != KindPurge {
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

// applied reports whether the flight's own transition t was applied to s
// already (a redelivery; docs/design.md#i4-exactly-once-effect): a normal
// transition at or below lastMsgId, a replayed one (t.Replay) not above the
// last replayed transition applied (message.Applied).
func applied(s *State, t Transition) bool {
	return message.Applied(s.LastMsgID, s.Replayed, t.Replay, t.MsgID)
}

// remember records the flight's own transition t as applied: lastMsgId
// moves to t's message unless it is higher (a replayed older message never
// moves it back: the read model's never-backwards guard and every later
// redelivery rest on it), and a replayed transition becomes the last
// replay applied.
func remember(next *State, t Transition) {
	next.LastMsgID = max(next.LastMsgID, t.MsgID)
	if t.Replay != 0 {
		next.Replayed = &message.ReplayMark{Gen: t.Replay, MsgID: t.MsgID}
	}
}

// lastMsgPolicy says how a committed change moves lastMsgId.
type lastMsgPolicy int

const (
	ownMessage lastMsgPolicy = iota // the flight's own message: set to it
	cascadeMsg                      // the master's message: never go back
	linkMsg                         // a child's message: leave alone
)

func applyUpdate(s *State, t Transition, o Options) Result {
	placeholder := s.IsPlaceholder()
	if (s == nil || placeholder) && t.Kind == KindFLOP {
		return Result{Outcome: OutcomeNoMatch}
	}
	if s != nil && applied(s, t) {
		return replay(s, OutcomeReplay)
	}
	if s != nil && s.State == StateDeleted && t.Kind == KindFLOP {
		next := s.Clone()
		remember(next, t)
		return Result{State: next, Outcome: OutcomeDeletedFlight}
	}
	var next *State
	before := s
	switch {
	case s == nil:
		next = &State{FLID: t.FLID, OperationDay: t.OperationDay}
	case placeholder:
		// The master's creation: a new flight that starts with the links
		// its children reported before it existed, so its first version
		// already lists them in MAFL.
		next = &State{FLID: t.FLID, OperationDay: t.OperationDay, Links: maps.Clone(s.Links)}
		before = nil
	default:
		next = s.Clone()
	}
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
	return commit(before, next, t, ownMessage)
}

func applyDelete(s *State, t Transition) Result {
	if s == nil || s.IsPlaceholder() {
		return Result{Outcome: OutcomeNoMatch}
	}
	if applied(s, t) {
		return replay(s, OutcomeReplay)
	}
	next := s.Clone()
	if s.State == StateDeleted {
		remember(next, t)
		return Result{State: next, Outcome: OutcomeDeletedFlight}
	}
	next.State = StateDeleted
	return commit(s, next, t, ownMessage)
}

// applyCascade deletes a child because its master was deleted.
//
// The cascade is exempt from the lastMsgId rule: the master derives it while
// applying message m, and it reaches the child behind the child's own later
// messages (m+1, …), so msgId <= lastMsgId says nothing about whether it was
// applied. That is safe because the guard is on state, not on message order:
//   - it deletes only a child that is ACTIVE, still names this master in
//     MAID and whose link began at or before m (LinkSince). A child that
//     moved to another master, or was revived, relinked or restated by a
//     SCHEDULE or ADFT after m, is left alone: nothing after the deletion
//     is undone by it. A child left alone that still names this master
//     tells it when its link began, so that the master, whose record of it
//     is older than that, neither hides it nor cascades again;
//   - a second delivery finds the child DELETED by this very cascade
//     (Last.MsgID == m, source CASCADE) and is a replay, so the effect
//     happens once.
func applyCascade(s *State, t Transition) Result {
	if s == nil || s.IsPlaceholder() {
		return Result{Outcome: OutcomeNoMatch}
	}
	if s.State == StateDeleted {
		if s.Last != nil && s.Last.MsgID == t.MsgID && s.Last.Source == t.Source {
			return replay(s, OutcomeReplay)
		}
		return Result{State: s.Clone(), Outcome: OutcomeDeletedFlight}
	}
	if masterOf(s) != t.Fields["MAID"] || s.LinkSince > t.MsgID {
		r := Result{State: s.Clone(), Outcome: OutcomeNotLinked}
		if n := linkOf(s); n.master == t.Fields["MAID"] {
			r.Derived = []Transition{linkTransition(s, n.master, n, Transition{MsgID: s.LinkSince, At: s.UpdatedAt})}
		}
		return r
	}
	next := s.Clone()
	next.State = StateDeleted
	return commit(s, next, t, cascadeMsg)
}

// applyLink records a child's link report on its master. LINKs are
// idempotent by the child's version, not by message id (several LINKs can
// carry one message id, and they reach the master after its own later
// messages).
//
// A LINK may arrive before its master exists (the child came first, or
// listed first in one package, or the master's partition is behind): it is
// kept on a placeholder, which the master's creation turns into the flight
// (applyUpdate). A placeholder whose last live child left is dropped from
// the table, so that placeholders are bounded by the live children naming
// them; a report that a child left a master that is not a flight is
// nothing to remember.
//
// A live LINK may also arrive after its master's deletion (it was still on
// the loop topic when the master was deleted, so the deletion's cascade did
// not know the child): when the link began at or before that deletion, the
// cascade for this child is derived now, carrying the deletion's message,
// so that applyCascade's LinkSince guard spares a child that linked later.
func applyLink(s *State, t Transition) Result {
	l := *t.Link
	if s == nil {
		if !l.Live {
			return Result{Outcome: OutcomeNoMatch}
		}
		s = &State{FLID: t.FLID, State: StatePlaceholder}
	}
	if rec, ok := s.Links[l.Child]; ok && !newer(l, rec) {
		// A redelivery (or a replayed child re-reporting): the master's
		// current event is re-emitted in case it was lost with the crash
		// that caused the redelivery, and so is the cascade the record
		// implies.
		r := replay(s, OutcomeStaleLink, withoutDerived)
		if doomed(s, rec) {
			r.Derived = []Transition{cascadeTo(s, l.Child, t.At)}
		}
		return r
	}
	next := s.Clone()
	if next.Links == nil {
		next.Links = map[string]ChildLink{}
	}
	rec := ChildLink{FLNO: l.FLNO, Live: l.Live, Version: l.ChildVersion}
	if l.Live {
		rec.Since = l.Since
	}
	next.Links[l.Child] = rec
	if next.IsPlaceholder() {
		for _, c := range next.Links {
			if c.Live {
				return Result{State: next, Outcome: OutcomePlaceholder}
			}
		}
		return Result{Drop: true, Outcome: OutcomePlaceholder}
	}
	if t.Source == "" {
		t.Source = SourceLink
	}
	r := commit(s, next, t, linkMsg)
	if !r.Applied && s.State == StateDeleted {
		// Recorded, so that a revived master shows the child if it linked
		// after the deletion, but a deleted flight has no MAFL to change.
		r.Outcome = OutcomeDeletedFlight
	}
	if doomed(next, rec) {
		r.Derived = append(r.Derived, cascadeTo(next, l.Child, t.At))
	}
	return r
}

// newer reports whether report l is newer than the record rec: a higher
// child version, or the same live link with a later start (a child answering
// a cascade, applyCascade).
func newer(l Link, rec ChildLink) bool {
	return l.ChildVersion > rec.Version || l.ChildVersion == rec.Version && l.Live && rec.Live && l.Since > rec.Since
}

// replayOption tunes replay.
type replayOption int

const withoutDerived replayOption = 1

// replay answers a transition that was already applied: no change, and the
// event (and derived transitions) the current state implies, so that
// whatever a crash lost between the table write and the emits is emitted
// again. Consumers de-duplicate by (FLID, stateVersion), masters by child
// version, children by their cascade guard.
func replay(s *State, outcome string, opts ...replayOption) Result {
	if s.IsPlaceholder() {
		// Not a flight: no event, and it tells no other flight anything.
		return Result{State: s.Clone(), Replay: true, Outcome: outcome}
	}
	r := Result{State: s.Clone(), Replay: true, Event: eventOf(s), Outcome: outcome}
	if !slices.Contains(opts, withoutDerived) {
		r.Derived = impliedDerived(s)
	}
	return r
}

// commit finishes a change: derived fields, MAFL projection, change list,
// version, provenance, event and derived transitions. before is nil for a
// new flight.
func commit(before, next *State, t Transition, policy lastMsgPolicy) Result {
	deriveFlags(next)
	// The operation day is fixed once known; a flight created without one
	// (ADFT without SODT) takes the first one offered, as the router's
	// FLID → day index does.
	if next.OperationDay == "" && policy != linkMsg {
		next.OperationDay = t.OperationDay
	}
	// The flight's own link and deletion bookkeeping, kept even when
	// nothing visible changes. A SCHEDULE or ADFT states the flight and its
	// link anew: a cascade from a deletion before it must not undo it,
	// whichever reaches the flight first (applyCascade).
	b, n := linkOf(before), linkOf(next)
	restated := t.Kind == KindSchedule || t.Kind == KindADFT
	switch {
	case n.master == "":
		next.LinkSince = 0
	case n.live && (b.master != n.master || !b.live || restated):
		next.LinkSince = t.MsgID
	}
	if n.live {
		n.since = next.LinkSince
	}
	deleting := next.State == StateDeleted && (before == nil || before.State != StateDeleted)
	if deleting {
		next.DeletedBy = t.MsgID
	}
	projectMAFL(next)
	changed := diff(before, next)
	if len(changed) == 0 {
		if policy == ownMessage {
			// Remember the message although it changed nothing, so that its
			// redelivery is recognised and stays a no-op.
			remember(next, t)
		}
		return Result{State: next, Outcome: OutcomeNoChange}
	}

	var prev int64
	if before != nil {
		prev = before.StateVersion
	}
	next.StateVersion = prev + 1
	next.UpdatedAt = t.At
	switch policy {
	case ownMessage:
		remember(next, t)
	case cascadeMsg:
		next.LastMsgID = max(next.LastMsgID, t.MsgID)
	}

	// Child side of MAFL: tell the old and the new master.
	var derived []Transition
	unlinked := ""
	if before != nil && before.Last != nil && policy == linkMsg {
		// A LINK does not touch the flight's own link; keep what a replay
		// of the flight's own last change must repeat.
		unlinked = before.Last.Unlinked
	}
	if b.master == n.master {
		if n.master != "" && (b.flno != n.flno || b.live != n.live) {
			derived = append(derived, linkTransition(next, n.master, n, t))
		}
	} else {
		if b.master != "" && b.live {
			derived = append(derived, linkTransition(next, b.master, childLink{flno: b.flno}, t))
			unlinked = b.master
		}
		if n.master != "" {
			derived = append(derived, linkTransition(next, n.master, n, t))
		}
	}
	if deleting {
		derived = append(derived, cascades(next, t.At)...)
	}

	next.Last = &Provenance{MsgID: t.MsgID, Source: t.Source, Changed: changed, Unlinked: unlinked}
	return Result{
		State:   next,
		Applied: true,
		Changed: slices.Clone(changed),
		Event:   eventOf(next),
		Derived: derived,
		Outcome: OutcomeApplied,
	}
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

// childLink is a flight's own link to its master, as its master sees it.
type childLink struct {
	master string
	flno   string
	live   bool
	since  int64 // LinkSince, live links only
}

// masterOf returns the flight's master FLID; a MAID naming the flight
// itself is no link.
func masterOf(s *State) string {
	if m := s.Fields["MAID"]; m != s.FLID {
		return m
	}
	return ""
}

func linkOf(s *State) childLink {
	if s == nil {
		return childLink{}
	}
	l := childLink{master: masterOf(s), flno: s.Fields["FLNO"], live: s.State == StateActive}
	if l.live {
		l.since = s.LinkSince
	}
	return l
}

func linkTransition(child *State, master string, l childLink, t Transition) Transition {
	return Transition{
		MsgID:  t.MsgID,
		Source: SourceLink,
		Kind:   KindLink,
		FLID:   master,
		At:     t.At,
		Link:   &Link{Child: child.FLID, FLNO: l.flno, Live: l.live, ChildVersion: child.StateVersion, Since: l.since},
	}
}

// doomed reports whether the child record l of flight s is a live child
// that the flight's last deletion deletes: its link began at or before it.
func doomed(s *State, l ChildLink) bool {
	return l.Live && s.DeletedBy > 0 && l.Since <= s.DeletedBy
}

// cascades returns the cascade DELETE of every doomed child, ordered by
// FLID.
func cascades(s *State, at time.Time) []Transition {
	var out []Transition
	for _, child := range sortedFLIDs(s.Links) {
		if doomed(s, s.Links[child]) {
			out = append(out, cascadeTo(s, child, at))
		}
	}
	return out
}

// cascadeTo is the cascade DELETE of child from the last deletion of s.
func cascadeTo(s *State, child string, at time.Time) Transition {
	return Transition{
		MsgID:   s.DeletedBy,
		Source:  SourceCascade,
		Kind:    KindDelete,
		FLID:    child,
		At:      at,
		Fields:  map[string]string{"MAID": s.FLID},
		Cascade: true,
	}
}

// impliedDerived is what the flight's current state tells other flights: its
// link to its master, the master it left in its last own change, and the
// cascade to the children its last deletion deletes that still report live.
func impliedDerived(s *State) []Transition {
	var out []Transition
	n := linkOf(s)
	msgID := s.LastMsgID
	if s.Last != nil {
		msgID = s.Last.MsgID
		if u := s.Last.Unlinked; u != "" && u != n.master {
			out = append(out, linkTransition(s, u, childLink{flno: n.flno}, Transition{MsgID: msgID, At: s.UpdatedAt}))
		}
	}
	if n.master != "" {
		out = append(out, linkTransition(s, n.master, n, Transition{MsgID: msgID, At: s.UpdatedAt}))
	}
	return append(out, cascades(s, s.UpdatedAt)...)
}

// projectMAFL recomputes the MAFL of a flight from its link records: the
// live children of an ACTIVE master (MAID empty), ordered by FLID. A
// revived master does not list the children its deletion deletes (their
// cascade may still be on its way): only those linked since.
func projectMAFL(s *State) {
	s.MAFL = nil
	if s.State != StateActive || masterOf(s) != "" {
		return
	}
	for _, child := range sortedFLIDs(s.Links) {
		if l := s.Links[child]; l.Live && !doomed(s, l) {
			s.MAFL = append(s.MAFL, MAFLEntry{FLID: child, FLNO: l.FLNO})
		}
	}
}

// sortedFLIDs orders FLIDs numerically (they are digit strings), falling
// back to byte order for equal lengths.
func sortedFLIDs(m map[string]ChildLink) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return keys
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
// TOMBSTONE event consumers see before it disappears (and, if it is a live
// child, a LINK that takes it out of its master's MAFL or placeholder); a
// deleted one already had its tombstone. A flight whose day is not (yet)
// past, or that has no day, stays; so does a placeholder, which has neither
// a day nor a row the sweep could find.
//
// The LINK is derived only here: a PURGE delivered again after the entry is
// gone finds nothing. A crash between the table delete and the loop emit
// therefore leaves the purged child in its master's MAFL, or a placeholder
// in the table, for good: a window the daily sweep accepts.
func applyPurge(s *State, t Transition) Result {
	if s == nil || s.IsPlaceholder() {
		return Result{Outcome: OutcomeNoMatch}
	}
	if s.OperationDay == "" || s.OperationDay >= t.PurgeBefore {
		return Result{Outcome: OutcomeNotEligible}
	}
	last := s.Clone()
	res := Result{State: last, Purge: true, Outcome: OutcomePurged}
	if last.State != StateDeleted {
		last.State = StateDeleted
		last.StateVersion++
		last.UpdatedAt = t.At
		last.Last = &Provenance{MsgID: last.LastMsgID, Source: SourceHistory, Changed: []string{ChangedState}}
		res.Applied, res.Changed, res.Event = true, []string{ChangedState}, eventOf(last)
		if m := masterOf(s); m != "" {
			gone := childLink{flno: s.Fields["FLNO"]}
			res.Derived = []Transition{linkTransition(last, m, gone, Transition{MsgID: last.LastMsgID, At: t.At})}
		}
	}
	return res
}

// eventOf is the msg-topic event of the flight's current version.
func eventOf(s *State) *Event {
	e := &Event{EventType: EventUpsert, FLID: s.FLID, StateVersion: s.StateVersion, MsgID: s.LastMsgID, Flight: s.View()}
	if s.State == StateDeleted {
		e.EventType = EventTombstone
	}
	if s.Last != nil {
		e.MsgID, e.Source, e.Changed = s.Last.MsgID, s.Last.Source, slices.Clone(s.Last.Changed)
	}
	if e.Changed == nil {
		e.Changed = []string{}
	}
	return e
}

func setOrClear(fields map[string]string, tag, v string) {
	if blank(v) {
		delete(fields, tag)
	} else {
		fields[tag] = v
	}
}

func blank(v string) bool { return strings.TrimSpace(v) == "" }
