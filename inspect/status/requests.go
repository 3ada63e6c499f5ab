package status

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequestStatus is msgx's outbound requests to the AODB
// (docs/design.md#requests): what is open and for how long, how the last
// request of each kind ended, and the EROR answers that paired with no
// request.
type RequestStatus struct {
	// TimeoutSeconds is MSGX_REQUEST_TIMEOUT: a request open longer is an
	// alert.
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// ByKind counts requests by kind (RQRD, RQFD) and state (PENDING, SENT,
	// DONE, EXPIRED, FAILED), every one present; null when unknown.
	ByKind map[string]map[string]int64 `json:"byKind"`
	// Open are the open (PENDING or SENT) requests, at most one per kind.
	Open []RequestSummary `json:"open"`
	// Latest is the newest request of each kind that has one: the alerts
	// judge it (a FAILED or EXPIRED one stays an alert until a newer
	// request of its kind is made).
	Latest map[string]RequestSummary `json:"latest"`
	// LastClosed holds, for each kind, its newest DONE, FAILED and EXPIRED
	// request.
	LastClosed map[string]map[string]RequestSummary `json:"lastClosed"`
	// UnpairedErors counts the EROR answers that paired with no request
	// since the newest request was registered (all of them when there is
	// none); LatestUnpaired is the newest of them.
	UnpairedErors  int64         `json:"unpairedErors"`
	LatestUnpaired *UnpairedEror `json:"latestUnpaired"`
	// Errors are the reads of this section that failed.
	Errors []string `json:"errors,omitempty"`
}

// RequestSummary is one request as the report shows it.
type RequestSummary struct {
	ID   int64  `json:"id"`
	Kind string `json:"kind"`
	// Categories are an RQRD's; WindowFrom and WindowTo an RQFD's window.
	Categories []string   `json:"categories,omitempty"`
	WindowFrom *time.Time `json:"windowFrom,omitempty"`
	WindowTo   *time.Time `json:"windowTo,omitempty"`
	SEQN       int64      `json:"seqn"`
	State      string     `json:"state"`
	CreatedAt  time.Time  `json:"createdAt"`
	// AgeSeconds is how long it has been open (GeneratedAt − CreatedAt);
	// for a closed request how long it was open.
	AgeSeconds int64      `json:"ageSeconds"`
	SentAt     *time.Time `json:"sentAt,omitempty"`
	// OutboxID is its COUTMSGS_ID once confirmed.
	OutboxID    int64      `json:"outboxId,omitempty"`
	ClosedAt    *time.Time `json:"closedAt,omitempty"`
	CloseReason string     `json:"closeReason,omitempty"`
	// AnswerMsgID is the message that closed it: the RESP of a DONE
	// request, the EROR of a FAILED one.
	AnswerMsgID int64 `json:"answerMsgId,omitempty"`
	// ErorCode and ErorText are what the EROR of a FAILED request said.
	ErorCode string `json:"erorCode,omitempty"`
	ErorText string `json:"erorText,omitempty"`
	// LastError is the last failure to write it into the outbox.
	LastError string `json:"lastError,omitempty"`
}

// UnpairedEror is an EROR answer that paired with no request.
type UnpairedEror struct {
	MsgID int64     `json:"msgId"`
	At    time.Time `json:"at"`
	// Detail says why it pairs with nothing.
	Detail string `json:"detail"`
	Code   string `json:"code,omitempty"`
	Text   string `json:"text,omitempty"`
}

// The request kinds and states, in the order the report lists them.
var (
	requestKinds  = []string{"RQFD", "RQRD"}
	requestStates = []string{"PENDING", "SENT", "DONE", "EXPIRED", "FAILED"}
)

