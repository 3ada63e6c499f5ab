package sis

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
)

// Limits that keep Decode bounded on hostile or broken input.
const (
	// MaxMessageSize is the largest raw message Decode accepts (4 MiB); the
	// inbox column is a MEDIUMTEXT (16 MiB) but real messages are far smaller.
	MaxMessageSize = 4 << 20
	// MaxDepth is the deepest element nesting accepted (MSG is depth 1).
	MaxDepth = 64
	// MaxElements is the largest number of elements in one message (a day's
	// schedule of a large airport has well under 100k).
	MaxElements = 200_000
	// MaxAttributes is the largest number of attributes in one message.
	MaxAttributes = 200_000
)

// Node is one XML element of a decoded message, kept for payloads whose
// shape the codec does not model (EROR, LDM, unknown types) and used
// internally for all others.
type Node struct {
	// Name is the element's local name (any namespace prefix dropped).
	Name string
	// Attrs are the element's attributes in document order, without
	// namespace declarations (xmlns, xmlns:*).
	Attrs []Attr
	// Text is the character data directly inside the element, entities
	// resolved, exactly as written. For an element with child elements,
	// whitespace-only runs (indentation) are dropped.
	Text string
	// Children are the child elements in document order.
	Children []*Node

	prefix string // namespace prefix as written, to match the end tag
}

// Attr is one attribute of a Node.
type Attr struct {
	// Name is the attribute's local name.
	Name string
	// Value is the attribute value as written (entities resolved).
	Value string
}

// Child returns the first child element named name, or nil.
func (n *Node) Child(name string) *Node {
	if n == nil {
		return nil
	}
	for _, c := range n.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ChildrenNamed returns the child elements named name, in document order.
func (n *Node) ChildrenNamed(name string) []*Node {
	if n == nil {
		return nil
	}
	var out []*Node
	for _, c := range n.Children {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// Attr returns the value of the attribute name and whether it is present.
// When an attribute appears twice, the last one wins.
func (n *Node) Attr(name string) (string, bool) {
	if n == nil {
		return "", false
	}
	v, ok := "", false
	for _, a := range n.Attrs {
		if a.Name == name {
			v, ok = a.Value, true
		}
	}
	return v, ok
}

// TrimmedText returns Text without surrounding XML whitespace.
func (n *Node) TrimmedText() string {
	if n == nil {
		return ""
	}
	return trimXMLSpace(n.Text)
}

// XML re-serializes the element as UTF-8 XML: `<NAME A="v">text<CHILD/></NAME>`
// with explicit end tags and no indentation. Text of an element that also has
// child elements is written before the children.
func (n *Node) XML() string {
	var b strings.Builder
	n.writeXML(&b)
	return b.String()
}

func (n *Node) writeXML(b *strings.Builder) {
	b.WriteByte('<')
	b.WriteString(n.Name)
	for _, a := range n.Attrs {
		b.WriteByte(' ')
		b.WriteString(a.Name)
		b.WriteString(`="`)
		escapeAttr(b, a.Value)
		b.WriteByte('"')
	}
	b.WriteByte('>')
	if len(n.Children) == 0 {
		escapeText(b, n.Text)
	} else {
		escapeText(b, trimXMLSpace(n.Text))
		for _, c := range n.Children {
			c.writeXML(b)
		}
	}
	b.WriteString("</")
	b.WriteString(n.Name)
	b.WriteByte('>')
}

// escapeText escapes character data.
func escapeText(b *strings.Builder, s string) {
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '\r':
			// A literal CR would be normalised away by the next parser.
			b.WriteString("&#xD;")
		default:
			b.WriteRune(r)
		}
	}
}

// escapeAttr escapes an attribute value so that it survives attribute-value
// normalisation (tabs and newlines are kept as character references).
func escapeAttr(b *strings.Builder, s string) {
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\t':
			b.WriteString("&#x9;")
		case '\n':
			b.WriteString("&#xA;")
		case '\r':
			b.WriteString("&#xD;")
		default:
			b.WriteRune(r)
		}
	}
}

// frame is an open element during parsing. Its text usually comes in one
// piece, stored straight into n.Text; text split into several pieces (by
// comments, CDATA sections or child elements) is collected in buf so that it
// costs linear, not quadratic, time.
type frame struct {
	n      *Node
	pieces int
	buf    []byte
}

// addText appends one piece of character data.
func (f *frame) addText(t []byte) {
	switch f.pieces {
	case 0:
		f.n.Text = string(t)
	case 1:
		f.buf = append(append(f.buf[:0], f.n.Text...), t...)
	default:
		f.buf = append(f.buf, t...)
	}
	f.pieces++
}

// text returns the element's text so far.
func (f *frame) text() string {
	if f.pieces > 1 {
		return string(f.buf)
	}
	return f.n.Text
}

// resetText forgets the text collected so far.
func (f *frame) resetText() {
	f.n.Text, f.pieces, f.buf = "", 0, f.buf[:0]
}

// parseTree parses a UTF-8 document into its root element, enforcing
// well-formedness (one root, nothing but whitespace, comments and processing
// instructions around it, matching tags, unique attributes) and the size
// limits.
func parseTree(doc []byte) (*Node, *DecodeError) {
	// Real messages take the fast path (scan.go), several times faster;
	// whatever it is not sure of, errors included, is left to encoding/xml,
	// so the results and the errors stay those of parseTreeXML.
	if root, ok := scanTree(doc); ok {
		return root, nil
	}
	return parseTreeXML(doc)
}

