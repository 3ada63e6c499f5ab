package refdata

import (
	"errors"
	"fmt"
	"strings"
)

// Category describes one of the 13 reference categories
// (docs/design.md#refdata).
type Category struct {
	// RType is the SIS META.TYPE, e.g. "AIRL".
	RType string
	// KeyTag is the record element whose text is the record key, e.g. "ITOP".
	KeyTag string
}

// Categories lists the 13 categories with a fixed key tag
// (docs/design.md#refdata). CLST and CHLT both key by CCOD and reuse
// CNMC/CTML/CCAT with a different meaning: they are told apart only by RTYPE,
// which is why the state is one value per RTYPE and never shared between them.
var Categories = []Category{
	{"COUL", "COUC"},
	{"ARPT", "ITCD"},
	{"AIRL", "ITOP"},
	{"AIRC", "ITAT"},
	{"REGN", "RNUM"},
	{"ORGN", "OGID"},
	{"FLTL", "FTYP"},
	{"TLST", "TCOD"},
	{"GLST", "GCOD"},
	{"SLST", "SCOD"},
	{"CLST", "CCOD"},
	{"BLST", "BCOD"},
	{"CHLT", "CCOD"},
}

// RSTA is the resource-status TYPE (docs/design.md#refdata). Its records are
// keyed by StatusKey(RTYP, RSID); DNLD is a single status update, RESP may
// carry many, and neither removes other statuses by absence.
const RSTA = "RSTA"

// FirstChildTypes lists the other reference TYPEs of testdata/sis-samples that
// msgx stores "with their first child as key" (docs/design.md#refdata). Their
// key tag is not fixed here but taken from the record (see KeyOf); in the
// samples it is ABDG→ABCD, ABNR→ANRC, CITY→ITCD, DLYL→DCOD, HLTR→HLTC,
// PLST→PCOD, REGL→REGC, SCHS→SNAM, STTS→STTC, VIPL→VPCD, VIPS→VSCD. SCHS
// (Season) is stored by season and the router always keys it by SNAM.
var FirstChildTypes = []string{
	"ABDG", "ABNR", "CITY", "DLYL", "HLTR", "PLST", "REGL", "SCHS", "STTS", "VIPL", "VIPS",
}

// Season is the seasonal-schedule TYPE (SCHS). Its records are seasons,
// keyed by SNAM (the first child, as for FirstChildTypes): the season's
// header (SNAM APCD SDAT EDAT) and its FLTR records as one record. A DNLD or
// RESP replaces the season it names and leaves the other seasons alone: a
// season, not the category, is the unit a seasonal schedule downloads. It
// creates no flights.
const Season = "SCHS"

// RSTA tag names and values. The SIS samples carry no RSTA message, so these
// names (in particular the window tags STRT and ENDT) are an assumption kept
// in this one place.
const (
	// TagRTYP is the resource type: one of ResourceTypes.
	TagRTYP = "RTYP"
	// TagRSID is the resource identifier within its type (a belt, gate … code).
	TagRSID = "RSID"
	// TagSTAT is the status: StatusEnabled or StatusDisabled.
	TagSTAT = "STAT"
	// TagSTRT is the optional start of a disable window, SIS time (SISTimeLayout).
	TagSTRT = "STRT"
	// TagENDT is the optional end of a disable window, SIS time (SISTimeLayout).
	TagENDT = "ENDT"

	// StatusEnabled ("E") is the default status of every resource.
	StatusEnabled = "E"
	// StatusDisabled ("D") disables a resource, possibly only within a window.
	StatusDisabled = "D"
)

// ResourceTypes lists the RTYP values RSTA accepts.
var ResourceTypes = []string{"BELT", "CNTR", "GATE", "STND"}

// STYP values of reference messages.
const (
	// STYPDNLD is an unsolicited full download: replaces the category.
	STYPDNLD = "DNLD"
	// STYPRESP answers a reference-data request: replaces the category like DNLD.
	STYPRESP = "RESP"
	// STYPADD adds records; an existing key is overwritten (upsert).
	STYPADD = "ADD"
	// STYPUPD updates records; a missing key is created (upsert).
	STYPUPD = "UPD"
	// STYPDEL deletes records by key; the only way a record is deleted
	// outside a full replace.
	STYPDEL = "DEL"
)

// ErrUnsupported is wrapped by errors for a TYPE or STYP this package does not
// handle. The router should not emit such a transition (it SKIPs the message
// as unsupported:<TYPE>-<STYP>), so seeing it in Apply is a programming error.
var ErrUnsupported = errors.New("refdata: unsupported")

var (
	keyTags = func() map[string]string {
		m := make(map[string]string, len(Categories))
		for _, c := range Categories {
			m[c.RType] = c.KeyTag
		}
		return m
	}()
	firstChildSet = toSet(FirstChildTypes)
	resourceSet   = toSet(ResourceTypes)
	stypSet       = toSet([]string{STYPDNLD, STYPRESP, STYPADD, STYPUPD, STYPDEL})
)

