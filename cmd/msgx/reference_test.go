package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"msgx/cmd/msgx/metric"
)

// docs/reference.md is generated from the code by `go generate ./cmd/msgx`,
// which runs TestReferenceIsGenerated with this flag (the generator needs
// the sources, for the fields' doc comments, and package main, for the
// commands: a test of this package has both).
var updateReference = flag.Bool("update-reference", false, "write docs/reference.md from the code")

const referencePath = "../../docs/reference.md"

// docs/reference.md is what the code generates: the configuration from
// Config (env tags, defaults, the fields' doc comments), the commands from
// their own flag sets, the metrics from the registry.
func TestReferenceIsGenerated(t *testing.T) {
	want, err := reference()
	if err != nil {
		t.Fatal(err)
	}
	if *updateReference {
		if err := os.WriteFile(referencePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v: run go generate ./cmd/msgx", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("docs/reference.md differs from what the code generates (run go generate ./cmd/msgx) at line %d:\n got: %s\nwant: %s", i+1, gl, wl)
		}
	}
}

// A Config field's doc comment is its reference entry: every variable has
// one, an integer's names its unit, and an empty or zero default says
// what it means.
func TestConfigDocsSayUnitsAndDefaults(t *testing.T) {
	vars, err := configVars()
	if err != nil {
		t.Fatal(err)
	}
	unit := regexp.MustCompile(`\b(bytes|rows|messages|records|events|flights|transitions|inputs|attempts|requests|connections|partitions|IDs|count|replicas|wrong credentials|failures|copies)\b`)
	for _, v := range vars {
		switch {
		case v.doc == "":
			t.Errorf("%s (%s) has no doc comment", v.name, v.field)
		case v.kind == "integer" && !unit.MatchString(v.doc):
			t.Errorf("%s (%s): the doc comment names no unit: %q", v.name, v.field, v.doc)
		case (v.def == "" || v.def == "0") && !regexp.MustCompile(`\b([Ee]mpty|0)\b`).MatchString(v.doc):
			t.Errorf("%s (%s): the default is %q, and the doc comment does not say what that means: %q", v.name, v.field, v.def, v.doc)
		}
	}
}

