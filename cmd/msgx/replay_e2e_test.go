package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/ingest"
	"msgx/ingest/replay"
	"msgx/internal/testenv"
	"msgx/processors/flights"
	refdataproc "msgx/processors/refdata"
	"msgx/processors/router"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
)

func replayFLOP(seqn int, estt string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20210122220000</DTTM>`+
		`<TYPE>FLOP</TYPE><STYP>ESTT</STYP></META><FLOP><FLID>100</FLID><ESTT>%s</ESTT></FLOP></MSG>`, seqn, estt)
}

func replayAIRL(seqn int, name string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20210122220000</DTTM>`+
		`<TYPE>AIRL</TYPE><STYP>UPD</STYP></META><AIRL><ITOP>CA</ITOP><ONAM>%s</ONAM></AIRL></MSG>`, seqn, name)
}

// msgEvent is what the test reads of a msgx.msg record.
type msgEvent struct {
	FLID         string   `json:"flid"`
	StateVersion int64    `json:"stateVersion"`
	MsgID        int64    `json:"msgId"`
	Source       string   `json:"source"`
	Changed      []string `json:"changed"`
	Flight       struct {
		LastMsgID int64             `json:"lastMsgId"`
		Fields    map[string]string `json:"fields"`
	} `json:"flight"`
}

