package flight

// Scalars lists the scalar SIS tags of a flight (docs/design.md#flight-state).
// A scalar that is present in a message overwrites the stored value; present
// but empty clears it. COBT CTOT EOBT TOBT IEST are the A-CDM times, RUNW
// the runway, POTM and POID the parts of the PORT element (Grouped).
var Scalars = []string{
	"ALCD", "ALSC", "FLNO", "MVIN", "SODT", "FLTY", "FLIN", "ACFT", "RENO",
	"TAOP", "TAFL", "TAID", "TRML", "CSOP", "CSFT", "MAID",
	"ESTT", "ACTT", "BOTM", "LACL", "FINT", "APPT", "EGSR", "EGST", "PADT", "NAAT", "NEAT", "PEDT", "FTSS",
	"COBT", "CTOT", "EOBT", "TOBT", "IEST",
	"STND", "PHAG", "FHAG", "MHAG", "CNCL", "REMC", "MAXP", "VIPP", "VIPR", "LBNO", "LBWT", "PAXC", "EXSC", "EXSR",
	"RUNW", "POTM", "POID",
	"FFID",
}

// TimeScalars are the scalars whose value is a SIS time, ddMMMyyHHmm
// (e.g. 23JAN210535), or empty: the router refuses any other value as a
// CODEC_ERROR before anything is stored or published
// (docs/design.md#time-values). The list is what the AODB's samples and the
// original field groups show to be times; FTSS, grouped with the times
// there, carries a source name ("RCFLOP") in the samples.
var TimeScalars = []string{
	"SODT", "ESTT", "ACTT", "BOTM", "LACL", "FINT", "APPT", "EGSR", "EGST", "PADT", "NAAT", "NEAT", "PEDT",
	"COBT", "CTOT", "EOBT", "TOBT", "IEST", "CNCL", "POTM",
}

// CollectionSpec describes one variable-length collection of a flight.
type CollectionSpec struct {
	// Name is the SIS element name, e.g. "GTDT".
	Name string
	// SeqAttr is the attribute carrying the upstream sequence number
	// (e.g. "GTNO"); empty for collections without one (DELY, SRVT, VIPF).
	// A sequence number of "0" means "no allocation now".
	SeqAttr string
	// Max is the number of entries kept locally; 0 means unbounded.
	Max int
	// Raw marks collections stored verbatim and never merged (SRVT, VIPF).
	Raw bool
	// Times are the element keys whose value is a SIS time, ddMMMyyHHmm, or
	// empty (checked like TimeScalars). Raw collections are not read.
	Times []string
}

// Collections lists the flight collections in their canonical order.
// ROUT and ERUT are separate collections, each capped at 4 entries
// (docs/design.md#flight-state).
//
// PSHT (PSTM PSID PUST, keyed by PSHN) and TIPT (TRTM TRST, no sequence
// attribute: message order) come from the AODB's samples.
var Collections = []CollectionSpec{
	{Name: "GTDT", SeqAttr: "GTNO", Max: 99, Times: []string{"PGOT", "PGCT", "GOTM", "GCTM"}},
	{Name: "CKDT", SeqAttr: "CKNO", Max: 99, Times: []string{"PCOT", "PCCT", "COTM", "CCTM"}},
	{Name: "CLDT", SeqAttr: "CLNO", Max: 99, Times: []string{"PCOT", "PCCT"}},
	{Name: "CHDT", SeqAttr: "CHNO", Max: 99, Times: []string{"PCBT", "PCET", "CBTM", "CETM"}},
	{Name: "PSDT", SeqAttr: "PSNO", Max: 9, Times: []string{"STST", "STET"}},
	{Name: "CHOT", SeqAttr: "CSNO", Max: 99, Times: []string{"CHTM"}},
	{Name: "ABTM", SeqAttr: "ASNO", Max: 99, Times: []string{"AOTM"}},
	{Name: "DELY", Times: []string{"STRT"}},
	{Name: "ROUT", SeqAttr: "RTNO", Max: 4, Times: []string{"SCAT", "SCDT"}},
	{Name: "ERUT", SeqAttr: "RTNO", Max: 4, Times: []string{"SCAT", "SCDT"}},
	{Name: "PSHT", SeqAttr: "PSHN", Max: 99, Times: []string{"PSTM"}},
	{Name: "TIPT", Max: 99, Times: []string{"TRTM"}},
	{Name: "SRVT", Raw: true},
	{Name: "VIPF", Raw: true},
}

// TextKey is the key under which an element's character data is kept when the
// element carries attributes and text (DELY, FDIV, FRET).
const TextKey = "TEXT"

