package sis

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"msgx/internal/workload"
)

// scanCases are hand-written inputs for the fast path, with whether it must
// take them (fast) or leave them to parseTreeXML. Either way its tree must
// be parseTreeXML's (checkScan).
var scanCases = []struct {
	doc  string
	fast bool
}{
	// Structure.
	{`<a/>`, true},
	{`<a></a>`, true},
	{`<a >x</a >`, true},
	{"\n\t <a/>\n\r\n", true},
	{`<a><b/><c></c></a>`, true},
	{"<a>\n  <b>\n    <c>x</c>\n    <c> y </c>\n  </b>\n  <d/>\n</a>", true},
	{"<a>x<b/> y <c/> \n</a>", true},
	{"<a> <b/> x </a>", true},
	{"<a>  </a>", true},
	{"<a> <!--c--> <b/></a>", true},
	{"<a>x<!--c-->  <b/></a>", true},
	{"<a>x<!--c-->y<?p?>z</a>", true},
	{"<a><b/>x<!--c-->y</a>", true},
	{"<a>\r<!--c-->\n<b/></a>", true},
	{`<a></a></a>`, false},
	{`<a><b></a></b>`, false},
	{`</a>`, false},
	{`<a/><b/>`, false},
	{`<a/><a/>`, false},
	{`<a/>x`, false},
	{`x<a/>`, false},
	{`<a/>&#32;`, false},
	{"", false},
	{" \n", false},
	{"<!--c-->", false},
	{"<a", false},
	{"<", false},
	{"<a>", false},
	{"<a><b>x</b>", false},
	{"<a b", false},
	{`<a b="1`, false},
	{`<a b="1"`, false},
	{`<a/`, false},
	{`<a/ >`, false},
	{`<a></a`, false},
	{`<a></ a>`, false},
	{"\xEF\xBB\xBF<a/>", false},
	// Declaration, processing instructions, comments.
	{`<?xml version="1.0" encoding="UTF-8"?>` + "\n<a/>", true},
	{`<?xml version='1.0' encoding='GB2312'?><a/>`, true},
	{`<?xml encoding="x" version="1.0"?><a/>`, true},
	{`<?xml?><a/>`, true},
	{`<?xml version="1.1"?><a/>`, false},
	{`<?xml version="2"?><a/>`, false},
	{`<?xml version=1.1 version="1.0"?><a/>`, true},
	{`<?xml-stylesheet href="x.xsl"?><a/><?pi y?>`, true},
	{`<?xml version="1.0"?><?xml version="1.0"?><a><?xml version="1.0"?></a>`, true},
	{`<?xml version="1.0"?><a><?xml version="9"?></a>`, false},
	{`<?xml version="1.0"`, false},
	{`<? xml?><a/>`, false},
	{`<?中?><a/>`, false},
	{"<!-- c --><a/><!-- d -->", true},
	{"<!----><a/>", true},
	{"<!-- \x00\xff --><a/>", true},
	{"<!-- a -- b --><a/>", false},
	{"<!-- a --->", false},
	{"<!---><a/>", false},
	{"<!-x--><a/>", false},
	{"<!-- a <a/>", false},
	{"<!DOCTYPE a><a/>", false},
	{"<a><![CDATA[x]]></a>", false},
	// Names.
	{`<x:a></x:a>`, true},
	{`<x:a></a>`, false},
	{`<a></x:a>`, false},
	{`<x:a></y:a>`, false},
	{`<a.b-c_d1/>`, true},
	{`<_a/>`, true},
	{`<a:1/>`, true},
	{`<x:y:a/>`, false},
	{`<:a/>`, false},
	{`<a:/>`, false},
	{`<1a/>`, false},
	{`<-a/>`, false},
	{`<中/>`, false},
	{`<a中/>`, false},
	{"<a\xff/>", false},
	// Attributes.
	{`<a b='1' c="2"/>`, true},
	{"<a\n\tb\n=\n'1'\r\nc = \"x'y\"d='x\"y'/>", true},
	{`<a b="1"c="2"></a>`, true},
	{`<a b=""/>`, true},
	{`<a b="&lt;&gt;&amp;&apos;&quot;&#65;&#x42;"/>`, true},
	{"<a b=\"x\r\ny\rz\r\r\n\t&#9;&#10;&#13;\n\"/>", true},
	{`<a b="]]>" c=">"/>`, true},
	{`<a b="中文"/>`, true},
	{`<a xmlns="u" xmlns:x="v"/>`, true},
	{`<a xmlns:x="1" xmlns:x="2"/>`, true},
	{`<a xmlns:x="1" x:b="2" xml:lang="zh"/>`, true},
	{`<x:a xmlns:x="1" b="1"><x:b/></x:a>`, true},
	{`<a b="1" b="2"/>`, false},
	{`<a x:b="1" y:b="2"/>`, false},
	{`<a x:b="1" x:b="2"/>`, false},
	{`<a xmlns:="1"/>`, false},
	{`<a b="<"/>`, false},
	{`<a b=1/>`, false},
	{`<a b/>`, false},
	{`<a b c="1"/>`, false},
	{`<a "b"="1"/>`, false},
	{`<a b="&x;"/>`, false},
	{"<a b=\"\x01\"/>", false},
	{"<a b=\"\xff\"/>", false},
	{`<a b="1"` + strings.Repeat(` b1="1" b2="2" b3="3" b4="4"`, 4) + `/>`, false},
	{`<a` + strings.Repeat(` xmlns:x="1"`, 20) + `/>`, true},
	// Text.
	{`<a>x &lt; &gt; &amp; &apos; &quot; y</a>`, true},
	{`<a>&#65;&#x42;&#x10FFFF;&#0065;&#x00e9;&#XA;</a>`, false},
	{`<a>&#65;&#x42;&#x10FFFF;&#0065;&#x00e9;&#xA;&#xd7ff;&#xE000;&#xFFFD;</a>`, true},
	{`<a>&#0;</a>`, false},
	{`<a>&#8;</a>`, false},
	{`<a>&#xD800;</a>`, false},
	{`<a>&#xDFFF;</a>`, false},
	{`<a>&#xFFFE;</a>`, false},
	{`<a>&#xFFFF;</a>`, false},
	{`<a>&#x110000;</a>`, false},
	{`<a>&#99999999999999999999;</a>`, false},
	{`<a>&#;</a>`, false},
	{`<a>&#x;</a>`, false},
	{`<a>&#X41;</a>`, false},
	{`<a>&#65</a>`, false},
	{`<a>&#6a;</a>`, false},
	{`<a>&lt</a>`, false},
	{`<a>&LT;</a>`, false},
	{`<a>&nbsp;</a>`, false},
	{`<a>&</a>`, false},
	{`<a>&amp</a>`, false},
	{`<a>&#xD;&#13;&#10;x</a>`, true},
	{`<a>&#32;<b/></a>`, true},
	{`<a>&#32;x<b/></a>`, true},
	{`<a><b/>&#x20;&#9;<c/></a>`, true},
	{`<a>&#xD;<b/></a>`, true},
	{"<a>x\r\ny\rz\r\r\nw\r</a>", true},
	{"<a>\r&amp;\n&#13;\n</a>", true},
	{"<a>\r\n\t<b>x</b>\r\n</a>\r\n", true},
	{`<a>]]></a>`, false},
	{`<a>x]]>y</a>`, false},
	{`<a>]]&gt;</a>`, true},
	{`<a>]&#93;></a>`, true},
	{`<a>]] ></a>`, true},
	{`<a>>]</a>`, true},
	{`<a>"'</a>`, true},
	{"<a>\x01</a>", false},
	{"<a>\x00</a>", false},
	{"<a>\x1f</a>", false},
	{"<a>\x7f</a>", true},
	{"<a>\xff</a>", false},
	{"<a>\xe4\xb8</a>", false},
	{"<a>\xe4\xb8<b/></a>", false},
	{"<a>\xed\xa0\x80</a>", false},
	{"<a>\xef\xbf\xbe</a>", false},
	{"<a>\xef\xbf\xbd</a>", true},
	{"<a>\xf4\x8f\xbf\xbf</a>", true},
	{"<a>\xc0\x80</a>", false},
	{`<a>中文 登机桥 212</a>`, true},
	{"<a>\u3000</a>", true},
	// Depth.
	{strings.Repeat("<a>", MaxDepth) + strings.Repeat("</a>", MaxDepth), true},
	{strings.Repeat("<a>", MaxDepth+1) + strings.Repeat("</a>", MaxDepth+1), false},
	{strings.Repeat("<a>", MaxDepth) + "<b/>" + strings.Repeat("</a>", MaxDepth), false},
}

