package sis

import (
	"bytes"
	"sync/atomic"
	"unicode/utf8"
)

// scanTree is the fast path of parseTree: a hand-written scanner for the
// plain XML real messages are made of (an XML declaration, ASCII element and
// attribute names with at most one prefix, quoted attribute values, text with
// the predefined entities and character references, comments, processing
// instructions, indentation, UTF-8 text).
//
// It returns ok only when encoding/xml, as parseTreeXML drives it, would
// accept doc and build the identical tree. Anything else — every error, and
// constructs left out of the subset (CDATA sections, DOCTYPE and other
// directives, non-ASCII names, repeated attribute names, text other than
// whitespace around the root, the size limits reached) — returns ok false so
// that parseTreeXML decides, and words the error.
func scanTree(doc []byte) (root *Node, ok bool) {
	s := scanner{doc: doc, kids: make([]*Node, 0, 32)}
	return s.scan()
}

// scanner is the state of one scanTree call. Nodes, attributes and child
// lists are carved from shared chunks, and names interned (internName), so
// that a document costs a few allocations besides its text and values.
type scanner struct {
	doc []byte
	i   int // position in doc

	depth    int // open elements, in frames
	frames   [MaxDepth]scanFrame
	kids     []*Node     // children of the open elements, innermost last
	elements int         // so far, for MaxElements
	attrs    int         // so far, for MaxAttributes
	pending  [16]rawAttr // attributes kept from the start tag being scanned
	vbuf     []byte      // scratch for attribute values with references

	sizeHint int    // elements expected at most, to size the chunks
	nodes    []Node // the chunks nodes, child lists and attributes are carved from
	ptrs     []*Node
	slab     []Attr
}

// scanFrame is an open element. Its text, usually one piece, stays a slice
// of doc until the end tag; only text split into pieces (by comments or
// child elements) or with references to resolve is built in buf, which is
// kept for the next element at the same depth.
type scanFrame struct {
	n      *Node
	kids   int // index in scanner.kids of its first child
	pieces int
	text   []byte // the text so far: a slice of doc, or buf
	buf    []byte
	owned  bool // text is buf
	blank  bool // all pieces are XML whitespace
}

// rawAttr is an attribute kept from the start tag being scanned.
type rawAttr struct {
	name, value []byte
	dirty       bool // value has references or CRs to resolve
}

// Byte classes of textClass.
const (
	cData    = iota // character data other than whitespace
	cSpace          // space, tab, newline
	cSpecial        // needs a closer look: < & > \r quotes, controls, non-ASCII
)

// Byte classes of nameClass (0: not part of a name).
const (
	nameStart = 1 + iota // ASCII letter or '_'
	nameByte             // any other ASCII byte encoding/xml reads as part of a name
)

var textClass, nameClass = func() (t, n [256]uint8) {
	for c := range 256 {
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			t[c] = cSpace
		case c < 0x20 || c >= utf8.RuneSelf || bytes.IndexByte([]byte(`<&>"'`), byte(c)) >= 0:
			t[c] = cSpecial
		}
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '_':
			n[c] = nameStart
		case '0' <= c && c <= '9', c == '-', c == '.', c == ':':
			n[c] = nameByte
		}
	}
	return t, n
}()

// scan scans the whole document, as parseTreeXML's token loop does.
func (s *scanner) scan() (*Node, bool) {
	d := s.doc
	// Every element has a '<' not followed by '/'.
	s.sizeHint = bytes.Count(d, []byte("<")) - bytes.Count(d, []byte("</"))
	var root *Node
	for s.i < len(d) {
		if d[s.i] != '<' {
			if s.depth == 0 {
				// Only raw whitespace around the root: encoding/xml would
				// report anything else (or, for references to whitespace,
				// skip them; rare enough to leave to it).
				if c := d[s.i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
					return nil, false
				}
				s.i++
				continue
			}
			start := s.i
			end, dirty, blank, ok := s.text('<')
			if !ok {
				return nil, false
			}
			s.i = end
			s.addText(d[start:end], dirty, blank)
			continue
		}
		if s.i+1 >= len(d) {
			return nil, false
		}
		var ok bool
		switch d[s.i+1] {
		case '/':
			ok = s.endTag()
		case '?':
			ok = s.procInst()
		case '!':
			ok = s.comment()
		default:
			if root != nil && s.depth == 0 {
				return nil, false // a second root
			}
			var n *Node
			if n, ok = s.startTag(); ok && root == nil {
				root = n
			}
		}
		if !ok {
			return nil, false
		}
	}
	if root == nil || s.depth > 0 {
		return nil, false
	}
	return root, true
}

