package message

import (
	"strings"
	"time"
	"unicode/utf8"
)

// States of a message (proc_state.state), docs/design.md#outcomes.
const (
	// StatePending is a message seen but not decided yet.
	StatePending = "PENDING"
	// StateFailed is a message whose own failure is retried in place.
	StateFailed = "FAILED"
	// StateRouted is a message whose transitions were emitted; the applying
	// processors complete it.
	StateRouted = "ROUTED"
	// StateSucceeded is a message whose effect is durable.
	StateSucceeded = "SUCCEEDED"
	// StateSkipped is a message that changes nothing, with a reason.
	StateSkipped = "SKIPPED"
	// StateDead is a message that cannot be applied, with its error class.
	StateDead = "DEAD"
	// StateArchived is the shadow of a terminal message moved to
	// proc_state_hst; it keeps its identity bound.
	StateArchived = "ARCHIVED"
)

// Error classes (proc_state.error_class), docs/design.md#outcomes.
const (
	// ClassMalformed: not XML, no META, raw missing, required payload
	// missing. DEAD at once, not replayable.
	ClassMalformed = "MALFORMED"
	// ClassProtocol: the whole package violates the protocol. DEAD at
	// once, nothing written, not replayable.
	ClassProtocol = "PROTOCOL"
	// ClassCodecError: a well-formed message the decoder cannot handle.
	// DEAD at once (the same bytes through the same code cannot succeed),
	// replayable once the codec is fixed.
	ClassCodecError = "CODEC_ERROR"
	// ClassInfra: a failure of this message while processing; the only
	// class that is retried.
	ClassInfra = "INFRA"
	// ClassExhausted: the attempts are used up (the class it replaces is
	// kept in the reason).
	ClassExhausted = "EXHAUSTED"
)

// ReplayableClass reports whether FAILED and DEAD messages of class can be
// replayed (docs/design.md#replay): CODEC_ERROR, INFRA and EXHAUSTED; never
// MALFORMED or PROTOCOL, where the message itself is wrong.
func ReplayableClass(class string) bool {
	switch class {
	case ClassCodecError, ClassInfra, ClassExhausted:
		return true
	}
	return false
}

// Reasons and reason prefixes of SKIPPED and DEAD messages.
const (
	// ReasonDuplicateOf prefixes the owner of a taken identity:
	// "duplicate-of:<msgId>".
	ReasonDuplicateOf = "duplicate-of:"
	// ReasonIgnored prefixes the ignore rule that matched: "ignored:LDM-*".
	ReasonIgnored = "ignored:"
	// ReasonUnsupported prefixes an unhandled kind: "unsupported:FLOP-XXXX".
	ReasonUnsupported = "unsupported:"
	// ReasonNoMatch is a FLOP/FDEL for an unknown flight or a RESP that
	// answers no open request.
	ReasonNoMatch = "no-match"
	// ReasonExhausted prefixes the class a DEAD(EXHAUSTED) message last
	// failed with: "exhausted:INFRA".
	ReasonExhausted = "exhausted:"
	// ReasonRawTooLarge is an inbox row larger than a Kafka record.
	ReasonRawTooLarge = "raw-too-large"
	// ReasonRawMissing is an inbox row without message text.
	ReasonRawMissing = "raw-missing"
)

// Reasons a terminal message's processed mark was abandoned
// (proc_state.backfill_abandoned_reason, docs/design.md#backfill-results).
const (
	// AbandonMissingRow: the inbox row does not exist (it was deleted after
	// it was enqueued). Deterministic, so it is abandoned at once, R or not.
	AbandonMissingRow = "MISSING_ROW"
	// AbandonTransientDeadline: writing the mark kept failing (MySQL down,
	// timeouts, …) until the row was older than R (MSGX_OVERDUE_BACKFILL).
	AbandonTransientDeadline = "TRANSIENT_DEADLINE"
)

// IsTerminal reports whether a message in this state no longer blocks the
// queue (SUCCEEDED, SKIPPED, DEAD; ARCHIVED rows were terminal).
func IsTerminal(state string) bool {
	switch state {
	case StateSucceeded, StateSkipped, StateDead, StateArchived:
		return true
	}
	return false
}