// checkScan fails t when scanTree takes doc but disagrees with parseTreeXML.
func checkScan(t *testing.T, doc []byte) (ok bool) {
	t.Helper()
	got, ok := scanTree(doc)
	if !ok {
		if got != nil {
			t.Fatalf("scanTree(%q) returned a tree with ok false", doc)
		}
		return false
	}
	want, derr := parseTreeXML(doc)
	if derr != nil {
		t.Fatalf("scanTree(%q) accepted what parseTreeXML refuses: %v", doc, derr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scanTree(%q):\n got %#v\nwant %#v", doc, got, want)
	}
	return true
}

func TestScanTree(t *testing.T) {
	for _, tc := range scanCases {
		if ok := checkScan(t, []byte(tc.doc)); ok != tc.fast {
			t.Errorf("scanTree(%q): ok %v, want %v", tc.doc, ok, tc.fast)
		}
	}
}

// TestScanTreeLimits checks that the size limits are left to parseTreeXML.
func TestScanTreeLimits(t *testing.T) {
	// 16 attributes, half of them namespace declarations, which count too.
	attrs16 := `<a b1="1" b2="2" b3="3" b4="4" b5="5" b6="6" b7="7" b8="8"` + strings.Repeat(` xmlns:c="1"`, 8) + "/>"
	for _, tc := range []struct {
		name string
		doc  string
		fast bool
	}{
		{"elements at limit", "<r>" + strings.Repeat("<a/>", MaxElements-1) + "</r>", true},
		{"elements over limit", "<r>" + strings.Repeat("<a/>", MaxElements) + "</r>", false},
		{"attributes at limit", "<r>" + strings.Repeat(attrs16, MaxAttributes/16) + "</r>", true},
		{"attributes over limit", "<r x=\"1\">" + strings.Repeat(attrs16, MaxAttributes/16) + "</r>", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ok := checkScan(t, []byte(tc.doc)); ok != tc.fast {
				t.Errorf("ok %v, want %v", ok, tc.fast)
			}
		})
	}
}

