package trace

import (
	"strings"
	"testing"
	"time"

	"msgx/sink"
)

func TestDiagnose(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	n := func(v int) *int { return &v }
	i64 := func(v int64) *int64 { return &v }
	done := func(d Decision) *Decision {
		if d.Backfill.MarkedAt == nil && d.Backfill.DueAt == nil {
			d.Backfill.MarkedAt = at(time.Minute)
		}
		return &d
	}
	published := func(flid string, v int64, sent int64) Version {
		return Version{FLID: flid, StateVersion: v, MsgID: 7, Event: &Event{Topic: "msgx.msg", Offset: v}, SchdSent: i64(sent)}
	}
	for _, tc := range []struct {
		name string
		m    Message
		want string // "step: substring" per finding, joined by " | "; "" = complete
	}{
		{"complete: two flights published, mark written", Message{MsgID: 7,
			Decision: done(Decision{State: "SUCCEEDED", NTransitions: n(2), NApplied: 2}),
			Versions: []Version{published("100", 1, 1), published("200", 3, 4)}}, ""},
		{"complete: SKIPPED duplicate", Message{MsgID: 7,
			Decision: done(Decision{State: "SKIPPED", Reason: "duplicate-of:3"})}, ""},
		{"complete: archived", Message{MsgID: 7, Decision: &Decision{State: "SUCCEEDED", ArchivedAt: at(time.Hour),
			Backfill: Backfill{MarkedAt: at(time.Minute)}}}, ""},
		{"no cursor", Message{MsgID: 7}, "ingest: never run"},
		{"beyond the watermark, gap waiting", Message{MsgID: 7, Inbox: &InboxRow{},
			Ingest: &Ingest{Watermark: 5, HoleSince: at(0)}}, "ingest: watermark is 5; the gap after it has been waiting since 2026-12-01T10:00:00Z"},
		{"released hole", Message{MsgID: 7, Ingest: &Ingest{Watermark: 9, Hole: &Hole{FirstID: 6, LastID: 7, ReleasedAt: t0, Reason: "aged"}}},
			"ingest: released IDs 6–7 as a permanent hole"},
		{"late row", Message{MsgID: 7, Inbox: &InboxRow{}, Ingest: &Ingest{Watermark: 9, LateAt: at(0),
			Hole: &Hole{FirstID: 6, LastID: 7}}}, "ingest: late row"},
		{"enqueued, not read", Message{MsgID: 7, Inbox: &InboxRow{}, Ingest: &Ingest{Watermark: 9}}, "router: watermark 9"},
		{"pending", Message{MsgID: 7, Decision: &Decision{State: "PENDING"}}, "router: not decided yet"},
		{"replay reset, never re-injected", Message{MsgID: 7, Decision: &Decision{State: "PENDING"},
			Replays: []Replay{{AuditID: 1, Produced: true}, {AuditID: 4}}}, "replay: replay #4 but never re-injected"},
		{"replayed and re-injected, not decided yet", Message{MsgID: 7, Decision: &Decision{State: "PENDING"},
			Replays: []Replay{{AuditID: 4, Produced: true, Inbox: &sink.InboxPosition{Offset: 9}}}}, "router: not decided yet"},
		{"failing at the head", Message{MsgID: 7, Decision: &Decision{State: "FAILED", ErrorClass: "INFRA", Attempts: 2,
			NextAttemptAt: at(4 * time.Second), LastError: "boom"}}, "router: FAILED (INFRA) at the head of the queue, attempt 2; next try 2026-12-01T10:00:04Z: boom"},
		{"routed, waiting for a transition", Message{MsgID: 7, Decision: &Decision{State: "ROUTED", NTransitions: n(3), NApplied: 1},
			Transitions: []Transition{{Kind: "flight", Key: "100"}}}, "flights: 1 of 3 transitions applied"},
		{"routed reference message", Message{MsgID: 7, Decision: &Decision{State: "ROUTED", NTransitions: n(2), NApplied: 1},
			Transitions: []Transition{{Kind: "refdata", Key: "AIRL"}}}, "refdata: 1 of 2"},
		{"dead, replayable", Message{MsgID: 7, Decision: done(Decision{State: "DEAD", ErrorClass: "EXHAUSTED", Reason: "exhausted:INFRA"})},
			"router: DEAD (EXHAUSTED): exhausted:INFRA; replayable: msgx replay --ids 7 --dry-run shows whether"},
		{"replayed, the inbox row keeps its earlier mark", Message{MsgID: 7, Inbox: &InboxRow{ProcessedAt: at(0)},
			Decision: &Decision{State: "SUCCEEDED", Backfill: Backfill{DueAt: at(time.Hour)}},
			Replays:  []Replay{{AuditID: 4, At: t0.Add(30 * time.Minute), Produced: true}}}, ""},
		{"dead, not replayable, mark owed", Message{MsgID: 7, Decision: &Decision{State: "DEAD", ErrorClass: "MALFORMED", LastError: "not XML",
			Backfill: Backfill{DueAt: at(0), Attempts: 2, Error: "mysql down"}}},
			"router: not XML; not replayable | backfill: due 2026-12-01T10:00:00Z, 2 attempt(s), last error: mysql down"},
		{"event in the outbox, schd behind", Message{MsgID: 7, Decision: done(Decision{State: "SUCCEEDED"}),
			Versions: []Version{{FLID: "100", StateVersion: 2, MsgID: 7, InOutbox: true, SchdSent: i64(1)}}},
			"publisher: flight 100 v2 waits in the outbox | schd: flight 100 v2 is not on the schd topic yet (published up to v1)"},
		{"only the flight's latest version counts for schd", Message{MsgID: 7, Decision: done(Decision{State: "SUCCEEDED"}),
			Versions: []Version{published("100", 2, 3), published("100", 3, 3)}}, ""},
		{"produced before positions were recorded, flight purged", Message{MsgID: 7, Decision: done(Decision{State: "SUCCEEDED"}),
			Versions: []Version{{FLID: "100", StateVersion: 2, MsgID: 7}}}, ""},
		{"mark abandoned", Message{MsgID: 7, Decision: &Decision{State: "SUCCEEDED", Backfill: Backfill{DueAt: at(0),
			AbandonedAt: at(time.Hour), AbandonedReason: "MISSING_ROW"}}}, "backfill: abandoned 2026-12-01T11:00:00Z (MISSING_ROW)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Diagnose(tc.m)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("findings %+v, want a complete path", got)
				}
				return
			}
			wants := strings.Split(tc.want, " | ")
			if len(got) != len(wants) {
				t.Fatalf("findings %+v, want %d: %s", got, len(wants), tc.want)
			}
			for i, w := range wants {
				step, sub, _ := strings.Cut(w, ": ")
				if got[i].Step != step || !strings.Contains(got[i].Why, sub) {
					t.Errorf("finding %d = %s: %s\nwant step %s containing %q", i, got[i].Step, got[i].Why, step, sub)
				}
			}
		})
	}
}

