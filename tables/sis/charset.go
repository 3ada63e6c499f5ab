package sis

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// utf8BOM is the byte order mark some writers put before the XML declaration.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// toUTF8 returns the message as UTF-8 bytes ready for the XML parser.
//
// Rows read from the MySQL utf8mb4 inbox are already UTF-8 even when their
// declaration still says GB2312 (the AODB's writer converted them), so valid
// UTF-8 is passed through unchanged whatever the declaration says. Anything
// else is decoded as GB18030 (a superset of GB2312 and GBK) when the
// declaration names a Chinese charset, UTF-8 or nothing at all (bytes that are
// not UTF-8 under a UTF-8 label are, in practice, GBK sent through the HTTP
// endpoint); any other declared charset is not supported by this version.
func toUTF8(raw []byte) ([]byte, *DecodeError) {
	raw = bytes.TrimPrefix(raw, utf8BOM)
	if utf8.Valid(raw) {
		return raw, nil
	}
	label := declaredEncoding(raw)
	switch {
	case label == "", isUTF8Label(label), isChineseLabel(label):
		out, err := simplifiedchinese.GB18030.NewDecoder().Bytes(raw)
		if err != nil {
			// The GB18030 decoder replaces invalid bytes instead of failing,
			// so this is not expected; keep it a retryable codec problem.
			return nil, codecErr("decoding GB18030", err)
		}
		return out, nil
	default:
		return nil, &DecodeError{Class: CodecError, Reason: fmt.Sprintf("unsupported encoding %q", short(label))}
	}
}

// declaredEncoding returns the encoding pseudo-attribute of the XML
// declaration at the start of b, or "" when there is none.
func declaredEncoding(b []byte) string {
	b = bytes.TrimLeft(b, " \t\r\n")
	if !bytes.HasPrefix(b, []byte("<?xml")) {
		return ""
	}
	end := bytes.Index(b, []byte("?>"))
	if end < 0 {
		return ""
	}
	decl := string(b[:end])
	i := strings.Index(decl, "encoding")
	if i < 0 {
		return ""
	}
	rest := strings.TrimLeft(decl[i+len("encoding"):], " \t\r\n")
	if !strings.HasPrefix(rest, "=") {
		return ""
	}
	rest = strings.TrimLeft(rest[1:], " \t\r\n")
	if rest == "" || (rest[0] != '"' && rest[0] != '\'') {
		return ""
	}
	q := rest[0]
	j := strings.IndexByte(rest[1:], q)
	if j < 0 {
		return ""
	}
	return rest[1 : 1+j]
}

func isUTF8Label(label string) bool {
	switch strings.ToLower(label) {
	case "utf-8", "utf8":
		return true
	}
	return false
}

func isChineseLabel(label string) bool {
	switch strings.ToLower(label) {
	case "gb2312", "gbk", "gb18030", "cp936", "ms936", "windows-936", "euc-cn", "x-gbk", "csgb2312", "gb_2312-80":
		return true
	}
	return false
}
