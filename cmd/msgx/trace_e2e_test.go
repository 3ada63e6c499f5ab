package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"msgx/ingest"
	"msgx/ingest/replay"
	"msgx/inspect/trace"
	"msgx/internal/testenv"
	"msgx/sink/sinktest"
)

// markConfirmed holds for a proc_state row whose processed mark is
// confirmed: terminal and out of the sweeper's queue (migration 0033).
const markConfirmed = `state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND NOT EXISTS (SELECT 1 FROM backfill_owed o WHERE o.msg_id = proc_state.msg_id)`

// msgx trace against a known scenario run through the whole gateway
// (MariaDB inbox, embedded Kafka, PostgreSQL): a multi-flight SCHD DNLD, a
// MALFORMED message (DEAD, not replayable), a FLOP that went
// DEAD(EXHAUSTED) and was replayed, a FLOP that changed nothing, IDs the
// bridge released as a hole and a reference message. Every position the trace reports is
// checked against the records on msgx.inbox and msgx.msg themselves.
func TestTraceScenario(t *testing.T) {
	httpAddr := freeAddr(t)
	cfg, myDSN := testConfig(t, map[string]string{"MSGX_MAX_ATTEMPTS": "2", "MSGX_BACKOFF": "10ms", "MSGX_SCHD_FLUSH_PERIOD": "200ms",
		"MSGX_BACKFILL_PERIOD": "100ms", "MSGX_HTTP_ADDR": httpAddr, "MSGX_HTTP_READ_TOKEN": "r3ad"})
	my := sinktest.OpenMySQL(t, myDSN)
	brokers := []string{cfg.Kafka.EmbeddedAddr}
	ctx := context.Background()
	log := testenv.Logger(t)
	stop := start(t, cfg)
	defer stop()
	pool := openPool(t, cfg)
	state := func(id int64) string {
		var s string
		_ = pool.QueryRow(ctx, `SELECT state || COALESCE(' ' || reason, '') FROM proc_state WHERE msg_id = $1`, id).Scan(&s)
		return s
	}
	waitState := func(id int64, want string) {
		t.Helper()
		waitFor(t, fmt.Sprintf("message %d %s", id, want), time.Minute, func() bool { return state(id) == want })
	}

	m1 := testenv.InsertInbox(t, my, `<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>1</SEQN>`+
		`<DTTM>20210122220000</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP></META><SCHD><RECS>2</RECS>`+
		`<FLTR><FLID>100</FLID><FLNO>CA100</FLNO><SODT>23JAN210535</SODT><ESTT>23JAN210501</ESTT></FLTR>`+
		`<FLTR><FLID>200</FLID><FLNO>CA200</FLNO><SODT>23JAN210635</SODT><ESTT>23JAN210601</ESTT></FLTR></SCHD></MSG>`)
	waitState(m1, "SUCCEEDED")
	// m3 fails for a reason of its own until it is DEAD(EXHAUSTED) (the
	// router inserts a fresh message's row already decided: INSERT too).
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION reject_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.msg_id = %d AND NEW.state = 'ROUTED' THEN RAISE EXCEPTION 'message %% refused by the test', NEW.msg_id; END IF;
		RETURN NEW; END $$;
		CREATE TRIGGER reject_for_test BEFORE INSERT OR UPDATE ON proc_state FOR EACH ROW EXECUTE FUNCTION reject_for_test()`, m1+2)); err != nil {
		t.Fatal(err)
	}
	m2 := testenv.InsertInbox(t, my, "<MSG/>")
	m3 := testenv.InsertInbox(t, my, replayFLOP(3, "23JAN210503"))
	flop200 := strings.ReplaceAll(replayFLOP(4, "23JAN210601"), "<FLID>100</FLID>", "<FLID>200</FLID>")
	m4 := testenv.InsertInbox(t, my, flop200) // the ESTT flight 200 already has
	if m3 != m1+2 || m4 != m1+3 {
		t.Fatalf("inbox ids %d %d %d after %d", m2, m3, m4, m1)
	}
	waitState(m2, "DEAD no META element")
	waitState(m3, "DEAD exhausted:INFRA")
	waitState(m4, "SUCCEEDED")
	if _, err := pool.Exec(ctx, `DROP TRIGGER reject_for_test ON proc_state`); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runCommand(ctx, cfg, "replay", []string{"--ids", fmt.Sprint(m3), "--who", "ops@trace"}, &out, log); err != nil {
		t.Fatal(err)
	}
	var res replay.Result
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil || len(res.Replayed) != 1 {
		t.Fatalf("replay output %s (%v)", out.String(), err)
	}
	waitState(m3, "SUCCEEDED")
	// IDs m4+1 and m4+2 never appear: the bridge releases them as a hole.
	m7 := m4 + 3
	if _, err := my.Exec("INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES (?, '<MSG/>', NOW())", m7); err != nil {
		t.Fatal(err)
	}
	waitState(m7, "DEAD no META element")
	m8 := testenv.InsertInbox(t, my, replayAIRL(8, "AIR CHINA"))
	waitState(m8, "SUCCEEDED")
	ids := []int64{m1, m2, m3, m4, m7, m8}
	waitFor(t, "every mark written, the outbox empty, schd caught up", time.Minute, func() bool {
		return count(t, pool, `SELECT count(*) FROM proc_state WHERE msg_id = ANY($1) AND `+markConfirmed, ids) == len(ids) &&
			count(t, pool, `SELECT count(*) FROM event_outbox`) == 0 &&
			count(t, pool, `SELECT count(*) FROM flight_schd WHERE schd_sent_version < state_version`) == 0
	})

	// What is on the topics, by position.
	type inboxRec struct{ msg, replay int64 }
	inbox := map[int64]inboxRec{}
	for _, r := range testenv.ReadTopic(t, brokers, "msgx.inbox", 7, 20*time.Second) {
		var rec ingest.Record
		if err := json.Unmarshal(r.Value, &rec); err != nil {
			t.Fatal(err)
		}
		inbox[r.Offset] = inboxRec{rec.MsgID, rec.Replay}
	}
	events := map[string]int64{} // "FLID vN" → offset on msgx.msg
	for _, r := range testenv.ReadTopic(t, brokers, "msgx.msg", 1<<20, 3*time.Second) {
		var e msgEvent
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		if k := fmt.Sprintf("%s v%d", e.FLID, e.StateVersion); events[k] == 0 {
			events[k] = r.Offset + 1 // +1: offset 0 is a real position
		}
	}
	traceOf := func(args ...string) (string, string) {
		t.Helper()
		var js, text strings.Builder
		if err := runCommand(ctx, cfg, "trace", append([]string{"--json"}, args...), &js, log); err != nil {
			t.Fatalf("msgx trace --json %v: %v", args, err)
		}
		if err := runCommand(ctx, cfg, "trace", args, &text, log); err != nil {
			t.Fatalf("msgx trace %v: %v", args, err)
		}
		return js.String(), text.String()
	}
	message := func(id int64) (trace.Message, string) {
		t.Helper()
		js, text := traceOf(fmt.Sprint(id))
		var m trace.Message
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatalf("trace %d: %v\n%s", id, err, js)
		}
		return m, text
	}
	checkEnqueued := func(m trace.Message) {
		t.Helper()
		if m.Decision == nil || m.Decision.Inbox == nil || inbox[m.Decision.Inbox.Offset] != (inboxRec{m.MsgID, 0}) {
			t.Errorf("message %d: enqueued at %+v; the topic holds %v", m.MsgID, m.Decision, inbox)
		}
		if m.Decision.DecidedAt == nil || m.Decision.DecidedAt.Before(m.Decision.EnqueuedAt) {
			t.Errorf("message %d: decided at %v, enqueued at %v", m.MsgID, m.Decision.DecidedAt, m.Decision.EnqueuedAt)
		}
		if m.Inbox == nil || m.Inbox.ProcessedAt == nil || !m.Decision.Backfill.Confirmed || m.Decision.Backfill.MarkedAt == nil {
			t.Errorf("message %d: inbox row %+v, backfill %+v", m.MsgID, m.Inbox, m.Decision.Backfill)
		}
	}
	checkVersions := func(m trace.Message, want ...string) {
		t.Helper()
		var got []string
		for _, v := range m.Versions {
			got = append(got, fmt.Sprintf("%s v%d %s r%d %v", v.FLID, v.StateVersion, v.Source, v.Replay, v.Changed))
			pub, known := v.SchdPublished()
			if v.Event == nil || v.Event.Topic != "msgx.msg" || events[fmt.Sprintf("%s v%d", v.FLID, v.StateVersion)] != v.Event.Offset+1 || !pub || !known {
				t.Errorf("message %d, flight %s v%d: event %+v, schd %v/%v; the topic has it at %d", m.MsgID, v.FLID, v.StateVersion,
					v.Event, pub, known, events[fmt.Sprintf("%s v%d", v.FLID, v.StateVersion)]-1)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("message %d versions %q, want %q", m.MsgID, got, want)
		}
	}
	transitions := func(m trace.Message) string {
		var s []string
		for _, tr := range m.Transitions {
			s = append(s, fmt.Sprintf("%s %s %s v%d", tr.Kind, tr.Key, tr.Outcome, tr.StateVersion))
		}
		return strings.Join(s, "; ")
	}

	// The multi-flight message: two transitions, two versions, complete.
	t1, text1 := message(m1)
	checkEnqueued(t1)
	checkVersions(t1, "100 v1 SCHD-DNLD r0 [FLNO SODT ESTT STATE]", "200 v1 SCHD-DNLD r0 [FLNO SODT ESTT STATE]")
	if d := t1.Decision; d.State != "SUCCEEDED" || d.NTransitions == nil || *d.NTransitions != 2 || d.NApplied != 2 ||
		transitions(t1) != "flight 100 applied v1; flight 200 applied v1" || len(t1.Where) != 0 {
		t.Errorf("trace of %d: %+v, transitions %s, where %+v", m1, d, transitions(t1), t1.Where)
	}
	for _, want := range []string{fmt.Sprintf("message %d", m1), "SUCCEEDED, SCHD-DNLD", "transitions 2/2 applied", "published (v1)", "path      complete"} {
		if !strings.Contains(text1, want) {
			t.Errorf("text of %d lacks %q:\n%s", m1, want, text1)
		}
	}

	// DEAD, not replayable: the path stops at the router and says why.
	t2, text2 := message(m2)
	checkEnqueued(t2)
	if t2.Decision.State != "DEAD" || t2.Decision.ErrorClass != "MALFORMED" || len(t2.Transitions) != 0 || len(t2.Versions) != 0 ||
		len(t2.Where) != 1 || t2.Where[0].Step != "router" || !strings.Contains(t2.Where[0].Why, "not replayable") {
		t.Errorf("trace of %d: %+v, where %+v", m2, t2.Decision, t2.Where)
	}
	if !strings.Contains(text2, "stuck at  router: DEAD (MALFORMED): no META element") {
		t.Errorf("text of %d:\n%s", m2, text2)
	}

	// The replayed message: its first delivery, the replay with its
	// before-image and its own position on msgx.inbox, the version it
	// made under the replay's generation.
	t3, text3 := message(m3)
	t.Logf("msgx trace %d:\n%s", m3, text3)
	checkEnqueued(t3)
	checkVersions(t3, fmt.Sprintf("100 v2 FLOP-ESTT r%d [ESTT]", res.AuditID))
	if len(t3.Replays) != 1 {
		t.Fatalf("trace of %d: replays %+v", m3, t3.Replays)
	}
	rp := t3.Replays[0]
	if rp.AuditID != res.AuditID || rp.Who != "ops@trace" || rp.Before.State != "DEAD" || rp.Before.ErrorClass != "EXHAUSTED" ||
		!strings.Contains(rp.Before.LastError, "refused by the test") || !rp.Produced || rp.Inbox == nil ||
		inbox[rp.Inbox.Offset] != (inboxRec{m3, res.AuditID}) {
		t.Errorf("trace of %d: replay %+v (inbox %+v); the topic holds %v", m3, rp, rp.Inbox, inbox)
	}
	if d := t3.Decision; d.State != "SUCCEEDED" || d.ReplayGen != res.AuditID || d.DecidedAt.Before(rp.At) || transitions(t3) != "flight 100 applied v2" || len(t3.Where) != 0 {
		t.Errorf("trace of %d: %+v, transitions %s, where %+v", m3, d, transitions(t3), t3.Where)
	}
	if !strings.Contains(text3, fmt.Sprintf("#%d", res.AuditID)) || !strings.Contains(text3, "ops@trace") || !strings.Contains(text3, "DEAD (EXHAUSTED)") {
		t.Errorf("text of %d:\n%s", m3, text3)
	}

	// A transition that changed nothing says so, and made no version.
	t4, _ := message(m4)
	checkEnqueued(t4)
	checkVersions(t4)
	if transitions(t4) != "flight 200 no-change v0" || len(t4.Where) != 0 {
		t.Errorf("trace of %d: transitions %s, where %+v", m4, transitions(t4), t4.Where)
	}

	// A reference message: its category's version.
	t8, _ := message(m8)
	checkEnqueued(t8)
	checkVersions(t8)
	if transitions(t8) != "refdata AIRL applied v1" || len(t8.Where) != 0 {
		t.Errorf("trace of %d: transitions %s, where %+v", m8, transitions(t8), t8.Where)
	}

	// A message the codec rejects is DEAD(CODEC_ERROR) and replayable: its
	// trace offers the dry run; a replay refuses it while the router would
	// decide it DEAD again (the codec is not fixed), and --force replays it
	// anyway: it dies again, the inbox row keeps its first mark.
	m9 := testenv.InsertInbox(t, my, replayFLOP(9, "31NOV210600"))
	waitFor(t, "the codec error DEAD and marked", time.Minute, func() bool {
		return strings.HasPrefix(state(m9), "DEAD FLOP-ESTT (FLID 100)") &&
			count(t, pool, `SELECT count(*) FROM proc_state WHERE msg_id = $1 AND `+markConfirmed, m9) == 1
	})
	t9, text9 := message(m9)
	firstMark := t9.Inbox.ProcessedAt
	hint := fmt.Sprintf("replayable: msgx replay --ids %d --dry-run", m9)
	if len(t9.Where) != 1 || !strings.Contains(t9.Where[0].Why, hint) || strings.Contains(text9, "FLOP-ESTT, attempts") {
		t.Errorf("trace of %d: where %+v\n%s", m9, t9.Where, text9)
	}
	out.Reset()
	err := runCommand(ctx, cfg, "replay", []string{"--ids", fmt.Sprint(m9), "--who", "ops@trace"}, &out, log)
	var res9 replay.Result
	if err == nil || !strings.Contains(err.Error(), "the router would decide them DEAD again now") || !strings.Contains(err.Error(), "--force") ||
		json.Unmarshal([]byte(out.String()), &res9) != nil || len(res9.Replayed) != 0 || len(res9.Refused) != 1 || res9.Refused[0].Verdict != "DEAD" {
		t.Fatalf("replay of a message that would die again: %v\n%s", err, out.String())
	}
	if st := state(m9); !strings.HasPrefix(st, "DEAD FLOP-ESTT") || count(t, pool, `SELECT count(*) FROM replay_audit_msg WHERE msg_id = $1`, m9) != 0 {
		t.Fatalf("message %d after the refused replay: %s", m9, st)
	}
	out.Reset()
	if err := runCommand(ctx, cfg, "replay", []string{"--ids", fmt.Sprint(m9), "--force", "--who", "ops@trace"}, &out, log); err != nil {
		t.Fatalf("replay --force: %v\n%s", err, out.String())
	}
	waitFor(t, "the forced replay decided and marked", time.Minute, func() bool {
		return count(t, pool, `SELECT count(*) FROM proc_state WHERE msg_id = $1 AND state = 'DEAD' AND replay_gen > 0 AND `+markConfirmed, m9) == 1
	})
	t9, text9 = message(m9)
	if len(t9.Replays) != 1 || t9.Inbox.ProcessedAt == nil || !t9.Inbox.ProcessedAt.Equal(*firstMark) || len(t9.Where) != 1 ||
		strings.Contains(text9, "not written yet") {
		t.Errorf("trace of %d after the forced replay:\n%s", m9, text9)
	}

	// An ID the bridge released: where it went missing.
	t5, text5 := message(m4 + 1)
	if t5.Decision != nil || t5.Inbox != nil || len(t5.Where) != 1 || t5.Where[0].Step != "ingest" || !strings.Contains(t5.Where[0].Why, "permanent hole") {
		t.Errorf("trace of %d: %+v", m4+1, t5)
	}
	if !strings.Contains(text5, "no CMINMSGS row") {
		t.Errorf("text of %d:\n%s", m4+1, text5)
	}
	// Nothing knows an ID beyond the inbox.
	if err := runCommand(ctx, cfg, "trace", []string{fmt.Sprint(m7 + 100)}, io.Discard, log); !errors.Is(err, trace.ErrNotFound) {
		t.Errorf("trace of an unknown message: %v", err)
	}

	// The flight's history, version by version.
	js, text := traceOf("--flid", "100")
	var f trace.Flight
	if err := json.Unmarshal([]byte(js), &f); err != nil {
		t.Fatal(err)
	}
	var hist []string
	for _, v := range f.Versions {
		hist = append(hist, fmt.Sprintf("v%d %d %s %v", v.StateVersion, v.MsgID, v.Source, v.Changed))
	}
	if want := []string{fmt.Sprintf("v1 %d SCHD-DNLD [FLNO SODT ESTT STATE]", m1), fmt.Sprintf("v2 %d FLOP-ESTT [ESTT]", m3)}; !slices.Equal(hist, want) ||
		f.Total != 2 || f.Current == nil || f.Current.StateVersion != 2 || f.Current.SchdSentVersion != 2 {
		t.Errorf("flight 100: %v (total %d, now %+v), want %v", hist, f.Total, f.Current, want)
	}
	if !strings.Contains(text, fmt.Sprintf("FLOP-ESTT (replay #%d)", res.AuditID)) || !strings.Contains(text, "SCHD-DNLD") {
		t.Errorf("flight text:\n%s", text)
	}
	js, _ = traceOf("--flid", "100", "--limit", "1")
	if err := json.Unmarshal([]byte(js), &f); err != nil || len(f.Versions) != 1 || f.Versions[0].StateVersion != 2 || f.Total != 2 {
		t.Errorf("flight 100 --limit 1: %+v (%v)", f, err)
	}

	// The same over HTTP, behind the read token.
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+httpAddr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for path, want := range map[string]int{fmt.Sprintf("/trace/%d", m3): 200, "/trace/flights/100": 200,
		fmt.Sprintf("/trace/%d", m7+100): 404, "/trace/flights/999": 404, "/trace/abc": 400, "/trace/flights/100?limit=0": 400} {
		if c, _ := get(path, ""); c != 401 {
			t.Errorf("GET %s without the read token: %d", path, c)
		}
		if c, body := get(path, "r3ad"); c != want {
			t.Errorf("GET %s: %d %s, want %d", path, c, body, want)
		}
	}
	_, body := get(fmt.Sprintf("/trace/%d", m3), "r3ad")
	var h trace.Message
	if err := json.Unmarshal([]byte(body), &h); err != nil || h.MsgID != m3 || len(h.Replays) != 1 || h.Decision.State != "SUCCEEDED" {
		t.Errorf("GET /trace/%d: %s (%v)", m3, body, err)
	}
	if _, body := get("/trace/flights/100?format=text", "r3ad"); !strings.Contains(body, "flight 100") || !strings.Contains(body, "FLOP-ESTT") {
		t.Errorf("GET /trace/flights/100?format=text:\n%s", body)
	}
	// The goka tables through msgx table: the router's table keeps the
	// decision (ROUTED) and shows the message's state now beside it; list
	// lists (the newest messages, the flights, the categories).
	table := func(args ...string) string {
		t.Helper()
		var b strings.Builder
		if err := runCommand(ctx, cfg, "table", args, &b, log); err != nil {
			t.Fatalf("msgx table %v: %v", args, err)
		}
		return b.String()
	}
	var entry struct{ State, Decision string }
	if js := table("get", "messages", fmt.Sprint(m1)); json.Unmarshal([]byte(js), &entry) != nil || entry.Decision != "ROUTED" || entry.State != "SUCCEEDED" {
		t.Errorf("table get messages %d:\n%s", m1, js)
	}
	var entries []struct {
		MsgID           int64
		State, Decision string
	}
	if js := table("list", "messages", "--limit", "2"); json.Unmarshal([]byte(js), &entries) != nil || len(entries) != 2 ||
		entries[0].MsgID != m8 || entries[1].MsgID != m9 || entries[1].State != "DEAD" || entries[0].Decision != "ROUTED" {
		t.Errorf("table list messages --limit 2:\n%s", js)
	}
	var fls []struct{ FLID, State string }
	if js := table("list", "flights"); json.Unmarshal([]byte(js), &fls) != nil || len(fls) != 2 || fls[0].FLID != "100" || fls[1].FLID != "200" {
		t.Errorf("table list flights:\n%s", js)
	}
	var cats []struct {
		RType   string
		Records int
	}
	if js := table("list", "refdata"); json.Unmarshal([]byte(js), &cats) != nil || len(cats) != 1 || cats[0].RType != "AIRL" || cats[0].Records != 1 {
		t.Errorf("table list refdata:\n%s", js)
	}
	if js := table("list", "refdata", "AIRL"); !strings.Contains(js, `"key": "CA"`) {
		t.Errorf("table list refdata AIRL:\n%s", js)
	}

	// As a page (the status page's search box): the text escaped in a
	// <pre>, links to the flights it touched; the search redirects there.
	if c, body := get(fmt.Sprintf("/trace?kind=message&id=%d", m1), "r3ad"); c != 200 || !strings.Contains(body, `<pre id="trace">message `+fmt.Sprint(m1)) ||
		!strings.Contains(body, `href="/trace/flights/100?format=html"`) || !strings.Contains(body, `href="/trace/flights/200?format=html"`) {
		t.Errorf("GET /trace?kind=message&id=%d: %d\n%s", m1, c, body)
	}
	if c, body := get(fmt.Sprintf("/trace/%d?format=html", m2), "r3ad"); c != 200 || !strings.Contains(body, "DEAD (MALFORMED)") {
		t.Errorf("GET /trace/%d?format=html: %d\n%s", m2, c, body)
	}
	if c, body := get("/trace?kind=flight&id=999", "r3ad"); c != 404 || !strings.Contains(body, `id="trace-error"`) {
		t.Errorf("GET /trace?kind=flight&id=999: %d\n%s", c, body)
	}
	if c, _ := get("/trace?kind=message&id=1", ""); c != 401 {
		t.Errorf("the search without the read token: %d", c)
	}
}