// Every MSGX_* variable the README and the manuals name is one msgx reads
// (or a test's), with the default they give it in passing ("`MSGX_X` (30
// s)", "(default `…`)"); every `msgx <command>` they name is a command,
// the manual's chapter 2 lists every command, and its Metrics table
// lists exactly the registry's metrics.
func TestDocsAgreeWithTheCode(t *testing.T) {
	vars, err := configVars()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	byName := map[string]configVar{}
	for _, v := range vars {
		known[v.name] = true
		byName[v.name] = v
	}
	// A default given in passing: a duration with its unit, or a value
	// after "default". "2 × `MSGX_X` (10 min)" is a multiple, not it.
	inPassing := regexp.MustCompile("(× )?`(MSGX_[A-Z0-9_]+)` \\((default )?(?:(\\d+(?:\\.\\d+)?) ?(ms|s|min|h|days?)\\b|`([^`]+)`|(\\d[\\d,: ]*\\d|\\d)\\b)")
	units := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "min": time.Minute, "h": time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour}
	for _, doc := range []string{"README.md", "docs/design.md", "docs/operations.md"} {
		b, err := os.ReadFile("../../" + doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range inPassing.FindAllStringSubmatch(string(b), -1) {
			v, ok := byName[m[2]]
			if m[1] != "" || !ok {
				continue
			}
			switch {
			case m[5] != "" && v.kind == "duration":
				n, _ := strconv.ParseFloat(m[4], 64)
				def, err := time.ParseDuration(v.def)
				if err != nil || time.Duration(n*float64(units[m[5]])) != def {
					t.Errorf("%s gives %s as %s %s, but its default is %s", doc, v.name, m[4], m[5], v.def)
				}
			case m[3] != "" && m[6] != "" && m[6] != v.def,
				m[3] != "" && m[7] != "" && strings.NewReplacer(",", "", " ", "").Replace(m[7]) != v.def:
				t.Errorf("%s gives %s's default as %s%s, but it is %q", doc, v.name, m[6], m[7], v.def)
			}
		}
	}
	name := regexp.MustCompile(`MSGX_[A-Z0-9_]*[A-Z0-9](_\*)?`)
	for _, doc := range []string{"README.md", "docs/design.md", "docs/operations.md"} {
		b, err := os.ReadFile("../../" + doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			switch {
			case known[n], strings.HasPrefix(n, "MSGX_TEST_"), strings.HasPrefix(n, "MSGX_BENCH_"), strings.HasPrefix(n, "MSGX_FAULTS"):
			case strings.HasSuffix(n, "_*"):
				prefix, found := strings.TrimSuffix(n, "*"), false
				for k := range known {
					found = found || strings.HasPrefix(k, prefix)
				}
				if !found {
					t.Errorf("%s names %s, but msgx reads no variable starting %s", doc, n, prefix)
				}
			default:
				t.Errorf("%s names %s, which msgx does not read", doc, n)
			}
		}
	}
	cmds := map[string]bool{"help": true}
	for _, c := range commands() {
		cmds[c.name] = true
	}
	manual, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"README.md", "docs/design.md", "docs/operations.md"} {
		b, err := os.ReadFile("../../" + doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("`msgx ([a-z]+)").FindAllStringSubmatch(string(b), -1) {
			// The log lines "msgx starting", "msgx stopped with an error".
			if !cmds[m[1]] && m[1] != "starting" && m[1] != "stopped" {
				t.Errorf("%s names the command msgx %s, which does not exist", doc, m[1])
			}
		}
	}
	_, roles, _ := strings.Cut(string(manual), "### Commands")
	roles, _, _ = strings.Cut(roles, "\n## ")
	for _, c := range commands() {
		if !strings.Contains(roles, "| `msgx "+c.name) {
			t.Errorf("the manual's Commands section does not list msgx %s", c.name)
		}
	}
	_, metrics, _ := strings.Cut(string(manual), "### Metrics")
	metrics, _, _ = strings.Cut(metrics, "\n### ")
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(msgx_[a-z_]+)`(?:, `(msgx_[a-z_]+)`)?").FindAllStringSubmatch(metrics, -1) {
		listed[m[1]], listed[m[2]] = true, m[2] != ""
	}
	for _, i := range metric.Catalogue() {
		if !listed[i.Name] {
			t.Errorf("the manual's Metrics table does not list %s", i.Name)
		}
		delete(listed, i.Name)
	}
	for n, ok := range listed {
		if ok {
			t.Errorf("the manual's Metrics table lists %s, which msgx does not export", n)
		}
	}
}

// configVar is one MSGX_* variable as the reference lists it.
type configVar struct {
	name, def, kind, doc string
	group                string // the Config field of its component ("" for the process-wide ones)
	field                string // pkg.Type.Field, for the tests' messages
	shared               bool   // read by more than one component's Config
}

// configGroups titles the components' sections, in Config's order.
var configGroups = map[string]string{
	"":          "Process",
	"DB":        "Databases",
	"Tables":    "The AODB's shared tables",
	"Kafka":     "Kafka",
	"Ingest":    "Ingest bridge",
	"HTTP":      "POST /cminmsgs/send",
	"Web":       "HTTP server",
	"Router":    "Router",
	"Flights":   "Flights processor",
	"Refdata":   "Reference-data processor",
	"Backfill":  "Backfill sweeper",
	"Requests":  "Outbound requests",
	"Schd":      "schd flusher",
	"Publisher": "Event publisher",
	"Jobs":      "Maintenance jobs",
	"History":   "Flight history sweep",
	"Status":    "Status report",
	"Page":      "Status page",
}

// configVars lists every variable of Config once, where a component's
// Config first reads it, with its field's doc comment.
func configVars() ([]configVar, error) {
	docs := map[reflect.Type]map[string]string{}
	fieldDocs := func(t reflect.Type) (map[string]string, error) {
		if d, ok := docs[t]; ok {
			return d, nil
		}
		d, err := structDocs(t)
		docs[t] = d
		return d, err
	}
	var out []configVar
	seen := map[string]int{}
	var walk func(t reflect.Type, group string) error
	walk = func(t reflect.Type, group string) error {
		d, err := fieldDocs(t)
		if err != nil {
			return err
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Time{}) {
				g := group
				if t == reflect.TypeOf(Config{}) {
					g = f.Name
					if _, ok := configGroups[g]; !ok {
						return fmt.Errorf("Config.%s has no section title in configGroups", g)
					}
				}
				if err := walk(f.Type, g); err != nil {
					return err
				}
				continue
			}
			tag := f.Tag.Get("env")
			if tag == "" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if i, ok := seen[name]; ok {
				out[i].shared = true
				continue
			}
			seen[name] = len(out)
			out = append(out, configVar{name: name, def: f.Tag.Get("envDefault"), kind: kindOf(f.Type),
				doc: d[f.Name], group: group, field: t.String() + "." + f.Name})
		}
		return nil
	}
	return out, walk(reflect.TypeOf(Config{}), "")
}

// structDocs reads the doc comments of struct type t's fields from its
// package's sources.
func structDocs(t reflect.Type) (map[string]string, error) {
	dir := "."
	if t.PkgPath() != "main" {
		dir = filepath.Join("..", "..", strings.TrimPrefix(t.PkgPath(), "msgx/"))
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	found := false
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != t.Name() {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			found = true
			for _, fl := range st.Fields.List {
				for _, id := range fl.Names {
					out[id.Name] = strings.Join(strings.Fields(fl.Doc.Text()), " ")
				}
			}
			return false
		})
	}
	if !found {
		return nil, fmt.Errorf("no struct %s in %s", t.Name(), dir)
	}
	return out, nil
}

func kindOf(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(time.Duration(0)):
		return "duration"
	case t.Kind() == reflect.Bool:
		return "bool"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "integer"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "list"
	case t.Name() == "Secret":
		return "secret"
	case t.Kind() == reflect.String:
		return "string"
	}
	return t.String()
}

var (
	// A doc comment starts with its field's name: "Timeout bounds …",
	// "PGDSN is …", "InboxLag: …". The reference drops it.
	leadVerb = regexp.MustCompile(`^[A-Z][A-Za-z0-9]* (?:(?:is|are) |([a-z]+s|must) )`)
	leadName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*: `)
	varName  = regexp.MustCompile(`\$\{MSGX_[A-Z0-9_]+\}|\bMSGX_[A-Z0-9_]*[A-Z0-9](?:_\*|=[^\s,;:)]*[^\s,;:).])?`)
	designLn = regexp.MustCompile(`docs/design\.md#([a-z0-9-]+)`)
)

