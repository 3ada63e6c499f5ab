package replay_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/emitters/backfill"
	"msgx/ingest"
	"msgx/ingest/replay"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/processors/router"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
	"msgx/tables/message"
)

// rpT0 is the replay's time in every test.
var rpT0 = time.Date(2026, 3, 12, 2, 0, 0, 0, time.UTC)

// rpReceived is CMINMSGS_DATE_RECEIVED of the seeded inbox rows (airport
// local time).
const rpReceived = "2026-03-10 08:59:00"

const rpTopic = "msgx.inbox"

// rpEnv is one test's databases and broker.
type rpEnv struct {
	t       *testing.T
	pg      *pgxpool.Pool
	my      *sql.DB
	brokers []string
	deps    replay.Deps
}

func newRP(t *testing.T) *rpEnv {
	t.Helper()
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := &rpEnv{t: t, pg: pool, my: sinktest.OpenMySQLIn(t, testenv.NewMySQL(t), sinktest.ShanghaiInbox)}
	// Kafka is kfake, in-process: this package tests its own logic against a
	// broker, one per test in milliseconds; the Kafka claims run on Apache
	// Kafka (cmd/msgx, emitters/event; docs/design.md#kafka-divergences).
	e.brokers = rpBroker(t, testenv.NewBroker(t))
	e.deps = replay.Deps{PG: pool, Inbox: sinktest.Tables(t, e.my, nil, "cminmsgs", 5*time.Second), Brokers: e.brokers, Kafka: testenv.KafkaConfig(e.brokers),
		Topic: rpTopic, Timeout: 5 * time.Second, Log: testenv.Logger(t)}
	return e
}

