package status_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/inspect/status"
	"msgx/internal/contract"
	"msgx/sink/sinktest"
)

// stRequest inserts one req_track row: created ago before stNow, sent a
// second later unless PENDING, closed at closed before stNow when closed.
func stRequest(t *testing.T, pool *pgxpool.Pool, id int64, kind, state string, ago, closed time.Duration, reason string, answer int64) {
	t.Helper()
	created := stNow.Add(-ago)
	var sentAt, closedAt, outbox, resp any
	if state != "PENDING" {
		sentAt, outbox = created.Add(time.Second), 100+id
	}
	if reason != "" {
		closedAt = stNow.Add(-closed)
	}
	if answer != 0 {
		resp = answer
	}
	rtypes, styp, from, to := []string{"AIRL"}, "AIRL", any(nil), any(nil)
	if kind == "RQFD" {
		rtypes, styp = []string{}, "NONE"
		from, to = time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 12, 0, 0, 0, 0, time.UTC)
	}
	lastErr := any(nil)
	if state == "PENDING" {
		lastErr = "MySQL unreachable"
	}
	stExec(t, pool, `INSERT INTO req_track (id, kind, styp, rtypes, window_from, window_to, seqn, sndr, state, payload, attempts,
			outbox_floor, outbox_id, created_at, sent_at, closed_at, close_reason, response_msg_id, last_error)
		VALUES ($1::bigint, $2, $3, $4, $5, $6, 1000 + $1::bigint, 'MSGX', $7, '<MSG/>', 1, 0, $8, $9, $10, $11, NULLIF($12, ''), $13, $14)`,
		id, kind, styp, rtypes, from, to, state, outbox, created, sentAt, closedAt, reason, resp, lastErr)
}

func stAnswer(t *testing.T, pool *pgxpool.Pool, msgID int64, typ string, request int64, outcome, code, text string, ago time.Duration) {
	t.Helper()
	var req any
	if request != 0 {
		req = request
	}
	stExec(t, pool, `INSERT INTO req_answer (msg_id, type, request_id, outcome, detail, code, text, at)
		VALUES ($1, $2, $3, $4, 'pairs with no request: SEQN 999 is no request of msgx', NULLIF($5, ''), NULLIF($6, ''), $7)`,
		msgID, typ, req, outcome, code, text, stNow.Add(-ago))
}

