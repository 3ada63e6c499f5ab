package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// tool returns the path of a Debian-packaged tool the tests need, or fails
// saying how to install it.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: install it with `make prometheus` (Debian package %s)", name, pkg)
	}
	return p
}

// run runs a command in dir and returns its combined output, failing the
// test when it exits non-zero.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ruleFile is the part of a Prometheus rule file the checks read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// operationsAnchors are the GitHub heading anchors of docs/operations.md.
func operationsAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\w\- ]`)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
			out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
		}
	}
	return out
}

// operationsRunbooks are the runbooks of docs/operations.md: the text of
// each "### <Alert>" section of its "## Runbooks" chapter, by heading.
func operationsRunbooks(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, chapter, ok := strings.Cut(string(b), "\n## Runbooks\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "## Runbooks" chapter`)
	}
	chapter, _, _ = strings.Cut(chapter, "\n## ")
	out := map[string]string{}
	for _, sec := range strings.Split(chapter, "\n### ")[1:] {
		name, body, _ := strings.Cut(sec, "\n")
		out[strings.TrimSpace(name)] = body
	}
	return out
}

// The shipped rules pass promtool's own checks and unit tests
// (msgx-rules.test.yml), as an operator would run them.
func TestPromtoolCheckAndTestRules(t *testing.T) {
	promtool := tool(t, "promtool", "prometheus")
	t.Log(run(t, "prometheus", promtool, "check", "rules", "msgx-rules.yml"))
	t.Log(run(t, "prometheus", promtool, "test", "rules", "msgx-rules.test.yml"))
}

// Every alert says how bad it is, what happened and what to do, and links
// its own runbook in the operations manual (a heading named after the
// alert, with what it means, its impact, what to check, what to do and when
// to escalate); and the unit tests make each alert fire once and stay
// silent once.
func TestEveryAlertIsDocumentedAndTested(t *testing.T) {
	var rules ruleFile
	readYAML(t, "prometheus/msgx-rules.yml", &rules)
	anchors := operationsAnchors(t)
	runbooks := operationsRunbooks(t)
	alerts := map[string]bool{}
	byURL := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				if !strings.HasPrefix(r.Record, "msgx:") {
					t.Errorf("recording rule %q: name it msgx:<what>:<how>", r.Record)
				}
				continue
			}
			alerts[r.Alert] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || len(r.Annotations["description"]) < 40 {
				t.Errorf("%s: a summary and a description that says what to do are required", r.Alert)
			}
			url := r.Annotations["runbook_url"]
			if anchor, ok := strings.CutPrefix(url, "docs/operations.md#"); !ok || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q is no section of docs/operations.md", r.Alert, url)
			}
			if want := "docs/operations.md#" + strings.ToLower(r.Alert); url != want {
				t.Errorf("%s: runbook_url %q, want its own runbook %q", r.Alert, url, want)
			}
			if other, ok := byURL[url]; ok && other != r.Alert {
				t.Errorf("%s and %s share the runbook %s: each alert needs its own", other, r.Alert, url)
			}
			byURL[url] = r.Alert
			body, ok := runbooks[r.Alert]
			if !ok {
				t.Errorf("%s: docs/operations.md has no runbook \"### %s\" under \"## Runbooks\"", r.Alert, r.Alert)
			}
			for _, part := range []string{"**What it means.**", "**Impact.**", "**What to check.**", "**What to do.**", "**When to escalate.**"} {
				if ok && !strings.Contains(body, part) {
					t.Errorf("%s: its runbook lacks %s", r.Alert, part)
				}
			}
		}
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, "prometheus/msgx-rules.test.yml", &tests)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if !alerts[a.Alertname] {
				t.Errorf("msgx-rules.test.yml tests %s, which msgx-rules.yml does not define", a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for name := range runbooks {
		if !alerts[name] {
			t.Errorf("docs/operations.md has a runbook for %s, which msgx-rules.yml does not define", name)
		}
	}
	for a := range alerts {
		if !fires[a] || !silent[a] {
			t.Errorf("%s: msgx-rules.test.yml must make it fire (%v) and stay silent (%v)", a, fires[a], silent[a])
		}
	}
	t.Logf("%d alerts, each fired and kept silent by the unit tests", len(alerts))
}