// rpBroker creates msgx.inbox as the ingest bridge does (one partition,
// kept forever) and returns brokers.
func rpBroker(t testing.TB, brokers []string) []string {
	t.Helper()
	spec := ingest.Config{Topic: rpTopic}.TopicSpec()
	if err := kafka.EnsureTopics(brokers, testenv.KafkaConfig(brokers), []kafka.TopicSpec{spec}, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	return brokers
}

// rpRaw is the inbox text of message id: distinct per message, so the
// re-injected record can be matched to its row.
func rpRaw(id int64) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><TYPE>FLOP</TYPE><STYP>ESTT</STYP></META><FLOP><FLID>%d</FLID></FLOP></MSG>`, id, 1000+id)
}

func (e *rpEnv) inbox(ids ...int64) {
	e.t.Helper()
	for _, id := range ids {
		if _, err := e.my.Exec("INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES (?, ?, ?)",
			id, rpRaw(id), rpReceived); err != nil {
			e.t.Fatal(err)
		}
	}
}

// rpRow is a proc_state row in a shape the router leaves.
type rpRow struct {
	id        int64
	state     string
	class     string
	reason    string
	lastErr   string
	identity  string
	attempts  int
	nTrans    *int
	nApplied  int
	marked    bool // backfill settled (the inbox row carries the mark)
	abandoned bool // backfill abandoned TRANSIENT_DEADLINE
}

func (e *rpEnv) proc(rows ...rpRow) {
	e.t.Helper()
	enq := rpT0.Add(-48 * time.Hour)
	for _, r := range rows {
		var next, at, abandonedAt *time.Time
		var abandonedReason *string
		if message.IsTerminal(r.state) {
			t := enq.Add(time.Minute)
			next = &t
			if r.marked {
				at = &t
			}
			if r.abandoned {
				abandonedAt = &t
				s := message.AbandonTransientDeadline
				abandonedReason = &s
			}
		}
		var nextAttempt *time.Time
		if r.state == message.StateFailed {
			t := enq.Add(time.Hour)
			nextAttempt = &t
		}
		_, err := e.pg.Exec(context.Background(), `INSERT INTO proc_state (msg_id, state, identity_key, error_class, reason, last_error,
				attempts, next_attempt_at, received_at, enqueued_at, updated_at, n_transitions, n_applied,
				backfill_at, backfill_next_at, backfill_attempts, backfill_abandoned_at, backfill_abandoned_reason)
			VALUES ($1, $2, NULLIF($3, ''), NULLIF($4, ''), NULLIF($5, ''), NULLIF($6, ''), $7, $8, $9, $9, $9, $10, $11,
				$12, $13, $14, $15, $16)`,
			r.id, r.state, r.identity, r.class, r.reason, r.lastErr, r.attempts, nextAttempt, enq, r.nTrans, r.nApplied,
			at, next, boolInt(r.abandoned)*3, abandonedAt, abandonedReason)
		if err != nil {
			e.t.Fatal(err)
		}
		// An unmarked terminal row owes its mark, as its writer records it.
		if _, err := e.pg.Exec(context.Background(), testenv.OweBackfillSQL, []int64{r.id}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func intp(n int) *int { return &n }

func (e *rpEnv) applied(msgID int64, key string) {
	e.t.Helper()
	if _, err := e.pg.Exec(context.Background(), `INSERT INTO transition_applied (msg_id, kind, key, applied_at) VALUES ($1, 'flight', $2, $3)`,
		msgID, key, rpT0.Add(-time.Hour)); err != nil {
		e.t.Fatal(err)
	}
}

// The messages of rpSeed, by the shape the router left them in.
const (
	rpExhausted   int64 = 1 // DEAD EXHAUSTED (was INFRA), marked
	rpCodec       int64 = 2 // FAILED CODEC_ERROR, retried in place
	rpUnsupported int64 = 3 // SKIPPED unsupported:FLOP-COBT, holds its identity, backfill abandoned
	rpMalformed   int64 = 4 // DEAD MALFORMED
	rpProtocol    int64 = 5 // DEAD PROTOCOL
	rpSucceeded   int64 = 6 // SUCCEEDED
	rpDuplicate   int64 = 7 // SKIPPED duplicate-of:6
	rpExhausted2  int64 = 8 // DEAD EXHAUSTED (was CODEC_ERROR), with a stale applied mark
	rpInfra       int64 = 9 // FAILED INFRA
	rpRouted      int64 = 10
)

// rpSeed inserts one inbox row and one proc_state row per shape.
func (e *rpEnv) seed() {
	e.t.Helper()
	e.inbox(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	e.proc(
		rpRow{id: rpExhausted, state: message.StateDead, class: message.ClassExhausted, reason: "exhausted:INFRA",
			lastErr: "flight 666 rejected by test trigger", attempts: 5, marked: true},
		rpRow{id: rpCodec, state: message.StateFailed, class: message.ClassCodecError, lastErr: "SODT: unknown time format", attempts: 2},
		rpRow{id: rpUnsupported, state: message.StateSkipped, reason: "unsupported:FLOP-COBT", identity: "AODB|FLOP|COBT|3", abandoned: true},
		rpRow{id: rpMalformed, state: message.StateDead, class: message.ClassMalformed, reason: "raw-missing", marked: true},
		rpRow{id: rpProtocol, state: message.StateDead, class: message.ClassProtocol, reason: "SCHD-DNLD declares RECS=2 but carries 1 FLTR",
			identity: "AODB|SCHD|DNLD|5", marked: true},
		rpRow{id: rpSucceeded, state: message.StateSucceeded, identity: "AODB|FLOP|ESTT|6", nTrans: intp(1), nApplied: 1, marked: true},
		rpRow{id: rpDuplicate, state: message.StateSkipped, reason: "duplicate-of:6", marked: true},
		rpRow{id: rpExhausted2, state: message.StateDead, class: message.ClassExhausted, reason: "exhausted:CODEC_ERROR",
			lastErr: "FLTR 1 (FLID 16) SODT: unknown format", attempts: 5, nTrans: intp(2), nApplied: 1},
		rpRow{id: rpInfra, state: message.StateFailed, class: message.ClassInfra, lastErr: "index insert failed", attempts: 1},
		rpRow{id: rpRouted, state: message.StateRouted, identity: "AODB|FLOP|ESTT|10", nTrans: intp(1)},
	)
	e.applied(rpSucceeded, "15")
	e.applied(rpExhausted2, "16")
}

// snapshot returns every proc_state and transition_applied row as JSON text,
// by key.
func (e *rpEnv) snapshot() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, q := range []string{
		`SELECT 'p' || msg_id, to_jsonb(p)::text FROM proc_state p`,
		`SELECT 'a' || msg_id || ':' || key, to_jsonb(a)::text FROM transition_applied a`,
	} {
		rows, err := e.pg.Query(context.Background(), q)
		if err != nil {
			e.t.Fatal(err)
		}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				e.t.Fatal(err)
			}
			out[k] = v
		}
		if err := rows.Err(); err != nil {
			e.t.Fatal(err)
		}
	}
	return out
}

func (e *rpEnv) sameAs(before map[string]string, except ...int64) {
	e.t.Helper()
	after := e.snapshot()
	for k, v := range before {
		skip := false
		for _, id := range except {
			if k == "p"+strconv.FormatInt(id, 10) || strings.HasPrefix(k, "a"+strconv.FormatInt(id, 10)+":") {
				skip = true
			}
		}
		if !skip && after[k] != v {
			e.t.Errorf("%s changed:\n was %s\n now %s", k, v, after[k])
		}
	}
}

func (e *rpEnv) get(id int64) sink.Message {
	e.t.Helper()
	m, ok, err := sink.NewMessages(e.pg, 5*time.Second).Get(context.Background(), id)
	if err != nil || !ok {
		e.t.Fatalf("message %d: %v (found %v)", id, err, ok)
	}
	return m
}

func (e *rpEnv) replay(sel replay.Selector) replay.Result {
	e.t.Helper()
	res, err := replay.Run(context.Background(), e.deps, sel, "ops@test", rpT0)
	if err != nil {
		e.t.Fatalf("Run(%s): %v", sel, err)
	}
	return res
}

func (e *rpEnv) plan(sel replay.Selector, limit int) replay.Plan {
	e.t.Helper()
	p, err := replay.DryRun(context.Background(), e.pg, sel, limit)
	if err != nil {
		e.t.Fatalf("DryRun(%s): %v", sel, err)
	}
	return p
}

func rowIDs(rows []replay.Row) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.MsgID)
	}
	return out
}

func refusedIDs(rs []replay.Refusal) []int64 {
	out := []int64{}
	for _, r := range rs {
		out = append(out, r.MsgID)
	}
	return out
}

func wantIDs(t *testing.T, what string, got []int64, want ...int64) {
	t.Helper()
	if want == nil {
		want = []int64{}
	}
	if got == nil {
		got = []int64{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

// rpAudit is a replay_audit row.
type rpAudit struct {
	Who, Selector string
	DryRun        bool
	Count         int
	IDs           []int64
	At            time.Time
}

func (e *rpEnv) audit(id int64) rpAudit {
	e.t.Helper()
	var a rpAudit
	if err := e.pg.QueryRow(context.Background(), `SELECT who, selector, dry_run, count, msg_ids, at FROM replay_audit WHERE id = $1`, id).
		Scan(&a.Who, &a.Selector, &a.DryRun, &a.Count, &a.IDs, &a.At); err != nil {
		e.t.Fatalf("audit row %d: %v", id, err)
	}
	return a
}

func (e *rpEnv) auditRows() int {
	e.t.Helper()
	var n int
	if err := e.pg.QueryRow(context.Background(), `SELECT count(*) FROM replay_audit`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// produced returns the produced flags of audit auditID's before-images.
func (e *rpEnv) produced(auditID int64) map[int64]bool {
	e.t.Helper()
	rows, err := e.pg.Query(context.Background(), `SELECT msg_id, produced FROM replay_audit_msg WHERE audit_id = $1`, auditID)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int64]bool{}
	for rows.Next() {
		var id int64
		var p bool
		if err := rows.Scan(&id, &p); err != nil {
			e.t.Fatal(err)
		}
		out[id] = p
	}
	return out
}

// records reads msgx.inbox from the start with an independent client and
// decodes every record with the router's own codec.
func records(t *testing.T, brokers []string, n int) []*ingest.Record {
	t.Helper()
	var out []*ingest.Record
	for _, r := range testenv.ReadTopic(t, brokers, rpTopic, n, 15*time.Second) {
		v, err := ingest.Codec{}.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		rec := v.(*ingest.Record)
		if string(r.Key) != rec.Key() {
			t.Errorf("record of message %d has key %q", rec.MsgID, r.Key)
		}
		out = append(out, rec)
	}
	if len(out) != n {
		t.Fatalf("%d records on %s, want %d", len(out), rpTopic, n)
	}
	return out
}

func recordIDs(recs []*ingest.Record) []int64 {
	out := []int64{}
	for _, r := range recs {
		out = append(out, r.MsgID)
	}
	return out
}

func TestReplaySelectorValidation(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		sel  replay.Selector
		want string
	}{
		{replay.Selector{}, "exactly one"},
		{replay.Selector{Class: "EXHAUSTED", IDs: []int64{1}}, "exactly one"},
		{replay.Selector{ReasonPrefix: "unsupported:", PendingReplayed: true}, "exactly one"},
		{replay.Selector{Class: "MALFORMED"}, "not replayable"},
		{replay.Selector{Class: "protocol"}, "not replayable"},
		{replay.Selector{Class: "TIMEOUT"}, "want EXHAUSTED, CODEC_ERROR, INFRA or UNSUPPORTED"},
		{replay.Selector{IDs: []int64{3, 0}}, "not a CMINMSGS_ID"},
	} {
		_, err := replay.DryRun(ctx, nil, tc.sel, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DryRun(%+v) = %v, want %q", tc.sel, err, tc.want)
		}
		if _, err := replay.Run(ctx, replay.Deps{}, tc.sel, "ops", rpT0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want %q", tc.sel, err, tc.want)
		}
	}
	if _, err := replay.DryRun(ctx, nil, replay.Selector{Class: "MALFORMED"}, 0); !errors.Is(err, replay.ErrNotReplayable) {
		t.Errorf("class MALFORMED: %v, want ErrNotReplayable", err)
	}
	for sel, want := range map[*replay.Selector]string{
		{Class: "exhausted"}:           "class=EXHAUSTED",
		{ReasonPrefix: "unsupported:"}: "reason=unsupported:",
		{IDs: []int64{8, 3, 8}}:        "ids=3,8",
		{PendingReplayed: true}:        "pending-replayed",
	} {
		if got := sel.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", *sel, got, want)
		}
	}
	// Bad dependencies are refused before anything is touched.
	_, err := replay.Run(ctx, replay.Deps{}, replay.Selector{Class: "INFRA"}, "ops", rpT0)
	for _, want := range []string{"no PostgreSQL pool", "no MySQL connection", "no Kafka brokers", "MSGX_TOPIC_INBOX", "MSGX_DB_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad deps: %v, want %q", err, want)
		}
	}
}

// The dry run lists exactly the replayable messages, refuses the named ones
// that are not, and moves nothing.
func TestReplayPlanListsOnlyReplayable(t *testing.T) {
	e := newRP(t)
	e.seed()
	before := e.snapshot()

	for _, tc := range []struct {
		sel  replay.Selector
		want []int64
	}{
		{replay.Selector{Class: "EXHAUSTED"}, []int64{rpExhausted, rpExhausted2}},
		// A class also selects the messages it exhausted (reason exhausted:<class>).
		{replay.Selector{Class: "CODEC_ERROR"}, []int64{rpCodec, rpExhausted2}},
		{replay.Selector{Class: "INFRA"}, []int64{rpExhausted, rpInfra}},
		{replay.Selector{Class: "UNSUPPORTED"}, []int64{rpUnsupported}},
		{replay.Selector{ReasonPrefix: "unsupported:"}, []int64{rpUnsupported}},
		{replay.Selector{ReasonPrefix: "unsupported:FLOP-COBT"}, []int64{rpUnsupported}},
		{replay.Selector{ReasonPrefix: "unsupported:SCHD"}, nil},
		{replay.Selector{ReasonPrefix: "exhausted:CODEC"}, []int64{rpExhausted2}},
		// Matches, but not replayable: nothing selected.
		{replay.Selector{ReasonPrefix: "duplicate-of:"}, nil},
		{replay.Selector{ReasonPrefix: "raw-missing"}, nil},
		{replay.Selector{PendingReplayed: true}, nil},
	} {
		p := e.plan(tc.sel, 0)
		wantIDs(t, tc.sel.String(), rowIDs(p.Rows), tc.want...)
		if p.Total != len(tc.want) || p.Selector != tc.sel.String() || len(p.Refused) != 0 {
			t.Errorf("%s: plan %+v", tc.sel, p)
		}
	}

	// A listed row says what the message is.
	p := e.plan(replay.Selector{Class: "EXHAUSTED"}, 1)
	if p.Total != 2 || len(p.Rows) != 1 {
		t.Fatalf("limited plan %+v", p)
	}
	if r := p.Rows[0]; r != (replay.Row{MsgID: rpExhausted, State: message.StateDead, ErrorClass: message.ClassExhausted,
		Reason: "exhausted:INFRA", LastError: "flight 666 rejected by test trigger", Attempts: 5}) {
		t.Errorf("plan row %+v", r)
	}

	// Explicit IDs: every one that is not replayable is refused, with why.
	p = e.plan(replay.Selector{IDs: []int64{99, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 3}}, 0)
	wantIDs(t, "named, replayable", rowIDs(p.Rows), 1, 2, 3, 8, 9)
	if p.Total != 5 {
		t.Errorf("named total %d", p.Total)
	}
	why := map[int64]string{}
	for _, r := range p.Refused {
		why[r.MsgID] = r.State + " / " + r.Why
	}
	for id, want := range map[int64]string{
		rpMalformed: "DEAD / DEAD MALFORMED: never replayable",
		rpProtocol:  "DEAD / DEAD PROTOCOL: never replayable",
		rpSucceeded: "SUCCEEDED / SUCCEEDED: finished",
		rpDuplicate: "SKIPPED / SKIPPED duplicate-of:6: only unsupported:… skips are replayable",
		rpRouted:    "ROUTED / ROUTED: its transitions are being applied",
		99:          " / unknown: msgx has no record of this message (the ingest bridge delivers inbox rows by itself)",
	} {
		if why[id] != want {
			t.Errorf("refusal of %d: %q, want %q", id, why[id], want)
		}
	}
	wantIDs(t, "refused", refusedIDs(p.Refused), 4, 5, 6, 7, 10, 99)

	e.sameAs(before)
	if n := e.auditRows(); n != 0 {
		t.Fatalf("a dry run wrote %d audit rows by itself", n)
	}

	// Recording the dry run.
	id, err := replay.AuditDryRun(context.Background(), e.pg, e.plan(replay.Selector{Class: "EXHAUSTED"}, 0), "ops@test", rpT0)
	if err != nil {
		t.Fatal(err)
	}
	a := e.audit(id)
	if !a.DryRun || a.Who != "ops@test" || a.Selector != "class=EXHAUSTED" || a.Count != 2 || !slices.Equal(a.IDs, []int64{1, 8}) || !a.At.Equal(rpT0) {
		t.Fatalf("dry-run audit %+v", a)
	}
	// A dry run's audit row does not make a message "reset by a replay".
	wantIDs(t, "pending-replayed after a dry run", rowIDs(e.plan(replay.Selector{PendingReplayed: true}, 0).Rows))
	e.sameAs(before)
}

// A real run resets exactly the replayable messages, keeps their identity,
// audits them and re-injects them with their inbox text.
func TestReplayResetsAndReinjects(t *testing.T) {
	e := newRP(t)
	e.seed()
	before := e.snapshot()
	ctx := context.Background()

	res := e.replay(replay.Selector{Class: "EXHAUSTED"})
	wantIDs(t, "replayed EXHAUSTED", rowIDs(res.Replayed), rpExhausted, rpExhausted2)
	if len(res.Refused)+len(res.Missing)+len(res.Changed)+len(res.Unproduced) != 0 || res.Selector != "class=EXHAUSTED" {
		t.Fatalf("result %+v", res)
	}
	// The before-images are what the dry run showed.
	if r := res.Replayed[1]; r.State != message.StateDead || r.ErrorClass != message.ClassExhausted || r.Reason != "exhausted:CODEC_ERROR" ||
		r.LastError != "FLTR 1 (FLID 16) SODT: unknown format" || r.Attempts != 5 {
		t.Errorf("before-image %+v", r)
	}
	a := e.audit(res.AuditID)
	if a.DryRun || a.Who != "ops@test" || a.Selector != "class=EXHAUSTED" || a.Count != 2 || !slices.Equal(a.IDs, []int64{1, 8}) || !a.At.Equal(rpT0) {
		t.Fatalf("audit %+v", a)
	}
	if p := e.produced(res.AuditID); len(p) != 2 || !p[1] || !p[8] {
		t.Fatalf("before-images produced %v", p)
	}
	// last_error is cleared from proc_state but kept in the audit.
	var kept string
	if err := e.pg.QueryRow(ctx, `SELECT last_error FROM replay_audit_msg WHERE audit_id = $1 AND msg_id = 1`, res.AuditID).Scan(&kept); err != nil ||
		kept != "flight 666 rejected by test trigger" {
		t.Fatalf("audited last_error %q (%v)", kept, err)
	}

	res2 := e.replay(replay.Selector{Class: "UNSUPPORTED"})
	wantIDs(t, "replayed UNSUPPORTED", rowIDs(res2.Replayed), rpUnsupported)
	res3 := e.replay(replay.Selector{IDs: []int64{rpInfra, rpMalformed, rpCodec, rpProtocol, rpDuplicate}})
	wantIDs(t, "replayed by ID", rowIDs(res3.Replayed), rpCodec, rpInfra)
	wantIDs(t, "refused by ID", refusedIDs(res3.Refused), rpMalformed, rpProtocol, rpDuplicate)
	if a := e.audit(res3.AuditID); a.Selector != "ids=2,4,5,7,9" || a.Count != 2 || !slices.Equal(a.IDs, []int64{2, 9}) {
		t.Fatalf("audit of the ID replay %+v", a)
	}

	// Every replayed message is back to the never-decided shape, with its
	// identity and enqueue time.
	for _, id := range []int64{rpExhausted, rpExhausted2, rpUnsupported, rpCodec, rpInfra} {
		m := e.get(id)
		if m.State != message.StatePending || m.Attempts != 0 || m.NextAttempt != nil || m.ErrorClass != nil || m.Reason != nil ||
			m.LastError != nil || m.NTransitions != nil || m.NApplied != 0 || m.RoutedAt != nil || m.BackfillAt != nil ||
			!m.UpdatedAt.Equal(rpT0) || !m.EnqueuedAt.Equal(rpT0.Add(-48*time.Hour)) {
			t.Errorf("message %d after replay: %+v", id, m)
		}
		var next, abandoned *time.Time
		var attempts int
		var bfErr, reason *string
		if err := e.pg.QueryRow(ctx, `SELECT backfill_next_at, backfill_attempts, backfill_error, backfill_abandoned_at, backfill_abandoned_reason
			FROM proc_state WHERE msg_id = $1`, id).Scan(&next, &attempts, &bfErr, &abandoned, &reason); err != nil {
			t.Fatal(err)
		}
		if next != nil || attempts != 0 || bfErr != nil || abandoned != nil || reason != nil {
			t.Errorf("message %d keeps backfill state: %v %d %v %v %v", id, next, attempts, bfErr, abandoned, reason)
		}
		var owed bool
		if err := e.pg.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM backfill_owed WHERE msg_id = $1)`, id).Scan(&owed); err != nil || owed {
			t.Errorf("message %d still owes the mark of its earlier decision (%v)", id, err)
		}
	}
	if m := e.get(rpUnsupported); m.IdentityKey == nil || *m.IdentityKey != "AODB|FLOP|COBT|3" {
		t.Errorf("identity not kept: %v", m.IdentityKey)
	}
	// The stale applied mark of the replayed message is gone; the others
	// are not.
	rows, _ := e.pg.Query(ctx, `SELECT msg_id || ':' || key FROM transition_applied ORDER BY msg_id`)
	marks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !slices.Equal(marks, []string{"6:15"}) {
		t.Errorf("transition_applied %v (%v)", marks, err)
	}
	// Nothing else moved.
	e.sameAs(before, rpExhausted, rpExhausted2, rpUnsupported, rpCodec, rpInfra)

	// The records, in replay order and MSG_ID order within a replay, carry
	// the inbox text and received time, and the replay's enqueue time.
	recs := records(t, e.brokers, 5)
	wantIDs(t, "records", recordIDs(recs), 1, 8, 3, 2, 9)
	received, err := time.ParseInLocation(time.DateTime, rpReceived, testenv.Shanghai)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Raw != rpRaw(r.MsgID) || r.ReceivedAt == nil || !r.ReceivedAt.Equal(received) || !r.EnqueuedAt.Equal(rpT0) {
			t.Errorf("record %d: %+v", r.MsgID, r)
		}
	}

	// Running a class replay again finds nothing (the messages are PENDING
	// now), still leaves its audit row, and produces nothing.
	again := e.replay(replay.Selector{Class: "EXHAUSTED"})
	if len(again.Replayed) != 0 || again.AuditID == 0 || again.AuditID == res.AuditID {
		t.Fatalf("second replay %+v", again)
	}
	if a := e.audit(again.AuditID); a.Count != 0 || len(a.IDs) != 0 {
		t.Fatalf("empty replay audit %+v", a)
	}
	if n := testenv.EndOffset(t, e.brokers, rpTopic); n != 5 {
		t.Fatalf("%d records after an empty replay", n)
	}
}