// The requests section: counts by kind and state, the open requests with
// their age, the last DONE / FAILED / EXPIRED of each kind with its answer,
// EROR answers paired with nothing since the newest request; and the
// alerts they raise.
func TestCollectReportRequests(t *testing.T) {
	t.Parallel()
	pool := stPG(t, sinktest.NewPG(t))
	stRequest(t, pool, 1, "RQFD", "DONE", 3*time.Hour, 170*time.Minute, "RESPONSE", 500)
	stAnswer(t, pool, 500, "RESP", 1, "DONE", "", "", 170*time.Minute)
	stRequest(t, pool, 2, "RQFD", "FAILED", time.Hour, 55*time.Minute, "EROR", 501)
	stAnswer(t, pool, 501, "EROR", 2, "FAILED", "E7", "no schedule for that day", 55*time.Minute)
	stRequest(t, pool, 3, "RQRD", "EXPIRED", 2*time.Hour, 110*time.Minute, "TIMEOUT", 0)
	stRequest(t, pool, 4, "RQRD", "PENDING", 20*time.Minute, 0, "", 0)
	stAnswer(t, pool, 499, "EROR", 0, "UNPAIRED", "", "", 4*time.Hour) // before the newest request
	stAnswer(t, pool, 502, "EROR", 0, "UNPAIRED", "E9", "bad body", 10*time.Minute)

	r, err := stCollect(t, status.Deps{PG: pool, Groups: stGroups, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	q := r.Requests
	if len(q.Errors) > 0 {
		t.Fatal(q.Errors)
	}
	stWant(t, "TimeoutSeconds", q.TimeoutSeconds, 600)
	stWantMap(t, "ByKind RQFD", q.ByKind["RQFD"], map[string]int64{"PENDING": 0, "SENT": 0, "DONE": 1, "EXPIRED": 0, "FAILED": 1})
	stWantMap(t, "ByKind RQRD", q.ByKind["RQRD"], map[string]int64{"PENDING": 1, "SENT": 0, "DONE": 0, "EXPIRED": 1, "FAILED": 0})
	if len(q.Open) != 1 || q.Open[0].ID != 4 || q.Open[0].AgeSeconds != 1200 || q.Open[0].LastError != "MySQL unreachable" {
		t.Errorf("Open = %+v", q.Open)
	}
	if l := q.Latest["RQFD"]; l.ID != 2 || l.State != "FAILED" || l.AnswerMsgID != 501 || l.ErorCode != "E7" || l.ErorText != "no schedule for that day" {
		t.Errorf("Latest RQFD = %+v", l)
	}
	if d := q.LastClosed["RQFD"]["DONE"]; d.ID != 1 || d.AnswerMsgID != 500 || d.ErorCode != "" || d.AgeSeconds != 600 {
		t.Errorf("last DONE = %+v", d)
	}
	if e := q.LastClosed["RQRD"]["EXPIRED"]; e.ID != 3 || e.CloseReason != "TIMEOUT" || len(e.Categories) != 1 {
		t.Errorf("last EXPIRED = %+v", e)
	}
	if q.UnpairedErors != 1 || q.LatestUnpaired == nil || q.LatestUnpaired.MsgID != 502 || q.LatestUnpaired.Code != "E9" {
		t.Errorf("unpaired %d %+v", q.UnpairedErors, q.LatestUnpaired)
	}
	var requestAlerts []string
	for _, a := range r.Alerts {
		if strings.Contains(a, "request") || strings.Contains(a, "EROR") {
			requestAlerts = append(requestAlerts, a)
		}
	}
	stWantAlerts(t, requestAlerts, [][]string{
		{"the AODB refused RQFD request #2 (SEQN 1002, flights 2026-03-11T00:00Z..2026-03-12T00:00Z) with EROR #501 E7: no schedule for that day",
			"msgx request flights"},
		{"RQRD request #4 (SEQN 1004, categories AIRL) open for 20m, longer than MSGX_REQUEST_TIMEOUT (10m): PENDING", "MySQL unreachable"},
		{"1 EROR answer since the newest request pair with no request", "latest #502 E9 (bad body): pairs with no request", "msgx trace 502"},
	})

	var text bytes.Buffer
	if err := r.Text(&text); err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{
		"REQUESTS (to the AODB, COUTMSGS)",
		"RQFD  0        0     1     0        1",
		"open           RQRD request #4 (SEQN 1004, categories AIRL)",
		"last DONE      RQFD request #1",
		", answered by #500",
		"last FAILED    RQFD request #2",
		"EROR #501 E7: no schedule for that day",
		"last EXPIRED   RQRD request #3 (SEQN 1003, categories AIRL)",
		"closed 2026-03-09T23:10:00Z, TIMEOUT",
		"EROR unpaired  1",
	} {
		if !strings.Contains(text.String(), frag) {
			t.Errorf("text lacks %q:\n%s", frag, text.String())
		}
	}
	raw, _ := json.Marshal(r)
	contracts, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := contracts.Response("GET", "/status", 200, "application/json", raw); err != nil {
		t.Errorf("the report breaks deploy/schemas/status.json: %v", err)
	}
	for _, frag := range []string{`"requests":{"timeoutSeconds":600,`, `"unpairedErors":1`, `"answerMsgId":501`, `"erorCode":"E7"`} {
		if !bytes.Contains(raw, []byte(frag)) {
			t.Errorf("JSON lacks %s", frag)
		}
	}

	// Once a newer request of a kind is made, its FAILED or EXPIRED
	// predecessor and the EROR answers before it are no alert any more.
	stRequest(t, pool, 5, "RQFD", "SENT", time.Minute, 0, "", 0)
	r, _ = stCollect(t, status.Deps{PG: pool, Groups: stGroups, Timeout: 5 * time.Second})
	for _, a := range r.Alerts {
		if strings.Contains(a, "refused") || strings.Contains(a, "EROR answer") {
			t.Errorf("alert after a newer request: %s", a)
		}
	}
}

// The request alerts, rule by rule.
func TestRequestAlertRules(t *testing.T) {
	t.Parallel()
	th := stConfig(t)
	closed := stNow.Add(-time.Minute)
	from, to := stNow, stNow.Add(24*time.Hour)
	rqfd := status.RequestSummary{ID: 7, Kind: "RQFD", SEQN: 17, WindowFrom: &from, WindowTo: &to, CreatedAt: stNow.Add(-time.Hour)}
	tests := []struct {
		name   string
		change func(q *status.RequestStatus)
		want   []string
	}{
		{"none", func(*status.RequestStatus) {}, nil},
		{"latest DONE", func(q *status.RequestStatus) {
			r := rqfd
			r.State, r.ClosedAt, r.AnswerMsgID = "DONE", &closed, 9
			q.Latest["RQFD"] = r
		}, nil},
		{"latest FAILED", func(q *status.RequestStatus) {
			r := rqfd
			r.State, r.ClosedAt, r.AnswerMsgID, r.ErorCode = "FAILED", &closed, 9, "E1"
			q.Latest["RQFD"] = r
		}, []string{"the AODB refused RQFD request #7 (SEQN 17, flights 2026-03-10T01:00Z..2026-03-11T01:00Z) with EROR #9 E1; no data will come"}},
		{"latest EXPIRED", func(q *status.RequestStatus) {
			r := rqfd
			r.State, r.ClosedAt, r.CloseReason = "EXPIRED", &closed, "TIMEOUT"
			q.Latest["RQFD"] = r
		}, []string{"RQFD request #7 (SEQN 17, flights 2026-03-10T01:00Z..2026-03-11T01:00Z) expired unanswered after MSGX_REQUEST_TIMEOUT (10m)"}},
		{"SENT within the timeout", func(q *status.RequestStatus) {
			r := rqfd
			r.State, r.AgeSeconds = "SENT", 599
			q.Open, q.Latest["RQFD"] = []status.RequestSummary{r}, r
		}, nil},
		{"SENT past the timeout", func(q *status.RequestStatus) {
			r := rqfd
			r.State, r.AgeSeconds = "SENT", 600
			q.Open, q.Latest["RQFD"] = []status.RequestSummary{r}, r
		}, []string{"open for 10m, longer than MSGX_REQUEST_TIMEOUT (10m): SENT and not expired: is the requests component running?"}},
		{"unpaired without details", func(q *status.RequestStatus) { q.UnpairedErors = 2 },
			[]string{"2 EROR answers since the newest request pair with no request"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := status.Report{GeneratedAt: stNow, Inbox: status.InboxStatus{Seeded: true, Watermark: 1, MaxID: 1},
				Requests: status.RequestStatus{TimeoutSeconds: 600, Latest: map[string]status.RequestSummary{}}}
			tc.change(&r.Requests)
			want := make([][]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = []string{w}
			}
			stWantAlerts(t, status.Alerts(r, th), want)
		})
	}
}
