package sis

import "fmt"

// Season is the payload of TYPE=SCHS, a seasonal schedule:
//
//	<SCHS><SNAM>Winter</SNAM><APCD>CTU</APCD><SDAT>10SEP20</SDAT><EDAT>10JUN21</EDAT>
//	      <RECS>2</RECS><FLTR>…</FLTR><FLTR>…</FLTR></SCHS>
//
// The declared count is not checked against the records here: the router
// does that for the whole package, as for SCHD.
type Season struct {
	// Fields maps the leaf children of SCHS other than RECS (SNAM, APCD,
	// SDAT, EDAT) to their trimmed text; "" when present but empty. When a
	// tag is repeated the last one wins, except SNAM (the season's key),
	// which may appear once.
	Fields map[string]string
	// Declared is SCHS/RECS when DeclaredPresent.
	Declared int
	// DeclaredPresent reports whether SCHS/RECS is present.
	DeclaredPresent bool
	// Records are the FLTR records in document order.
	Records []SeasonRecord
	// Other names the children of SCHS that are neither leaves nor FLTR, in
	// document order without repeats (not stored).
	Other []string
}

// SeasonRecord is one FLTR of a seasonal schedule: a flight series (ALCD
// FLNO MVIN STDT EDDT DYOP SCHT FLTY FLIN ACFT RENO TAOP TAFL TRML MAXP CSOP
// CSFT) with its routes (ROUT, ERUT). It describes a schedule, not a
// flight: it has no FLID and creates none.
type SeasonRecord struct {
	// Fields maps every leaf child without attributes but ROUT and ERUT to
	// its trimmed text ("" when empty); a repeated tag keeps its last value.
	Fields map[string]string
	// Collections maps ROUT, ERUT and every other child with attributes or
	// children to its elements in document order, flattened like a flight
	// collection element: trimmed attributes, leaf children, non-blank text
	// under flight.TextKey.
	Collections map[string][]map[string]string
}

// SeasonKey is the tag that names a season: a DNLD or RESP replaces the
// season of that name.
const SeasonKey = "SNAM"

// The time-valued tags of a seasonal schedule and their formats, as the
// AODB's SCHS samples write them. SADC and SDDC are the day offsets of a
// route point's times (+1 = the next day).
var (
	seasonTimes = map[string]timeFormat{"SDAT": formatDate, "EDAT": formatDate}
	// seasonRecordTimes are the FLTR scalars: its first and last day and
	// its daily time.
	seasonRecordTimes = map[string]timeFormat{"STDT": formatDate, "EDDT": formatDate, "SCHT": formatClock}
	// seasonRouteTimes are the route point keys by collection: ROUT gives
	// times of day, ERUT full times.
	seasonRouteTimes = map[string]map[string]timeFormat{
		"ROUT": {"SCAT": formatClock, "SCDT": formatClock, "SADC": formatDayOffset, "SDDC": formatDayOffset},
		"ERUT": {"SCAT": formatDateTime, "SCDT": formatDateTime, "SADC": formatDayOffset, "SDDC": formatDayOffset},
	}
)

// decodeSeason decodes the SCHS element of a TYPE=SCHS message.
func decodeSeason(root *Node) (*Season, *DecodeError) {
	n, derr := single(root, "SCHS")
	if derr != nil {
		return nil, derr
	}
	if n == nil {
		return nil, malformed("TYPE=SCHS without <SCHS> element")
	}
	if _, derr := single(n, SeasonKey); derr != nil {
		return nil, derr
	}
	s := &Season{Fields: map[string]string{}}
	s.Declared, s.DeclaredPresent, derr = decodeRECS(n, "SCHS/RECS")
	if derr != nil {
		return nil, derr
	}
	var other uniqueNames
	for _, c := range n.Children {
		switch {
		case c.Name == "RECS":
		case c.Name == "FLTR":
			s.Records = append(s.Records, decodeSeasonRecord(c))
		case len(c.Children) == 0 && len(c.Attrs) == 0:
			s.Fields[c.Name] = c.TrimmedText()
		default:
			other.add(c.Name)
		}
	}
	s.Other = other.list
	return s, nil
}

func decodeSeasonRecord(n *Node) SeasonRecord {
	r := SeasonRecord{Fields: map[string]string{}, Collections: map[string][]map[string]string{}}
	for _, c := range n.Children {
		// A route is a collection even when empty (<ROUT/>), so that it has
		// one shape.
		if _, route := seasonRouteTimes[c.Name]; !route && len(c.Children) == 0 && len(c.Attrs) == 0 {
			r.Fields[c.Name] = c.TrimmedText()
			continue
		}
		r.Collections[c.Name] = append(r.Collections[c.Name], flatten(c))
	}
	return r
}

// Name is the season's SNAM ("" when absent or empty).
func (s *Season) Name() string { return s.Fields[SeasonKey] }

// CheckTimes checks every time-valued tag of the season (SDAT, EDAT and,
// in each FLTR, STDT, EDDT, SCHT and the route times) against the format
// the AODB's samples use for it. An empty value passes. The error names the
// first offending tag and value, like FlightRecord.CheckTimes.
func (s *Season) CheckTimes() error {
	if err := checkFields("SCHS/", s.Fields, seasonTimes); err != nil {
		return err
	}
	for i, r := range s.Records {
		path := fmt.Sprintf("SCHS/FLTR[%d]/", i+1)
		if err := checkFields(path, r.Fields, seasonRecordTimes); err != nil {
			return err
		}
		for _, coll := range sortedKeys(r.Collections) {
			for j, e := range r.Collections[coll] {
				if err := checkFields(fmt.Sprintf("%s%s[%d]/", path, coll, j+1), e, seasonRouteTimes[coll]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Record is the season as one reference record (keyed by SNAM): its header
// tags as strings and "FLTR", a list of the records in document order, each
// a map of its scalars plus its collections as lists of maps. Lists are
// lists even with one entry, so every reader sees one shape.
func (s *Season) Record() RefRecord {
	rec := RefRecord{}
	for k, v := range s.Fields {
		rec[k] = v
	}
	fltr := make([]any, 0, len(s.Records))
	for _, r := range s.Records {
		m := make(map[string]any, len(r.Fields)+len(r.Collections))
		for k, v := range r.Fields {
			m[k] = v
		}
		for k, elems := range r.Collections {
			list := make([]any, len(elems))
			for i, e := range elems {
				em := make(map[string]any, len(e))
				for ek, ev := range e {
					em[ek] = ev
				}
				list[i] = em
			}
			m[k] = list
		}
		fltr = append(fltr, m)
	}
	rec["FLTR"] = fltr
	return rec
}
