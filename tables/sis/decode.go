package sis

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// notRefData lists the TYPEs that are never reference data, whatever their
// shape: the flight, season and request families, the ignored ones and
// names that would collide with the envelope itself.
var notRefData = map[string]bool{
	"SCHD": true, "FLOP": true, "FDEL": true, "RQRD": true, "RQFD": true,
	"EROR": true, "LDM": true, "SCHS": true, "META": true, "RECS": true, "MSG": true,
}

// Decode decodes one raw SIS message. loc is the airport time zone used for
// every SIS time of the message (nil means DefaultLocation()).
//
// The returned error, if any, is always a *DecodeError: MALFORMED when the
// message is broken, CODEC_ERROR when it is well-formed but not decodable by
// this version. Semantic checks that concern a whole package (declared record
// counts, missing FLID/SODT in a schedule) are left to the router.
func Decode(raw []byte, loc *time.Location) (*Message, error) {
	h, err := DecodeHead(raw, loc)
	if err != nil {
		return nil, err
	}
	return h.Decode()
}

// Head is a message whose META header is decoded and whose payload is not
// yet: the router matches its ignore rules on the header alone, so that an
// ignored message is never judged by a payload msgx cannot decode (004
// US-04).
type Head struct {
	// Meta is the decoded header.
	Meta Meta
	root *Node
	loc  *time.Location
}

// DecodeHead parses raw and decodes its META header only. Errors are as
// for Decode.
func DecodeHead(raw []byte, loc *time.Location) (h *Head, err error) {
	defer recoverCodec(&err)
	if loc == nil {
		loc = DefaultLocation()
	}
	root, meta, derr := decodeHead(raw, loc)
	if derr != nil {
		return nil, finish(derr)
	}
	return &Head{Meta: meta, root: root, loc: loc}, nil
}

// Decode decodes the payload of the message. Errors are as for Decode.
func (h *Head) Decode() (m *Message, err error) {
	defer recoverCodec(&err)
	m, derr := decodeBody(h.root, h.Meta, h.loc)
	if derr != nil {
		return nil, finish(derr)
	}
	return m, nil
}

// recoverCodec turns a panic of the decoder into a CODEC_ERROR: a panic
// would crash the router on every restart and block the FIFO for good; as a
// CODEC_ERROR the message goes DEAD and is replayable once the codec is
// fixed.
func recoverCodec(err *error) {
	if r := recover(); r != nil {
		*err = &DecodeError{Class: CodecError, Reason: clip(fmt.Sprintf("internal error: %v", r), maxReason)}
	}
}

// finish bounds the reason of derr and returns it as an error: reasons may
// quote the XML decoder's messages, which quote names of unbounded length
// from the input. derr is never nil, so the interface is never a typed nil.
func finish(derr *DecodeError) error {
	derr.Reason = clip(derr.Reason, maxReason)
	return derr
}

// decodeHead parses the document and decodes META.
func decodeHead(raw []byte, loc *time.Location) (*Node, Meta, *DecodeError) {
	if len(raw) > MaxMessageSize {
		return nil, Meta{}, malformed("message too large (%d bytes, limit %d)", len(raw), MaxMessageSize)
	}
	if len(bytes.Trim(raw, " \t\r\n")) == 0 {
		return nil, Meta{}, malformed("empty message")
	}
	doc, derr := toUTF8(raw)
	if derr != nil {
		return nil, Meta{}, derr
	}
	root, derr := parseTree(doc)
	if derr != nil {
		return nil, Meta{}, derr
	}
	if root.Name != "MSG" {
		return nil, Meta{}, malformed("root element is <%s>, want <MSG>", short(root.Name))
	}
	meta, derr := decodeMeta(root, loc)
	if derr != nil {
		return nil, Meta{}, derr
	}
	return root, meta, nil
}