// A selection larger than one batch runs in several, in MSG_ID order, under
// one audit row.
// The router decides a CODEC_ERROR DEAD at once (the same bytes through the
// same code cannot succeed); once the codec is fixed it is replayed by its
// class, identity kept.
func TestReplayDeadCodecErrorByClass(t *testing.T) {
	e := newRP(t)
	e.inbox(1, 2)
	e.proc(
		rpRow{id: 1, state: message.StateDead, class: message.ClassCodecError, reason: `META/DTTM "2026-11-30": unknown date format`, marked: true},
		rpRow{id: 2, state: message.StateDead, class: message.ClassCodecError, reason: `FLTR 1 (FLID 1) SODT "2021-01-23": unknown date format`,
			identity: "AODB|SCHD|DNLD|2", marked: true},
	)
	p := e.plan(replay.Selector{Class: "codec_error"}, 0)
	wantIDs(t, "planned", rowIDs(p.Rows), 1, 2)
	res := e.replay(replay.Selector{Class: "CODEC_ERROR"})
	wantIDs(t, "replayed", rowIDs(res.Replayed), 1, 2)
	for _, id := range []int64{1, 2} {
		if m := e.get(id); m.State != message.StatePending || m.ErrorClass != nil || m.Reason != nil {
			t.Errorf("message %d after replay: %+v", id, m)
		}
	}
	if m := e.get(2); m.IdentityKey == nil || *m.IdentityKey != "AODB|SCHD|DNLD|2" {
		t.Errorf("identity not kept: %v", m.IdentityKey)
	}
	wantIDs(t, "re-injected", recordIDs(records(t, e.brokers, 2)), 1, 2)
}

