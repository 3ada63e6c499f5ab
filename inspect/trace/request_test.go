package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"msgx/inspect/trace"
	"msgx/internal/contract"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// The trace of an answer names the request it closed, or why none: from
// the outcome recorded with it (req_answer), or, for a RESP without one,
// from the router's decision.
func TestTraceOfAnAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO req_track (id, kind, styp, rtypes, window_from, window_to, seqn, sndr, state, payload, attempts, outbox_floor,
			outbox_id, created_at, sent_at, closed_at, close_reason, response_msg_id)
			VALUES (3, 'RQFD', 'NONE', '{}', $1::timestamptz, $1::timestamptz + interval '1 day', 1764, 'MSGX', 'FAILED', '<MSG/>', 1, 0, 40, $1, $1, $1, 'EROR', 10)`,
		`INSERT INTO proc_state (msg_id, state, reason, msg_type, msg_styp, enqueued_at, updated_at, n_transitions, n_applied, backfill_at)
			VALUES (10, 'SKIPPED', 'ignored:EROR-*', 'EROR', 'RQFD', $1, $1, 0, 0, $1),
			       (11, 'SKIPPED', 'ignored:EROR-*', 'EROR', 'NONE', $1, $1, 0, 0, $1),
			       (12, 'SKIPPED', 'no-match', 'SCHD', 'RESP', $1, $1, 0, 0, $1)`,
		`INSERT INTO req_answer (msg_id, type, kind, request_id, outcome, paired_by, detail, code, text, at) VALUES
			(10, 'EROR', 'RQFD', 3, 'FAILED', 'TYPE', 'closed RQFD request 3 (SEQN 1764) as FAILED, named by its kind', 'E7', 'no schedule', $1),
			(11, 'EROR', NULL, NULL, 'UNPAIRED', NULL, 'pairs with no request: SEQN 999 is no request of msgx', NULL, NULL, $1)`,
	} {
		if _, err := pool.Exec(ctx, q, at); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r, err := trace.New(trace.Deps{PG: pool, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   int64
		want string
	}{
		{10, "request   FAILED: closed RQFD request 3 (SEQN 1764) as FAILED, named by its kind; the EROR says E7 no schedule; request 3 is FAILED now (msgx request show 3)"},
		{11, "request   UNPAIRED: pairs with no request: SEQN 999 is no request of msgx"},
		{12, "request   none: it answers no open request, so the RESP guard (MSGX_RESP_GUARD) SKIPPED it"},
	} {
		m, err := r.Message(ctx, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := m.Text(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("trace of %d lacks %q:\n%s", tc.id, tc.want, b.String())
		}
	}
	m, _ := r.Message(ctx, 10)
	contracts, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(m)
	if err := contracts.Response("GET", "/trace/10", 200, "application/json", raw); err != nil {
		t.Errorf("the trace breaks deploy/schemas/trace-message.json: %v", err)
	}
	if a := m.Request; a == nil || a.RequestID != 3 || a.SEQN != 1764 || a.RequestState != "FAILED" || a.PairedBy != "TYPE" || !a.At.Equal(at) {
		t.Errorf("request of 10: %+v", a)
	}
}