// decodeBody decodes the payload META/TYPE names.
func decodeBody(root *Node, meta Meta, loc *time.Location) (*Message, *DecodeError) {
	var derr *DecodeError
	m := &Message{Meta: meta}
	switch meta.TYPE {
	case "SCHD":
		m.Kind = KindSchedule
		m.Schedule, derr = decodeSchedule(root)
	case "FLOP":
		m.Kind = KindFlightOp
		if meta.STYP == "FDEL" {
			m.Kind = KindFlightDelete
		}
		m.Flight, derr = decodeFlightOp(root, "FLOP", "FLOP")
	case "FDEL":
		// The format of a TYPE=FDEL message is not documented: accept the
		// FLOP shape under either body name.
		m.Kind = KindFlightDelete
		bodyName := "FDEL"
		if root.Child("FDEL") == nil && root.Child("FLOP") != nil {
			bodyName = "FLOP"
		}
		m.Flight, derr = decodeFlightOp(root, "FDEL", bodyName)
	case "RQRD":
		m.Kind = KindRefDataRequest
		m.RefDataRequest, derr = decodeRQRD(root)
	case "RQFD":
		m.Kind = KindFlightRequest
		m.FlightRequest, derr = decodeRQFD(root, loc)
	case "EROR":
		m.Kind = KindError
		m.Body = body(root)
		m.ErrorAnswer = decodeEROR(m.Body)
	case "LDM":
		m.Kind = KindLDM
		m.Body = body(root)
	case "SCHS":
		m.Kind = KindSeason
		m.Season, derr = decodeSeason(root)
	default:
		m.Kind = KindUnknown
		if !notRefData[meta.TYPE] {
			var ok bool
			m.RefData, ok, derr = decodeRefData(root, meta.TYPE)
			if ok {
				m.Kind = KindRefData
			}
		}
		if m.Kind == KindUnknown {
			m.Body = body(root)
		}
	}
	if derr != nil {
		return nil, derr
	}
	return m, nil
}

// decodeMeta decodes and checks the META header.
func decodeMeta(root *Node, loc *time.Location) (Meta, *DecodeError) {
	var meta Meta
	metaNode, derr := single(root, "META")
	if derr != nil {
		return meta, derr
	}
	if metaNode == nil {
		return meta, malformed("no META element")
	}
	// get returns the trimmed text of a META child that may appear once.
	get := func(tag string) (string, bool, *DecodeError) {
		n, derr := single(metaNode, tag)
		if derr != nil || n == nil {
			return "", false, derr
		}
		return n.TrimmedText(), true, nil
	}
	// The identity tags (SNDR|TYPE|STYP|SEQN) are required and non-empty.
	required := []struct {
		tag string
		dst *string
	}{{"SNDR", &meta.SNDR}, {"SEQN", &meta.SEQN}, {"TYPE", &meta.TYPE}, {"STYP", &meta.STYP}}
	for _, r := range required {
		v, ok, derr := get(r.tag)
		if derr != nil {
			return meta, derr
		}
		if !ok {
			return meta, malformed("META/%s missing", r.tag)
		}
		if v == "" {
			return meta, malformed("META/%s empty", r.tag)
		}
		*r.dst = v
	}
	meta.TYPE = strings.ToUpper(meta.TYPE)
	meta.STYP = strings.ToUpper(meta.STYP)
	if n, err := strconv.ParseInt(meta.SEQN, 10, 64); err == nil {
		meta.SEQNNum, meta.SEQNIsNum = n, true
	}
	optional := []struct {
		tag string
		dst *string
	}{{"RCVR", &meta.RCVR}, {"DTTM", &meta.DTTMRaw}, {"DDTM", &meta.DDTMRaw}}
	for _, o := range optional {
		v, _, derr := get(o.tag)
		if derr != nil {
			return meta, derr
		}
		*o.dst = v
	}
	if meta.DTTMRaw != "" {
		t, err := ParseDTTM(meta.DTTMRaw, loc)
		if err != nil {
			return meta, codecErr("META/DTTM", err)
		}
		meta.DTTM = t
	}
	return meta, nil
}