func TestReplayBatches(t *testing.T) {
	e := newRP(t)
	n := replay.Batch + 7
	var ids []int64
	for i := 1; i <= n; i++ {
		ids = append(ids, int64(i))
	}
	var sb strings.Builder
	for _, id := range ids {
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "(%d, '%s', '%s')", id, rpRaw(id), rpReceived)
	}
	if _, err := e.my.Exec("INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES " + sb.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pg.Exec(context.Background(), `INSERT INTO proc_state (msg_id, state, error_class, reason, attempts, enqueued_at, updated_at, backfill_next_at)
		SELECT g, 'DEAD', 'EXHAUSTED', 'exhausted:INFRA', 5, $2, $2, $2 FROM generate_series(1, $1) g`, n, rpT0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pg.Exec(context.Background(), testenv.OweBackfillSQL, nil); err != nil {
		t.Fatal(err)
	}
	// One in the second batch lost its inbox row.
	missing := int64(replay.Batch + 3)
	if _, err := e.my.Exec("DELETE FROM cminmsgs WHERE CMINMSGS_ID = ?", missing); err != nil {
		t.Fatal(err)
	}
	res := e.replay(replay.Selector{Class: "EXHAUSTED"})
	want := slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return id == missing })
	wantIDs(t, "replayed", rowIDs(res.Replayed), want...)
	wantIDs(t, "missing", res.Missing, missing)
	if a := e.audit(res.AuditID); a.Count != n-1 || !slices.Equal(a.IDs, want) {
		t.Fatalf("audit count %d, %d IDs", a.Count, len(a.IDs))
	}
	wantIDs(t, "records", recordIDs(records(t, e.brokers, n-1)), want...)
	if m := e.get(missing); m.State != message.StateDead {
		t.Fatalf("message without inbox row moved: %+v", m)
	}
}

