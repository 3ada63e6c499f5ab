package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/contract"
	"msgx/internal/testenv"
	"msgx/internal/workload"
	"msgx/sink/sinktest"
)

// promServer is a real Prometheus (Debian's prometheus package) on a
// loopback port, scraping msgx every second and evaluating the shipped rules
// every second.
type promServer struct {
	t    *testing.T
	base string
}

// testRules is deploy/prometheus/msgx-rules.yml with only its `for:`
// durations shortened to 1s: Prometheus has no way to scale a rule's for:
// (and PromQL none to read it from a metric), while the thresholds need no
// change — they are msgx's own settings, exported as msgx_status_threshold,
// which the test sets low. Every other line is the shipped file's, which the
// test checks.
func testRules(t *testing.T) string {
	t.Helper()
	shipped, err := os.ReadFile("../../deploy/prometheus/msgx-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	forLine := regexp.MustCompile(`^(\s+)for: \S+$`)
	lines := strings.Split(string(shipped), "\n")
	changed := 0
	for i, l := range lines {
		if forLine.MatchString(l) {
			lines[i] = forLine.ReplaceAllString(l, "${1}for: 1s")
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("no for: line in the shipped rules: the pattern is stale")
	}
	path := filepath.Join(t.TempDir(), "msgx-rules.yml")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startPrometheus starts Prometheus with a generated configuration scraping
// targets as job msgx. It is stopped when the test ends.
func startPrometheus(t *testing.T, rules string, targets ...string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not found: install it with `make prometheus` (Debian package prometheus)")
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: msgx
    static_configs:
      - targets: [%s]
`, rules, strings.Join(quoted, ", "))
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logs, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	p := &promServer{t: t, base: "http://" + addr}
	waitFor(t, "prometheus ready", 30*time.Second, func() bool { c, _ := get(t, p.base+"/-/ready"); return c == 200 })
	return p
}

// api GETs a Prometheus API path and decodes its data.
func (p *promServer) api(path string, data any) {
	p.t.Helper()
	resp, err := http.Get(p.base + path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Status != "success" {
		p.t.Fatalf("prometheus %s: %v %s %s", path, err, env.Status, env.Error)
	}
	if err := json.Unmarshal(env.Data, data); err != nil {
		p.t.Fatal(err)
	}
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (p *promServer) alerts() []promAlert {
	var d struct {
		Alerts []promAlert `json:"alerts"`
	}
	p.api("/api/v1/alerts", &d)
	return d.Alerts
}

// firing reports whether alert name fires with every label of match.
func (p *promServer) firing(name string, match map[string]string) bool {
	for _, a := range p.alerts() {
		if a.Labels["alertname"] != name || a.State != "firing" {
			continue
		}
		ok := true
		for k, v := range match {
			ok = ok && a.Labels[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

func (p *promServer) waitFiring(name string, match map[string]string, timeout time.Duration) {
	p.t.Helper()
	start := time.Now()
	waitFor(p.t, name+" firing", timeout, func() bool { return p.firing(name, match) })
	p.t.Logf("%s %v firing after %s", name, match, time.Since(start).Round(100*time.Millisecond))
}

func (p *promServer) waitResolved(name string, match map[string]string, timeout time.Duration) {
	p.t.Helper()
	start := time.Now()
	p.t.Cleanup(func() {
		if p.t.Failed() {
			p.t.Logf("alerts when the test failed: %+v", p.alerts())
		}
	})
	waitFor(p.t, name+" resolved", timeout, func() bool { return !p.firing(name, match) })
	p.t.Logf("%s %v resolved after %s", name, match, time.Since(start).Round(100*time.Millisecond))
}

// query evaluates an instant PromQL expression and returns its series.
func (p *promServer) query(expr string) []json.RawMessage {
	var d struct {
		Result []json.RawMessage `json:"result"`
	}
	p.api("/api/v1/query?query="+url.QueryEscape(expr), &d)
	return d.Result
}

// dashboardQueries are the expressions of every panel of
// deploy/grafana/msgx.json with the dashboard's variables filled in.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/grafana/msgx.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer(`"$job"`, `"msgx"`, `"$instance"`, `".*"`, "$__rate_interval", "1m")
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, q := range p.Targets {
			out[fmt.Sprintf("%s #%d", p.Title, i+1)] = fill.Replace(q.Expr)
		}
	}
	return out
}

// TestPrometheusAgainstLiveMsgx runs the shipped rules and dashboard in a
// real Prometheus scraping a live msgx, and causes the situations an
// operator is paged for: a DEAD message, a backlog behind an open hole (the
// inbox lag), PostgreSQL unreachable (the processing components paused and
// stopped, the status report incomplete), and an instance that refuses to
// start on the Kafka binding and is then stopped (msgx down). Each alert
// must fire, and resolve once its cause is gone; every dashboard query must
// return a series; no rule may fail to evaluate.
func TestPrometheusAgainstLiveMsgx(t *testing.T) {
	pgProxy := testenv.NewProxy(t, "127.0.0.1:5432")
	httpAddr := freeAddr(t)
	cfg, myDSN := testConfig(t, map[string]string{
		"MSGX_HTTP_ADDR": httpAddr, "MSGX_DB_TIMEOUT": "2s", "MSGX_SCHD_FLUSH_PERIOD": "200ms",
		// Thresholds the test reaches in seconds; the rules read them from msgx.
		"MSGX_STATUS_INBOX_LAG": "5", "MSGX_HOLE_PROBE_TIMEOUT": "1s",
		// A DEAD message is marked at once and archived 20 s later: "accept".
		"MSGX_BACKFILL_PERIOD": "500ms", "MSGX_ARCHIVE_AFTER": "20s", "MSGX_MAINTENANCE_PERIOD": "1s",
	})
	cfg.DB.PGDSN = strings.Replace(cfg.DB.PGDSN, "127.0.0.1:5432", pgProxy.Addr(), 1)
	my := sinktest.OpenMySQL(t, myDSN)
	stop := start(t, cfg)
	defer stop()
	base := "http://" + httpAddr
	waitFor(t, "msgx ready", time.Minute, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })

	// A second instance on its own embedded Kafka: refused by the binding,
	// it stays up saying so.
	refusedCfg := otherInstance(t, cfg)
	refusedCtx, stopRefused := context.WithCancel(context.Background())
	refusedDone := make(chan error, 1)
	go func() { refusedDone <- runGateway(refusedCtx, refusedCfg, testenv.Logger(t), roleAll) }()
	defer stopRefused()
	waitFor(t, "the second instance refusing", time.Minute, func() bool {
		c, body := get(t, "http://"+refusedCfg.HTTPAddr+"/readyz")
		return c == 503 && strings.Contains(body, refusedReason)
	})

	prom := startPrometheus(t, testRules(t), httpAddr, refusedCfg.HTTPAddr)
	prom.waitFiring("MsgxKafkaBindingRefused", map[string]string{"instance": refusedCfg.HTTPAddr}, time.Minute)

	// A DEAD message.
	testenv.InsertInbox(t, my, "garbage: not XML")
	prom.waitFiring("MsgxDeadMessages", nil, time.Minute)

	// A backlog: an insert whose transaction is still open holds a hole,
	// and a codeshare day waits behind it.
	tx, err := my.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// (A FLOP for a flight nobody knows: SKIPPED no-match once read.)
	if _, err := tx.Exec("INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, NOW(), 'VALID')",
		bindFLOP(99999, "1", "23JAN210501")); err != nil {
		t.Fatal(err)
	}
	day := workload.Day(workload.Options{Seed: 23, Flights: 60, PackageSize: 20, Ops: 240, SharedEvery: 4})
	for _, m := range day {
		testenv.InsertInbox(t, my, m)
	}
	prom.waitFiring("MsgxInboxLag", nil, time.Minute)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	prom.waitResolved("MsgxInboxLag", nil, time.Minute)
	pool := openPool(t, cfg)
	waitFor(t, "the day processed", 2*time.Minute, func() bool {
		return count(t, pool, "SELECT COUNT(*) FROM proc_state WHERE state IN ('SUCCEEDED','SKIPPED','DEAD','ARCHIVED')") == len(day)+2
	})

	// The integrators' contracts: every record of the codeshare day on
	// msgx.msg and msgx.schd, and every answer of the read endpoints.
	contracts, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event outbox drained", time.Minute, func() bool { return count(t, pool, "SELECT COUNT(*) FROM event_outbox") == 0 })
	validateTopics(t, contracts, []string{cfg.Kafka.EmbeddedAddr})
	validateAnswers(t, contracts, base, pool)

	// Every dashboard query returns a series, now that every kind of
	// figure has been produced.
	queries := dashboardQueries(t)
	titles := make([]string, 0, len(queries))
	for title := range queries {
		titles = append(titles, title)
	}
	sort.Strings(titles)
	for _, title := range titles {
		if res := prom.query(queries[title]); len(res) == 0 {
			t.Errorf("dashboard panel %s: %s returns no series", title, queries[title])
		}
	}
	t.Logf("%d dashboard queries each returned a series", len(queries))

	// PostgreSQL unreachable: the processing components pause, then stop
	// when the process lock's session is gone; the report cannot be built.
	pgProxy.Down()
	prom.waitFiring("MsgxComponentNotProcessing", map[string]string{"instance": httpAddr, "component": "router"}, time.Minute)
	prom.waitFiring("MsgxStatusIncomplete", map[string]string{"instance": httpAddr}, time.Minute)
	pgProxy.Up()
	t.Cleanup(func() {
		if t.Failed() {
			_, st := get(t, base+"/status")
			t.Logf("status when the test failed:\n%s", st)
		}
	})
	prom.waitResolved("MsgxComponentNotProcessing", map[string]string{"instance": httpAddr}, time.Minute)
	prom.waitResolved("MsgxStatusIncomplete", map[string]string{"instance": httpAddr}, time.Minute)

	// The DEAD message is archived (accepted): its alert clears, and the
	// figure behind it is a real 0, not a missing report.
	waitFor(t, "the DEAD messages archived", time.Minute, func() bool {
		return len(prom.query(`sum(msgx_dead_messages{instance="`+httpAddr+`"}) == 0`)) == 1
	})
	prom.waitResolved("MsgxDeadMessages", nil, time.Minute)

	// The refusing instance stops: msgx down, and no refusal any more.
	stopRefused()
	<-refusedDone
	prom.waitFiring("MsgxDown", map[string]string{"instance": refusedCfg.HTTPAddr}, time.Minute)
	prom.waitResolved("MsgxKafkaBindingRefused", nil, time.Minute)

	// No rule failed to evaluate; what still fires is listed.
	var rules struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	prom.api("/api/v1/rules", &rules)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("rule %s: health %s %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	var still []string
	for _, a := range prom.alerts() {
		still = append(still, a.Labels["alertname"]+"/"+a.State+" "+a.Labels["instance"])
		if a.Labels["instance"] == httpAddr && a.State == "firing" {
			t.Errorf("still firing for the live msgx: %v", a.Labels)
		}
	}
	t.Logf("%d rules evaluated without error; alerts at the end: %v", n, still)
}

// validateTopics checks every record on msgx.msg and msgx.schd against its
// JSON Schema (deploy/schemas), with msgx's Go validator and with Python's
// jsonschema, which loads the schemas as an integrator does.
func validateTopics(t *testing.T, c *contract.Contracts, brokers []string) {
	t.Helper()
	var checks []contract.Check
	for _, topic := range []struct {
		name, schema string
		check        func([]byte) error
	}{{"msgx.msg", "msgx.msg.json", c.Event}, {"msgx.schd", "msgx.schd.json", c.Schd}} {
		recs := testenv.ReadTopic(t, brokers, topic.name, 1<<20, 3*time.Second)
		if len(recs) == 0 {
			t.Errorf("no record on %s to validate", topic.name)
		}
		bad := 0
		for _, r := range recs {
			if err := topic.check(r.Value); err != nil {
				if bad++; bad <= 3 {
					t.Errorf("%s record %s@%d does not validate against deploy/schemas: %v\n%s", topic.name, r.Key, r.Offset, err, r.Value)
				}
			}
			if r.Value != nil { // a schd tombstone has no JSON
				checks = append(checks, contract.Check{Schema: topic.schema, What: fmt.Sprintf("%s record %s@%d", topic.name, r.Key, r.Offset), Instance: r.Value})
			}
		}
		t.Logf("%d %s records validated (%d invalid)", len(recs), topic.name, bad)
	}
	if err := c.Independent(checks); err != nil {
		t.Error(err)
	}
}

// validateAnswers asks the trace, flights, refdata and status endpoints
// every question the data allows (each message, each flight, each day, the
// documented errors) and checks each answer against deploy/openapi.yaml.
func validateAnswers(t *testing.T, c *contract.Contracts, base string, pool *pgxpool.Pool) {
	t.Helper()
	var paths []string
	column := func(q string) []string {
		rows, err := pool.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	for _, id := range column("SELECT msg_id::text FROM proc_state ORDER BY msg_id") {
		paths = append(paths, "/trace/"+id, "/trace/"+id+"?format=text")
	}
	for _, flid := range column("SELECT flid FROM flight_schd ORDER BY flid") {
		paths = append(paths, "/flights/"+flid, "/trace/flights/"+flid, "/trace/flights/"+flid+"?limit=2")
	}
	for _, day := range column("SELECT DISTINCT operation_day::text FROM flight_schd") {
		paths = append(paths, "/flights?day="+day)
	}
	paths = append(paths, "/status", "/readyz", "/healthz", "/refdata/AIRL", "/refdata/rsta", "/refdata/AIRL/CA",
		"/refdata/NOPE", "/flights/0", "/flights?day=2021-13-01", "/flights", "/trace/0", "/trace/abc",
		"/trace/flights/0", "/trace/flights/100000?limit=x", "/metrics")
	codes := map[int]int{}
	var checks []contract.Check
	for _, p := range paths {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
		path, _, _ := strings.Cut(p, "?")
		if err := c.Response("GET", path, resp.StatusCode, resp.Header.Get("Content-Type"), body); err != nil {
			t.Errorf("GET %s: the answer does not validate against deploy/openapi.yaml: %v\n%.2000s", p, err, body)
		}
		if file := c.SchemaFile("GET", path, resp.StatusCode, resp.Header.Get("Content-Type")); file != "" {
			checks = append(checks, contract.Check{Schema: file, What: "GET " + p, Instance: body})
		}
	}
	// The answers of a schema of deploy/schemas, by Python's jsonschema too.
	if err := c.Independent(checks); err != nil {
		t.Error(err)
	}
	t.Logf("%d HTTP answers validated against deploy/openapi.yaml (by status: %v), %d by Python's jsonschema too", len(paths), codes, len(checks))
}
