package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"msgx/ingest/replay"
	"msgx/internal/testenv"
	"msgx/processors/router"
	"msgx/sink"
	"msgx/tables/message"
)

// A replay is a generation (docs/design.md#replay): the reset stores its
// audit id as the message's replay_gen and the re-injected record carries
// it; replays are serialised, so a second one while the first holds the
// replay lock changes nothing.
func TestReplayGenerationAndLock(t *testing.T) {
	e := newRP(t)
	e.seed()
	ctx := context.Background()

	release, ok, err := sink.TryPoolLock(ctx, e.pg, sink.LockReplay, e.deps.Timeout)
	if err != nil || !ok {
		t.Fatalf("taking the replay lock: %v %v", ok, err)
	}
	before := e.snapshot()
	audits := e.auditRows()
	if _, err := replay.Run(ctx, e.deps, replay.Selector{Class: "EXHAUSTED"}, "ops@test", rpT0); !errors.Is(err, replay.ErrReplayBusy) {
		t.Fatalf("a replay while another runs: %v", err)
	}
	e.sameAs(before)
	if n := e.auditRows(); n != audits {
		t.Fatalf("the refused replay left %d audit rows", n-audits)
	}
	release()

	res := e.replay(replay.Selector{Class: "EXHAUSTED"})
	wantIDs(t, "replayed", rowIDs(res.Replayed), rpExhausted, rpExhausted2)
	for _, id := range []int64{rpExhausted, rpExhausted2} {
		if m := e.get(id); m.State != message.StatePending || m.ReplayGen != res.AuditID {
			t.Fatalf("message %d after the reset: %s, replay_gen %d (audit %d)", id, m.State, m.ReplayGen, res.AuditID)
		}
	}
	for _, rec := range records(t, e.brokers, 2) {
		if rec.Replay != res.AuditID {
			t.Fatalf("re-injected record of %d carries generation %d, want %d", rec.MsgID, rec.Replay, res.AuditID)
		}
	}
	// Without router settings a replay records no effect.
	var n int
	if err := e.pg.QueryRow(ctx, `SELECT count(*) FROM replay_audit_msg WHERE audit_id = $1 AND effect IS NOT NULL`, res.AuditID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d effects recorded without router settings (%v)", n, err)
	}
}

// With the router's settings a replay records each message's effect with
// its before-image, and the dry run explains every message it lists; a
// message whose inbox row is gone says so.
func TestReplayRecordsEffects(t *testing.T) {
	e := newRP(t)
	e.inbox(1, 2)
	e.proc(
		rpRow{id: 1, state: message.StateDead, class: message.ClassExhausted, reason: "exhausted:INFRA", attempts: 5},
		rpRow{id: 2, state: message.StateDead, class: message.ClassExhausted, reason: "exhausted:INFRA", attempts: 5},
		rpRow{id: 3, state: message.StateDead, class: message.ClassExhausted, reason: "exhausted:INFRA", attempts: 5},
	)
	ctx := context.Background()
	sel := replay.Selector{Class: "EXHAUSTED"}
	if err := replay.Explain(ctx, e.deps, &replay.Plan{}); err == nil || !strings.Contains(err.Error(), "router settings") {
		t.Fatalf("Explain without router settings: %v", err)
	}
	s := router.Config{IgnoreRules: "LDM-*,EROR-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}.Settings(testenv.Shanghai)
	e.deps.Route = &s

	plan := e.plan(sel, 0)
	if err := replay.Explain(ctx, e.deps, &plan); err != nil {
		t.Fatal(err)
	}
	// rpRaw is a FLOP-ESTT without its ESTT: the router would decide it
	// DEAD(MALFORMED) now; message 3 has no inbox row.
	if len(plan.Effects) != 3 || plan.Effects[0].Verdict != message.StateDead || plan.Effects[0].ErrorClass != message.ClassMalformed ||
		plan.Effects[2].Error == "" || plan.Effects[2].Verdict != "" {
		t.Fatalf("effects %+v", plan.Effects)
	}
	id, err := replay.AuditDryRun(ctx, e.pg, plan, "ops@test", rpT0)
	if err != nil {
		t.Fatal(err)
	}
	var doc []byte
	if err := e.pg.QueryRow(ctx, `SELECT effects FROM replay_audit WHERE id = $1`, id).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	var audited []replay.Effect
	if err := json.Unmarshal(doc, &audited); err != nil || len(audited) != 3 || audited[1].MsgID != 2 || audited[1].ErrorClass != message.ClassMalformed {
		t.Fatalf("audited effects %s (%v)", doc, err)
	}

	// Their verdict is DEAD: a replay refuses them, saying why, and
	// changes nothing; forced, it replays them.
	res := e.replay(sel)
	if len(res.Replayed) != 0 || len(res.Refused) != 2 || res.Refused[0].MsgID != 1 || res.Refused[1].MsgID != 2 ||
		!strings.Contains(res.Refused[0].Why, "the router would decide it DEAD again now (MALFORMED: ") ||
		!strings.Contains(res.Refused[0].Why, "--force") || res.Refused[0].State != message.StateDead {
		t.Fatalf("replay of messages that would die again: %+v", res)
	}
	for _, id := range []int64{1, 2} {
		if m := e.get(id); m.State != message.StateDead || m.Attempts != 5 {
			t.Fatalf("message %d after a refused replay: %+v", id, m)
		}
	}
	sel.Force = true
	res = e.replay(sel)
	wantIDs(t, "replayed", rowIDs(res.Replayed), 1, 2)
	rows, err := e.pg.Query(ctx, `SELECT effect FROM replay_audit_msg WHERE audit_id = $1 ORDER BY msg_id`, res.AuditID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []replay.Effect
	for rows.Next() {
		var doc []byte
		var eff replay.Effect
		if err := rows.Scan(&doc); err != nil || json.Unmarshal(doc, &eff) != nil {
			t.Fatalf("before-image effect %s (%v)", doc, err)
		}
		got = append(got, eff)
	}
	if len(got) != 2 || got[0].MsgID != 1 || got[1].MsgID != 2 || got[0].Verdict != message.StateDead {
		t.Fatalf("recorded effects %+v", got)
	}
}
