package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"msgx/inspect/status"
	"msgx/internal/testenv"
	"msgx/sink/sinktest"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue sums a metric's samples matching the label filter in a
// Prometheus text exposition.
func metricValue(body, name, labels string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	sum := 0.0
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		if labels != "" && !strings.Contains(m[1], labels) {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		sum += v
	}
	return sum
}

// TestOperability runs the gateway with PostgreSQL and MariaDB behind
// proxies: the health, readiness, metrics and status endpoints answer from
// real figures, readiness flips when a database goes away and returns when
// it is back, and `msgx status --json` reports the demo day.
func TestOperability(t *testing.T) {
	pgProxy := testenv.NewProxy(t, "127.0.0.1:5432")
	myProxy := testenv.NewProxy(t, "127.0.0.1:3306")
	httpAddr := freeAddr(t)
	cfg, myDSN := testConfig(t, map[string]string{"MSGX_HTTP_ADDR": httpAddr, "MSGX_DB_TIMEOUT": "2s"})
	cfg.DB.PGDSN = strings.Replace(cfg.DB.PGDSN, "127.0.0.1:5432", pgProxy.Addr(), 1)
	cfg.DB.MySQLDSN = strings.Replace(myDSN, "127.0.0.1:3306", myProxy.Addr(), 1)
	base := "http://" + httpAddr
	pgName := cfg.DB.PGDSN[strings.LastIndex(cfg.DB.PGDSN, "/")+1 : strings.Index(cfg.DB.PGDSN, "?")]
	myName := myDSN[strings.LastIndex(myDSN, "/")+1:]
	stop := start(t, cfg)
	defer stop()

	waitFor(t, "/healthz", 30*time.Second, func() bool { c, _ := get(t, base+"/healthz"); return c == 200 })
	waitFor(t, "/readyz ready", 60*time.Second, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })

	demo, _ := os.ReadFile("../../testdata/demo.sql")
	multi, err := sql.Open("mysql", myDSN+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer multi.Close()
	if _, err := multi.Exec(string(demo)); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, "metrics showing the demo day", 60*time.Second, func() bool {
		_, body = get(t, base+"/metrics")
		return metricValue(body, "msgx_messages_decided_total", "") >= 13 && metricValue(body, "msgx_end_to_end_seconds_count", "") > 0
	})
	for _, m := range []struct{ name, labels string }{
		{"msgx_ingest_rows_total", ""}, {"msgx_messages_decided_total", `state="ROUTED"`},
		{"msgx_messages_ignored_total", `rule="LDM-*"`}, {"msgx_messages_skipped_or_dead_total", `reason_class="duplicate"`},
		{"msgx_transitions_applied_total", `processor="flights"`}, {"msgx_events_emitted_total", `topic="msgx.msg"`},
		{"msgx_router_decision_seconds_count", ""}, {"msgx_component_up", `component="router"`},
	} {
		if metricValue(body, m.name, m.labels) <= 0 {
			t.Errorf("metric %s%s is not positive", m.name, m.labels)
		}
	}
	waitFor(t, "status-derived metrics", 30*time.Second, func() bool {
		_, body = get(t, base+"/metrics")
		return metricValue(body, "msgx_dead_messages", `class="MALFORMED"`) == 1 && metricValue(body, "msgx_messages", `state="SUCCEEDED"`) > 0
	})
	// Moving: one more message raises the counters.
	before := metricValue(body, "msgx_ingest_rows_total", "")
	my := sinktest.OpenMySQL(t, myDSN)
	testenv.InsertInbox(t, my, "<MSG/>")
	waitFor(t, "metrics moving", 30*time.Second, func() bool {
		_, body = get(t, base+"/metrics")
		return metricValue(body, "msgx_ingest_rows_total", "") > before
	})
	// Ingested is not decided yet: wait for the router's verdict on it.
	waitFor(t, "the new message decided", 30*time.Second, func() bool {
		_, body = get(t, base+"/metrics")
		return metricValue(body, "msgx_dead_messages", `class="MALFORMED"`) == 2
	})

	// msgx status --json, through the daemon.
	var out strings.Builder
	if err := runCommand(context.Background(), cfg, "status", []string{"--json"}, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	var rep status.Report
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out.String())
	}
	if rep.Inbox.Watermark != 14 || rep.Messages.DeadByClass["MALFORMED"] != 2 || len(rep.Components) == 0 || len(rep.Alerts) == 0 {
		t.Fatalf("status: watermark %d, dead %v, %d components, alerts %v", rep.Inbox.Watermark, rep.Messages.DeadByClass, len(rep.Components), rep.Alerts)
	}
	out.Reset()
	if err := runCommand(context.Background(), cfg, "status", nil, &out, testenv.Logger(t)); err != nil || !strings.Contains(out.String(), "DEAD") {
		t.Fatalf("status text (%v):\n%s", err, out.String())
	}

	// Readiness follows the databases.
	for _, dep := range []struct {
		name  string
		proxy *testenv.Proxy
	}{{"postgres", pgProxy}, {"mysql", myProxy}} {
		dep.proxy.Down()
		var ready string
		waitFor(t, "/readyz not ready without "+dep.name, 30*time.Second, func() bool {
			var c int
			c, ready = get(t, base+"/readyz")
			return c == 503 && strings.Contains(ready, dep.name+" unreachable")
		})
		// /readyz is open to anyone: it names no user, database or host.
		for _, secret := range []string{pgName, myName, "user=", "postgres@", "root@", pgProxy.Addr(), myProxy.Addr()} {
			if strings.Contains(ready, secret) {
				t.Errorf("/readyz without %s shows %q:\n%s", dep.name, secret, ready)
			}
		}
		if c, _ := get(t, base+"/healthz"); c != 200 {
			t.Fatalf("/healthz %d while %s is down: the process is alive", c, dep.name)
		}
		dep.proxy.Up()
		waitFor(t, "/readyz ready again after "+dep.name, 60*time.Second, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })
	}
}