// startTag scans `<name attr="value"...>` or `.../>` at s.i and opens the
// element (and closes it when self-closing).
func (s *scanner) startTag() (*Node, bool) {
	d := s.doc
	if s.depth >= MaxDepth {
		return nil, false
	}
	if s.elements++; s.elements > MaxElements {
		return nil, false
	}
	s.i++
	prefix, local, ok := s.qname()
	if !ok {
		return nil, false
	}
	kept, count, empty := 0, 0, false
	for {
		s.skipSpace()
		if s.i >= len(d) {
			return nil, false
		}
		if c := d[s.i]; c == '>' {
			s.i++
			break
		} else if c == '/' {
			if s.i+1 >= len(d) || d[s.i+1] != '>' {
				return nil, false
			}
			s.i += 2
			empty = true
			break
		}
		aprefix, alocal, ok := s.qname()
		if !ok {
			return nil, false
		}
		s.skipSpace()
		if s.i >= len(d) || d[s.i] != '=' {
			return nil, false
		}
		s.i++
		s.skipSpace()
		if s.i >= len(d) || (d[s.i] != '"' && d[s.i] != '\'') {
			return nil, false
		}
		q := d[s.i]
		s.i++
		start := s.i
		end, dirty, _, ok := s.text(q)
		if !ok {
			return nil, false
		}
		s.i = end + 1
		count++
		// Namespace declarations are not attributes of the Node.
		if string(aprefix) == "xmlns" || (aprefix == nil && string(alocal) == "xmlns") {
			continue
		}
		// A repeated local name is an error, or a merge across prefixes,
		// in parseTreeXML: both are left to it. The linear search is
		// bounded by the number of attributes allowed here.
		if kept == len(s.pending) {
			return nil, false
		}
		for _, a := range s.pending[:kept] {
			if bytes.Equal(a.name, alocal) {
				return nil, false
			}
		}
		s.pending[kept] = rawAttr{name: alocal, value: d[start:end], dirty: dirty}
		kept++
	}
	if s.attrs += count; s.attrs > MaxAttributes {
		return nil, false
	}

	// Chunks hold the elements still expected, but no more than 32: a
	// chunk of 8 KiB or more costs a span of its own, and a hostile
	// document must not reserve memory it never fills.
	n := &carve(&s.nodes, 1, min(s.sizeHint-s.elements+1, 32))[0]
	n.Name, n.prefix = internName(local), internName(prefix)
	if count > 0 {
		// parseTreeXML leaves a non-nil, possibly empty, list whenever the
		// tag had attributes, namespace declarations included.
		n.Attrs = []Attr{}
		if kept > 0 {
			n.Attrs = carve(&s.slab, kept, 16)
		}
		for i, a := range s.pending[:kept] {
			n.Attrs[i].Name = internName(a.name)
			if a.dirty {
				s.vbuf = appendText(s.vbuf[:0], a.value)
				n.Attrs[i].Value = string(s.vbuf)
			} else {
				n.Attrs[i].Value = string(a.value)
			}
		}
	}
	if s.depth > 0 {
		p := &s.frames[s.depth-1]
		if len(s.kids) == p.kids && p.pieces > 0 && p.blank {
			// Indentation before the first child is not content.
			p.pieces, p.text, p.owned = 0, nil, false
		}
		s.kids = append(s.kids, n)
	}
	f := &s.frames[s.depth]
	f.n, f.kids, f.pieces, f.text, f.owned = n, len(s.kids), 0, nil, false
	s.depth++
	if empty {
		s.close()
	}
	return n, true
}

// endTag scans `</name>` at s.i and closes the open element it must match.
func (s *scanner) endTag() bool {
	d := s.doc
	s.i += 2
	prefix, local, ok := s.qname()
	if !ok {
		return false
	}
	s.skipSpace()
	if s.i >= len(d) || d[s.i] != '>' || s.depth == 0 {
		return false
	}
	s.i++
	n := s.frames[s.depth-1].n
	if n.Name != string(local) || n.prefix != string(prefix) {
		return false
	}
	s.close()
	return true
}

// close ends the innermost open element: its text and children are final.
func (s *scanner) close() {
	f := &s.frames[s.depth-1]
	f.n.Text = string(f.text)
	if k := s.kids[f.kids:]; len(k) > 0 {
		f.n.Children = carve(&s.ptrs, len(k), min(s.sizeHint, 128))
		copy(f.n.Children, k)
		s.kids = s.kids[:f.kids]
	}
	s.depth--
}