// ReasonClass is the class a SKIPPED or DEAD reason is counted under:
// duplicate, ignored, unsupported, no-match, exhausted, …: the reason up to
// its first colon ("duplicate-of:12" → "duplicate").
func ReasonClass(reason string) string {
	class, _, _ := strings.Cut(reason, ":")
	return strings.TrimSuffix(class, "-of")
}

// FlightDay is an entry of the router's flight index: FLID → operation day
// (docs/design.md#operation-day) and the flight's own link to its master
// (docs/design.md#codeshare).
type FlightDay struct {
	FLID string
	// Day is nil while the flight's operation day is not known yet (an
	// ADFT without SODT).
	Day *time.Time
	// FirstMsgID is the message that created the entry.
	FirstMsgID int64
	// Link is the flight's link as of the messages the router decided so
	// far.
	Link FlightLink
}

// FlightLink is what the router's flight index holds of one flight so that
// it can tell what a message implies for the flights it links — MAFL
// updates of masters, cascades to children (flight.Expand): the flight's
// lifecycle state and its raw MAID and FLNO, exactly as the flights table
// holds them after the same messages. The zero value is "not a flight":
// never created, or taken out by the history sweep.
type FlightLink struct {
	// State is "ACTIVE" or "DELETED" (flight.StateActive, StateDeleted); ""
	// for no flight.
	State string `json:"state,omitempty"`
	// MAID is the flight's MAID field as stored ("" when absent).
	MAID string `json:"maid,omitempty"`
	// FLNO is the flight's FLNO field as stored ("" when absent).
	FLNO string `json:"flno,omitempty"`
}

// IsFlight reports whether l is the link of a flight (ACTIVE or DELETED).
func (l FlightLink) IsFlight() bool { return l.State != "" }

// RefKey is an entry of the router's reference key-tag index: the tag the
// records of a category keyed by their first child (refdata.FirstChildTypes)
// are keyed by, as of the last message routed to it (refdata.KeyTagOf). The
// router checks an incremental message against it as refdata.Apply will
// (docs/design.md#refdata).
type RefKey struct {
	RType  string
	KeyTag string
}

// Query is what a routing decision must look up in the store
// (route.Plan.Query).
type Query struct {
	// IdentityKey is the message's identity ("": none).
	IdentityKey string
	// FLIDs are the flights whose index entries are read.
	FLIDs []string
	// Days are the operation days whose earlier flights are listed
	// (absent-flight deletion).
	Days []time.Time
	// Cascade are the FLIDs the message deletes: the index entries of their
	// live descendants (children, their children, …) are read too, as are
	// those of the flights of Days.
	Cascade []string
	// RefType is the reference category whose indexed key tag is read
	// ("": none).
	RefType string
}

// Lookups are what a routing decision needs to know from the store
// (route.Decide).
type Lookups struct {
	// Owner is the message holding the identity key, 0 when free.
	Owner int64
	// Days are the index entries of the message's FLIDs and of every other
	// flight its transitions may reach: the flights of Query.Days and the
	// live descendants of those and of Query.Cascade.
	Days map[string]FlightDay
	// Earlier lists, per operation day (YYYY-MM-DD), the flights the index
	// knew before this message: the "absent from the package" candidates.
	// Filled only when asked for.
	Earlier map[string][]string
	// RequestOpen says an open request accepts this message as its answer
	// (the RESP guard); filled from request tracking.
	RequestOpen bool
	// KeyTag is the indexed key tag of Query.RefType ("": none indexed).
	KeyTag string
}

// BatchLookups is what the store knew before a batch, for its queries. The
// router decides each message of the batch against it plus the decisions
// of the messages before it in the batch.
type BatchLookups struct {
	// Owners maps each held identity key to the message holding it.
	Owners map[string]int64
	// Index holds the flight_index entries of the queried FLIDs, of the
	// flights of the queried operation days and of the live descendants of
	// those and of the Cascade FLIDs.
	Index map[string]FlightDay
	// KeyTags maps each queried reference type to its indexed key tag.
	KeyTags map[string]string
}

// KeyIndex is a refdata_key_index entry as a batch leaves it: the key tag
// of the last message of the batch routed to the reference type.
type KeyIndex struct {
	RefKey
	MsgID int64
}

// Clip returns s cut to at most n bytes at a character boundary: reasons
// and error texts are stored clipped (a reason in at most 200 bytes, an
// error in at most 1000).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