// parseTreeXML is parseTree with encoding/xml, for any input.
func parseTreeXML(doc []byte) (*Node, *DecodeError) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	// The bytes are already UTF-8 (see toUTF8) whatever the declaration
	// says, so any declared charset is read as is.
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }

	var (
		root     *Node
		stack    []frame
		elements int
		attrs    int
	)
	for {
		// RawToken skips the namespace translation and token copies that
		// Token does (a third of the decoding time); tag matching is checked
		// below against our own stack.
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
				return nil, syntaxErr(d, "unexpected EOF")
			}
			break
		}
		if err != nil {
			return nil, &DecodeError{Class: Malformed, Reason: "not well-formed XML: " + err.Error(), Err: err}
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if root != nil && len(stack) == 0 {
				return nil, malformed("content after the root element: <%s>", short(t.Name.Local))
			}
			if len(stack) >= MaxDepth {
				return nil, malformed("elements nested deeper than %d", MaxDepth)
			}
			if elements++; elements > MaxElements {
				return nil, malformed("more than %d elements", MaxElements)
			}
			if attrs += len(t.Attr); attrs > MaxAttributes {
				return nil, malformed("more than %d attributes", MaxAttributes)
			}
			n := &Node{Name: t.Name.Local, prefix: t.Name.Space}
			if derr := setAttrs(d, n, t); derr != nil {
				return nil, derr
			}
			if len(stack) == 0 {
				root = n
			} else {
				p := &stack[len(stack)-1]
				if len(p.n.Children) == 0 && p.pieces > 0 && isBlank(p.text()) {
					// Indentation before the first child is not content.
					p.resetText()
				}
				p.n.Children = append(p.n.Children, n)
			}
			stack = append(stack, frame{n: n})
		case xml.EndElement:
			if len(stack) == 0 {
				return nil, syntaxErr(d, "unexpected end element </"+short(qname(t.Name))+">")
			}
			top := stack[len(stack)-1]
			if top.n.Name != t.Name.Local || top.n.prefix != t.Name.Space {
				return nil, syntaxErr(d, "element <"+short(qname(xml.Name{Space: top.n.prefix, Local: top.n.Name}))+
					"> closed by </"+short(qname(t.Name))+">")
			}
			top.n.Text = top.text()
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) == 0 {
				if isBlankBytes(t) {
					continue
				}
				if root == nil {
					return nil, malformed("not XML: text before the root element")
				}
				return nil, malformed("text after the root element")
			}
			f := &stack[len(stack)-1]
			if len(f.n.Children) > 0 && isBlankBytes(t) {
				continue
			}
			f.addText(t)
		}
	}
	if root == nil {
		return nil, malformed("no root element")
	}
	return root, nil
}

// setAttrs copies the attributes of t into n, without namespace
// declarations. A repeated attribute is a well-formedness error; two
// attributes with the same local name under different prefixes keep the
// last value (Node only knows local names).
func setAttrs(d *xml.Decoder, n *Node, t xml.StartElement) *DecodeError {
	if len(t.Attr) == 0 {
		return nil
	}
	n.Attrs = make([]Attr, 0, len(t.Attr))
	var index map[string]int // local name -> position, for many attributes
	spaces := make([]string, 0, len(t.Attr))
	for _, a := range t.Attr {
		if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
			continue
		}
		i := -1
		if index != nil {
			if j, ok := index[a.Name.Local]; ok {
				i = j
			}
		} else {
			for j := range n.Attrs {
				if n.Attrs[j].Name == a.Name.Local {
					i = j
					break
				}
			}
		}
		if i >= 0 {
			if spaces[i] == a.Name.Space {
				return syntaxErr(d, "attribute "+short(qname(a.Name))+" repeated in <"+short(n.Name)+">")
			}
			n.Attrs[i].Value, spaces[i] = a.Value, a.Name.Space
			continue
		}
		n.Attrs = append(n.Attrs, Attr{Name: a.Name.Local, Value: a.Value})
		spaces = append(spaces, a.Name.Space)
		// Linear search is fastest for the usual handful of attributes; a
		// map keeps hostile elements with thousands of them linear.
		if index == nil && len(n.Attrs) > 16 {
			index = make(map[string]int, len(t.Attr))
			for j, x := range n.Attrs {
				index[x.Name] = j
			}
		} else if index != nil {
			index[a.Name.Local] = len(n.Attrs) - 1
		}
	}
	return nil
}

// syntaxErr reports a well-formedness error found by parseTree itself, in the
// same form as the XML decoder's own errors.
func syntaxErr(d *xml.Decoder, msg string) *DecodeError {
	line, _ := d.InputPos()
	err := &xml.SyntaxError{Msg: msg, Line: line}
	return &DecodeError{Class: Malformed, Reason: "not well-formed XML: " + err.Error(), Err: err}
}

// qname renders a raw (untranslated) name as written: prefix:local.
func qname(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}

// isBlank reports whether s holds only XML whitespace.
func isBlank(s string) bool {
	return trimXMLSpace(s) == ""
}

// isBlankBytes is isBlank for character data, without a string copy.
func isBlankBytes(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// trimXMLSpace trims the XML whitespace characters (space, tab, CR, LF).
// Other Unicode spaces (e.g. the ideographic space) are data.
func trimXMLSpace(s string) string {
	return strings.Trim(s, " \t\r\n")
}