// addText adds one piece of character data to the innermost open element,
// as parseTreeXML's frame.addText does.
func (s *scanner) addText(raw []byte, dirty, blank bool) {
	f := &s.frames[s.depth-1]
	if len(s.kids) > f.kids && blank {
		return // indentation between children
	}
	switch {
	case f.pieces == 0 && !dirty:
		f.text, f.owned = raw, false
	case f.pieces == 0:
		f.buf = appendText(f.buf[:0], raw)
		f.text, f.owned = f.buf, true
	default:
		if !f.owned {
			f.buf = append(f.buf[:0], f.text...)
		}
		if dirty {
			f.buf = appendText(f.buf, raw)
		} else {
			f.buf = append(f.buf, raw...)
		}
		f.text, f.owned = f.buf, true
	}
	f.blank = blank && (f.pieces == 0 || f.blank)
	f.pieces++
}

// procInst scans `<?target ...?>` at s.i. Processing instructions are not
// part of the tree; the XML declaration's version must be one encoding/xml
// accepts (its encoding does not matter: parseTreeXML reads any charset as
// UTF-8).
func (s *scanner) procInst() bool {
	d := s.doc
	s.i += 2
	start := s.i
	if s.i >= len(d) || nameClass[d[s.i]] != nameStart {
		return false
	}
	for s.i < len(d) && nameClass[d[s.i]] != 0 {
		s.i++
	}
	if s.i >= len(d) || d[s.i] >= utf8.RuneSelf {
		return false
	}
	target := d[start:s.i]
	s.skipSpace()
	k := bytes.Index(d[s.i:], []byte("?>"))
	if k < 0 {
		return false
	}
	if string(target) == "xml" {
		if v := xmlVersion(d[s.i : s.i+k]); len(v) > 0 && string(v) != "1.0" {
			return false
		}
	}
	s.i += k + 2
	return true
}

// xmlVersion returns the version of an XML declaration's content as
// encoding/xml's procInst finds it (the value after the first "version="
// that is followed by a quote), or nil.
func xmlVersion(b []byte) []byte {
	const param = "version="
	i, sep := 0, byte(0)
	for i < len(b) {
		sub := b[i:]
		k := bytes.Index(sub, []byte(param))
		if k < 0 || len(param)+k >= len(sub) {
			return nil
		}
		i += len(param) + k + 1
		if c := sub[len(param)+k]; c == '\'' || c == '"' {
			sep = c
			break
		}
	}
	if sep == 0 {
		return nil
	}
	j := bytes.IndexByte(b[i:], sep)
	if j < 0 {
		return nil
	}
	return b[i : i+j]
}

// comment scans `<!-- ... -->` at s.i. encoding/xml does not check the
// content, except that "--" must end the comment.
func (s *scanner) comment() bool {
	d := s.doc
	if !bytes.HasPrefix(d[s.i:], []byte("<!--")) {
		return false // CDATA section or directive
	}
	start := s.i + 4
	k := bytes.Index(d[start:], []byte("--"))
	if k < 0 || start+k+2 >= len(d) || d[start+k+2] != '>' {
		return false
	}
	s.i = start + k + 3
	return true
}

// qname scans a name at s.i and splits it at its colon. Only ASCII names
// with at most one colon, neither first nor last, are accepted: encoding/xml
// reads any non-ASCII byte as part of a name and splits names differently
// otherwise.
func (s *scanner) qname() (prefix, local []byte, ok bool) {
	d := s.doc
	start, colon := s.i, -1
	if start >= len(d) || nameClass[d[start]] != nameStart {
		return nil, nil, false
	}
	i := start + 1
	for ; i < len(d) && nameClass[d[i]] != 0; i++ {
		if d[i] == ':' {
			if colon >= 0 {
				return nil, nil, false
			}
			colon = i
		}
	}
	if i >= len(d) || d[i] >= utf8.RuneSelf || colon == i-1 {
		return nil, nil, false
	}
	s.i = i
	if colon < 0 {
		return nil, d[start:i], true
	}
	return d[start:colon], d[colon+1 : i], true
}