func toSet(xs []string) map[string]struct{} {
	m := make(map[string]struct{}, len(xs))
	for _, x := range xs {
		m[x] = struct{}{}
	}
	return m
}

// Supported reports whether rtype (META.TYPE, upper case as SIS sends it) is
// reference data handled here: the 13 categories, RSTA and FirstChildTypes.
// Any other TYPE is not reference data (FLOP, SCHD, …) or is unknown.
func Supported(rtype string) bool {
	if _, ok := keyTags[rtype]; ok {
		return true
	}
	_, ok := firstChildSet[rtype]
	return ok || rtype == RSTA
}

// SupportedSTYP reports whether styp is one of DNLD, RESP, ADD, UPD, DEL.
func SupportedSTYP(styp string) bool {
	_, ok := stypSet[styp]
	return ok
}

// KeyTag returns the fixed key tag of one of the 13 categories ("ITOP" for
// AIRL). It returns "" when the key is not a single fixed tag: for RSTA (the
// composite RTYP|RSID, see StatusKey), for FirstChildTypes (the first child
// of the record) and for unsupported types.
func KeyTag(rtype string) string {
	return keyTags[rtype]
}

// StatusKey is the RKEY of an RSTA record: "RTYP|RSID", e.g. "GATE|21".
func StatusKey(rtyp, rsid string) string {
	return rtyp + "|" + rsid
}

// KeyOf returns the RKEY of rec in category rtype.
//
// For the 13 categories the key is the text of KeyTag(rtype) and firstChild
// is ignored (SIS does not promise the key comes first). For RSTA it is
// StatusKey(RTYP, RSID) and RTYP must be one of ResourceTypes. For
// FirstChildTypes the key is the text of firstChild, the tag of the record's
// first child element in document order, which the codec must report since a
// Record map has no order. A key that is absent, empty or blank, or a key tag
// repeated in the record, is a *RecordError (Index 0; Apply sets the index).
func KeyOf(rtype string, rec Record, firstChild string) (string, error) {
	key, rerr := keyOf(rtype, rec, firstChild)
	if rerr != nil {
		return "", rerr
	}
	return key, nil
}

// keyOf is KeyOf returning the concrete error type, so that a nil result is
// never wrapped into a non-nil error interface.
func keyOf(rtype string, rec Record, firstChild string) (string, *RecordError) {
	switch {
	case rtype == RSTA:
		rtyp, rerr := keyText(rtype, rec, TagRTYP)
		if rerr != nil {
			return "", rerr
		}
		if _, ok := resourceSet[rtyp]; !ok {
			return "", &RecordError{RType: rtype, Tag: TagRTYP, Reason: ReasonBadValue,
				Detail: fmt.Sprintf("RTYP %q is not one of %s", rtyp, strings.Join(ResourceTypes, "/"))}
		}
		rsid, rerr := keyText(rtype, rec, TagRSID)
		if rerr != nil {
			return "", rerr
		}
		return StatusKey(rtyp, rsid), nil
	case keyTags[rtype] != "":
		return keyText(rtype, rec, keyTags[rtype])
	case Supported(rtype):
		if firstChild == "" {
			return "", &RecordError{RType: rtype, Reason: ReasonMissingKey,
				Detail: "no first child element to key by"}
		}
		return keyText(rtype, rec, firstChild)
	default:
		return "", &RecordError{RType: rtype, Reason: ReasonUnsupported,
			Detail: fmt.Sprintf("TYPE %q is not reference data", rtype)}
	}
}

// keyText returns the trimmed text of tag in rec, which must be present,
// single and non-blank. Blank keys are rejected here although an empty tag is
// otherwise a legitimate "unavailable" value: a record cannot be unavailable
// under no name.
func keyText(rtype string, rec Record, tag string) (string, *RecordError) {
	missing := &RecordError{RType: rtype, Tag: tag, Reason: ReasonMissingKey}
	v, ok := rec[tag]
	if !ok {
		return "", missing
	}
	if _, repeated := v.([]any); repeated {
		return "", &RecordError{RType: rtype, Tag: tag, Reason: ReasonBadValue,
			Detail: "key tag " + tag + " is repeated"}
	}
	s, ok := text(v)
	if !ok || s == "" {
		return "", missing
	}
	return s, nil
}

// text returns the trimmed character data of a record value: a leaf string,
// or the "#text" of an element that also has attributes or children.
func text(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x), true
	case map[string]any:
		s, _ := x["#text"].(string)
		return strings.TrimSpace(s), true
	case Record:
		s, _ := x["#text"].(string)
		return strings.TrimSpace(s), true
	}
	return "", false
}