// meaning is a doc comment as the reference's table shows it.
func meaning(doc string) string {
	if m := leadVerb.FindStringSubmatchIndex(doc); m != nil {
		if m[2] >= 0 {
			doc = doc[m[2]:] // keep the verb
		} else {
			doc = doc[m[1]:]
		}
	} else if m := leadName.FindStringIndex(doc); m != nil {
		doc = doc[m[1]:]
	}
	doc = varName.ReplaceAllString(doc, "`$0`")
	doc = designLn.ReplaceAllString(doc, "[design.md#$1](design.md#$1)")
	return strings.ReplaceAll(doc, "|", `\|`)
}

// reference renders docs/reference.md.
func reference() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`# msgx — reference

<!-- Generated by go generate ./cmd/msgx: do not edit by hand. -->

Generated from the code by ` + "`go generate ./cmd/msgx`" + `: the configuration from ` + "`cmd/msgx`" + `'s ` + "`Config`" + ` (each
variable's ` + "`env`" + ` tag, its default and its field's doc comment), the commands from their own flag
sets, the metrics from msgx's Prometheus registry. ` + "`TestReferenceIsGenerated`" + ` (in ` + "`make test`" + `) fails
when this file and the code disagree. How to use them: the [operator's manual](operations.md).

- [Configuration](#configuration)
- [Commands](#commands)
- [Metrics](#metrics)

`)
	if err := writeConfig(&b); err != nil {
		return nil, err
	}
	writeCommands(&b)
	writeMetrics(&b)
	return b.Bytes(), nil
}

