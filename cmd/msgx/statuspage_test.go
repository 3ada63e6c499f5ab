package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"msgx/cmd/msgx/page"
	"msgx/ingest/replay"
	"msgx/inspect/status"
	"msgx/internal/browser"
	"msgx/internal/testenv"
	"msgx/sink/sinktest"
)

// statusJSON reads GET /status (with the read token when one is given).
func statusJSON(t *testing.T, base, token string) (status.Report, bool) {
	t.Helper()
	var rep status.Report
	req, _ := http.NewRequest("GET", base+"/status", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rep, false
	}
	defer resp.Body.Close()
	return rep, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&rep) == nil
}

// fetchStatus is the status code of a fetch of path from the page (its
// cookies, not the test's).
func fetchStatus(t *testing.T, b *browser.Browser, path string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	code, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch(`+jsString(path)+`).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("fetch %s from the page: %v", path, err)
	}
	return code
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The status page in Chromium against a running msgx with a known
// scenario: the demo day (SUCCEEDED traffic, a MALFORMED DEAD message), then
// an inbox row two IDs ahead, which leaves an open hole. The page shows
// what /status and proc_state say — the lag, the hole, the DEAD reason, the
// components — draws the sampled history, and follows the scenario at its
// next refresh when the hole is filled.
func TestStatusPageInChromium(t *testing.T) {
	b := browser.New(t) // first: without Chromium the test fails at once, saying how to install it
	httpAddr := freeAddr(t)
	cfg, myDSN := testConfig(t, map[string]string{
		"MSGX_HTTP_ADDR": httpAddr, "MSGX_HOLE_PROBE": "false", "MSGX_PAGE_SAMPLE_INTERVAL": "1s",
	})
	base := "http://" + httpAddr
	stop := start(t, cfg)
	defer stop()
	waitFor(t, "/readyz ready", 60*time.Second, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })

	demo, err := os.ReadFile("../../testdata/demo.sql")
	if err != nil {
		t.Fatal(err)
	}
	multi, err := sql.Open("mysql", myDSN+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer multi.Close()
	if _, err := multi.Exec(string(demo)); err != nil {
		t.Fatal(err)
	}
	my := sinktest.OpenMySQL(t, myDSN)
	// A message the codec rejects: DEAD(CODEC_ERROR), replayable.
	codecID := testenv.InsertInbox(t, my, replayFLOP(900, "31NOV210600"))
	var maxID int64
	if err := my.QueryRow("SELECT MAX(CMINMSGS_ID) FROM cminmsgs").Scan(&maxID); err != nil {
		t.Fatal(err)
	}
	var rep status.Report
	waitFor(t, "the demo day decided", 60*time.Second, func() bool {
		rep, _ = statusJSON(t, base, "")
		return rep.Inbox.Watermark == maxID && rep.Messages.Backlog == 0 && rep.Messages.DeadByClass["MALFORMED"] > 0 &&
			rep.Messages.DeadByClass["CODEC_ERROR"] == 1
	})
	hole := maxID + 1
	if _, err := my.Exec(`INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
		VALUES (?, '<MSG/>', NOW(), 'VALID')`, hole+1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the open hole", 30*time.Second, func() bool {
		rep, _ = statusJSON(t, base, "")
		return rep.Inbox.Hole != nil && rep.Inbox.Lag == 2
	})
	pool := openPool(t, cfg)
	var deadID int64
	var reason string
	if err := pool.QueryRow(context.Background(),
		`SELECT msg_id, last_error FROM proc_state WHERE state = 'DEAD' AND error_class = 'MALFORMED' ORDER BY msg_id DESC LIMIT 1`).
		Scan(&deadID, &reason); err != nil || reason == "" {
		t.Fatalf("the demo's MALFORMED message: %v %q", err, reason)
	}

	// The page quotes the reason without the class the row names already.
	shown := strings.TrimPrefix(reason, "MALFORMED: ")
	// The browser is at the airport: every time the page shows names its
	// zone; the inbox's zone (the MySQL server's, UTC here) is named apart.
	if err := b.Timezone("Asia/Shanghai"); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(30*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "the page's first refresh", `document.body.dataset.refreshes >= 1`, 30*time.Second)
	b.WaitFor(t, "the open hole on the page", `document.querySelector("#hole").textContent.startsWith("IDs `+fmt.Sprint(hole)+` open for")`, 30*time.Second)
	want := map[string][]string{
		"#inbox-lag":   {"2"},
		"#watermark":   {fmt.Sprintf("%d / %d", maxID, hole+1)},
		"#next-unread": {fmt.Sprintf("#%d received", hole+1)},
		"#hole":        {fmt.Sprintf("W=%d", maxID)},
		`#dead tr[data-class="MALFORMED"]`: {fmt.Sprint(rep.Messages.DeadByClass["MALFORMED"]), fmt.Sprintf("#%d", deadID),
			shown[:min(len(shown), 80)], "not replayable: the message itself is wrong. Tell the sender"},
		`#dead tr[data-class="CODEC_ERROR"]`:   {fmt.Sprintf("#%d", codecID), "dry run", "msgx replay --class CODEC_ERROR --dry-run"},
		"#inbox-zone":                          {"MySQL session time_zone"},
		"#zone-note":                           {"in this browser's zone (UTC+08:00)"},
		`#messages tr[data-state="SUCCEEDED"]`: {fmt.Sprint(rep.Messages.ByState["SUCCEEDED"])},
		"#alerts":                              {"to decide on (replay or accept)"},
	}
	for _, c := range rep.Components {
		want[`#components tr[data-component="`+c.Name+`"]`] = []string{c.State}
	}
	if len(rep.Components) < 8 {
		t.Errorf("status reports %d components", len(rep.Components))
	}
	for _, g := range rep.Groups {
		want[`#groups tr[data-group="`+g.Group+`"][data-topic="`+g.Topic+`"]`] = []string{g.State, fmt.Sprint(g.Members)}
	}
	for sel, frags := range want {
		got, err := b.Text(sel)
		if err != nil {
			t.Errorf("%s: %v", sel, err)
			continue
		}
		for _, f := range frags {
			if !strings.Contains(got, f) {
				t.Errorf("%s shows %q, want it to contain %q", sel, got, f)
			}
		}
	}
	if rep.Messages.ByState["SUCCEEDED"] == 0 {
		t.Error("the demo day has no SUCCEEDED message")
	}

	// Replay is offered only where it can work.
	for sel, want := range map[string]int{
		`#dead tr[data-class="MALFORMED"] a[href^="/replay/"]`: 0, `#dead tr[data-class="CODEC_ERROR"] a[href="/replay/dry-run?class=CODEC_ERROR"]`: 1,
		`#dead tr[data-class="MALFORMED"] a[href="/trace/` + fmt.Sprint(deadID) + `?format=html"]`: 1,
	} {
		if n, err := browser.Eval[int](b, `document.querySelectorAll(`+jsString(sel)+`).length`); err != nil || n != want {
			t.Errorf("%s: %d elements (%v), want %d", sel, n, err, want)
		}
	}
	if got, _ := b.Text(`#dead tr[data-class="MALFORMED"]`); strings.Contains(got, "msgx replay") {
		t.Errorf("the MALFORMED row offers a replay: %q", got)
	}
	// Times name the browser's zone.
	if got, _ := b.Text("#hole"); !strings.Contains(got, " UTC+08:00)") {
		t.Errorf("#hole shows %q: its time does not name the zone", got)
	}

	b.WaitFor(t, "the charts", `document.querySelector('#chart-lag polyline[data-series="inbox"]').getAttribute("data-points") >= 3 &&
		document.querySelector('#chart-rate [data-series="decisions/s"]') !== null`, 30*time.Second)

	// The replay dry-run links answer from the page, with the verdict and
	// effects the CLI's dry run shows: the codec still rejects the message.
	if c := fetchStatus(t, b, "/replay/dry-run?class=EXHAUSTED"); c != 200 {
		t.Errorf("dry run of EXHAUSTED: %d", c)
	}
	var codecPlan replay.Plan
	if c, body := get(t, base+"/replay/dry-run?class=CODEC_ERROR"); c != 200 || json.Unmarshal([]byte(body), &codecPlan) != nil ||
		codecPlan.Total != 1 || len(codecPlan.Effects) != 1 || codecPlan.Effects[0].MsgID != codecID || codecPlan.Effects[0].Verdict != "DEAD" ||
		codecPlan.Effects[0].ErrorClass != "CODEC_ERROR" || !strings.Contains(body, `"verdict": "DEAD"`) {
		t.Errorf("dry run of CODEC_ERROR: %d %s", c, body)
	}
	if c, body := get(t, base+"/replay/dry-run?class=MALFORMED"); c != 400 || !strings.Contains(body, "not replayable") {
		t.Errorf("dry run of MALFORMED: %d %s", c, body)
	}
	var plan struct {
		Selector string `json:"selector"`
		Total    int    `json:"total"`
	}
	if c, body := get(t, base+"/replay/dry-run?class=exhausted"); c != 200 || json.Unmarshal([]byte(body), &plan) != nil ||
		plan.Selector != "class=EXHAUSTED" || plan.Total != 0 {
		t.Errorf("dry run of EXHAUSTED: %d %s", c, body)
	}
	if n := count(t, pool, `SELECT count(*) FROM replay_audit`); n != 0 {
		t.Errorf("the page's dry runs wrote %d audit rows, want none", n)
	}

	// Filling the hole: the next refresh shows it gone, without a reload.
	if _, err := my.Exec(`INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
		VALUES (?, '<MSG/>', NOW(), 'VALID')`, hole); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "the hole gone from the page", `document.querySelector("#hole").textContent === "none" &&
		document.querySelector("#inbox-lag").textContent === "0"`, 30*time.Second)

	// The history behind the charts: sampled every second since start-up,
	// with the demo's end-to-end latencies and the rate of the decisions of
	// the two rows the hole held back.
	var hist page.Response
	var decided, observed bool
	waitFor(t, "the history of the scenario", 30*time.Second, func() bool {
		_, body := get(t, base+"/status/history")
		if err := json.Unmarshal([]byte(body), &hist); err != nil {
			t.Fatalf("/status/history: %v\n%s", err, body)
		}
		for _, s := range hist.Samples {
			decided = decided || (s.DecisionsPerSecond != nil && *s.DecisionsPerSecond > 0)
			observed = observed || (s.EndToEnd != nil && s.EndToEnd.Count > 0 && s.EndToEnd.P99 > 0)
		}
		last := hist.Samples[len(hist.Samples)-1]
		return decided && observed && last.InboxLag != nil && *last.InboxLag == 0 && len(last.GroupLag) == 3
	})
	if hist.IntervalSeconds != 1 || len(hist.Samples) < 5 {
		t.Errorf("history: %d samples every %vs", len(hist.Samples), hist.IntervalSeconds)
	}
	b.WaitFor(t, "the latency drawn", `document.querySelector('#chart-latency [data-series="end-to-end p99"]') !== null`, 30*time.Second)
	// The search box opens a message's and a flight's trace as a page, and
	// says what is wrong with what it was given.
	search := func(kind, id string) {
		t.Helper()
		if err := b.Do(20*time.Second,
			chromedp.SetValue(chromedp.CSS("#search-kind"), kind),
			chromedp.SetValue(chromedp.CSS("#search-id"), id),
			chromedp.Click(chromedp.CSS("#search button")),
		); err != nil {
			t.Fatal(err)
		}
	}
	search("message", fmt.Sprint(deadID))
	b.WaitFor(t, "the message's trace page", `location.pathname === "/trace/`+fmt.Sprint(deadID)+`" &&
		document.querySelector("#trace") !== null`, 20*time.Second)
	if got, _ := b.Text("#trace"); !strings.Contains(got, fmt.Sprintf("message %d (times in UTC)", deadID)) || !strings.Contains(got, "DEAD (MALFORMED)") {
		t.Errorf("trace page of %d:\n%s", deadID, got)
	}
	search("flight", "15")
	b.WaitFor(t, "the flight's trace page", `location.pathname === "/trace/flights/15" && document.querySelector("#trace") !== null`, 20*time.Second)
	if got, _ := b.Text("#trace"); !strings.Contains(got, "flight 15 (times in UTC)") || !strings.Contains(got, "SCHD-DNLD") {
		t.Errorf("trace page of flight 15:\n%s", got)
	}
	// From the flight to one of its messages.
	if err := b.Do(20*time.Second, chromedp.Click(chromedp.CSS(`nav a[href^="/trace/"]`))); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "a message of flight 15", `/^\/trace\/\d+$/.test(location.pathname) && document.querySelector("#trace") !== null`, 20*time.Second)
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("browser errors: %q", errs)
	}
	// (The two answers below are errors on purpose: the browser logs them.)
	search("message", "15x")
	b.WaitFor(t, "the search's error", `document.querySelector("#trace-error") !== null`, 20*time.Second)
	if got, _ := b.Text("#trace-error"); !strings.Contains(got, `"15x" is not a message ID`) {
		t.Errorf("search for 15x: %q", got)
	}
	search("flight", "99999")
	b.WaitFor(t, "an unknown flight", `document.querySelector("#trace-error") !== null && location.pathname === "/trace/flights/99999"`, 20*time.Second)
	if got, _ := b.Text("#trace-error"); !strings.Contains(got, "not found") {
		t.Errorf("search for flight 99999: %q", got)
	}
	if err := b.Do(20*time.Second, chromedp.Click(chromedp.CSS("#back"))); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "back on the status page", `location.pathname === "/" && document.body.dataset.refreshes >= 1`, 30*time.Second)
	for _, e := range b.Errors() {
		if !strings.Contains(e, "status of 400") && !strings.Contains(e, "status of 404") {
			t.Errorf("browser error: %q", e)
		}
	}
}