// text scans character data from s.i up to the byte stop: '<' for content
// (or the end of the document), the quote for an attribute value. It checks
// what encoding/xml checks: valid UTF-8 of XML characters, known entities
// and valid character references, no "]]>" in content, no '<' in values.
// dirty reports references or CRs to resolve with appendText; blank, that
// the resolved data is XML whitespace only.
func (s *scanner) text(stop byte) (end int, dirty, blank, ok bool) {
	d := s.doc
	blank = true
	i := s.i
	for i < len(d) {
		c := d[i]
		switch textClass[c] {
		case cData:
			blank = false
			i++
			continue
		case cSpace:
			i++
			continue
		}
		switch {
		case c == stop:
			return i, dirty, blank, true
		case c == '&':
			r, n := reference(d[i:])
			if n == 0 {
				return 0, false, false, false
			}
			blank = blank && isXMLSpace(r)
			dirty = true
			i += n
		case c == '\r':
			dirty = true
			i++
		case c == '>':
			// The "]]" cannot belong to a reference or precede the text, so
			// these bytes are the "]]>" that encoding/xml refuses.
			if stop == '<' && i >= 2 && d[i-1] == ']' && d[i-2] == ']' {
				return 0, false, false, false
			}
			blank = false
			i++
		case c == '"' || c == '\'':
			blank = false
			i++
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(d[i:])
			if (r == utf8.RuneError && n == 1) || !isXMLChar(r) {
				return 0, false, false, false
			}
			blank = false
			i += n
		default: // '<' in a value, control characters
			return 0, false, false, false
		}
	}
	if stop != '<' {
		return 0, false, false, false
	}
	return i, dirty, blank, true
}

// appendText appends character data checked by text with its references
// resolved and its line ends ("\r\n", lone "\r") turned into "\n", as
// encoding/xml does.
func appendText(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		j := i
		for j < len(raw) && raw[j] != '&' && raw[j] != '\r' {
			j++
		}
		dst = append(dst, raw[i:j]...)
		if i = j; i == len(raw) {
			break
		}
		if raw[i] == '&' {
			r, n := reference(raw[i:])
			dst = utf8.AppendRune(dst, r)
			i += n
			continue
		}
		dst = append(dst, '\n')
		if i++; i < len(raw) && raw[i] == '\n' {
			i++
		}
	}
	return dst
}

// reference resolves the entity or character reference at the start of b
// and returns its rune and length, or n == 0 for anything encoding/xml
// refuses (and, to keep things simple, for references to surrogates, which
// it turns into U+FFFD).
func reference(b []byte) (r rune, n int) {
	if len(b) > 1 && b[1] != '#' {
		for _, e := range [...]struct {
			name string
			r    rune
		}{{"lt;", '<'}, {"gt;", '>'}, {"amp;", '&'}, {"apos;", '\''}, {"quot;", '"'}} {
			if bytes.HasPrefix(b[1:], []byte(e.name)) {
				return e.r, 1 + len(e.name)
			}
		}
		return 0, 0
	}
	i, base := 2, rune(10)
	if len(b) > i && b[i] == 'x' {
		i, base = 3, 16
	}
	start := i
	for ; i < len(b); i++ {
		v := rune(255)
		switch c := rune(b[i]); {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		}
		if v >= base {
			break
		}
		if r = r*base + v; r > utf8.MaxRune {
			return 0, 0
		}
	}
	if i == start || i >= len(b) || b[i] != ';' || !isXMLChar(r) {
		return 0, 0
	}
	return r, i + 1
}

// isXMLChar reports whether r is an XML character (encoding/xml's
// isInCharacterRange).
func isXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// isXMLSpace reports whether r is XML whitespace.
func isXMLSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r'
}

func (s *scanner) skipSpace() {
	for s.i < len(s.doc) {
		switch s.doc[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// names caches the element and attribute names seen, by hash: all the
// traffic uses a few hundred names, so that they need not be allocated for
// each message. A slot holds the last name stored there; concurrent
// scanners race benignly (a name is immutable, a lost update a later miss).
var names [4096]atomic.Pointer[string]

// internName returns b as a string, from names when it is there.
func internName(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	h := uint(len(b))
	for _, c := range b {
		h = h*31 + uint(c)
	}
	slot := &names[h%uint(len(names))]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	name := string(b)
	// Long names are not worth keeping (and may be hostile).
	if len(name) <= 32 {
		slot.Store(&name)
	}
	return name
}

// carve returns n zeroed elements from the chunk *slab, starting a new
// chunk of max(n, size) elements when it is full. The result's capacity is
// its length, so that appending to it never writes into the chunk.
func carve[T any](slab *[]T, n, size int) []T {
	if cap(*slab)-len(*slab) < n {
		*slab = make([]T, 0, max(n, size))
	}
	i := len(*slab)
	*slab = (*slab)[:i+n]
	return (*slab)[i : i+n : i+n]
}