// The renderer shows every part of a trace and where the path stops.
func TestMessageText(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	n := 2
	sent := int64(1)
	m := Message{MsgID: 42, Inbox: &InboxRow{Bytes: 310, ReceivedAt: &t0},
		Decision: &Decision{State: "SUCCEEDED", Type: "SCHD", STYP: "DNLD", EnqueuedAt: t0, UpdatedAt: t0,
			Inbox: &sink.InboxPosition{Offset: 41}, NTransitions: &n, NApplied: 2, ReplayGen: 3, Backfill: Backfill{DueAt: &t0}},
		Transitions: []Transition{{Kind: "flight", Key: "100", AppliedAt: t0, Outcome: "applied", StateVersion: 1},
			{Kind: "flight", Key: "200", AppliedAt: t0, Outcome: "no-change"}},
		Versions: []Version{{FLID: "100", StateVersion: 1, MsgID: 42, Replay: 3, Source: "SCHD-DNLD", State: "ACTIVE",
			Changed: []string{"FLNO", "SODT"}, At: t0, Event: &Event{Topic: "msgx.msg", Offset: 17}, SchdSent: &sent}},
		Replays: []Replay{{AuditID: 3, At: t0, Who: "ops", Selector: "ids=42", Produced: true, Inbox: &sink.InboxPosition{Offset: 50}}},
	}
	m.Replays[0].Before.State, m.Replays[0].Before.ErrorClass = "DEAD", "EXHAUSTED"
	m.Where = Diagnose(m)
	var b strings.Builder
	if err := m.Text(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"message 42", "CMINMSGS row, 310 bytes", "msgx.inbox 0@41", "SUCCEEDED, SCHD-DNLD",
		"transitions 2/2 applied", "decided under replay #3", "200  ", "no-change", "SCHD-DNLD (replay #3)", "FLNO,SODT",
		"msgx.msg 0@17", "published (v1)", "#3", "DEAD (EXHAUSTED), attempts 0", "msgx.inbox 0@50",
		"stuck at  backfill: processed mark not written yet", "message 42 (times in UTC)", "received 2026-12-01T10:00:00Z"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}

	// Read in the inbox zone, shown in UTC with the zone named; a reason
	// that names the type does not get it twice; a mark the inbox row
	// kept through a replay is no step still owed.
	sh := time.FixedZone("+08:00", 8*3600)
	recv, mark := time.Date(2026, 12, 1, 20, 14, 51, 0, sh), time.Date(2026, 12, 1, 20, 14, 52, 0, sh)
	m = Message{MsgID: 4, Inbox: &InboxRow{Bytes: 9, ReceivedAt: &recv, ProcessedAt: &mark, Zone: "+08:00 (MySQL session time_zone +08:00)"},
		Decision: &Decision{State: "DEAD", ErrorClass: "CODEC_ERROR", Type: "FLOP", STYP: "BOTM", EnqueuedAt: t0, UpdatedAt: t0,
			Reason: `FLOP-BOTM (FLID 15) BOTM "31NOV261200": date or time out of range`, Backfill: Backfill{DueAt: &t0}},
		Replays: []Replay{{AuditID: 6, At: t0.Add(3 * time.Hour), Who: "ops", Produced: true}},
	}
	m.Where = Diagnose(m)
	b.Reset()
	if err := m.Text(&b); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	for _, want := range []string{"received 2026-12-01T12:14:51Z, processed mark 2026-12-01T12:14:52Z; its DATETIMEs read in +08:00 (MySQL session time_zone +08:00)",
		"out of range, attempts 0", "carries its processed mark (2026-12-01T12:14:52Z), written before replay #6 reset the message",
		"stuck at  router: DEAD (CODEC_ERROR): FLOP-BOTM", "msgx replay --ids 4 --dry-run"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"FLOP-BOTM, attempts", "not written yet", "+08:00, processed"} {
		if strings.Contains(out, bad) {
			t.Errorf("text has %q:\n%s", bad, out)
		}
	}
}