// Attributed lists the single-valued elements that carry attributes plus text
// (docs/design.md#flop): FDIV (DDES, DDIR), FRET (REID) and FLAB (ARES, from
// the AODB's samples). They are stored as scalars named after their SIS
// parts: the element's text under the element name (FDIV, FRET, FLAB) and
// each attribute under its own name (DDES, DDIR, REID, ARES).
var Attributed = map[string][]string{
	"FDIV": {"DDES", "DDIR"},
	"FRET": {"REID"},
	"FLAB": {"ARES"},
}

// Grouped lists the single-valued elements whose leaf children are scalars
// of their own: <PORT><POTM>…</POTM><POID>…</POID></PORT> is stored as POTM
// and POID. The element replaces the group as a whole: the codec reports a
// part the element lacks as present and empty, so <PORT></PORT> clears both.
var Grouped = map[string][]string{
	"PORT": {"POTM", "POID"},
}

// IsScalar reports whether tag is a scalar flight tag.
func IsScalar(tag string) bool {
	_, ok := scalarSet[tag]
	return ok
}

// Collection returns the spec of the named collection.
func Collection(name string) (CollectionSpec, bool) {
	for _, c := range Collections {
		if c.Name == name {
			return c, true
		}
	}
	return CollectionSpec{}, false
}

var scalarSet = func() map[string]struct{} {
	m := make(map[string]struct{}, len(Scalars))
	for _, s := range Scalars {
		m[s] = struct{}{}
	}
	return m
}()

// AttributedTags lists the scalar keys of the attributed elements in
// canonical order: each element's text first, then its attributes.
var AttributedTags = []string{"FDIV", "DDES", "DDIR", "FRET", "REID", "FLAB", "ARES"}

// DerivedScalars are status flags that Apply computes and no message sets.
// BDST ("boarding status") is "Y" while BOTM (boarding time) is set and
// absent otherwise; LCST ("last-call status") follows LACL the same way
// (docs/design.md#flop: a non-empty BOTM/LACL sets its status, an empty one
// clears the time and resets the status). Keeping them in fields lets every
// reader (PG columns, msg/schd consumers) see the status without knowing
// the rule.
var DerivedScalars = []string{"BDST", "LCST"}

// FieldTags lists every key a flight's fields may hold, in canonical order:
// Scalars, then AttributedTags, then DerivedScalars.
var FieldTags = func() []string {
	tags := make([]string, 0, len(Scalars)+len(AttributedTags)+len(DerivedScalars))
	tags = append(tags, Scalars...)
	tags = append(tags, AttributedTags...)
	return append(tags, DerivedScalars...)
}()

// Pseudo tags that appear in a change list next to field and collection
// tags.
const (
	// ChangedMAFL marks a change of a master's derived MAFL list.
	ChangedMAFL = "MAFL"
	// ChangedState marks a lifecycle change: creation, deletion, revival.
	ChangedState = "STATE"
	// ChangedOperationDay marks the one-time fill-in of an operation day
	// for a flight that was created without one (ADFT without SODT).
	ChangedOperationDay = "OPERATION_DAY"
)

// ChangeOrder is the canonical order of a change list: FieldTags, then the
// collections in vocabulary order, then MAFL, STATE and OPERATION_DAY.
var ChangeOrder = func() []string {
	order := append([]string(nil), FieldTags...)
	for _, c := range Collections {
		order = append(order, c.Name)
	}
	return append(order, ChangedMAFL, ChangedState, ChangedOperationDay)
}()

// FLOPGroups lists the FLOP STYPs whose payload is a group of tags rather than
// the single tag named by the STYP (docs/design.md#flop: FDIV, FRET, HNAG,
// TAOP, VIPP and the EXSS, FLAB and PORT samples). STYPs equal to a scalar or
// collection tag carry just that tag.
var FLOPGroups = map[string][]string{
	"HNAG": {"FHAG", "PHAG", "MHAG"},
	"TAOP": {"TAOP", "TAFL", "TAID"},
	"VIPP": {"VIPP", "VIPR"},
	"EXSS": {"EXSC", "EXSR"},
	"FDIV": {"FDIV", "DDES", "DDIR"},
	"FRET": {"FRET", "REID"},
	"FLAB": {"FLAB", "ARES"},
	"PORT": {"POTM", "POID"},
}

// OptionalPayload lists the FLOP STYPs that may arrive without the element
// they name: the AODB's own FLOP-TOBT sample carries nothing but FLID and
// FFID. Such a message is applied and changes nothing (it does not clear
// the time: an absent tag never does); any other FLOP without its payload
// is DEAD MALFORMED.
var OptionalPayload = map[string]bool{"COBT": true, "CTOT": true, "EOBT": true, "TOBT": true, "IEST": true}

// STYPDelete is the FLOP STYP that deletes a flight (docs/design.md#fdel).
const STYPDelete = "FDEL"
