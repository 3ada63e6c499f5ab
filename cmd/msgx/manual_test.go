package main

import (
	"flag"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The operator's manual names nothing the code does not have: every
// `msgx …` command line (command, action, flags), every MSGX_* variable,
// every msgx_* metric, every Msgx* alert and every log line it quotes is
// looked up in the code's own registries — the command table and the
// commands' flag sets, the Config's env tags, the metric package, the
// Prometheus rules, the string literals of the Go sources. A name found in
// none of them is a stranger, and the test fails naming it.
//
// Log lines are quoted by a convention the test relies on: right after
// their level (INFO `…`, WARN `…`, ERROR `…`, DEBUG `…`), or in the first
// column of a table whose header's first cell is `msg`. "…" stands for a
// part that varies.
func TestManualNamesExist(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range manualStrangers(string(b), manualRegistries(t)) {
		t.Error(s)
	}
}

// The check fails on a stranger of each kind.
func TestManualNamesExistCatchesStrangers(t *testing.T) {
	reg := manualRegistries(t)
	for _, bad := range []string{
		"Run `msgx stauts` first.",
		"Run `msgx replay --class EXHAUSTED --dryrun`.",
		"Run `msgx backfill reopn 12`.",
		"```sh\nmsgx rebuild --yes --force\n```",
		"Set `MSGX_POLL_INTERVALL`.",
		"Watch `msgx_inbox_lagg`.",
		"The alert `MsgxInboxLagging` fires.",
		"It logs WARN `process lock lost: processors stopped, waiting as a standby`.",
		"It logs WARN `the process lock lost: processors stopped,\nwaiting as a standby` (wrapped).",
		"Then run `msgx backfill\n  reopen-all` (wrapped, in a list item).",
		"| `msg` | level | meaning |\n|---|---|---|\n| `ingest poll went wrong` | WARN | … |",
	} {
		if got := manualStrangers(bad, reg); len(got) == 0 {
			t.Errorf("no stranger found in %q", bad)
		}
	}
	good := "Run `msgx status --exit-code`, `msgx backfill reopen 12`, `msgx migrate down 1`; set `MSGX_KAFKA_TLS_*`; " +
		"watch `msgx_end_to_end_seconds_bucket` and `msgx_router_batch*`; `MsgxDown` fires; it logs WARN `the process lock lost: the " +
		"single processing roles stopped, waiting for it again` and ERROR `flights processor halted: …`."
	if got := manualStrangers(good, reg); len(got) > 0 {
		t.Errorf("strangers in a correct text: %q", got)
	}
}

// registries is what the code has, by kind.
type registries struct {
	commands  map[string]*command
	variables []string
	metrics   map[string]bool
	alerts    map[string]bool
	// literals are every string literal of the non-test Go sources, each
	// between NULs, for the log-line check.
	literals string
	whole    map[string]bool
}

func manualRegistries(t *testing.T) *registries {
	t.Helper()
	r := &registries{commands: map[string]*command{}, metrics: map[string]bool{}, alerts: map[string]bool{}, whole: map[string]bool{}}
	cmds := commands()
	for i := range cmds {
		r.commands[cmds[i].name] = &cmds[i]
	}
	keys := map[string][]string{}
	collectKeys(reflect.TypeOf(Config{}), keys)
	for _, names := range keys {
		r.variables = append(r.variables, names...)
	}
	sort.Strings(r.variables)

	var lits strings.Builder
	lits.WriteByte(0)
	root := "../.."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		metricPkg := filepath.ToSlash(filepath.Dir(path)) == "../../cmd/msgx/metric"
		var s scanner.Scanner
		fset := token.NewFileSet()
		s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
		for {
			_, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok != token.STRING {
				continue
			}
			v, err := strconv.Unquote(lit)
			if err != nil {
				continue
			}
			lits.WriteString(v)
			lits.WriteByte(0)
			r.whole[v] = true
			if metricPkg && metricName.MatchString(v) {
				r.metrics[v] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.literals = lits.String()
	if len(r.metrics) < 40 {
		t.Fatalf("found %d metrics in cmd/msgx/metric: the registry moved?", len(r.metrics))
	}

	rules, err := os.ReadFile("../../deploy/prometheus/msgx-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
		r.alerts[m[1]] = true
	}
	return r
}

var (
	metricName = regexp.MustCompile(`^msgx_[a-z0-9_]+$`)
	codeSpan   = regexp.MustCompile("`([^`\n]+)`")
	fence      = regexp.MustCompile("(?ms)^```[^\n]*\n(.*?)^```")
	// Names mentioned anywhere, code or prose. A trailing * makes a
	// prefix (MSGX_KAFKA_TLS_*).
	variableRef = regexp.MustCompile(`\bMSGX_[A-Z0-9_]*[A-Z0-9](_?\*)?`)
	metricRef   = regexp.MustCompile(`\bmsgx_[a-z0-9_]*[a-z0-9](_?\*)?`)
	alertRef    = regexp.MustCompile(`\bMsgx[A-Z][A-Za-z]+\b`)
	// A command line in a code block: msgx at the start of a command
	// (line start, a prompt, after | ; && xargs or a subshell), not the
	// user name of `sudo -u msgx`.
	blockCommand = regexp.MustCompile(`(?m)(?:^\s*(?:\$ )?|[|;(]\s*|&&\s*|xargs\s+|\)\s+|[A-Z_]+=\S*\s+)msgx ([^\n|;&#)]*)`)
	logLevelSpan = regexp.MustCompile("\\b(?:DEBUG|INFO|WARN|ERROR)(?:/[A-Z]+)*,? `([^`\n]+)`")
	continuation = regexp.MustCompile(`\n[ \t]*([^|\n])`)
)

// nonMetrics are msgx_* names the manual mentions that are no metric, each
// with the Go source that defines it.
var nonMetrics = map[string]string{
	"msgx_read": "../../internal/web", // the status page's session cookie
}

// manualStrangers returns one line per name in text the registries lack.
func manualStrangers(text string, r *registries) []string {
	var out []string
	seen := map[string]bool{}
	report := func(format string, args ...any) {
		s := strings.TrimSpace(fmt.Sprintf(format, args...))
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}

	for _, m := range variableRef.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[0]:m[1]]
		if m[2] >= 0 {
			prefix := strings.TrimRight(name, "*")
			if !anyHasPrefix(r.variables, prefix) {
				report("the manual names variables %s, and no MSGX_* variable starts so", name)
			}
			continue
		}
		if i := sort.SearchStrings(r.variables, name); i == len(r.variables) || r.variables[i] != name {
			report("the manual names %s, which is no variable msgx reads (Config's env tags)", name)
		}
	}

	for _, m := range metricRef.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[0]:m[1]]
		if m[2] >= 0 {
			prefix := strings.TrimRight(name, "*")
			found := false
			for k := range r.metrics {
				found = found || strings.HasPrefix(k, prefix)
			}
			if !found {
				report("the manual names metrics %s, and no metric starts so", name)
			}
			continue
		}
		if dir, ok := nonMetrics[name]; ok {
			if !dirHasLiteral(dir, name) {
				report("the manual names %s, which %s no longer defines", name, dir)
			}
			continue
		}
		base := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && r.metrics[b] {
				base = b
			}
		}
		if !r.metrics[base] {
			report("the manual names %s, which is no metric of cmd/msgx/metric", name)
		}
	}

	for _, name := range alertRef.FindAllString(text, -1) {
		if !r.alerts[name] {
			report("the manual names the alert %s, which deploy/prometheus/msgx-rules.yml does not define", name)
		}
	}

	// Log lines, quoted by the convention above.
	var logs []string
	prose := fence.ReplaceAllString(text, "")
	// Code spans may wrap: a line that continues a paragraph or a list
	// item is joined to the one before (table rows stay lines).
	joined := continuation.ReplaceAllString(prose, " $1")
	for _, m := range logLevelSpan.FindAllStringSubmatch(joined, -1) {
		logs = append(logs, m[1])
	}
	inLogTable := false
	for _, line := range strings.Split(prose, "\n") {
		switch {
		case strings.HasPrefix(line, "| `msg` |"):
			inLogTable = true
		case !strings.HasPrefix(line, "|"):
			inLogTable = false
		case inLogTable:
			first := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 2)[0]
			for _, m := range codeSpan.FindAllStringSubmatch(first, -1) {
				logs = append(logs, m[1])
			}
		}
	}

	// Command lines: code spans that start with "msgx " (and are no log
	// line), and commands in code blocks.
	var lines []string
	for _, m := range fence.FindAllStringSubmatch(text, -1) {
		for _, c := range blockCommand.FindAllStringSubmatch(m[1], -1) {
			lines = append(lines, "msgx "+c[1])
		}
	}
	for _, m := range codeSpan.FindAllStringSubmatch(joined, -1) {
		if strings.HasPrefix(m[1], "msgx ") && !contains(logs, m[1]) {
			line, _, _ := strings.Cut(m[1], " | ")
			lines = append(lines, line)
		}
	}
	for _, l := range lines {
		if s := commandStranger(l, r); s != "" {
			report("%s", s)
		}
	}

	for _, l := range logs {
		if !r.logLine(l) {
			report("the manual quotes the log line %q, which no Go source logs", l)
		}
	}
	return out
}