// A replayed message is applied to the current state although newer
// messages changed the same flight or category since (docs/design.md#replay),
// run through the whole gateway (MariaDB inbox, embedded Kafka,
// PostgreSQL) and the msgx replay command:
//
//   - the dry run lists, per message, the flights and categories it touches
//     and the newer messages that changed the same tags or records, and
//     its audit row records the same;
//   - two replayed FLOPs of one flight in one replay batch both apply, in
//     MSG_ID order: new versions, their events on msgx.msg, flight_schd
//     changed, lastMsgId not moved back, the messages SUCCEEDED;
//   - a replayed reference message overwrites the newer record;
//   - a crash redelivery of the replayed transitions (and of the replayed
//     inbox record) changes nothing.
func TestReplayAppliesToCurrentState(t *testing.T) {
	cfg, myDSN := testConfig(t, map[string]string{"MSGX_MAX_ATTEMPTS": "2", "MSGX_BACKOFF": "10ms", "MSGX_SCHD_FLUSH_PERIOD": "200ms"})
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

	// Flight 100 exists; then the messages 2, 4 and 6 fail for a reason of
	// their own (a test trigger refuses their decision) until they are
	// DEAD(EXHAUSTED), while 3, 5 and 7 change the same flight and record.
	m1 := testenv.InsertInbox(t, my, `<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>1</SEQN>`+
		`<DTTM>20210122220000</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP></META><SCHD><RECS>1</RECS>`+
		`<FLTR><FLID>100</FLID><FLNO>CA100</FLNO><SODT>23JAN210535</SODT><ESTT>23JAN210501</ESTT></FLTR></SCHD></MSG>`)
	waitState(m1, "SUCCEEDED")
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION reject_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.msg_id IN (%d, %d, %d) AND NEW.state = 'ROUTED' THEN RAISE EXCEPTION 'message %% refused by the test', NEW.msg_id; END IF;
		RETURN NEW; END $$;
		CREATE TRIGGER reject_for_test BEFORE INSERT OR UPDATE ON proc_state FOR EACH ROW EXECUTE FUNCTION reject_for_test()`, m1+1, m1+3, m1+5)); err != nil {
		t.Fatal(err)
	}
	ids := []int64{
		testenv.InsertInbox(t, my, replayFLOP(2, "23JAN210502")),
		testenv.InsertInbox(t, my, replayFLOP(3, "23JAN210503")),
		testenv.InsertInbox(t, my, replayFLOP(4, "23JAN210504")),
		testenv.InsertInbox(t, my, replayFLOP(5, "23JAN210505")),
		testenv.InsertInbox(t, my, replayAIRL(6, "AIR CHINA 6")),
		testenv.InsertInbox(t, my, replayAIRL(7, "AIR CHINA 7")),
	}
	if !slices.Equal(ids, []int64{m1 + 1, m1 + 2, m1 + 3, m1 + 4, m1 + 5, m1 + 6}) {
		t.Fatalf("inbox ids %v after %d", ids, m1)
	}
	m2, m3, m4, m5, m6, m7 := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]
	for _, id := range []int64{m2, m4, m6} {
		waitState(id, "DEAD exhausted:INFRA")
	}
	for _, id := range []int64{m3, m5, m7} {
		waitState(id, "SUCCEEDED")
	}
	if _, err := pool.Exec(ctx, `DROP TRIGGER reject_for_test ON proc_state`); err != nil {
		t.Fatal(err)
	}
	flightRow := func() (version, lastMsg int64, estt string) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT state_version, last_msg_id, estt FROM flight_schd WHERE flid = '100'`).Scan(&version, &lastMsg, &estt); err != nil {
			t.Fatal(err)
		}
		return
	}
	if v, last, estt := flightRow(); v != 3 || last != m5 || estt != "23JAN210505" {
		t.Fatalf("flight 100 before the replay: v%d last %d ESTT %s", v, last, estt)
	}
	selector := []string{"--ids", fmt.Sprintf("%d,%d,%d", m2, m4, m6), "--who", "ops@e2e"}

	// The dry run: per message, what it touches and what it overwrites.
	var out strings.Builder
	if err := runCommand(ctx, cfg, "replay", append(selector, "--dry-run"), &out, log); err != nil {
		t.Fatal(err)
	}
	var plan replay.Plan
	if err := json.Unmarshal([]byte(out.String()), &plan); err != nil {
		t.Fatalf("dry run output %s: %v", out.String(), err)
	}
	if plan.Total != 3 || len(plan.Effects) != 3 {
		t.Fatalf("dry run %s", out.String())
	}
	overwrites := func(os []replay.Overwrite) string {
		var s []string
		for _, o := range os {
			s = append(s, fmt.Sprintf("%d:v%d:%s:%v:%v", o.MsgID, o.StateVersion, o.Source, o.Tags, o.Keys))
		}
		return strings.Join(s, " ")
	}
	for i, want := range []string{
		fmt.Sprintf("%d ROUTED 100 FLOP [ESTT] v3 last %d: %d:v2:FLOP-ESTT:[ESTT]:[] %d:v3:FLOP-ESTT:[ESTT]:[]", m2, m5, m3, m5),
		fmt.Sprintf("%d ROUTED 100 FLOP [ESTT] v3 last %d: %d:v3:FLOP-ESTT:[ESTT]:[]", m4, m5, m5),
		fmt.Sprintf("%d ROUTED AIRL UPD [CA]: %d:v0::[]:[CA]", m6, m7),
	} {
		e := plan.Effects[i]
		var got string
		switch {
		case len(e.Flights) == 1 && len(e.Categories) == 0:
			f := e.Flights[0]
			got = fmt.Sprintf("%d %s %s %s %v v%d last %d: %s", e.MsgID, e.Verdict, f.FLID, f.Kind, f.Tags, f.StateVersion, f.LastMsgID, overwrites(f.Overwrites))
		case len(e.Categories) == 1 && len(e.Flights) == 0:
			c := e.Categories[0]
			got = fmt.Sprintf("%d %s %s %s %v: %s", e.MsgID, e.Verdict, c.RType, c.STYP, c.Keys, overwrites(c.Overwrites))
		default:
			got = fmt.Sprintf("%+v", e)
		}
		if got != want {
			t.Errorf("dry run effect %d:\n got %s\nwant %s", i, got, want)
		}
	}
	var audited []replay.Effect
	var effects []byte
	if err := pool.QueryRow(ctx, `SELECT effects FROM replay_audit WHERE dry_run ORDER BY id DESC LIMIT 1`).Scan(&effects); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(effects, &audited); err != nil || fmt.Sprint(audited) != fmt.Sprint(plan.Effects) {
		t.Fatalf("audited effects %s (%v), printed %+v", effects, err, plan.Effects)
	}

	// The replay.
	out.Reset()
	if err := runCommand(ctx, cfg, "replay", selector, &out, log); err != nil {
		t.Fatal(err)
	}
	var res replay.Result
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil || len(res.Replayed) != 3 {
		t.Fatalf("replay output %s (%v)", out.String(), err)
	}
	for _, id := range []int64{m2, m4, m6} {
		waitState(id, "SUCCEEDED")
	}
	testenv.WaitCaughtUp(t, brokers, flights.BaseGroup, []string{"msgx.flight-transitions"}, time.Minute)

	// Both FLOPs applied, in MSG_ID order, over the newer state; lastMsgId
	// did not go back.
	if v, last, estt := flightRow(); v != 5 || last != m5 || estt != "23JAN210504" {
		t.Fatalf("flight 100 after the replay: v%d last %d ESTT %s", v, last, estt)
	}
	rows, err := pool.Query(ctx, `SELECT state_version || ':' || msg_id || ':' || replay_gen || ':' || array_to_string(changed, ',')
		FROM flight_change WHERE flid = '100' ORDER BY state_version`)
	if err != nil {
		t.Fatal(err)
	}
	var history []string
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		history = append(history, s)
	}
	rows.Close()
	wantHistory := []string{fmt.Sprintf("1:%d:0:FLNO,SODT,ESTT,STATE", m1), fmt.Sprintf("2:%d:0:ESTT", m3), fmt.Sprintf("3:%d:0:ESTT", m5),
		fmt.Sprintf("4:%d:%d:ESTT", m2, res.AuditID), fmt.Sprintf("5:%d:%d:ESTT", m4, res.AuditID)}
	if !slices.Equal(history, wantHistory) {
		t.Fatalf("flight_change of 100: %v, want %v", history, wantHistory)
	}
	events := func() []msgEvent {
		t.Helper()
		var out []msgEvent
		for _, r := range testenv.ReadTopic(t, brokers, "msgx.msg", 1<<20, 3*time.Second) {
			var e msgEvent
			if err := json.Unmarshal(r.Value, &e); err != nil {
				t.Fatal(err)
			}
			if e.FLID == "100" {
				out = append(out, e)
			}
		}
		return out
	}
	var seen []msgEvent
	waitFor(t, "the events of versions 4 and 5 on msgx.msg", 30*time.Second, func() bool {
		seen = events()
		return len(seen) >= 5
	})
	byVersion := map[int64]msgEvent{}
	for _, e := range seen {
		byVersion[e.StateVersion] = e
	}
	for v, want := range map[int64]struct {
		msg  int64
		estt string
	}{4: {m2, "23JAN210502"}, 5: {m4, "23JAN210504"}} {
		e := byVersion[v]
		if e.MsgID != want.msg || e.Source != "FLOP-ESTT" || !slices.Equal(e.Changed, []string{"ESTT"}) ||
			e.Flight.Fields["ESTT"] != want.estt || e.Flight.LastMsgID != m5 {
			t.Errorf("event of version %d: %+v", v, e)
		}
	}
	// The reference record carries the replayed message's name.
	var name string
	var last int64
	if err := pool.QueryRow(ctx, `SELECT attributes->>'ONAM', last_msg_id FROM ref_master WHERE rtype = 'AIRL' AND rkey = 'CA'`).Scan(&name, &last); err != nil ||
		name != "AIR CHINA 6" || last != m6 {
		t.Fatalf("AIRL CA after the replay: %q by %d (%v)", name, last, err)
	}
	// The real replay recorded each message's effect with its before-image.
	if n := count(t, pool, `SELECT count(*) FROM replay_audit_msg WHERE audit_id = $1 AND effect->>'verdict' = 'ROUTED'`, res.AuditID); n != 3 {
		t.Fatalf("%d before-images with their effect, want 3", n)
	}

	// A crash redelivery: the replayed transitions and the replayed inbox
	// records are delivered once more. Nothing changes.
	before := snapshot(t, pool)
	var again []*kgo.Record
	for _, topic := range []string{"msgx.flight-transitions", "msgx.refdata-transitions", "msgx.inbox"} {
		for _, r := range testenv.ReadTopic(t, brokers, topic, 1<<20, 3*time.Second) {
			var x struct {
				Replay int64 `json:"replay"`
			}
			if err := json.Unmarshal(r.Value, &x); err != nil {
				t.Fatal(err)
			}
			if x.Replay == res.AuditID {
				again = append(again, r)
			}
		}
	}
	if len(again) != 6 { // per message: its inbox record and its transition
		t.Fatalf("%d replayed records on the topics, want 6", len(again))
	}
	produce(t, brokers, again)
	testenv.WaitCaughtUp(t, brokers, router.BaseGroup, []string{"msgx.inbox"}, time.Minute)
	testenv.WaitCaughtUp(t, brokers, flights.BaseGroup, []string{"msgx.flight-transitions"}, time.Minute)
	testenv.WaitCaughtUp(t, brokers, refdataproc.BaseGroup, []string{"msgx.refdata-transitions"}, time.Minute)
	if after := snapshot(t, pool); after != before {
		t.Fatalf("a redelivery of the replay changed state:\nbefore %s\nafter  %s", before, after)
	}
	if v, last, estt := flightRow(); v != 5 || last != m5 || estt != "23JAN210504" {
		t.Fatalf("flight 100 after the redelivery: v%d last %d ESTT %s", v, last, estt)
	}
	if n := count(t, pool, `SELECT count(*) FROM flight_change WHERE flid = '100'`); n != 5 {
		t.Fatalf("%d versions of flight 100 after the redelivery, want 5", n)
	}
	if err := pool.QueryRow(ctx, `SELECT attributes->>'ONAM' FROM ref_master WHERE rtype = 'AIRL' AND rkey = 'CA'`).Scan(&name); err != nil || name != "AIR CHINA 6" {
		t.Fatalf("AIRL CA after the redelivery: %q (%v)", name, err)
	}
	// The redelivered transitions re-emit the current version's event only
	// (consumers de-duplicate by (FLID, stateVersion)).
	for _, e := range events() {
		if e.StateVersion > 5 {
			t.Fatalf("a redelivery made a new version: %+v", e)
		}
	}
	var rec ingest.Record
	if err := json.Unmarshal(again[len(again)-1].Value, &rec); err != nil || rec.Replay != res.AuditID {
		t.Fatalf("replayed inbox record %+v (%v)", rec, err)
	}
	var tr flight.Transition
	if err := json.Unmarshal(again[0].Value, &tr); err != nil || tr.Replay != res.AuditID || tr.MsgID != m2 {
		t.Fatalf("replayed flight transition %+v (%v)", tr, err)
	}
}