// An inbox row that no longer exists: the message is reported and left as
// it is, and nothing is produced for it.
func TestReplayMissingInboxRow(t *testing.T) {
	e := newRP(t)
	e.seed()
	if _, err := e.my.Exec("DELETE FROM cminmsgs WHERE CMINMSGS_ID = ?", rpExhausted2); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot()
	res := e.replay(replay.Selector{IDs: []int64{rpExhausted, rpExhausted2}})
	wantIDs(t, "replayed", rowIDs(res.Replayed), rpExhausted)
	wantIDs(t, "missing", res.Missing, rpExhausted2)
	e.sameAs(before, rpExhausted)
	if a := e.audit(res.AuditID); !slices.Equal(a.IDs, []int64{rpExhausted}) {
		t.Fatalf("audit %+v", a)
	}
	wantIDs(t, "records", recordIDs(records(t, e.brokers, 1)), rpExhausted)
}

// The reset re-checks each message: one the router decided while the
// replay was reading the inbox is left alone and reported as changed.
func TestReplayRechecksBeforeReset(t *testing.T) {
	e := newRP(t)
	e.seed()
	ctx := context.Background()
	// Hold the replay in its inbox read: a table lock blocks the SELECT.
	conn, err := e.my.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "LOCK TABLES cminmsgs WRITE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res replay.Result
	go func() {
		var err error
		res, err = replay.Run(ctx, e.deps, replay.Selector{IDs: []int64{rpCodec, rpInfra}}, "ops@test", rpT0)
		done <- err
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := e.my.QueryRow(`SELECT count(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND state = 'Waiting for table metadata lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("replay finished while the inbox was locked: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the replay never read the inbox")
		}
	}
	// Meanwhile the router decides message 2 (its retry succeeded).
	if _, err := e.pg.Exec(ctx, `UPDATE proc_state SET state = 'ROUTED', error_class = NULL, n_transitions = 1, next_attempt_at = NULL
		WHERE msg_id = $1`, rpCodec); err != nil {
		t.Fatal(err)
	}
	routed := e.snapshot()["p2"]
	if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "replayed", rowIDs(res.Replayed), rpInfra)
	wantIDs(t, "changed", res.Changed, rpCodec)
	if now := e.snapshot()["p2"]; now != routed {
		t.Fatalf("the decided message was touched:\n was %s\n now %s", routed, now)
	}
	if a := e.audit(res.AuditID); !slices.Equal(a.IDs, []int64{rpInfra}) {
		t.Fatalf("audit %+v", a)
	}
	wantIDs(t, "records", recordIDs(records(t, e.brokers, 1)), rpInfra)
}

// The crash window between reset and produce: the reset messages are
// PENDING with unconfirmed before-images; a pending-replayed run and a
// re-run by IDs both re-inject them.
func TestReplayCrashBetweenResetAndProduce(t *testing.T) {
	e := newRP(t)
	e.seed()
	ctx := context.Background()

	// Kafka dies after the producer was built and before the batch is
	// produced: the replay is held on the backfill lock (a pass in
	// progress) while the broker goes away.
	b, err := kafka.StartBroker("127.0.0.1:0", "", testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	doomed := rpBroker(t, b.Addrs())
	deps := e.deps
	deps.Brokers, deps.Kafka = doomed, testenv.KafkaConfig(doomed)
	deps.Kafka.Timeout = time.Second

	pass := e.holdBackfillLock()
	done := make(chan error, 1)
	var res replay.Result
	go func() {
		var err error
		res, err = replay.Run(ctx, deps, replay.Selector{IDs: []int64{rpExhausted, rpUnsupported}}, "ops@test", rpT0)
		done <- err
	}()
	e.waitLockWaiter(done)
	b.Close()
	pass.release()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "producing 2 replayed messages") {
		t.Fatalf("Run with Kafka gone = %v", err)
	}
	wantIDs(t, "unproduced", res.Unproduced, rpExhausted, rpUnsupported)
	wantIDs(t, "replayed", rowIDs(res.Replayed))
	for _, id := range []int64{rpExhausted, rpUnsupported} {
		if m := e.get(id); m.State != message.StatePending {
			t.Fatalf("message %d: %s", id, m.State)
		}
	}
	if p := e.produced(res.AuditID); len(p) != 2 || p[1] || p[3] {
		t.Fatalf("before-images %v", p)
	}

	// What the crash left behind is visible: pending-replayed lists it;
	// the class selector does not find the reset message any more.
	wantIDs(t, "pending-replayed plan", rowIDs(e.plan(replay.Selector{PendingReplayed: true}, 0).Rows), rpExhausted, rpUnsupported)
	wantIDs(t, "EXHAUSTED plan", rowIDs(e.plan(replay.Selector{Class: "EXHAUSTED"}, 0).Rows), rpExhausted2)
	// The identity survived the reset.
	if m := e.get(rpUnsupported); m.IdentityKey == nil || *m.IdentityKey != "AODB|FLOP|COBT|3" {
		t.Fatalf("identity %v", m.IdentityKey)
	}

	// Recovery 1: pending-replayed re-injects exactly those.
	rec := e.replay(replay.Selector{PendingReplayed: true})
	wantIDs(t, "recovered", rowIDs(rec.Replayed), rpExhausted, rpUnsupported)
	if r := rec.Replayed[0]; r.State != message.StatePending {
		t.Errorf("before-image of a re-injection %+v", r)
	}
	wantIDs(t, "records after recovery", recordIDs(records(t, e.brokers, 2)), rpExhausted, rpUnsupported)
	wantIDs(t, "pending-replayed after recovery", rowIDs(e.plan(replay.Selector{PendingReplayed: true}, 0).Rows))
	if again := e.replay(replay.Selector{PendingReplayed: true}); len(again.Replayed) != 0 {
		t.Fatalf("pending-replayed twice: %+v", again)
	}

	// Recovery 2: the same IDs again. A PENDING message a replay reset
	// counts as replayable, so it is produced again (harmless: the router
	// knows it by MSG_ID); the original audit entry still shows the failed
	// attempt.
	rerun := e.replay(replay.Selector{IDs: []int64{rpExhausted, rpUnsupported}})
	wantIDs(t, "re-run by IDs", rowIDs(rerun.Replayed), rpExhausted, rpUnsupported)
	wantIDs(t, "records after re-run", recordIDs(records(t, e.brokers, 4)), rpExhausted, rpUnsupported, rpExhausted, rpUnsupported)
	if p := e.produced(res.AuditID); p[1] || p[3] {
		t.Fatalf("the failed replay's audit was rewritten: %v", p)
	}
	var n int
	if err := e.pg.QueryRow(ctx, `SELECT count(*) FROM replay_audit_msg WHERE msg_id = 1`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("message 1 has %d before-images (%v)", n, err)
	}
	if m := e.get(rpUnsupported); m.IdentityKey == nil || *m.IdentityKey != "AODB|FLOP|COBT|3" {
		t.Fatalf("identity %v", m.IdentityKey)
	}
}

// A replay that cannot reach Kafka or the inbox changes nothing.
func TestReplayFailingDependencyChangesNothing(t *testing.T) {
	e := newRP(t)
	e.seed()
	before := e.snapshot()
	closed := sinktest.OpenMySQL(t, testenv.NewMySQL(t))
	closed.Close()
	for name, mod := range map[string]func(*replay.Deps){
		"inbox unreachable": func(d *replay.Deps) { d.Inbox = sinktest.Tables(t, closed, nil, "cminmsgs", 5*time.Second) },
		"unreachable": func(d *replay.Deps) {
			d.Brokers = []string{"127.0.0.1:1"}
			d.Kafka.Timeout = 500 * time.Millisecond
		},
		"no topic": func(d *replay.Deps) { d.Topic = "msgx.inbox-missing" },
	} {
		d := e.deps
		mod(&d)
		if _, err := replay.Run(context.Background(), d, replay.Selector{Class: "EXHAUSTED"}, "ops", rpT0); err == nil {
			t.Fatalf("%s: Run succeeded", name)
		}
	}
	e.sameAs(before)
	if n := e.auditRows(); n != 0 {
		t.Fatalf("%d audit rows", n)
	}
	// The missing topic was not created by the attempt.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("msgx.inbox-missing") {
		t.Fatal("the replay created the missing topic")
	}
	if n := testenv.EndOffset(t, e.brokers, rpTopic); n != 0 {
		t.Fatalf("%d records", n)
	}
}

// lockHolder is a transaction holding the backfill lock, as a sweep pass
// does.
type lockHolder struct {
	t  *testing.T
	tx pgx.Tx
}

func (e *rpEnv) holdBackfillLock() *lockHolder {
	e.t.Helper()
	tx, err := e.pg.Begin(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := sink.XactLock(context.Background(), tx, sink.LockBackfill); err != nil {
		e.t.Fatal(err)
	}
	h := &lockHolder{t: e.t, tx: tx}
	e.t.Cleanup(h.release)
	return h
}

func (h *lockHolder) release() { _ = h.tx.Rollback(context.Background()) }

// waitLockWaiter returns once a session waits for the backfill lock; it
// fails if done delivers first (the replay did not wait).
func (e *rpEnv) waitLockWaiter(done <-chan error) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := e.pg.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND ((classid::bigint << 32) | objid::bigint) = $1 AND objsubid = 1`, int64(sink.LockBackfill)).Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case err := <-done:
			e.t.Fatalf("the replay did not wait for the backfill lock: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the replay never queued for the backfill lock")
		}
	}
}

