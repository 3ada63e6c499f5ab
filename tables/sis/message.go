package sis

import "time"

// Kind is the decoded message family, the router's first dispatch key.
type Kind string

const (
	// KindSchedule is TYPE=SCHD with any STYP (the router handles DNLD, RESP
	// and ADFT): Message.Schedule.
	KindSchedule Kind = "SCHEDULE"
	// KindFlightOp is TYPE=FLOP with any STYP but FDEL: Message.Flight.
	KindFlightOp Kind = "FLIGHT_OP"
	// KindFlightDelete is TYPE=FLOP STYP=FDEL, or TYPE=FDEL: Message.Flight.
	// The kind follows TYPE/STYP; FlightOp.Delete only reports whether the
	// <FDEL/> marker element was present.
	KindFlightDelete Kind = "FLIGHT_DELETE"
	// KindRefData is a reference data message (MSG/RECS plus repeated
	// <TYPE> records): Message.RefData.
	KindRefData Kind = "REFDATA"
	// KindRefDataRequest is TYPE=RQRD: Message.RefDataRequest.
	KindRefDataRequest Kind = "REFDATA_REQUEST"
	// KindFlightRequest is TYPE=RQFD: Message.FlightRequest.
	KindFlightRequest Kind = "FLIGHT_REQUEST"
	// KindError is TYPE=EROR, an error answer of the AODB: Message.ErrorAnswer
	// and Message.Body.
	KindError Kind = "EROR"
	// KindLDM is TYPE=LDM (ignored downstream): Message.Body only.
	KindLDM Kind = "LDM"
	// KindSeason is TYPE=SCHS, a seasonal schedule, with any STYP:
	// Message.Season.
	KindSeason Kind = "SEASON"
	// KindUnknown is any other TYPE without a recognisable shape:
	// Message.Body only. It is not an error; the router skips it as
	// unsupported.
	KindUnknown Kind = "UNKNOWN"
)

// Meta is the META header of a message.
type Meta struct {
	// SNDR is the sender, trimmed.
	SNDR string
	// RCVR is the optional receiver, trimmed; "" when absent.
	RCVR string
	// SEQN is the sender's sequence number as a trimmed string (part of the
	// business identity, so never reformatted).
	SEQN string
	// SEQNNum is SEQN as an integer when SEQNIsNum is true.
	SEQNNum int64
	// SEQNIsNum reports whether SEQN is a decimal integer.
	SEQNIsNum bool
	// DTTMRaw is META/DTTM as written, trimmed; "" when absent or empty.
	DTTMRaw string
	// DTTM is DTTMRaw parsed in the airport time zone; zero when DTTMRaw is "".
	DTTM time.Time
	// DDTMRaw is the optional META/DDTM as written, trimmed (not interpreted).
	DDTMRaw string
	// TYPE is the message type, trimmed and upper-cased.
	TYPE string
	// STYP is the message subtype, trimmed and upper-cased.
	STYP string
}

// Message is one decoded SIS message: META plus the payload of its Kind
// (the other payload pointers are nil).
type Message struct {
	// Meta is the decoded header.
	Meta Meta
	// Kind selects the payload field that is set.
	Kind Kind
	// Schedule is set for KindSchedule.
	Schedule *Schedule
	// Flight is set for KindFlightOp and KindFlightDelete.
	Flight *FlightOp
	// RefData is set for KindRefData.
	RefData *RefData
	// RefDataRequest is set for KindRefDataRequest.
	RefDataRequest *RefDataRequest
	// FlightRequest is set for KindFlightRequest.
	FlightRequest *FlightRequest
	// ErrorAnswer is set for KindError.
	ErrorAnswer *ErrorAnswer
	// Season is set for KindSeason.
	Season *Season
	// Body holds the children of MSG other than META, for KindError,
	// KindLDM and KindUnknown.
	Body []*Node
}

// Schedule is the payload of TYPE=SCHD: <SCHD><RECS>n</RECS><FLTR>…</FLTR>*</SCHD>.
// The declared count is not checked against the records here: a mismatch is
// a PROTOCOL error that the router reports for the whole package.
type Schedule struct {
	// Declared is SCHD/RECS when DeclaredPresent.
	Declared int
	// DeclaredPresent reports whether SCHD/RECS is present.
	DeclaredPresent bool
	// Flights are the FLTR records in document order.
	Flights []FlightRecord
	// Other names the children of SCHD other than RECS and FLTR, in document
	// order without repeats.
	Other []string
}