// TestScanTreeRealMessages proves that real traffic takes the fast path:
// every sample message and every message of generated days (as the
// benchmarks make them) that parseTreeXML accepts, scanTree accepts too,
// with the same tree; the broken ones are left to parseTreeXML.
func TestScanTreeRealMessages(t *testing.T) {
	check := func(t *testing.T, doc []byte) {
		t.Helper()
		_, derr := parseTreeXML(doc)
		if ok := checkScan(t, doc); ok != (derr == nil) {
			t.Fatalf("scanTree ok %v, parseTreeXML error %v:\n%s", ok, derr, doc)
		}
	}
	for _, s := range loadSamples(t) {
		t.Run(s.Name(), func(t *testing.T) {
			// What Decode hands to parseTree.
			doc, derr := toUTF8([]byte(s.XML))
			if derr != nil {
				t.Fatal(derr)
			}
			check(t, doc)
		})
	}
	for _, o := range []workload.Options{
		{Seed: 1, Flights: 300, Ops: 2000, SharedEvery: 20},
		{Seed: 2, Flights: 300, Ops: 2000, Codeshare: true},
	} {
		for _, m := range workload.Day(o) {
			check(t, []byte(m))
		}
	}
}

// TestScanTreeGenerated compares the paths on random documents made of the
// constructs the fast path handles and of some it does not, well-formed
// mostly.
func TestScanTreeGenerated(t *testing.T) {
	var (
		names = []string{"a", "B", "p:a", "q:a", "p:B", "xmlns", "a.b-c"}
		attrs = []string{` x="1"`, ` y='2'`, ` p:x="3"`, ` xmlns="u"`, ` xmlns:p="u"`, "\n\tz = \"&lt;&#x9;\r\n\r\"",
			` w="]]>&quot;'"`, ` v='"&apos;中'`, ` x="&#0;"`, ` u="<"`}
		texts = []string{"x", " ", "\n\t", "\r\n", "\r", "&#32;", "&#xD;", "&lt;&gt;&amp;", "]]", ">", "]]>", "中文",
			"&#x4E2D;", "\u3000", "&#xD800;", "&bad;", "\x01", "\xff", "<!--c-->", "<!---->", "<?pi x?>",
			`<?xml version="1.0"?>`, "<![CDATA[x]]>", "<!-- -- -->"}
		rng  = rand.New(rand.NewPCG(1, 2))
		pick = func(l []string) string { return l[rng.IntN(len(l))] }
	)
	var elem func(b *strings.Builder, depth int)
	elem = func(b *strings.Builder, depth int) {
		name := pick(names)
		b.WriteString("<" + name)
		for range rng.IntN(3) {
			b.WriteString(pick(attrs))
		}
		if rng.IntN(4) == 0 {
			b.WriteString("/>")
			return
		}
		b.WriteString(">")
		for range rng.IntN(5) {
			if depth < 4 && rng.IntN(2) == 0 {
				elem(b, depth+1)
			} else {
				b.WriteString(pick(texts))
			}
		}
		b.WriteString("</" + name + ">")
	}
	fast := 0
	const n = 20_000
	for range n {
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
		}
		elem(&b, 0)
		doc := b.String()
		if rng.IntN(10) == 0 {
			// Break it somewhere.
			i := rng.IntN(len(doc) + 1)
			doc = doc[:i] + pick(append(texts, "<", "</a>", "<a>", `"`)) + doc[i:]
		}
		if checkScan(t, []byte(doc)) {
			fast++
		}
	}
	// The generator is worth its time only if many documents are taken.
	if fast < n/10 {
		t.Errorf("fast path taken by %d documents of %d", fast, n)
	}
	t.Logf("fast path taken by %d documents of %d", fast, n)
}