// decodeSchedule decodes <SCHD><RECS>n</RECS><FLTR>…</FLTR>*</SCHD>.
func decodeSchedule(root *Node) (*Schedule, *DecodeError) {
	n, derr := single(root, "SCHD")
	if derr != nil {
		return nil, derr
	}
	if n == nil {
		return nil, malformed("TYPE=SCHD without <SCHD> element")
	}
	s := &Schedule{}
	var other uniqueNames
	s.Declared, s.DeclaredPresent, derr = decodeRECS(n, "SCHD/RECS")
	if derr != nil {
		return nil, derr
	}
	for _, c := range n.Children {
		switch c.Name {
		case "RECS":
		case "FLTR":
			fr, _, derr := decodeFlight(c, false, fmt.Sprintf("SCHD/FLTR[%d]", len(s.Flights)+1))
			if derr != nil {
				return nil, derr
			}
			s.Flights = append(s.Flights, fr)
		default:
			other.add(c.Name)
		}
	}
	s.Other = other.list
	return s, nil
}

// decodeFlightOp decodes the single body element of a FLOP / FDEL message.
// typ names the message TYPE in reasons.
func decodeFlightOp(root *Node, typ, bodyName string) (*FlightOp, *DecodeError) {
	n, derr := single(root, bodyName)
	if derr != nil {
		return nil, derr
	}
	if n == nil {
		return nil, malformed("TYPE=%s without <%s> element", typ, bodyName)
	}
	if n.Child("FLID") == nil {
		return nil, malformed("%s without FLID", bodyName)
	}
	fr, del, derr := decodeFlight(n, true, bodyName)
	if derr != nil {
		return nil, derr
	}
	if fr.FLID == "" {
		return nil, malformed("%s/FLID empty", bodyName)
	}
	return &FlightOp{FlightRecord: fr, Delete: del}, nil
}

// decodeRECS parses the optional RECS child of n: a non-negative integer.
func decodeRECS(n *Node, path string) (int, bool, *DecodeError) {
	r, derr := single(n, "RECS")
	if derr != nil || r == nil {
		return 0, false, derr
	}
	v := r.TrimmedText()
	if _, ok := digits(v); !ok {
		return 0, true, &DecodeError{Class: CodecError, Reason: fmt.Sprintf("%s %q: not a non-negative integer", path, short(v))}
	}
	x, err := strconv.Atoi(v)
	if err != nil {
		return 0, true, &DecodeError{Class: CodecError, Reason: fmt.Sprintf("%s %q: out of range", path, short(v)), Err: err}
	}
	return x, true, nil
}

// decodeRQRD decodes <RQRD><RTYP>…</RTYP>…</RQRD>.
func decodeRQRD(root *Node) (*RefDataRequest, *DecodeError) {
	n, derr := single(root, "RQRD")
	if derr != nil {
		return nil, derr
	}
	if n == nil {
		return nil, malformed("TYPE=RQRD without <RQRD> element")
	}
	r := &RefDataRequest{}
	for _, c := range n.ChildrenNamed("RTYP") {
		if v := strings.ToUpper(c.TrimmedText()); v != "" {
			r.Types = append(r.Types, v)
		}
	}
	if len(r.Types) == 0 {
		return nil, malformed("RQRD without RTYP")
	}
	return r, nil
}