// The SQL of the requests section. req_track holds a few rows a day and is
// read whole; req_answer through req_answer_unpaired_eror.
const (
	sqlRequestCounts = `SELECT kind, state, count(*) FROM req_track GROUP BY 1, 2`
	// The newest request of every (kind, state): the open ones, the last
	// closed ones, and among them the newest of each kind.
	sqlRequestNewest = `SELECT DISTINCT ON (r.kind, r.state) r.id, r.kind, r.rtypes, r.window_from, r.window_to, r.seqn,
			r.state, r.created_at, r.sent_at, COALESCE(r.outbox_id, 0), r.closed_at, COALESCE(r.close_reason, ''),
			COALESCE(r.response_msg_id, 0), COALESCE(a.code, ''), COALESCE(a.text, ''), COALESCE(r.last_error, '')
		FROM req_track r LEFT JOIN req_answer a ON a.msg_id = r.response_msg_id AND a.type = 'EROR'
		ORDER BY r.kind, r.state, r.id DESC`
	sqlUnpairedErors = `SELECT count(*), max(msg_id) FROM req_answer
		WHERE type = 'EROR' AND outcome = 'UNPAIRED' AND at >= COALESCE((SELECT max(created_at) FROM req_track), '-infinity')`
	sqlUnpairedOne = `SELECT msg_id, at, detail, COALESCE(code, ''), COALESCE(text, '') FROM req_answer WHERE msg_id = $1`
)

// requests fills the requests section.
func (s *collection) requests(ctx context.Context, q *RequestStatus) {
	pg := s.deps.PG
	fail := func(what string, err error) {
		q.Errors = append(q.Errors, fmt.Sprintf("%s: %v", what, err))
	}
	err := s.pg(ctx, false, func(ctx context.Context) error {
		rows, err := pg.Query(ctx, sqlRequestCounts)
		if err != nil {
			return err
		}
		by := map[string]map[string]int64{}
		for _, k := range requestKinds {
			by[k] = map[string]int64{}
			for _, st := range requestStates {
				by[k][st] = 0
			}
		}
		var kind, state string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&kind, &state, &n}, func() error {
			if by[kind] == nil {
				by[kind] = map[string]int64{}
			}
			by[kind][state] = n
			return nil
		})
		q.ByKind = by
		return err
	})
	if err != nil {
		q.ByKind = nil
		fail("counting requests", err)
	}

	err = s.pg(ctx, false, func(ctx context.Context) error {
		rows, err := pg.Query(ctx, sqlRequestNewest)
		if err != nil {
			return err
		}
		var r RequestSummary
		var rtypes []string
		_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Kind, &rtypes, &r.WindowFrom, &r.WindowTo, &r.SEQN, &r.State, &r.CreatedAt,
			&r.SentAt, &r.OutboxID, &r.ClosedAt, &r.CloseReason, &r.AnswerMsgID, &r.ErorCode, &r.ErorText, &r.LastError}, func() error {
			x := r
			x.Categories = append([]string(nil), rtypes...)
			end := s.now
			if x.ClosedAt != nil {
				end = *x.ClosedAt
			}
			x.AgeSeconds, x.LastError = ageSeconds(end, x.CreatedAt), clip(x.LastError, errorChars)
			if x.State == "PENDING" || x.State == "SENT" {
				q.Open = append(q.Open, x)
			} else {
				if q.LastClosed[x.Kind] == nil {
					q.LastClosed[x.Kind] = map[string]RequestSummary{}
				}
				q.LastClosed[x.Kind][x.State] = x
			}
			if l, ok := q.Latest[x.Kind]; !ok || x.ID > l.ID {
				q.Latest[x.Kind] = x
			}
			return nil
		})
		return err
	})
	if err != nil {
		q.Open, q.Latest, q.LastClosed = nil, nil, nil
		fail("reading the newest requests", err)
	} else {
		sort.Slice(q.Open, func(i, j int) bool { return q.Open[i].ID < q.Open[j].ID })
	}

	var latest *int64
	err = s.pg(ctx, false, func(ctx context.Context) error {
		return pg.QueryRow(ctx, sqlUnpairedErors).Scan(&q.UnpairedErors, &latest)
	})
	if err != nil {
		q.UnpairedErors = -1
		fail("counting EROR answers paired with no request", err)
		return
	}
	if latest != nil {
		var u UnpairedEror
		err = s.pg(ctx, false, func(ctx context.Context) error {
			return pg.QueryRow(ctx, sqlUnpairedOne, *latest).Scan(&u.MsgID, &u.At, &u.Detail, &u.Code, &u.Text)
		})
		if err != nil {
			fail("reading the latest EROR paired with no request", err)
		} else {
			u.Detail, u.Text = clip(u.Detail, errorChars), clip(u.Text, errorChars)
			q.LatestUnpaired = &u
		}
	}
}