// FuzzScanTree checks that whatever the fast path takes, parseTreeXML takes
// too, with the same tree.
func FuzzScanTree(f *testing.F) {
	for _, s := range loadSamples(f) {
		f.Add([]byte(s.XML))
	}
	for _, tc := range scanCases {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkScan(t, doc)
		// As element content, fragments reach the accepting paths far
		// more often.
		checkScan(t, append(append([]byte("<r>"), doc...), "</r>"...))
	})
}

// BenchmarkParseTree compares the two paths on the samples of
// BenchmarkDecode and BenchmarkDecodeFLOP.
func BenchmarkParseTree(b *testing.B) {
	for _, file := range []string{"INSERT_CMINMSGS_SCHD.sql", "INSERT_CMINMSGS_GTDT.sql"} {
		doc := sampleXML(b, file, 0)
		for _, p := range []struct {
			name  string
			parse func([]byte) (*Node, *DecodeError)
		}{{"scan", parseTree}, {"xml", parseTreeXML}} {
			b.Run(file[len("INSERT_CMINMSGS_"):len(file)-len(".sql")]+"/"+p.name, func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				b.ReportAllocs()
				for b.Loop() {
					if _, derr := p.parse(doc); derr != nil {
						b.Fatal(derr)
					}
				}
			})
		}
	}
}
