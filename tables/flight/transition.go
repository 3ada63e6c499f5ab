package flight

import (
	"strings"
	"time"
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
	// KindLink is derived by Apply: a child's MAID link reported to its
	// master.
	KindLink Kind = "LINK"
	// KindPurge is sent by the history sweep: a flight whose operation day
	// is before PurgeBefore leaves the table (archived by the processor).
	// It travels through the processor like any change, so it is never
	// applied while the flight is being updated.
	KindPurge Kind = "PURGE"
)

// Sources that Apply itself puts on derived transitions.
const (
	// SourceHistory is the source of the tombstone the history sweep emits
	// for a flight that was never deleted.
	SourceHistory = "HISTORY-SWEEP"
	// SourceCascade is the source of a DELETE derived from a master's
	// deletion.
	SourceCascade = "CASCADE"
	// SourceLink is the source of a LINK derived from a child's change and
	// of the master events it causes.
	SourceLink = "DERIVED-LINK"
)

// Element is one collection entry: its attributes, its leaf children and its
// character data under TextKey, all by SIS name. Raw collections (SRVT, VIPF)
// carry the element's XML verbatim under RawKey.
type Element map[string]string

// RawKey is the Element key holding the verbatim XML of a raw collection
// entry.
const RawKey = "RAW"

// Transition is one change to one flight, as the router emits it on
// msgx.flight-transitions (key FLID, JSON) and as Apply derives it (LINK,
// cascade DELETE).
//
// Attributed elements travel flattened in Fields under the names of their
// parts: <FDIV DDES="HKG" DDIR="TO">WX</FDIV> is {"FDIV":"WX","DDES":"HKG",
// "DDIR":"TO"}; an attribute missing from the element is missing from Fields.
// The element counts as present when any of its parts is.
type Transition struct {
	// MsgID is the inbox message the transition comes from (CMINMSGS_ID).
	MsgID int64 `json:"msgId"`
	// Source names the message kind for events and audit, e.g. "SCHD-DNLD",
	// "FLOP-ESTT", "FDEL", "DERIVED-LINK", "CASCADE".
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
	// carries the deleting master in Fields["MAID"]: it deletes the flight
	// only while the flight still belongs to that master.
	Cascade bool `json:"cascade,omitempty"`
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
	// redelivery by State.Replayed. Derived transitions (LINK, cascade)
	// never carry it: their idempotency does not rest on message ids.
	Replay int64 `json:"replay,omitempty"`
	// FirstSeen is set by the router on a SCHEDULE or ADFT whose FLID no
	// older message named (no flight_index entry before this message):
	// PostgreSQL cannot hold the flight from an older message, so the
	// flights processor skips its divergence lookup (docs/design.md#divergence)
	// for it. Apply ignores it; a transition without it is looked up.
	FirstSeen bool `json:"firstSeen,omitempty"`
}

// Link reports the state of one child's MAID link to its master.
type Link struct {
	// Child is the child's FLID.
	Child string `json:"flid"`
	// FLNO is the child's flight number.
	FLNO string `json:"flno"`
	// Live is true while the child is ACTIVE and points at this master.
	Live bool `json:"live"`
	// ChildVersion is the child's StateVersion after the change; the master
	// ignores reports that are not newer than the last one it recorded (a
	// higher version, or the same one with a later Since).
	ChildVersion int64 `json:"childVersion"`
	// Since is the message at which the child's live link began (its
	// LinkSince; live reports only): a master deleted at or after it
	// cascades to the child whenever the report arrives.
	Since int64 `json:"since,omitempty"`
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