// commandStranger checks one `msgx …` command line: the command exists,
// its first action word is one its synopsis names, its flags are its own.
func commandStranger(line string, r *registries) string {
	words := strings.Fields(line)
	if len(words) < 2 {
		return ""
	}
	name := words[1]
	if name == "help" || strings.HasPrefix(name, "<") || !regexp.MustCompile(`^[a-z]+$`).MatchString(name) {
		return ""
	}
	c, ok := r.commands[name]
	if !ok {
		return fmt.Sprintf("the manual runs `%s`: msgx has no command %q", line, name)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c.define(fs)
	actionChecked := false
	for _, w := range words[2:] {
		w = strings.Trim(strings.ReplaceAll(w, `\`, ""), "[]()\"',.:")
		if f, ok := strings.CutPrefix(w, "--"); ok {
			f, _, _ = strings.Cut(f, "=")
			if f != "" && f != "help" && fs.Lookup(f) == nil {
				return fmt.Sprintf("the manual runs `%s`: msgx %s has no flag --%s", line, name, f)
			}
			continue
		}
		if actionChecked || !regexp.MustCompile(`^[a-z][a-z-]*(\|[a-z][a-z-]*)*$`).MatchString(w) {
			continue
		}
		// The first lower-case word is the action of commands whose
		// synopsis names actions (table, request, backfill, migrate).
		actionChecked = true
		actions := regexp.MustCompile(`[a-z]+`).FindAllString(regexp.MustCompile(`--[\w-]+|<[^>]*>`).ReplaceAllString(c.synopsis, ""), -1)
		if len(actions) == 0 {
			continue
		}
		for _, a := range strings.Split(w, "|") {
			if !contains(actions, a) {
				return fmt.Sprintf("the manual runs `%s`: msgx %s has no action %q (%s)", line, name, a, c.synopsis)
			}
		}
	}
	return ""
}

// logLine reports whether quoted (with "…" for what varies) is what some
// log call writes: each part between ellipses is found in one string
// literal, or is made of literals joined as the code joins them (the end
// of one, whole ones, the start of another).
func (r *registries) logLine(quoted string) bool {
	for _, part := range strings.Split(quoted, "…") {
		part = strings.TrimSpace(part)
		if len([]rune(part)) < 4 {
			continue
		}
		if !r.composed(part) {
			return false
		}
	}
	return true
}

func (r *registries) composed(s string) bool {
	if strings.Contains(r.literals, s) {
		return true
	}
	n := len(s)
	// reach[i]: s[:i] is the end of a literal followed by whole literals.
	reach := make([]bool, n+1)
	for i := 1; i < n; i++ {
		reach[i] = strings.Contains(r.literals, s[:i]+"\x00")
	}
	for i := 1; i < n; i++ {
		if !reach[i] {
			continue
		}
		if strings.Contains(r.literals, "\x00"+s[i:]) {
			return true
		}
		for j := i + 1; j < n; j++ {
			if r.whole[s[i:j]] {
				reach[j] = true
			}
		}
	}
	return false
}

func anyHasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func dirHasLiteral(dir, lit string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, _ := os.ReadFile(path)
			found = found || strings.Contains(string(b), strconv.Quote(lit))
		}
		return nil
	})
	return found
}

// Code, rules, schemas and units cite the manual by a section's anchor
// (docs/operations.md#kafka-acls), never by a number that moves when the
// manual does; every anchor cited exists.
func TestRepositoryCitesManualAnchors(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(b))
	cite := regexp.MustCompile(`operations\.md#([A-Za-z0-9_-]+)`)
	numbered := regexp.MustCompile(`operations(?:\.md| manual),? (?:chapter |§)?[0-9]`)
	text := map[string]bool{".go": true, ".js": true, ".json": true, ".yml": true, ".yaml": true, ".md": true,
		".service": true, ".example": true, ".sh": true, ".sql": true, ".conf": true, "": true}
	root := "../.."
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !text[filepath.Ext(path)] {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range cite.FindAllStringSubmatch(string(src), -1) {
			if !anchors[m[1]] {
				t.Errorf("%s cites docs/operations.md#%s, which has no such section", rel, m[1])
			}
		}
		for _, m := range numbered.FindAllString(string(src), -1) {
			t.Errorf("%s cites the manual by number (%q): cite the section's anchor", rel, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// markdownAnchors are a Markdown page's anchors: its explicit <a id>s and
// GitHub's for its headings.
func markdownAnchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`<a id="([^"]+)">`).FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	drop := regexp.MustCompile("[^a-z0-9 _-]")
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(text, -1) {
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")] = true
	}
	return out
}