// decodeRQFD decodes <RQFD><STDB>ddMMMyyHHmm</STDB><STDE>…</STDE></RQFD>.
func decodeRQFD(root *Node, loc *time.Location) (*FlightRequest, *DecodeError) {
	n, derr := single(root, "RQFD")
	if derr != nil {
		return nil, derr
	}
	if n == nil {
		return nil, malformed("TYPE=RQFD without <RQFD> element")
	}
	r := &FlightRequest{}
	for _, f := range []struct {
		tag string
		raw *string
		t   *time.Time
	}{{"STDB", &r.FromRaw, &r.From}, {"STDE", &r.ToRaw, &r.To}} {
		c, derr := single(n, f.tag)
		if derr != nil {
			return nil, derr
		}
		if c == nil {
			return nil, malformed("RQFD without %s", f.tag)
		}
		*f.raw = c.TrimmedText()
		if *f.raw == "" {
			continue
		}
		t, err := ParseTime(*f.raw, loc)
		if err != nil {
			return nil, codecErr("RQFD/"+f.tag, err)
		}
		*f.t = t
	}
	return r, nil
}

// erorCodeTags and erorTextTags are the leaf names read as an EROR's code
// and text, first present wins. The EROR format is not documented: these
// are the names such answers commonly use (ECOD/ETXT in our tests).
var (
	erorCodeTags = []string{"ECOD", "CODE", "ERCD", "ERRC", "ERNO"}
	erorTextTags = []string{"ETXT", "TEXT", "DESC", "ERTX", "EMSG", "ERMS", "REMK"}
)

// maxErorText bounds ErrorAnswer.Text: one line on an operator's screen.
const maxErorText = 500

// decodeEROR extracts the obvious fields of an error answer.
func decodeEROR(body []*Node) *ErrorAnswer {
	ea := &ErrorAnswer{Fields: map[string]string{}}
	var others []string // "TAG=value" of the leaves not named below, in order
	var walk func(n *Node)
	walk = func(n *Node) {
		if len(n.Children) == 0 {
			if _, ok := ea.Fields[n.Name]; !ok {
				ea.Fields[n.Name] = n.TrimmedText()
				switch {
				case slices.Contains(erorCodeTags, n.Name), slices.Contains(erorTextTags, n.Name),
					n.Name == "SEQN", n.Name == "TYPE", n.Name == "STYP", n.TrimmedText() == "":
				default:
					others = append(others, n.Name+"="+n.TrimmedText())
				}
			}
			return
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, n := range body {
		walk(n)
	}
	ea.RefSEQN = ea.Fields["SEQN"]
	ea.RefTYPE = ea.Fields["TYPE"]
	ea.RefSTYP = ea.Fields["STYP"]
	ea.Code = firstField(ea.Fields, erorCodeTags)
	ea.Text = firstField(ea.Fields, erorTextTags)
	if ea.Text == "" {
		// Whatever else the AODB wrote is the operator's only clue.
		ea.Text = strings.Join(others, "; ")
	}
	if r := []rune(ea.Text); len(r) > maxErorText {
		ea.Text = string(r[:maxErorText-1]) + "…"
	}
	return ea
}

// firstField is the first non-empty field of tags.
func firstField(fields map[string]string, tags []string) string {
	for _, t := range tags {
		if v := fields[t]; v != "" {
			return v
		}
	}
	return ""
}

// body returns the children of MSG other than META.
func body(root *Node) []*Node {
	out := make([]*Node, 0, len(root.Children))
	for _, c := range root.Children {
		if c.Name != "META" {
			out = append(out, c)
		}
	}
	return out
}

// single returns the only child of n named name, nil when there is none, and
// a MALFORMED error when there are several (the message would be ambiguous).
func single(n *Node, name string) (*Node, *DecodeError) {
	var found *Node
	for _, c := range n.Children {
		if c.Name != name {
			continue
		}
		if found != nil {
			return nil, malformed("%s/%s repeated", short(n.Name), short(name))
		}
		found = c
	}
	return found, nil
}

// uniqueNames collects names in first-seen order without repeats.
type uniqueNames struct {
	list []string
	seen map[string]struct{}
}

// add appends s unless it was already added.
func (u *uniqueNames) add(s string) {
	if u.seen == nil {
		u.seen = map[string]struct{}{}
	}
	if _, ok := u.seen[s]; ok {
		return
	}
	u.seen[s] = struct{}{}
	u.list = append(u.list, s)
}