// describe names a request for people: "RQFD request #3 (SEQN 17, flights
// 2026-12-01T00:00Z..2026-12-02T00:00Z)".
func (r RequestSummary) describe() string {
	what := "categories " + strings.Join(r.Categories, ",")
	if r.Kind == "RQFD" && r.WindowFrom != nil && r.WindowTo != nil {
		what = "flights " + r.WindowFrom.UTC().Format("2006-01-02T15:04Z") + ".." + r.WindowTo.UTC().Format("2006-01-02T15:04Z")
	}
	return fmt.Sprintf("%s request #%d (SEQN %d, %s)", r.Kind, r.ID, r.SEQN, what)
}

// requestAlerts are the requests' alerts (see Alerts): the newest request
// of a kind FAILED or EXPIRED, a request open longer than the timeout, EROR
// answers that paired with nothing.
func requestAlerts(q RequestStatus, th Config) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	cmd := map[string]string{"RQFD": "msgx request flights --from … --to …", "RQRD": "msgx request refdata <RTYPE>…"}
	for _, kind := range requestKinds {
		l, ok := q.Latest[kind]
		if !ok {
			continue
		}
		switch l.State {
		case "FAILED":
			eror := fmt.Sprintf("EROR #%d", l.AnswerMsgID)
			if l.AnswerMsgID == 0 {
				eror = "an EROR"
			}
			if l.ErorCode != "" {
				eror += " " + l.ErorCode
			}
			if l.ErorText != "" {
				eror += ": " + l.ErorText
			}
			add("the AODB refused %s with %s; no data will come for it: settle the cause with the AODB, then ask again (%s)",
				l.describe(), eror, cmd[kind])
		case "EXPIRED":
			add("%s expired unanswered after MSGX_REQUEST_TIMEOUT (%s): no data will come for it; ask again (%s) once the AODB reads the outbox",
				l.describe(), fmtAge(q.TimeoutSeconds), cmd[kind])
		}
	}
	for _, o := range q.Open {
		if time.Duration(o.AgeSeconds)*time.Second < th.RequestTimeout {
			continue
		}
		why := "SENT and not expired: is the requests component running?"
		if o.State == "PENDING" {
			why = "PENDING: not confirmed in the outbox COUTMSGS yet"
			if o.LastError != "" {
				why += ": " + o.LastError
			}
		}
		add("%s open for %s, longer than MSGX_REQUEST_TIMEOUT (%s): %s", o.describe(), fmtAge(o.AgeSeconds), fmtDur(th.RequestTimeout), why)
	}
	if q.UnpairedErors > 0 {
		line := fmt.Sprintf("%s since the newest request pair with no request: the AODB refused something msgx cannot attribute",
			plural(q.UnpairedErors, "EROR answer"))
		if u := q.LatestUnpaired; u != nil {
			line += fmt.Sprintf("; latest #%d", u.MsgID)
			if u.Code != "" {
				line += " " + u.Code
			}
			if u.Text != "" {
				line += " (" + u.Text + ")"
			}
			line += ": " + u.Detail + fmt.Sprintf(" — read it with msgx trace %d", u.MsgID)
		}
		out = append(out, line)
	}
	return out
}
