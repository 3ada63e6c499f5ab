package outbound

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/tables/request"
)

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const reqCols = `id, kind, styp, rtypes, answered, window_from, window_to, seqn, sndr, state, payload, attempts,
	outbox_floor, outbox_id, created_at, sent_at, closed_at, close_reason, response_msg_id, last_error`

// openStates is the SQL list of the states that occupy a kind's slot; it
// must match request.State.Open and the predicate of req_track_open_kind.
const openStates = `('PENDING', 'SENT')`

func scanReq(row pgx.Row) (request.ReqTrack, error) {
	var (
		r                          request.ReqTrack
		kind, state                string
		wf, wt, sentAt, closedAt   *time.Time
		floor, outboxID, respMsgID *int64
		reason, lastErr            *string
	)
	err := row.Scan(&r.ID, &kind, &r.STYP, &r.RTypes, &r.Answered, &wf, &wt, &r.SEQN, &r.SNDR, &state, &r.Payload, &r.Attempts,
		&floor, &outboxID, &r.CreatedAt, &sentAt, &closedAt, &reason, &respMsgID, &lastErr)
	if err != nil {
		return r, err
	}
	r.Kind, r.State = request.Kind(kind), request.State(state)
	if len(r.RTypes) == 0 {
		r.RTypes = nil
	}
	if len(r.Answered) == 0 {
		r.Answered = nil
	}
	r.WindowFrom, r.WindowTo, r.SentAt, r.ClosedAt = deref(wf), deref(wt), deref(sentAt), deref(closedAt)
	r.OutboxFloor, r.OutboxID, r.ResponseMsgID = deref(floor), deref(outboxID), deref(respMsgID)
	r.CloseReason, r.LastError = deref(reason), deref(lastErr)
	return r, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Nullable parameters: the zero value is stored as NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func queryReqs(ctx context.Context, q querier, sql string, args ...any) ([]request.ReqTrack, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []request.ReqTrack
	for rows.Next() {
		r, err := scanReq(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// getReq loads one request by id, locked for the transaction when
// forUpdate.
func getReq(ctx context.Context, q querier, id int64, forUpdate bool) (request.ReqTrack, error) {
	sql := `SELECT ` + reqCols + ` FROM req_track WHERE id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	r, err := scanReq(q.QueryRow(ctx, sql, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("request %d does not exist", id)
	}
	return r, err
}

// openOfKind returns the open requests of kind (at most one, by the
// req_track_open_kind index), locked when forUpdate. FOR UPDATE under READ
// COMMITTED re-checks the state after waiting for a concurrent writer, so a
// request closed meanwhile is not returned.
func openOfKind(ctx context.Context, q querier, kind request.Kind, forUpdate bool) ([]request.ReqTrack, error) {
	sql := `SELECT ` + reqCols + ` FROM req_track WHERE kind = $1 AND state IN ` + openStates + ` ORDER BY id`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	return queryReqs(ctx, q, sql, string(kind))
}

// insertReq inserts a new request and returns its id.
func insertReq(ctx context.Context, q querier, r request.ReqTrack) (int64, error) {
	rtypes := r.RTypes
	if rtypes == nil {
		rtypes = []string{}
	}
	var id int64
	err := q.QueryRow(ctx, `INSERT INTO req_track (kind, styp, rtypes, window_from, window_to, seqn, sndr, state,
			payload, attempts, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
		string(r.Kind), r.STYP, rtypes, nullTime(r.WindowFrom), nullTime(r.WindowTo), r.SEQN, r.SNDR, string(r.State),
		r.Payload, r.Attempts, r.CreatedAt).Scan(&id)
	return id, err
}

// saveReq writes every mutable column of r. The immutable ones (kind,
// categories, window, SEQN, payload, created_at) are never rewritten.
func saveReq(ctx context.Context, q querier, r request.ReqTrack) error {
	var floor any
	if r.Attempts > 0 {
		floor = r.OutboxFloor
	}
	answered := r.Answered
	if answered == nil {
		answered = []string{}
	}
	tag, err := q.Exec(ctx, `UPDATE req_track SET state = $2, attempts = $3, outbox_floor = $4, outbox_id = $5,
			sent_at = $6, closed_at = $7, close_reason = $8, response_msg_id = $9, last_error = $10, answered = $11
		WHERE id = $1`,
		r.ID, string(r.State), r.Attempts, floor, nullInt(r.OutboxID), nullTime(r.SentAt), nullTime(r.ClosedAt),
		nullString(r.CloseReason), nullInt(r.ResponseMsgID), nullString(r.LastError), answered)
	if err != nil {
		return fmt.Errorf("updating request %d: %w", r.ID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("updating request %d: no such row", r.ID)
	}
	return nil
}

// answerFrom reads an answer with its request's SEQN; answerCols are its
// columns, in scanAnswer's order.
const (
	answerCols = `a.msg_id, a.type, COALESCE(a.kind, ''), COALESCE(a.request_id, 0), COALESCE(r.seqn, 0), a.outcome,
	COALESCE(a.paired_by, ''), a.detail, COALESCE(a.code, ''), COALESCE(a.text, ''), a.at`
	answerFrom = ` FROM req_answer a LEFT JOIN req_track r ON r.id = a.request_id`
)

func scanAnswer(row pgx.Row) (request.Answer, error) {
	var a request.Answer
	var kind string
	err := row.Scan(&a.MsgID, &a.Type, &kind, &a.RequestID, &a.SEQN, &a.Outcome, &a.PairedBy, &a.Detail, &a.Code, &a.Text, &a.At)
	a.Kind = request.Kind(kind)
	return a, err
}

// insertAnswer records a, unless its message has an outcome already; it
// reports whether it did.
func insertAnswer(ctx context.Context, q querier, a request.Answer) (bool, error) {
	tag, err := q.Exec(ctx, `INSERT INTO req_answer (msg_id, type, kind, request_id, outcome, paired_by, detail, code, text, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (msg_id) DO NOTHING`,
		a.MsgID, a.Type, nullString(string(a.Kind)), nullInt(a.RequestID), a.Outcome, nullString(a.PairedBy), a.Detail,
		nullString(a.Code), nullString(a.Text), a.At)
	if err != nil {
		return false, fmt.Errorf("recording the answer of message %d: %w", a.MsgID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// getAnswer reads the recorded outcome of message msgID.
func getAnswer(ctx context.Context, q querier, msgID int64) (request.Answer, bool, error) {
	a, err := scanAnswer(q.QueryRow(ctx, `SELECT `+answerCols+answerFrom+` WHERE a.msg_id = $1`, msgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return request.Answer{}, false, nil
	}
	if err != nil {
		return request.Answer{}, false, fmt.Errorf("reading the answer of message %d: %w", msgID, err)
	}
	return a, true, nil
}

// Tracked is a request with the answers recorded for it (msgx request
// list/show).
type Tracked struct {
	request.ReqTrack
	// Answers are the messages that answered it, oldest first: RESPs that
	// completed it or answered a category, the EROR that failed it, late
	// EROR answers naming it.
	Answers []request.Answer `json:"answers"`
}

// List returns the newest limit requests (every one when limit <= 0),
// newest first, each with its answers. It reads PostgreSQL only.
func List(ctx context.Context, pg *pgxpool.Pool, limit int) ([]Tracked, error) {
	sql := `SELECT ` + reqCols + ` FROM req_track ORDER BY id DESC`
	args := []any{}
	if limit > 0 {
		sql += ` LIMIT $1`
		args = append(args, limit)
	}
	reqs, err := queryReqs(ctx, pg, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("listing requests: %w", err)
	}
	out := make([]Tracked, len(reqs))
	ids := make([]int64, len(reqs))
	at := map[int64]int{}
	for i, r := range reqs {
		out[i] = Tracked{ReqTrack: r, Answers: []request.Answer{}}
		ids[i], at[r.ID] = r.ID, i
	}
	rows, err := pg.Query(ctx, `SELECT `+answerCols+answerFrom+` WHERE a.request_id = ANY($1) ORDER BY a.at, a.msg_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("listing the answers of requests: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanAnswer(rows)
		if err != nil {
			return nil, fmt.Errorf("listing the answers of requests: %w", err)
		}
		out[at[a.RequestID]].Answers = append(out[at[a.RequestID]].Answers, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the answers of requests: %w", err)
	}
	return out, nil
}

// ErrNoRequest: Show found no request with that id.
var ErrNoRequest = errors.New("no such request")

// Show returns request id with its answers.
func Show(ctx context.Context, pg *pgxpool.Pool, id int64) (Tracked, error) {
	r, err := scanReq(pg.QueryRow(ctx, `SELECT `+reqCols+` FROM req_track WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Tracked{}, fmt.Errorf("request %d: %w", id, ErrNoRequest)
	}
	if err != nil {
		return Tracked{}, fmt.Errorf("reading request %d: %w", id, err)
	}
	t := Tracked{ReqTrack: r, Answers: []request.Answer{}}
	rows, err := pg.Query(ctx, `SELECT `+answerCols+answerFrom+` WHERE a.request_id = $1 ORDER BY a.at, a.msg_id`, id)
	if err != nil {
		return Tracked{}, fmt.Errorf("reading the answers of request %d: %w", id, err)
	}
	t.Answers, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (request.Answer, error) { return scanAnswer(row) })
	if err != nil {
		return Tracked{}, fmt.Errorf("reading the answers of request %d: %w", id, err)
	}
	if t.Answers == nil {
		t.Answers = []request.Answer{}
	}
	return t, nil
}