// With MSGX_HTTP_READ_TOKEN set the page shows nothing without the token:
// the browser is sent to the login form, the data endpoints answer 401 to
// the page, a wrong token is refused; with the token the page and its
// refreshes work on the session cookie, which scripts cannot read; logging
// out ends it.
func TestStatusPageBehindTheReadToken(t *testing.T) {
	b := browser.New(t)
	httpAddr := freeAddr(t)
	cfg, _ := testConfig(t, map[string]string{"MSGX_HTTP_ADDR": httpAddr, "MSGX_HTTP_READ_TOKEN": "r3ad-t0ken"})
	base := "http://" + httpAddr
	stop := start(t, cfg)
	defer stop()
	waitFor(t, "/readyz ready", 60*time.Second, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })
	if c, _ := get(t, base+"/"); c != 401 {
		t.Errorf("GET / from a script without the token: %d, want 401", c)
	}

	location := func() string {
		ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
		defer cancel()
		l, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(l, base)
	}
	// /healthz is open: from it, the page's requests without a session
	// (its Content-Security-Policy forbids fetches: ignored for these).
	if err := b.BypassCSP(true); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(30*time.Second, chromedp.Navigate(base+"/healthz")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/status", "/status/history", "/replay/dry-run?class=EXHAUSTED", "/assets/page.js"} {
		if c := fetchStatus(t, b, p); c != 401 {
			t.Errorf("fetch %s without logging in: %d, want 401", p, c)
		}
	}
	if err := b.BypassCSP(false); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(30*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	if l := location(); l != "/login?next=%2F" {
		t.Fatalf("navigating to / without the token lands on %q, want the login form", l)
	}
	if n, _ := browser.Eval[int](b, `document.querySelectorAll("#inbox-lag, #components").length`); n != 0 {
		t.Error("the login form shows status data")
	}

	login := func(token string) {
		t.Helper()
		if err := b.Do(20*time.Second,
			chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SendKeys(chromedp.CSS("#token"), token),
			chromedp.Submit(chromedp.CSS("#token")),
		); err != nil {
			t.Fatal(err)
		}
	}
	login("wrong")
	b.WaitFor(t, "the refusal", `document.querySelector("#login-problem") !== null`, 20*time.Second)
	if got, _ := b.Text("#login-problem"); !strings.Contains(got, "not the read token") {
		t.Errorf("wrong token: %q", got)
	}
	login("r3ad-t0ken")
	b.WaitFor(t, "the page after logging in", `location.pathname === "/" && document.body.dataset.refreshes >= 2`, 30*time.Second)
	rep, ok := statusJSON(t, base, "r3ad-t0ken")
	if !ok || len(rep.Components) == 0 {
		t.Fatal("no status with the bearer token")
	}
	for _, c := range rep.Components {
		if got, _ := b.Text(`#components tr[data-component="` + c.Name + `"]`); !strings.Contains(got, c.Name) {
			t.Errorf("component %s: %q", c.Name, got)
		}
	}
	for _, p := range []string{"/status", "/status/history", "/replay/dry-run?class=EXHAUSTED"} {
		if c := fetchStatus(t, b, p); c != 200 {
			t.Errorf("fetch %s with the session: %d, want 200", p, c)
		}
	}
	if cookies, _ := browser.Eval[string](b, `document.cookie`); strings.Contains(cookies, "msgx_read") {
		t.Errorf("the session cookie is readable by scripts: %q", cookies)
	}

	if err := b.Do(20*time.Second, chromedp.Click(chromedp.CSS("form.logout button"))); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "the form after logging out", `location.pathname === "/login"`, 20*time.Second)
	if err := b.Do(30*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	if l := location(); l != "/login?next=%2F" {
		t.Errorf("after logging out / lands on %q, want the login form", l)
	}
}
