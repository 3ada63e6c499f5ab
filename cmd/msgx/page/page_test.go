package page

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"msgx/inspect/status"
	"msgx/internal/browser"
	"msgx/internal/clock"
)

// pageReport is a report with something in every section of the page: a
// FAILED head with its next attempt, an open hole, a group without members,
// DEAD of two classes (one reason carrying markup, which must show as text),
// abandoned marks, late rows and a restarting component.
func pageReport(now time.Time) status.Report {
	next := now.Add(4 * time.Second)
	errAt := now.Add(-90 * time.Second)
	return status.Report{
		GeneratedAt: now,
		Alerts:      []string{"inbox hole at IDs 11-13 open for 12m (threshold 10m)", "4 DEAD messages to decide on"},
		Inbox: status.InboxStatus{
			Seeded: true, Watermark: 10, MaxID: 25, Lag: 15,
			OldestUnread:   &status.UnreadRow{MsgID: 14, AgeSeconds: 720},
			Hole:           &status.OpenHole{From: 11, To: 13, Since: now.Add(-12 * time.Minute), AgeSeconds: 720},
			PermanentHoles: 2, PermanentHoleIDs: 3,
			RecentHoles: []status.ReleasedHole{{From: 7, To: 7, ReleasedAt: now.Add(-time.Hour), Reason: "probe"}},
			LateRows:    1, LateRowIDs: []int64{4},
		},
		Messages: status.MessageStatus{
			ByState: map[string]int64{"PENDING": 2, "FAILED": 1, "ROUTED": 1, "SUCCEEDED": 3, "SKIPPED": 5, "DEAD": 4, "ARCHIVED": 1},
			Backlog: 4,
			OldestUnfinished: &status.UnfinishedMessage{MsgID: 150, State: "FAILED", EnqueuedAt: now.Add(-time.Hour), AgeSeconds: 3600,
				Attempts: 3, ErrorClass: "CODEC_ERROR", NextAttemptAt: &next, LastError: "bad date"},
			DeadByClass:    map[string]int64{"MALFORMED": 3, "EXHAUSTED": 1},
			DeadReplayable: map[string]bool{"MALFORMED": false, "EXHAUSTED": true},
			DeadRecent:     2, DeadRecentWindowSeconds: 3600,
			DeadLatestByClass: map[string][]status.DeadMessage{
				"MALFORMED": {
					{MsgID: 110, ErrorClass: "MALFORMED", EnqueuedAt: now, LastError: `XML syntax error: <img src=x onerror="document.title='pwned'">`},
					{MsgID: 109, ErrorClass: "MALFORMED", EnqueuedAt: now, LastError: "not XML"},
				},
				"EXHAUSTED": {{MsgID: 112, ErrorClass: "EXHAUSTED", EnqueuedAt: now, LastError: "CODEC_ERROR: unparseable date 2026-13-40"}},
			},
			SkippedByReasonClass: map[string]int64{"duplicate": 1, "ignored": 4},
		},
		Backfill: status.BackfillStatus{Pending: 3, Overdue: 1, OverdueAfterSeconds: 720 * 3600, OldestPendingAgeSeconds: 800 * 3600,
			Abandoned: map[string]int64{"MISSING_ROW": 1, "TRANSIENT_DEADLINE": 1}},
		Requests: pageRequests(now),
		Groups: []status.GroupLag{
			{Group: "msgx-router", Topic: "msgx.inbox", State: "Stable", Members: 1, Partitions: 1, Committed: 7, End: 10, Lag: 3},
			{Group: "msgx-refdata", Topic: "msgx.refdata-transitions", State: "Empty", Members: 0, Partitions: 1, Committed: -1, End: 2, Lag: 2},
		},
		Components: []status.ComponentState{
			{Name: "ingest", State: "running"},
			{Name: "router", State: "restarting", LastError: "postgres: connection refused", LastErrorAt: &errAt},
		},
		Publisher: &status.PublisherStatus{ExactlyOnce: true, TransactionalID: "msgx-publisher", Committed: 40, Aborted: 1,
			Fenced: "fenced: another producer initialised transactional ID", FencedAt: &errAt, Position: 5120, Published: 900, Reconciled: 3, Deduplicated: 2},
	}
}

