package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// dashboard is the part of a Grafana dashboard the checks read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Schema     int    `json:"schemaVersion"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []struct {
			Expr       string `json:"expr"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

// The dashboard imports anywhere: its datasource is a variable every panel
// and query uses; ids are unique; it has the status page's three questions
// as rows; and every metric a query names is one msgx exports (the metrics
// table of docs/operations.md#metrics), a recording rule of msgx-rules.yml, or
// Prometheus' own up. cmd/msgx's TestPrometheusAgainstLiveMsgx evaluates
// every query against a live msgx.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/msgx.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || d.Schema < 30 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.Schema)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" {
		t.Fatalf("no datasource variable: %v", vars)
	}

	var rules ruleFile
	readYAML(t, "prometheus/msgx-rules.yml", &rules)
	recorded := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(msgx_[a-z_]+)`(?:, `(msgx_[a-z_]+)`)?").FindAllStringSubmatch(string(doc), -1) {
		exported[m[1]], exported[m[2]] = true, m[2] != ""
	}
	metricName := regexp.MustCompile(`\b(msgx[_:][a-zA-Z0-9_:]*|up)\b`)

	ids := map[int]bool{}
	var rows []string
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			if q.Datasource == nil || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a query without the ${datasource} variable", p.Title)
			}
			for _, name := range metricName.FindAllString(q.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count")
				if !exported[base] && !recorded[name] && name != "up" {
					t.Errorf("panel %q queries %s, which msgx neither exports (docs/operations.md#metrics) nor records", p.Title, name)
				}
			}
		}
	}
	want := []string{"Is it keeping up?", "Is anything stuck?", "What needs a human?", "Group commits and recoveries"}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("rows %q, want %q", rows, want)
	}
	t.Logf("%d panels, %d queries", len(ids)-len(rows), queries)
}
