package sis

import (
	"msgx/tables/flight"
)

// collectionSpecs indexes flight.Collections by name.
var collectionSpecs = func() map[string]flight.CollectionSpec {
	m := make(map[string]flight.CollectionSpec, len(flight.Collections))
	for _, c := range flight.Collections {
		m[c.Name] = c
	}
	return m
}()

// decodeFlight builds a FlightRecord from a FLTR element or a FLOP body.
// With opBody set, an FDEL child is the delete marker (reported as del)
// instead of an unsupported tag. path names n in error reasons.
func decodeFlight(n *Node, opBody bool, path string) (fr FlightRecord, del bool, derr *DecodeError) {
	fr.Fields = make(map[string]string, len(n.Children))
	fr.Collections = map[string][]map[string]string{}
	flidSeen := false
	var other uniqueNames
	for _, c := range n.Children {
		name := c.Name
		if name == "FLID" {
			v := c.TrimmedText()
			// A repeated FLID naming two flights makes the record ambiguous.
			if flidSeen && v != fr.FLID {
				return fr, false, malformed("%s: conflicting FLID values %q and %q", path, short(fr.FLID), short(v))
			}
			fr.FLID, flidSeen = v, true
			continue
		}
		if flight.IsScalar(name) {
			fr.Fields[name] = c.TrimmedText()
			continue
		}
		if attrs, ok := flight.Attributed[name]; ok {
			fr.Fields[name] = c.TrimmedText()
			for _, a := range attrs {
				// A repeated element replaces the previous one entirely: an
				// attribute it lacks must not survive from the earlier one.
				delete(fr.Fields, a)
				if v, ok := c.Attr(a); ok {
					fr.Fields[a] = trimXMLSpace(v)
				}
			}
			continue
		}
		if parts, ok := flight.Grouped[name]; ok {
			// A part the element lacks is reported present and empty: the
			// element replaces the whole group (a repeated element, the
			// earlier one entirely).
			for _, p := range parts {
				fr.Fields[p] = c.Child(p).TrimmedText()
			}
			continue
		}
		if spec, ok := collectionSpecs[name]; ok {
			var e map[string]string
			if spec.Raw {
				e = map[string]string{RawKey: c.XML()}
			} else {
				e = flatten(c)
			}
			fr.Collections[name] = append(fr.Collections[name], e)
			continue
		}
		if opBody && name == "FDEL" {
			del = true
			continue
		}
		other.add(name)
	}
	fr.Other = other.list
	return fr, del, nil
}

// flatten turns one collection element into a flat map: trimmed attributes,
// leaf child elements (trimmed text), non-blank text under flight.TextKey.
// Child elements that have children of their own are not part of any
// modelled collection and are left out.
func flatten(c *Node) map[string]string {
	m := make(map[string]string, len(c.Attrs)+len(c.Children))
	for _, a := range c.Attrs {
		m[a.Name] = trimXMLSpace(a.Value)
	}
	for _, ch := range c.Children {
		if len(ch.Children) == 0 {
			m[ch.Name] = ch.TrimmedText()
		}
	}
	if t := c.TrimmedText(); t != "" {
		m[flight.TextKey] = t
	}
	return m
}