// pageRequests has an RQFD refused by an EROR, an RQRD open past the
// timeout after an earlier one was answered, and an EROR that paired with
// nothing (whose text carries markup).
func pageRequests(now time.Time) status.RequestStatus {
	closed, sent := now.Add(-time.Hour), now.Add(-2*time.Hour)
	from, to := now.Add(24*time.Hour), now.Add(48*time.Hour)
	failed := status.RequestSummary{ID: 2, Kind: "RQFD", SEQN: 1002, WindowFrom: &from, WindowTo: &to, State: "FAILED", CreatedAt: sent,
		SentAt: &sent, ClosedAt: &closed, CloseReason: "EROR", AnswerMsgID: 501, ErorCode: "E7", ErorText: "no schedule for that day"}
	done := status.RequestSummary{ID: 1, Kind: "RQRD", SEQN: 1001, Categories: []string{"AIRL"}, State: "DONE", CreatedAt: sent,
		SentAt: &sent, ClosedAt: &closed, CloseReason: "RESPONSE", AnswerMsgID: 500}
	open := status.RequestSummary{ID: 4, Kind: "RQRD", SEQN: 1004, Categories: []string{"AIRL", "COUL"}, State: "PENDING",
		CreatedAt: now.Add(-20 * time.Minute), AgeSeconds: 1200, LastError: "MySQL unreachable"}
	return status.RequestStatus{
		TimeoutSeconds: 600,
		ByKind:         map[string]map[string]int64{"RQFD": {"FAILED": 1}, "RQRD": {"DONE": 1, "PENDING": 1}},
		Open:           []status.RequestSummary{open},
		Latest:         map[string]status.RequestSummary{"RQFD": failed, "RQRD": open},
		LastClosed:     map[string]map[string]status.RequestSummary{"RQFD": {"FAILED": failed}, "RQRD": {"DONE": done}},
		UnpairedErors:  1,
		LatestUnpaired: &status.UnpairedEror{MsgID: 502, At: now, Detail: "pairs with no request: SEQN 999 is no request of msgx",
			Code: "E9", Text: "<b>bad</b>"},
	}
}

// pageServer serves the page with the report of rep (swappable) and a
// history of a few samples.
type pageServer struct {
	mu  sync.Mutex
	rep status.Report
}

func (p *pageServer) setReport(r status.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rep = r
}

