package flight

import (
	"strings"
	"time"

	"msgx/tables/message"
)

// Kind says how a Transition changes a flight.
type Kind string

// The transition kinds the router and the flights processor exchange.
const (
	// KindSchedule is one FLTR record of a SCHD DNLD/RESP package: merge,
	// creating the flight if unknown and reviving it if deleted.
	KindSchedule Kind = "SCHEDULE"
	// KindADFT is a SCHD-ADFT record: set-only create or update.
	KindADFT Kind = "ADFT"
	// KindFLOP is the patch of one FLOP STYP.
	KindFLOP Kind = "FLOP"
	// KindDelete is FDEL, FLOP-FDEL, an absent-from-schedule delete or a
	// cascade from a deleted master.
	KindDelete Kind = "DELETE"
	// KindLink is derived by the router (Expand): a child's MAID link
	// reported to its master.
	KindLink Kind = "LINK"
	// KindPurge is the history sweep's, sent through the router: a flight
	// whose operation day is before PurgeBefore leaves the table (archived
	// by the processor). It travels through the processor like any change,
	// so it is never applied while the flight is being updated.
	KindPurge Kind = "PURGE"
)

// Sources of the transitions that are not a message's own change.
const (
	// SourceHistory is the source of the history sweep's PURGE, of the
	// tombstone it makes for a flight that was never deleted and of the
	// LINK a purged child sends its master.
	SourceHistory = "HISTORY-SWEEP"
	// SourceCascade is the source of a DELETE derived from a master's
	// deletion.
	SourceCascade = "CASCADE"
	// SourceLink is the source of a LINK derived from a child's change and
	// of the master versions it causes.
	SourceLink = "DERIVED-LINK"
)

// Element is one collection entry: its attributes, its leaf children and its
// character data under TextKey, all by SIS name. Raw collections (SRVT, VIPF)
// carry the element's XML verbatim under RawKey.
type Element map[string]string

// RawKey is the Element key holding the verbatim XML of a raw collection
// entry.
const RawKey = "RAW"

// Transition is what one message does to one flight, as the router emits it
// on msgx.flight-transitions (key FLID, JSON): its first step in the fields
// below — the message's own change (SCHEDULE, ADFT, FLOP, DELETE), a LINK
// from a child or a cascade DELETE from a master — and the steps after it in
// Then. The history sweep's PURGE (and the LINK a purged child sends its
// master) carry no message: MsgID 0, never counted in a message's n.
//
// Attributed elements travel flattened in Fields under the names of their
// parts: <FDIV DDES="HKG" DDIR="TO">WX</FDIV> is {"FDIV":"WX","DDES":"HKG",
// "DDIR":"TO"}; an attribute missing from the element is missing from Fields.
// The element counts as present when any of its parts is.
type Transition struct {
	// MsgID is the inbox message the transition comes from (CMINMSGS_ID).
	MsgID int64 `json:"msgId"`
	// Source names the message kind for events and audit, e.g. "SCHD-DNLD",
	// "FLOP-ESTT", "FDEL", "DERIVED-LINK", "CASCADE", "HISTORY-SWEEP".
	Source string `json:"source"`
	// Kind selects the merge rule.
	Kind Kind `json:"kind"`
	// STYP is the FLOP subtype (Kind FLOP only).
	STYP string `json:"styp,omitempty"`
	// FLID is the flight the transition applies to.
	FLID string `json:"flid"`
	// OperationDay (YYYY-MM-DD) is derived by the router; Apply uses it only
	// when the flight has none yet.
	OperationDay string `json:"operationDay,omitempty"`
	// At is the time of the change (the inbox enqueue time); it becomes
	// updatedAt. Apply never reads a clock.
	At time.Time `json:"at"`
	// Fields holds the present scalars; "" means present but empty.
	Fields map[string]string `json:"fields,omitempty"`
	// Collections holds the present collections, elements in message order.
	Collections map[string][]Element `json:"collections,omitempty"`
	// Link is the reported child link (Kind LINK only).
	Link *Link `json:"link,omitempty"`
	// Cascade marks a DELETE caused by the master's deletion. A cascade
	// carries the deleting master in Fields["MAID"]: the router sends it
	// only to an ACTIVE flight that names that master, and Apply rejects
	// it on any other.
	Cascade bool `json:"cascade,omitempty"`
	// Expect is the flight's link after this step as the router's flight
	// index computed it (Expand, LinkAfter): Apply rejects a step whose
	// result disagrees, so that the index and the flights table never part
	// silently (docs/design.md#codeshare). nil: not checked (LINK steps,
	// which do not change the flight's own link, and transitions of
	// earlier versions).
	Expect *message.FlightLink `json:"expect,omitempty"`
	// Then are the further steps of the same message for the same flight,
	// in the order the message causes them (Expand): a master's LINKs, a
	// cascade. Each takes MsgID, FLID, At, OperationDay, Replay and MsgDTTM
	// from the transition when it leaves them zero. The transition is one
	// unit: applied whole or recognised as a redelivery whole, one applied
	// mark, one of its message's n.
	Then []Transition `json:"then,omitempty"`
	// PurgeBefore (YYYY-MM-DD, PURGE only): flights of operation days
	// strictly before it are history.
	PurgeBefore string `json:"purgeBefore,omitempty"`
	// MsgDTTM is the message's META DTTM: request tracking matches a SCHD
	// RESP to its RQFD by it. Apply ignores it.
	MsgDTTM time.Time `json:"msgDttm,omitzero"`
	// Replay is the replay generation of a message msgx replay put back
	// (its replay_audit id; docs/design.md#replay), 0 for every other
	// message. A replayed transition is applied to the current state even
	// though its MsgID is not above the flight's lastMsgId; Apply tells its
	// redelivery by State.Replayed. A replayed message's LINKs and
	// cascades carry it too: they are its transitions like its own ones.
	Replay int64 `json:"replay,omitempty"`
	// FirstSeen is set by the router on a transition whose own step is a
	// SCHEDULE or ADFT whose FLID no older message named (no flight_index
	// entry before this message):
	// PostgreSQL cannot hold the flight from an older message, so the
	// flights processor skips its divergence lookup (docs/design.md#divergence)
	// for it. Apply ignores it; a transition without it is looked up.
	FirstSeen bool `json:"firstSeen,omitempty"`
}

// Link reports one child's link to its master (Kind LINK): the router
// derives it from the child's change (Expand) and the master records it
// (docs/design.md#codeshare).
type Link struct {
	// Child is the child's FLID.
	Child string `json:"flid"`
	// FLNO is the child's flight number.
	FLNO string `json:"flno"`
	// Live is true while the child is ACTIVE and points at this master;
	// false says it left (deleted, moved to another master, unlinked or
	// purged).
	Live bool `json:"live"`
}

// SupportedFLOP reports whether Apply handles the FLOP subtype styp: every
// scalar and collection tag of the vocabulary, the grouped STYPs of
// FLOPGroups (HNAG, TAOP, VIPP, EXSS, FDIV, FRET) and FDEL. The router skips
// other STYPs as unsupported:FLOP-<STYP> (docs/design.md#flop).
func SupportedFLOP(styp string) bool {
	styp = strings.ToUpper(strings.TrimSpace(styp))
	if styp == STYPDelete || IsScalar(styp) {
		return true
	}
	if _, ok := FLOPGroups[styp]; ok {
		return true
	}
	_, ok := Collection(styp)
	return ok
}