func writeConfig(b *bytes.Buffer) error {
	vars, err := configVars()
	if err != nil {
		return err
	}
	b.WriteString(`<a id="configuration"></a>
## Configuration

Every setting is a ` + "`MSGX_*`" + ` environment variable; ` + "`msgx run`" + `, every role and every operator
command read the same ones. A value that does not parse or is out of range stops start-up (exit 2)
with one line naming the variable. Types: a *duration* is Go's (` + "`300ms`" + `, ` + "`30s`" + `, ` + "`5m`" + `, ` + "`720h`" + `: no
days); a *list* is comma-separated; a *bool* is ` + "`true`" + ` or ` + "`false`" + `; a *secret* is a string msgx never logs.
` + "`${MSGX_KAFKA_PREFIX}`" + ` in a default is that variable's value. A variable several components read is
listed once, marked *(shared)*.
`)
	group := "-"
	for _, v := range vars {
		if v.group != group {
			group = v.group
			fmt.Fprintf(b, "\n### %s\n\n| variable | default | type | meaning |\n|---|---|---|---|\n", configGroups[group])
		}
		def := "*(empty)*"
		if v.def != "" {
			def = "`" + v.def + "`"
		}
		doc := meaning(v.doc)
		if v.shared {
			doc += " *(shared)*"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", v.name, def, v.kind, doc)
	}
	b.WriteString("\n")
	return nil
}

func writeCommands(b *bytes.Buffer) {
	b.WriteString(`<a id="commands"></a>
## Commands

One binary: ` + "`msgx <command> [flags] [arguments]`" + `; flags may come before, after or between the
arguments, with one dash or two. ` + "`msgx help`" + ` lists the commands, ` + "`msgx <command> --help`" + ` shows one. Exit
status: 0 done, 1 the command failed, 2 a wrong command line or configuration. The daemons (` + "`run`" + `,
` + "`ingest`" + `, ` + "`process`" + `, ` + "`broker`" + `) log JSON lines on stderr; the other commands print their error as one
line ` + "`msgx <command>: …`" + `.
`)
	for _, c := range commands() {
		fs := flag.NewFlagSet("msgx "+c.name, flag.ContinueOnError)
		c.define(fs)
		fmt.Fprintf(b, "\n### msgx %s\n\n`msgx %s", c.name, c.name)
		if c.synopsis != "" {
			fmt.Fprintf(b, " %s", c.synopsis)
		}
		fmt.Fprintf(b, "`\n\n%s.", upperFirst(c.summary))
		if c.bare {
			b.WriteString(" Reads no configuration.")
		}
		b.WriteString("\n")
		first := true
		fs.VisitAll(func(f *flag.Flag) {
			if first {
				b.WriteString("\n| flag | default | meaning |\n|---|---|---|\n")
				first = false
			}
			name, usage := flag.UnquoteUsage(f)
			flagText := "`--" + f.Name
			if name != "" {
				flagText += " " + name
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				def = "`" + f.DefValue + "`"
			}
			fmt.Fprintf(b, "| %s` | %s | %s |\n", flagText, def, strings.ReplaceAll(usage, "|", `\|`))
		})
	}
	b.WriteString("\n")
}

func writeMetrics(b *bytes.Buffer) {
	b.WriteString(`<a id="metrics"></a>
## Metrics

What ` + "`/metrics`" + ` exports besides the Go runtime's and the process's (` + "`go_*`" + `, ` + "`process_*`" + `), with the help
text it carries. Which process exports which, and what to make of each: the manual's
[Metrics](operations.md#metrics).

| metric | type | labels | help |
|---|---|---|---|
`)
	for _, i := range metric.Catalogue() {
		labels := ""
		if len(i.Labels) > 0 {
			labels = "`" + strings.Join(i.Labels, "`, `") + "`"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", i.Name, i.Type, labels, strings.ReplaceAll(i.Help, "|", `\|`))
	}
}

func upperFirst(s string) string {
	for i, r := range s {
		return string(unicode.ToUpper(r)) + s[i+len(string(r)):]
	}
	return s
}
