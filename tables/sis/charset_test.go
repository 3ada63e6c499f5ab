package sis

import (
	"bytes"
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// TestCharset checks that Chinese text survives every way the inbox can
// deliver it.
func TestCharset(t *testing.T) {
	const chinese = "登机桥 212，由于机器问题"
	doc := func(decl string) string {
		return decl + envelope(metaOf("ABDG", "ADD"), "<RECS>1</RECS><ABDG><CDSC>"+chinese+"</CDSC></ABDG>")
	}
	gbk := func(s string) string {
		b, err := simplifiedchinese.GBK.NewEncoder().String(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	gb18030 := func(s string) string {
		b, err := simplifiedchinese.GB18030.NewEncoder().String(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// envelope already carries a UTF-8 declaration; strip it to set our own.
	strip := func(s string) string { return s[len(`<?xml version="1.0" encoding="UTF-8"?>`):] }
	tests := []struct {
		name string
		raw  string
	}{
		{"UTF-8 declared UTF-8", doc("")},
		{"UTF-8 bytes declared GB2312 (utf8mb4 inbox)", `<?xml version="1.0" encoding="GB2312"?>` + strip(doc(""))},
		{"GBK bytes declared GB2312", gbk(`<?xml version="1.0" encoding="GB2312"?>` + strip(doc("")))},
		{"GBK bytes declared gbk, single quotes", gbk(`<?xml version='1.0' encoding='gbk'?>` + strip(doc("")))},
		{"GB18030 bytes declared GB18030", gb18030(`<?xml version="1.0" encoding="GB18030"?>` + strip(doc("")))},
		{"GBK bytes without declaration", gbk(strip(doc("")))},
		{"UTF-8 with BOM", "\xEF\xBB\xBF" + doc("")},
		{"UTF-8 with BOM declared GBK", "\xEF\xBB\xBF" + `<?xml version="1.0" encoding="GBK"?>` + strip(doc(""))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode([]byte(tc.raw), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.RefData.Records[0]["CDSC"]; got != chinese {
				t.Errorf("CDSC = %q, want %q", got, chinese)
			}
		})
	}
	// The GBK case really is not UTF-8 (otherwise the test proves nothing).
	if raw := gbk(chinese); bytes.Equal([]byte(raw), []byte(chinese)) {
		t.Fatal("GBK encoding is the identity")
	}
}

// TestDeclaredEncoding checks the declaration scanner.
func TestDeclaredEncoding(t *testing.T) {
	tests := []struct{ in, want string }{
		{`<?xml version="1.0" encoding="GB2312"?><MSG/>`, "GB2312"},
		{"  \n<?xml version='1.0' encoding = 'utf-8' ?>", "utf-8"},
		{`<?xml version="1.0"?><MSG encoding="x"/>`, ""},
		{`<MSG/>`, ""},
		{`<?xml version="1.0" encoding="GB2312`, ""},
		{`<?xml version="1.0" encoding=GB2312?>`, ""},
		{`<?xml version="1.0" encoding?>`, ""},
	}
	for _, tc := range tests {
		if got := declaredEncoding([]byte(tc.in)); got != tc.want {
			t.Errorf("declaredEncoding(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
