package flight

// Scalars lists the scalar SIS tags of a flight (docs/design.md#flight-state).
// A scalar that is present in a message overwrites the stored value; present
// but empty clears it.
var Scalars = []string{
	"ALCD", "ALSC", "FLNO", "MVIN", "SODT", "FLTY", "FLIN", "ACFT", "RENO",
	"TAOP", "TAFL", "TAID", "TRML", "CSOP", "CSFT", "MAID",
	"ESTT", "ACTT", "BOTM", "LACL", "FINT", "APPT", "EGSR", "EGST", "PADT", "NAAT", "NEAT", "PEDT", "FTSS",
	"STND", "PHAG", "FHAG", "MHAG", "CNCL", "REMC", "MAXP", "VIPP", "VIPR", "LBNO", "LBWT", "PAXC", "EXSC", "EXSR",
	"FFID",
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
}

// Collections lists the flight collections in their canonical order.
// ROUT and ERUT are separate collections, each capped at 4 entries
// (docs/design.md#flight-state).
var Collections = []CollectionSpec{
	{Name: "GTDT", SeqAttr: "GTNO", Max: 99},
	{Name: "CKDT", SeqAttr: "CKNO", Max: 99},
	{Name: "CLDT", SeqAttr: "CLNO", Max: 99},
	{Name: "CHDT", SeqAttr: "CHNO", Max: 99},
	{Name: "PSDT", SeqAttr: "PSNO", Max: 9},
	{Name: "CHOT", SeqAttr: "CSNO", Max: 99},
	{Name: "ABTM", SeqAttr: "ASNO", Max: 99},
	{Name: "DELY"},
	{Name: "ROUT", SeqAttr: "RTNO", Max: 4},
	{Name: "ERUT", SeqAttr: "RTNO", Max: 4},
	{Name: "SRVT", Raw: true},
	{Name: "VIPF", Raw: true},
}

// TextKey is the key under which an element's character data is kept when the
// element carries attributes and text (DELY, FDIV, FRET).
const TextKey = "TEXT"

// Attributed lists the single-valued elements that carry attributes plus text
// (docs/design.md#flop): FDIV (DDES, DDIR) and FRET (REID). They are stored as
// scalars named after their SIS parts: the element's text under the element
// name (FDIV, FRET) and each attribute under its own name (DDES, DDIR, REID).
var Attributed = map[string][]string{
	"FDIV": {"DDES", "DDIR"},
	"FRET": {"REID"},
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
var AttributedTags = []string{"FDIV", "DDES", "DDIR", "FRET", "REID"}

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
// TAOP, VIPP and the EXSS sample). STYPs equal to a scalar or collection tag
// carry just that tag.
var FLOPGroups = map[string][]string{
	"HNAG": {"FHAG", "PHAG", "MHAG"},
	"TAOP": {"TAOP", "TAFL", "TAID"},
	"VIPP": {"VIPP", "VIPR"},
	"EXSS": {"EXSC", "EXSR"},
	"FDIV": {"FDIV", "DDES", "DDIR"},
	"FRET": {"FRET", "REID"},
}

// STYPDelete is the FLOP STYP that deletes a flight (docs/design.md#fdel).
const STYPDelete = "FDEL"