// The page in Chromium, against a known report and history: every section
// shows its figures, a reason with markup stays text, the charts draw the
// samples, and a changed report appears at the next refresh.
func TestPageShowsTheReport(t *testing.T) {
	b := browser.New(t)
	now := time.Now().UTC().Truncate(time.Second)
	fake := clock.NewFake(now.Add(-time.Minute))
	src := &sources{c: Counters{Decisions: 0, Events: 0}, lag: status.Lag{Inbox: 0, Groups: []status.GroupLag{
		{Group: "msgx-router", Topic: "msgx.inbox", Lag: 0}}}}
	h := newHistory(t, Config{Interval: 5 * time.Second, Window: 15 * time.Minute}, src.deps(fake))
	for i := range 12 {
		src.set(func(s *sources) {
			s.c = Counters{Decisions: int64(50 * i), Events: int64(20 * i)}
			s.lag = status.Lag{Inbox: int64(i), Groups: []status.GroupLag{{Group: "msgx-router", Topic: "msgx.inbox", Lag: int64(2 * i)}}}
		})
		for j := range 10 {
			h.ObserveEndToEnd(time.Duration(10+j) * time.Millisecond)
		}
		h.Sample(context.Background())
		fake.Advance(5 * time.Second)
	}

	ps := &pageServer{rep: pageReport(now)}
	mux := http.NewServeMux()
	Handlers{History: h}.Register(mux)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		_ = json.NewEncoder(w).Encode(ps.rep)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	if err := b.Do(30*time.Second, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "the first refresh", `document.body.dataset.refreshes >= 1`, 20*time.Second)

	want := map[string][]string{
		"#alerts":            {"inbox hole at IDs 11-13 open for 12m", "4 DEAD messages to decide on"},
		"#inbox-lag":         {"15"},
		"#watermark":         {"10 / 25"},
		"#next-unread":       {"#14 received 12m ago"},
		"#backlog":           {"4"},
		"#hole":              {"IDs 11-13 open for 12m", "W=10"},
		"#oldest-unfinished": {"#150 FAILED CODEC_ERROR, 3 attempts, enqueued 1h ago, next attempt", "(in 4s)", ": bad date"},
		"#memberless":        {"msgx-refdata (2 records waiting)"},
		"#dead-recent":       {"2 in the last 1h"},
		`#dead tr[data-class="MALFORMED"]`: {"MALFORMED", "3", "#110", `<img src=x onerror="document.title='pwned'">`, "#109", "not XML",
			"not replayable: the message itself is wrong"},
		`#dead tr[data-class="EXHAUSTED"]`:        {"#112", "CODEC_ERROR: unparseable date 2026-13-40", "msgx replay --class EXHAUSTED --dry-run"},
		"#abandoned":                              {"MISSING_ROW 1, TRANSIENT_DEADLINE 1"},
		"#backfill-pending":                       {"1 overdue (pending longer than 30d), 3 pending, oldest 33d8h"},
		"#late-rows":                              {"1 (IDs 4)"},
		"#permanent-holes":                        {"2 (3 IDs); last 7 released"},
		`#groups tr[data-group="msgx-router"]`:    {"msgx.inbox", "Stable", "7", "10", "3"},
		`#groups tr[data-group="msgx-refdata"]`:   {"Empty", "none"},
		`#messages tr[data-state="SKIPPED"]`:      {"5", "duplicate 1, ignored 4"},
		`#components tr[data-component="router"]`: {"restarting", "postgres: connection refused"},
		`#components tr[data-component="ingest"]`: {"running"},
		"#pub-mode":                               {"exactly once for read_committed consumers", "msgx-publisher"},
		"#pub-transactions":                       {"40 committed, 1 aborted"},
		"#pub-fenced":                             {"since ", ": fenced: another producer initialised transactional ID"},
		"#pub-position":                           {"5120"},
		"#pub-events":                             {"900 published, 2 duplicates not published, 3 reconciled at start-up"},
		`#requests tr[data-kind="RQFD"]`:          {"none", "#2 (SEQN 1002, flights", "EROR #501: E7 no schedule for that day"},
		`#requests tr[data-kind="RQRD"]`: {"#4 (SEQN 1004, categories AIRL,COUL) PENDING for 20m: MySQL unreachable",
			"#1 (SEQN 1001, categories AIRL) closed", "answered by #500"},
		"#requests-timeout": {"MSGX_REQUEST_TIMEOUT 10m"},
		"#eror-unpaired":    {"1; latest #502", "(E9 <b>bad</b>): pairs with no request: SEQN 999 is no request of msgx"},
		"#decisions-rate":   {"10.0"},
		"#events-rate":      {"4.00"},
		"#e2e-latency":      {"14.0 / 19.0 ms (10 at"},
		"#history-note":     {"12 samples, one every 5 s over the last 15m"},
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

	// The markup of a reason is text: no element was made of it, no script ran.
	if n, _ := browser.Eval[int](b, `document.querySelectorAll("#dead img").length`); n != 0 {
		t.Errorf("a DEAD reason became %d img elements", n)
	}
	if title, _ := browser.Eval[string](b, `document.title`); title != "msgx status" {
		t.Errorf("title %q: a reason's markup ran", title)
	}
	if href, _ := browser.Eval[string](b, `document.querySelector('#dead tr[data-class="EXHAUSTED"] a[href^="/replay/"]').getAttribute("href")`); href != "/replay/dry-run?class=EXHAUSTED" {
		t.Errorf("dry-run link %q", href)
	}
	// Each answer opens its trace; the FAILED request is the newest of its
	// kind, so it is marked bad.
	if href, _ := browser.Eval[string](b, `document.querySelector('#requests tr[data-kind="RQFD"] td.bad a').getAttribute("href")`); href != "/trace/501?format=html" {
		t.Errorf("the FAILED request's EROR link %q", href)
	}
	if n, _ := browser.Eval[int](b, `document.querySelectorAll("#eror-unpaired b").length`); n != 0 {
		t.Errorf("an EROR text became %d b elements", n)
	}
	// A class no replay can move offers none; each latest message opens
	// its trace.
	if n, _ := browser.Eval[int](b, `document.querySelectorAll('#dead tr[data-class="MALFORMED"] a[href^="/replay/"]').length`); n != 0 {
		t.Errorf("the MALFORMED row offers %d replay links", n)
	}
	if href, _ := browser.Eval[string](b, `document.querySelector('#dead tr[data-class="MALFORMED"] a').getAttribute("href")`); href != "/trace/110?format=html" {
		t.Errorf("trace link %q", href)
	}
	// The charts: one line per series, a point per sample (the rates from
	// the second sample on).
	for sel, points := range map[string]int{
		`#chart-lag polyline[data-series="inbox"]`:              12,
		`#chart-lag polyline[data-series="msgx-router"]`:        12,
		`#chart-rate polyline[data-series="decisions/s"]`:       11,
		`#chart-latency polyline[data-series="end-to-end p99"]`: 12,
	} {
		n, err := browser.Eval[string](b, `(document.querySelector('`+sel+`') || {getAttribute: () => "none"}).getAttribute("data-points")`)
		if err != nil || n != strconv.Itoa(points) {
			t.Errorf("%s: %s points (%v), want %d", sel, n, err, points)
		}
	}

	// The next refresh shows a changed report without a reload.
	r := pageReport(now)
	r.Alerts, r.Inbox.Hole, r.Inbox.Lag, r.Messages.OldestUnfinished = []string{}, nil, 0, nil
	r.Publisher = &status.PublisherStatus{Published: 3}
	ps.setReport(r)
	b.WaitFor(t, "the changed report", `document.querySelector("#hole").textContent === "none" && document.querySelector("#inbox-lag").textContent === "0"`, 20*time.Second)
	if got, _ := b.Text("#alerts"); !strings.Contains(got, "none — keeping up, nothing stuck") {
		t.Errorf("alerts after the change: %q", got)
	}
	if got, _ := b.Text("#oldest-unfinished"); got != "none" {
		t.Errorf("oldest unfinished after the change: %q", got)
	}
	if got, _ := b.Text("#pub-mode"); !strings.Contains(got, "at least once") {
		t.Errorf("publisher mode after the change: %q", got)
	}

	// The page loads nothing but its own files: the CSP would have refused
	// anything else, and the browser reported no error.
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("browser errors: %q", errs)
	}
}

