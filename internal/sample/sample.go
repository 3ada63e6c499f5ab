package sample

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Sample is one message found in a sample SQL file.
type Sample struct {
	// File is the base name of the SQL file holding the message.
	File string
	// Label is the text of the "--" comment line preceding the INSERT,
	// trimmed (e.g. "DNLD", "UPD", "Delete"); empty when there is none.
	Label string
	// Index is the 0-based position of the message within its file.
	Index int
	// XML is the message text, with SQL string escapes resolved.
	XML string
}

// Name returns a stable, human-readable identifier such as
// "INSERT_CMINMSGS_SCHD.sql#0(DNLD)", suitable as a subtest name.
func (s Sample) Name() string {
	return fmt.Sprintf("%s#%d(%s)", s.File, s.Index, s.Label)
}

// Dir returns the absolute path of testdata/sis-samples of the module that
// contains the working directory, found by walking up to the directory that
// holds go.mod. It returns "" when no go.mod is found.
func Dir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "sis-samples")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Load reads every *.sql file of dir (in name order) and returns the
// messages of all INSERT statements into the cminmsgs table, in file order.
// Files without such statements (e.g. the schema script) contribute nothing.
func Load(dir string) ([]Sample, error) {
	if dir == "" {
		return nil, errors.New("loading samples: no sample directory (go.mod not found?)")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("loading samples from %s: %w", dir, err)
	}
	sort.Strings(files)
	var out []Sample
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("loading samples: %w", err)
		}
		got, err := Parse(filepath.Base(f), string(data))
		if err != nil {
			return nil, fmt.Errorf("loading samples: %w", err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// Parse extracts the messages of the INSERT INTO … cminmsgs statements of
// one SQL script. The message is the first value of each VALUES tuple and
// must be a string literal. file is used for Sample.File and error messages.
func Parse(file, sql string) ([]Sample, error) {
	p := parser{src: sql}
	var out []Sample
	for {
		st, ok, err := p.statement()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if !ok {
			return out, nil
		}
		if !st.isInboxInsert() {
			continue
		}
		for _, xml := range st.firstValues {
			out = append(out, Sample{File: file, Label: st.label, Index: len(out), XML: xml})
		}
	}
}

// statement is what the scanner keeps of one SQL statement.
type statement struct {
	label       string   // last "--" comment seen before the statement text
	words       []string // upper-cased bare words, in order (enough to recognise INSERT … cminmsgs)
	firstValues []string // first literal of each VALUES tuple
}

// isInboxInsert reports whether the statement is INSERT [modifiers] INTO
// [db.]cminmsgs (table names compare case-insensitively, quoted or not).
func (s statement) isInboxInsert() bool {
	if len(s.words) == 0 || s.words[0] != "INSERT" {
		return false
	}
	into := -1
	for i, w := range s.words {
		if w == "INTO" {
			into = i
			break
		}
	}
	if into < 0 {
		return false
	}
	// The table name is every word between INTO and the VALUES keyword,
	// e.g. "aodbinterface.cminmsgs" or `aodbinterface` . `cminmsgs`.
	var table strings.Builder
	for _, w := range s.words[into+1:] {
		if w == "VALUES" || w == "VALUE" || w == "SET" || w == "SELECT" {
			break
		}
		table.WriteString(w)
	}
	name := table.String()
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return name == "CMINMSGS"
}

// parser is a minimal MySQL script scanner: it understands comments, string
// literals with MySQL escapes, quoted identifiers and statement boundaries,
// which is all the sample files need.
type parser struct {
	src  string
	pos  int
	line int
}

// statement scans up to and including the next ';' (or the end of input).
// ok is false when only whitespace and comments were left.
func (p *parser) statement() (st statement, ok bool, err error) {
	depth := 0
	inValues := false
	tupleHasFirst := false
	started := false
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '\n':
			p.line++
			p.pos++
		case c == ' ' || c == '\t' || c == '\r':
			p.pos++
		case strings.HasPrefix(p.src[p.pos:], "--") || c == '#':
			// A line comment; before a statement it is the sample's label.
			end := strings.IndexByte(p.src[p.pos:], '\n')
			if end < 0 {
				end = len(p.src) - p.pos
			}
			text := p.src[p.pos : p.pos+end]
			p.pos += end
			if !started {
				st.label = strings.TrimSpace(strings.TrimLeft(text, "-#"))
			}
		case strings.HasPrefix(p.src[p.pos:], "/*"):
			end := strings.Index(p.src[p.pos+2:], "*/")
			if end < 0 {
				return st, false, fmt.Errorf("line %d: unterminated /* comment", p.line+1)
			}
			p.line += strings.Count(p.src[p.pos:p.pos+2+end+2], "\n")
			p.pos += 2 + end + 2
		case c == '\'' || c == '"' || c == '`':
			started = true
			startLine := p.line + 1
			s, err := p.literal(c)
			if err != nil {
				return st, false, fmt.Errorf("line %d: %w", startLine, err)
			}
			if c == '`' {
				// A quoted identifier (e.g. the table name) counts as a word.
				if depth == 0 {
					st.words = append(st.words, strings.ToUpper(s))
				}
				continue
			}
			if inValues && depth == 1 && !tupleHasFirst {
				st.firstValues = append(st.firstValues, s)
				tupleHasFirst = true
			}
		case c == '(':
			started = true
			depth++
			if depth == 1 {
				tupleHasFirst = false
			}
			p.pos++
		case c == ')':
			depth--
			p.pos++
		case c == ',':
			if depth == 1 {
				// Only the first value of a tuple is the message.
				tupleHasFirst = true
			}
			p.pos++
		case c == ';':
			p.pos++
			return st, true, nil
		default:
			started = true
			start := p.pos
			for p.pos < len(p.src) && isWordByte(p.src[p.pos]) {
				p.pos++
			}
			if p.pos == start {
				p.pos++ // any other punctuation
				continue
			}
			w := strings.ToUpper(p.src[start:p.pos])
			if depth == 0 {
				st.words = append(st.words, w)
				if w == "VALUES" || w == "VALUE" {
					inValues = true
				}
			}
		}
	}
	if depth != 0 {
		return st, false, fmt.Errorf("line %d: unbalanced parentheses at end of file", p.line+1)
	}
	return st, started, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// literal reads a quoted string or identifier starting at p.pos (the opening
// quote q) and returns its unescaped value. Strings follow MySQL's rules in
// the default sql_mode: a doubled quote stands for one quote, and a
// backslash starts an escape (\0 \b \n \r \t \Z map to control characters,
// \% and \_ keep their backslash, any other escaped character stands for
// itself). Backquoted identifiers only know the doubled quote.
func (p *parser) literal(q byte) (string, error) {
	var b strings.Builder
	p.pos++ // opening quote
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == q:
			if p.pos+1 < len(p.src) && p.src[p.pos+1] == q {
				b.WriteByte(q)
				p.pos += 2
				continue
			}
			p.pos++
			return b.String(), nil
		case c == '\\' && q != '`':
			if p.pos+1 >= len(p.src) {
				return "", errors.New("unterminated string literal")
			}
			e := p.src[p.pos+1]
			p.pos += 2
			switch e {
			case '0':
				b.WriteByte(0)
			case 'b':
				b.WriteByte('\b')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'Z':
				b.WriteByte(0x1a)
			case '%', '_':
				// MySQL keeps the backslash so that LIKE patterns work.
				b.WriteByte('\\')
				b.WriteByte(e)
			default:
				if e == '\n' {
					p.line++
				}
				b.WriteByte(e)
			}
		default:
			if c == '\n' {
				p.line++
			}
			b.WriteByte(c)
			p.pos++
		}
	}
	return "", errors.New("unterminated string literal")
}

// XML is the text of message index of the sample file file (a test's
// fixture: a missing one fails the test).
func XML(t testing.TB, file string, index int) string {
	t.Helper()
	all, err := Load(Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.File == file && s.Index == index {
			return s.XML
		}
	}
	t.Fatalf("no sample %s#%d", file, index)
	return ""
}