// A replay waits for a sweep pass that is writing marks, and then sees
// its results; a pass that outlasts the bound makes the replay give up
// without changing anything.
func TestReplayWaitsForBackfillPass(t *testing.T) {
	e := newRP(t)
	ctx := context.Background()
	// A DEAD EXHAUSTED message the sweeper has not marked yet.
	e.inbox(1)
	e.proc(rpRow{id: 1, state: message.StateDead, class: message.ClassExhausted, reason: "exhausted:INFRA", attempts: 5})
	clk := clock.NewFake(rpT0)
	bf, err := backfill.New(backfill.Config{Period: 30 * time.Second, Batch: 500, Backoff: 30 * time.Second,
		BackoffCap: 15 * time.Minute, Overdue: 720 * time.Hour, MaxAttemptsAlarm: 20},
		backfill.Deps{PG: e.pg, Inbox: sinktest.Tables(t, e.my, nil, "cminmsgs", 5*time.Second), Zone: sinktest.ShanghaiInbox, Timeout: 5 * time.Second, Clock: clk, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// Hold the pass inside its inbox write with a row lock.
	myTx, err := e.my.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer myTx.Rollback() //nolint:errcheck
	if _, err := myTx.ExecContext(ctx, "SELECT CMINMSGS_ID FROM cminmsgs WHERE CMINMSGS_ID = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	passDone := make(chan backfill.SweepResult, 1)
	go func() {
		res, err := bf.Sweep(ctx)
		if err != nil {
			t.Error(err)
		}
		passDone <- res
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := e.pg.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND ((classid::bigint << 32) | objid::bigint) = $1 AND objsubid = 1`, int64(sink.LockBackfill)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pass never took the backfill lock")
		}
	}
	done := make(chan error, 1)
	var res replay.Result
	go func() {
		var err error
		res, err = replay.Run(ctx, e.deps, replay.Selector{Class: "EXHAUSTED"}, "ops@test", rpT0)
		done <- err
	}()
	e.waitLockWaiter(done)
	if m := e.get(1); m.State != message.StateDead {
		t.Fatalf("reset while the pass held the lock: %+v", m)
	}
	if err := myTx.Commit(); err != nil {
		t.Fatal(err)
	}
	if p := <-passDone; p.Marked != 1 {
		t.Fatalf("pass %+v", p)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "replayed", rowIDs(res.Replayed), 1)
	// The replay came after the pass: it cleared the pass's backfill_at,
	// and the inbox keeps the mark (monotonic) for the next terminal state.
	if m := e.get(1); m.State != message.StatePending || m.BackfillAt != nil {
		t.Fatalf("after replay %+v", m)
	}
	var mark sql.NullString
	if err := e.my.QueryRow("SELECT DATE_FORMAT(CMINMSGS_DATE_PROCESSED, '%Y-%m-%d %H:%i:%s') FROM cminmsgs WHERE CMINMSGS_ID = 1").Scan(&mark); err != nil ||
		mark.String != "2026-03-12 10:00:00" {
		t.Fatalf("inbox mark %v (%v)", mark, err)
	}

	// A pass that holds the lock too long: the replay gives up after
	// lockWait and changes nothing.
	e.inbox(2)
	e.proc(rpRow{id: 2, state: message.StateDead, class: message.ClassExhausted, reason: "exhausted:INFRA", attempts: 5})
	before := e.snapshot()
	audits := e.auditRows()
	stuck := e.holdBackfillLock()
	short := e.deps
	short.Timeout = 100 * time.Millisecond
	start := time.Now()
	_, err = replay.Run(ctx, short, replay.Selector{Class: "EXHAUSTED"}, "ops@test", rpT0)
	if !errors.Is(err, replay.ErrBackfillBusy) {
		t.Fatalf("Run behind a stuck pass = %v", err)
	}
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Fatalf("gave up after %s, before lockWait", waited)
	}
	stuck.release()
	e.sameAs(before)
	if n := e.auditRows(); n != audits {
		t.Fatalf("a refused replay wrote an audit row")
	}
	if n := testenv.EndOffset(t, e.brokers, rpTopic); n != 1 {
		t.Fatalf("%d records", n)
	}
}

// End to end with the real ingest bridge and router: a message that died
// EXHAUSTED is replayed once its cause is gone and is routed with its
// identity; an unsupported message keeps its identity and is not called a
// duplicate of itself; the processed mark written while the message was
// DEAD is kept and found "already marked" once it is terminal again.
func TestReplayEndToEndWithRouter(t *testing.T) {
	ctx := context.Background()
	pgDSN := sinktest.NewPG(t)
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second, PGMaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	my := sinktest.OpenMySQL(t, testenv.NewMySQL(t))
	brokers := testenv.NewBroker(t)
	kc := testenv.KafkaConfig(brokers)
	log := testenv.Logger(t)

	rcfg := router.Config{InboxTopic: rpTopic, FlightTopic: "msgx.flight-transitions", RefdataTopic: "msgx.refdata-transitions", Partitions: 1,
		MaxAttempts: 2, Backoff: "1s", BackoffCap: time.Minute, IgnoreRules: "LDM-*,EROR-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}
	if err := rcfg.Validate(); err != nil {
		t.Fatal(err)
	}
	icfg := ingest.Config{Topic: rpTopic, PollInterval: 20 * time.Millisecond, ClaimBatch: 100,
		MaxCommitDelay: time.Minute, HoleProbeTimeout: time.Second, Cutover: "zero", LateWatch: time.Hour, LateCheckInterval: time.Minute}
	if err := kafka.EnsureTopics(brokers, kc, append(rcfg.TopicSpecs(), icfg.TopicSpec(), rcfg.TableSpec()), log); err != nil {
		t.Fatal(err)
	}
	routerClock := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	msgs := sink.NewMessages(pool, 5*time.Second)
	bridge, err := ingest.New(icfg, ingest.Deps{
		Inbox: sinktest.Tables(t, my, nil, "cminmsgs", 10*time.Second), Cursors: sink.NewCursors(pool, 10*time.Second),
		PG: sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second}, Brokers: brokers, Kafka: kc, Clock: clock.Real{}, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.New(rcfg, router.Deps{Messages: msgs, Clock: routerClock, Log: log, Loc: testenv.Shanghai})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 2)
	go func() { stopped <- bridge.Run(rctx) }()
	pb, err := kafka.ProducerBuilder(kc)
	if err != nil {
		t.Fatal(err)
	}
	go func() { stopped <- r.Run(rctx, brokers, pb, kafka.GokaOptions(kc, storage.MemoryBuilder(), log)...) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-stopped; err != nil {
				t.Errorf("component stopped with %v", err)
			}
		}
	})

	waitFor := func(id int64, what string, ok func(sink.Message) bool) sink.Message {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if m, found, err := msgs.Get(ctx, id); err == nil && found && ok(m) {
				return m
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("message %d never became %s", id, what)
		return sink.Message{}
	}
	str := func(s *string) string {
		if s == nil {
			return "<nil>"
		}
		return *s
	}

	// The head fails for a reason of its own (a trigger rejects its flight
	// in the index) until its attempts are used up.
	if _, err := pool.Exec(ctx, `CREATE FUNCTION reject_666() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.flid = '666' THEN RAISE EXCEPTION 'flight 666 rejected by test trigger'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER reject_666 BEFORE INSERT ON flight_index FOR EACH ROW EXECUTE FUNCTION reject_666()`); err != nil {
		t.Fatal(err)
	}
	head := testenv.InsertInbox(t, my, `<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>77</SEQN>`+
		`<DTTM>20261130080000</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP></META><SCHD><RECS>1</RECS>`+
		`<FLTR><FLID>666</FLID><SODT>23JAN210535</SODT><FLNO>CA666</FLNO></FLTR></SCHD></MSG>`)
	unsupported := testenv.InsertInbox(t, my, `<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>1243</SEQN>`+
		`<DTTM>20180810090311</DTTM><TYPE>FLOP</TYPE><STYP>BDPB</STYP></META><FLOP><FLID>121112312</FLID><BDPB>Y</BDPB></FLOP></MSG>`)
	if err := routerClock.BlockUntil(ctx, 1); err != nil { // the first backoff
		t.Fatal(err)
	}
	routerClock.Advance(time.Second)
	dead := waitFor(head, "DEAD", func(m sink.Message) bool { return m.State == message.StateDead })
	if str(dead.ErrorClass) != message.ClassExhausted || str(dead.Reason) != "exhausted:INFRA" || dead.Attempts != 2 ||
		!strings.Contains(str(dead.LastError), "flight 666 rejected") {
		t.Fatalf("dead head %+v", dead)
	}
	// Its identity was bound with its first failure and stays bound
	// (000 §5.2 step 3); the replay keeps it, so the message is not a
	// duplicate of itself when it is decided again.
	if str(dead.IdentityKey) != "AODB|SCHD|DNLD|77" {
		t.Fatalf("dead head holds identity %s", str(dead.IdentityKey))
	}
	skipped := waitFor(unsupported, "SKIPPED", func(m sink.Message) bool { return m.State == message.StateSkipped })
	if str(skipped.Reason) != "unsupported:FLOP-BDPB" || skipped.IdentityKey == nil {
		t.Fatalf("unsupported message %+v", skipped)
	}
	identity := *skipped.IdentityKey

	// The sweeper marks both terminal messages in the inbox.
	sweepClock := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	bf, err := backfill.New(backfill.Config{Period: 30 * time.Second, Batch: 500, Backoff: 30 * time.Second,
		BackoffCap: 15 * time.Minute, Overdue: 720 * time.Hour, MaxAttemptsAlarm: 20},
		backfill.Deps{PG: pool, Inbox: sinktest.Tables(t, my, nil, "cminmsgs", 5*time.Second), Zone: sinktest.ShanghaiInbox, Timeout: 5 * time.Second, Clock: sweepClock, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := bf.Sweep(ctx); err != nil || res.Marked != 2 {
		t.Fatalf("first sweep %+v %v", res, err)
	}

	// The cause is fixed; the operator replays.
	if _, err := pool.Exec(ctx, `DROP TRIGGER reject_666 ON flight_index`); err != nil {
		t.Fatal(err)
	}
	deps := replay.Deps{PG: pool, Inbox: sinktest.Tables(t, my, nil, "cminmsgs", 5*time.Second), Brokers: brokers, Kafka: kc, Topic: rpTopic, Timeout: 5 * time.Second, Log: log}
	now := time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC)
	for _, sel := range []replay.Selector{{Class: "EXHAUSTED"}, {Class: "UNSUPPORTED"}} {
		plan, err := replay.DryRun(ctx, pool, sel, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := replay.Run(ctx, deps, sel, "ops@e2e", now)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rowIDs(res.Replayed), rowIDs(plan.Rows)) || len(res.Replayed) != 1 {
			t.Fatalf("%s: replayed %v, planned %v", sel, rowIDs(res.Replayed), rowIDs(plan.Rows))
		}
	}

	// The router decides the dead message again: routed, with its identity,
	// not a duplicate.
	routed := waitFor(head, "ROUTED", func(m sink.Message) bool { return m.State == message.StateRouted })
	if str(routed.IdentityKey) != "AODB|SCHD|DNLD|77" || routed.Reason != nil || routed.Attempts != 0 ||
		routed.NTransitions == nil || *routed.NTransitions != 1 || routed.NApplied != 0 {
		t.Fatalf("replayed head %+v", routed)
	}
	// The unsupported message is decided again with its own identity: still
	// unsupported (nothing changed about it), never duplicate-of itself.
	again := waitFor(unsupported, "decided again", func(m sink.Message) bool { return m.State != message.StatePending })
	if again.State != message.StateSkipped || str(again.Reason) != "unsupported:FLOP-BDPB" || str(again.IdentityKey) != identity {
		t.Fatalf("replayed unsupported message %+v", again)
	}

	// Its transition is on the topic; applying it (as the flights
	// processor does) completes the message.
	var tr *flight.Transition
	for _, rec := range testenv.ReadTopic(t, brokers, rcfg.FlightTopic, 1, 20*time.Second) {
		var x flight.Transition
		if err := json.Unmarshal(rec.Value, &x); err != nil {
			t.Fatal(err)
		}
		tr = &x
	}
	if tr == nil || tr.MsgID != head || tr.FLID != "666" {
		t.Fatalf("flight transition %+v", tr)
	}
	var completed bool
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		completed, err = sink.MarkApplied(ctx, tx, tr.MsgID, "flight", tr.FLID, sink.Applied{}, routerClock.Now())
		return err
	}); err != nil || !completed {
		t.Fatalf("completing the replayed message: %v %v", completed, err)
	}
	if m := waitFor(head, "SUCCEEDED", func(m sink.Message) bool { return m.State == message.StateSucceeded }); m.BackfillAt != nil {
		t.Fatalf("succeeded message already settled %+v", m)
	}

	// Both are terminal again: the sweeper finds their rows already marked
	// and keeps the first mark.
	sweepClock.Advance(time.Hour)
	res, err := bf.Sweep(ctx)
	if err != nil || res.AlreadyMarked != 2 || res.Marked != 0 {
		t.Fatalf("second sweep %+v %v", res, err)
	}
	for _, id := range []int64{head, unsupported} {
		var mark string
		if err := my.QueryRow("SELECT DATE_FORMAT(CMINMSGS_DATE_PROCESSED, '%Y-%m-%d %H:%i:%s') FROM cminmsgs WHERE CMINMSGS_ID = ?", id).Scan(&mark); err != nil ||
			mark != "2026-11-30 17:00:00" {
			t.Fatalf("inbox mark of %d: %q (%v)", id, mark, err)
		}
	}
}

// logLines collects JSON log lines for assertions.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// with returns the decoded lines whose msg is msg.
func (l *logLines) with(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// The raw text a batch holds is bounded by Deps.MaxBytes: a batch ends
// before the message that would exceed it (at least one per batch), the rest
// follows in the next batch, and every message and refusal is reported once.
func TestReplayBatchBoundedByBytes(t *testing.T) {
	e := newRP(t)
	e.seed()
	var lines logLines
	e.deps.Log = slog.New(slog.NewJSONHandler(&lines, nil))
	e.deps.MaxBytes = 2 * len(rpRaw(1)) // two messages of the seed per batch
	res := e.replay(replay.Selector{IDs: []int64{rpExhausted, rpCodec, rpUnsupported, rpMalformed, rpExhausted2, rpInfra, 99}})
	wantIDs(t, "replayed", rowIDs(res.Replayed), rpExhausted, rpCodec, rpUnsupported, rpExhausted2, rpInfra)
	wantIDs(t, "refused", refusedIDs(res.Refused), rpMalformed, 99)
	var sizes []float64
	for _, m := range lines.with("replayed messages re-injected") {
		sizes = append(sizes, m["count"].(float64))
	}
	if !slices.Equal(sizes, []float64{2, 2, 1}) {
		t.Fatalf("re-injected in batches of %v, want 2, 2, 1", sizes)
	}
	wantIDs(t, "records", recordIDs(records(t, e.brokers, 5)), rpExhausted, rpCodec, rpUnsupported, rpExhausted2, rpInfra)

	// A keyset selector, one message per batch whatever its size.
	e2 := newRP(t)
	e2.seed()
	var lines2 logLines
	e2.deps.Log = slog.New(slog.NewJSONHandler(&lines2, nil))
	e2.deps.MaxBytes = 1
	res = e2.replay(replay.Selector{Class: "EXHAUSTED"})
	wantIDs(t, "replayed by class", rowIDs(res.Replayed), rpExhausted, rpExhausted2)
	if n := len(lines2.with("replayed messages re-injected")); n != 2 {
		t.Fatalf("%d batches for two messages, want 2", n)
	}
	if a := e2.audit(res.AuditID); a.Count != 2 {
		t.Fatalf("audit count %d", a.Count)
	}
}