// The page without its data source says so and keeps the last data; a 401
// offers the login form.
func TestPageSaysWhenRefreshFails(t *testing.T) {
	b := browser.New(t)
	fake := clock.NewFake(time.Now())
	h := newHistory(t, Config{Interval: 5 * time.Second, Window: time.Minute}, (&sources{c: Counters{-1, -1}}).deps(fake))
	var mu sync.Mutex
	code := http.StatusOK
	mux := http.NewServeMux()
	Handlers{History: h, Login: true}.Register(mux)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if code != http.StatusOK {
			http.Error(w, "nope", code)
			return
		}
		_ = json.NewEncoder(w).Encode(pageReport(time.Now()))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if err := b.Do(30*time.Second, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "the first refresh", `document.body.dataset.refreshes >= 1`, 20*time.Second)
	if n, _ := browser.Eval[int](b, `document.querySelectorAll("form.logout").length`); n != 1 {
		t.Errorf("with a read token the page offers to log out: %d forms", n)
	}
	setCode := func(c int) { mu.Lock(); code = c; mu.Unlock() }

	setCode(http.StatusServiceUnavailable)
	b.WaitFor(t, "the failed refresh", `!document.querySelector("#refresh-error").hidden`, 20*time.Second)
	if got, _ := b.Text("#refresh-error"); !strings.Contains(got, "/status: 503 nope") || !strings.Contains(got, "showing the data of") {
		t.Errorf("refresh error %q", got)
	}
	if got, _ := b.Text("#inbox-lag"); got != "15" {
		t.Errorf("the last data is gone: inbox lag %q", got)
	}
	setCode(http.StatusUnauthorized)
	b.WaitFor(t, "the login offer", `!document.querySelector("#login-needed").hidden`, 20*time.Second)
	if href, _ := browser.Eval[string](b, `document.querySelector("#login-needed a").getAttribute("href")`); href != "/login?next=/" {
		t.Errorf("login link %q", href)
	}
	setCode(http.StatusOK)
	b.WaitFor(t, "recovery", `document.querySelector("#refresh-error").hidden && document.querySelector("#login-needed").hidden`, 20*time.Second)
}