// FlightRecord is one flight as carried by a FLTR element or a FLOP body.
// Everywhere, "absent", "present but empty" and "present with a value" stay
// distinct: an absent tag has no map key, an empty one maps to "".
type FlightRecord struct {
	// FLID is the flight id, trimmed; "" when absent or empty.
	FLID string
	// Fields maps every present scalar tag of flight.Scalars (including FFID)
	// to its trimmed text. The attributed elements of flight.Attributed are
	// stored here too: the element's text under its name (FDIV, FRET, FLAB)
	// and each present attribute under its own name (DDES, DDIR, REID,
	// ARES); so are the parts of the grouped elements of flight.Grouped, all
	// of them once the element is present (<PORT></PORT> is POTM="" and
	// POID=""). When a scalar is repeated, the last occurrence wins.
	Fields map[string]string
	// Collections maps every present collection of flight.Collections to its
	// elements in document order. An element is flattened into its trimmed
	// attributes, its leaf child elements (trimmed text) and its non-blank
	// text under flight.TextKey; an empty element (<DELY></DELY>) is an empty
	// map. Elements of Raw collections (SRVT, VIPF) are {"RAW": "<SRVT>…</SRVT>"}.
	Collections map[string][]map[string]string
	// Other names the present child tags that are neither scalars,
	// attributed or grouped elements nor collections (e.g. BDPB), in
	// document order without repeats.
	Other []string
}

// FlightOp is the payload of TYPE=FLOP (and TYPE=FDEL).
type FlightOp struct {
	FlightRecord
	// Delete reports whether the body carries the FDEL marker element.
	Delete bool
}

// RawKey is the key of the re-serialized element in Raw collection entries.
const RawKey = "RAW"

// RefRecord is one reference data record built from the record element:
// a leaf child without attributes is a string ("" when empty); a child with
// attributes and/or child elements is a map[string]any with attributes under
// "@NAME", non-blank text under "#text" and its children by the same rules;
// a tag repeated in the same parent is a []any of its values in document
// order. Attributes of the record element itself are stored under "@NAME",
// its non-blank text under "#text".
type RefRecord map[string]any

// RefData is the payload of a reference data message: MSG/RECS plus one
// <TYPE> element per record directly under MSG.
type RefData struct {
	// Type is the reference type, META/TYPE (e.g. AIRL).
	Type string
	// Declared is MSG/RECS when DeclaredPresent.
	Declared int
	// DeclaredPresent reports whether MSG/RECS is present.
	DeclaredPresent bool
	// Records are the records in document order.
	Records []RefRecord
	// FirstChild is the name of the first child element of the first record
	// (e.g. ABCD for ABDG): the key tag of reference types that have no fixed
	// key (docs/design.md#refdata). Empty when there is no record.
	FirstChild string
}

// RefDataRequest is the payload of TYPE=RQRD (our reference data request).
type RefDataRequest struct {
	// Types are the requested reference types (RTYP elements), trimmed and
	// upper-cased, in document order.
	Types []string
}

// FlightRequest is the payload of TYPE=RQFD (our flight data request).
type FlightRequest struct {
	// FromRaw and ToRaw are STDB and STDE as written, trimmed.
	FromRaw, ToRaw string
	// From and To are STDB and STDE parsed in the airport time zone; zero
	// when the element is empty.
	From, To time.Time
}

// ErrorAnswer is what the codec extracts from TYPE=EROR, whose format is not
// documented: the obvious fields, with the full body in Message.Body.
type ErrorAnswer struct {
	// RefSEQN is the text of the first SEQN element outside META (the
	// sequence number of the message the error refers to), "" if none.
	RefSEQN string
	// RefTYPE and RefSTYP are the first TYPE / STYP elements outside META,
	// "" if none.
	RefTYPE, RefSTYP string
	// Code is the error code: the first non-empty of the leaves ECOD, CODE,
	// ERCD, ERRC, ERNO; "" if none.
	Code string
	// Text is the error text: the first non-empty of ETXT, TEXT, DESC, ERTX,
	// EMSG, ERMS, REMK, or else every other non-empty leaf as "TAG=value"
	// joined with "; " (SEQN, TYPE, STYP and the code left out); at most 500
	// characters.
	Text string
	// Fields maps the name of every leaf element outside META to its trimmed
	// text (first occurrence wins).
	Fields map[string]string
}
