package sis

import (
	"strings"
	"time"
)

// EncodeRQRD encodes our reference data request: TYPE=RQRD, STYP = the
// requested types joined with "," and one <RTYP> per type in the body. m
// supplies SNDR, SEQN, DTTM (or DTTMRaw) and the optional RCVR and DDTMRaw;
// its TYPE and STYP are ignored. Types are trimmed and upper-cased; the
// caller must pass at least one (an empty STYP does not decode).
func EncodeRQRD(m Meta, rtypes []string) []byte {
	types := make([]string, 0, len(rtypes))
	for _, t := range rtypes {
		if t = strings.ToUpper(trimXMLSpace(t)); t != "" {
			types = append(types, t)
		}
	}
	var b strings.Builder
	writeHead(&b, m, "RQRD", strings.Join(types, ","))
	b.WriteString("  <RQRD>\n")
	for _, t := range types {
		writeElem(&b, "    ", "RTYP", t)
	}
	b.WriteString("  </RQRD>\n</MSG>\n")
	return []byte(b.String())
}

// EncodeRQFD encodes our flight data request for scheduled times from..to:
// TYPE=RQFD, STYP=NONE, body <RQFD><STDB>ddMMMyyHHmm</STDB><STDE>…</STDE></RQFD>.
// The times are formatted in their own location, which should be the airport
// time zone.
func EncodeRQFD(m Meta, from, to time.Time) []byte {
	var b strings.Builder
	writeHead(&b, m, "RQFD", "NONE")
	b.WriteString("  <RQFD>\n")
	writeElem(&b, "    ", "STDB", FormatTime(from))
	writeElem(&b, "    ", "STDE", FormatTime(to))
	b.WriteString("  </RQFD>\n</MSG>\n")
	return []byte(b.String())
}

// writeHead writes the XML declaration, <MSG> and the META block.
func writeHead(b *strings.Builder, m Meta, typ, styp string) {
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<MSG>\n  <META>\n")
	writeElem(b, "    ", "SNDR", m.SNDR)
	if m.RCVR != "" {
		writeElem(b, "    ", "RCVR", m.RCVR)
	}
	writeElem(b, "    ", "SEQN", m.SEQN)
	switch {
	case !m.DTTM.IsZero():
		writeElem(b, "    ", "DTTM", FormatDTTM(m.DTTM))
	case m.DTTMRaw != "":
		writeElem(b, "    ", "DTTM", m.DTTMRaw)
	}
	if m.DDTMRaw != "" {
		writeElem(b, "    ", "DDTM", m.DDTMRaw)
	}
	writeElem(b, "    ", "TYPE", typ)
	writeElem(b, "    ", "STYP", styp)
	b.WriteString("  </META>\n")
}

// writeElem writes one indented leaf element with escaped text.
func writeElem(b *strings.Builder, indent, name, text string) {
	b.WriteString(indent)
	b.WriteByte('<')
	b.WriteString(name)
	b.WriteByte('>')
	escapeText(b, text)
	b.WriteString("</")
	b.WriteString(name)
	b.WriteString(">\n")
}