// With MSGX_HTTP_READ_TOKEN set, every read endpoint of the running gateway
// needs it (bearer, any case), the probes and the compatibility endpoint do
// not, and `msgx status` reads the daemon with it.
func TestReadTokenOnTheGateway(t *testing.T) {
	httpAddr := freeAddr(t)
	// It presents wrong tokens on purpose, more than the login throttle
	// lets one address try (TestHTTPSurfaceOverTLS tests that).
	cfg, _ := testConfig(t, map[string]string{"MSGX_HTTP_ADDR": httpAddr, "MSGX_HTTP_READ_TOKEN": "r3ad", "MSGX_HTTP_TOKEN": "s3nd",
		"MSGX_HTTP_THROTTLE_FAILURES": "100"})
	base := "http://" + httpAddr
	stop := start(t, cfg)
	defer stop()
	waitFor(t, "/readyz ready", 60*time.Second, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })
	do := func(method, path, auth, body string) int {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for path, withToken := range map[string]int{"/status": 200, "/metrics": 200, "/flights?day=2026-11-30": 200,
		"/flights/15": 404, "/refdata/AIRL": 200, "/": 200, "/status/history": 200, "/replay/dry-run?class=INFRA": 200} {
		if c := do("GET", path, "", ""); c != 401 {
			t.Errorf("GET %s without the read token: %d, want 401", path, c)
		}
		if c := do("GET", path, "Bearer s3nd", ""); c != 401 {
			t.Errorf("GET %s with the send token: %d, want 401", path, c)
		}
		if c := do("GET", path, "bearer r3ad", ""); c != withToken {
			t.Errorf("GET %s with the read token: %d, want %d", path, c, withToken)
		}
	}
	if c := do("GET", "/healthz", "", ""); c != 200 {
		t.Errorf("/healthz: %d", c)
	}
	if c := do("POST", "/cminmsgs/send", "Bearer s3nd", "<MSG/>"); c != 200 {
		t.Errorf("/cminmsgs/send with its own token: %d", c)
	}
	if c := do("POST", "/cminmsgs/send", "Bearer r3ad", "<MSG/>"); c != 401 {
		t.Errorf("/cminmsgs/send with the read token: %d, want 401", c)
	}
	var out strings.Builder
	if err := runCommand(context.Background(), cfg, "status", []string{"--json"}, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	var rep status.Report
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil || len(rep.Components) == 0 {
		t.Fatalf("msgx status did not read the daemon with the token (%v):\n%s", err, out.String())
	}
}
