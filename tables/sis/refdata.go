package sis

// Keys of RefRecord maps for attributes and text.
const (
	// RefAttrPrefix prefixes attribute names in RefRecord maps ("@MVIN").
	RefAttrPrefix = "@"
	// RefTextKey is the key of non-blank text in RefRecord maps.
	RefTextKey = "#text"
)

// decodeRefData decodes a reference data message of type typ. ok is false
// when the message does not have the reference data shape (neither MSG/RECS
// nor any <typ> element under MSG).
func decodeRefData(root *Node, typ string) (rd *RefData, ok bool, derr *DecodeError) {
	records := root.ChildrenNamed(typ)
	if len(records) == 0 && root.Child("RECS") == nil {
		return nil, false, nil
	}
	rd = &RefData{Type: typ}
	rd.Declared, rd.DeclaredPresent, derr = decodeRECS(root, "MSG/RECS")
	if derr != nil {
		return nil, true, derr
	}
	if len(records) == 0 && rd.Declared > 0 {
		return nil, true, malformed("TYPE=%s: RECS=%d but no <%s> record", short(typ), rd.Declared, short(typ))
	}
	rd.Records = make([]RefRecord, 0, len(records))
	if len(records) > 0 && len(records[0].Children) > 0 {
		rd.FirstChild = records[0].Children[0].Name
	}
	for _, r := range records {
		m := RefRecord{}
		fillRef(m, r)
		rd.Records = append(rd.Records, m)
	}
	return rd, true, nil
}

// refValue is the RefRecord value of one element.
func refValue(n *Node) any {
	if len(n.Attrs) == 0 && len(n.Children) == 0 {
		return n.TrimmedText()
	}
	m := map[string]any{}
	fillRef(m, n)
	return m
}

// fillRef stores n's attributes, text and children into m.
func fillRef(m map[string]any, n *Node) {
	for _, a := range n.Attrs {
		m[RefAttrPrefix+a.Name] = trimXMLSpace(a.Value)
	}
	if t := n.TrimmedText(); t != "" {
		m[RefTextKey] = t
	}
	for _, c := range n.Children {
		v := refValue(c)
		// Element names cannot start with '@' or '#', so a key holds either a
		// single value (string or map) or, once repeated, a []any.
		switch prev := m[c.Name].(type) {
		case nil:
			m[c.Name] = v
		case []any:
			m[c.Name] = append(prev, v)
		default:
			m[c.Name] = []any{prev, v}
		}
	}
}
