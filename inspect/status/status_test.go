package status_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/inspect/status"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink/sinktest"
	"msgx/tables/message"
)

// stNow is the report time of every status test: 09:00 in Shanghai.
var stNow = time.Date(2026, 3, 10, 1, 0, 0, 0, time.UTC)

// stPG opens a migrated test database.
func stPG(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func stExec(t *testing.T, pool *pgxpool.Pool, q string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// stMsg is one proc_state row of a scenario.
type stMsg struct {
	id         int64
	state      string
	class      string
	reason     string
	lastErr    string
	age        time.Duration // enqueued this long before stNow
	attempts   int
	marked     bool   // backfill_at set
	abandoned  string // backfill_abandoned_reason
	nextInSecs int    // next_attempt_at = stNow + this, when > 0
}

func stInsertMsgs(t *testing.T, pool *pgxpool.Pool, msgs []stMsg) {
	t.Helper()
	for _, m := range msgs {
		enq := stNow.Add(-m.age)
		var backfillAt, abandonedAt, next *time.Time
		if m.marked {
			backfillAt = &stNow
		}
		if m.abandoned != "" {
			abandonedAt = &stNow
		}
		if m.nextInSecs > 0 {
			n := stNow.Add(time.Duration(m.nextInSecs) * time.Second)
			next = &n
		}
		stExec(t, pool, `INSERT INTO proc_state (msg_id, state, error_class, reason, last_error, attempts, enqueued_at, updated_at,
				next_attempt_at, backfill_at, backfill_abandoned_at, backfill_abandoned_reason)
			VALUES ($1, $2, NULLIF($3, ''), NULLIF($4, ''), NULLIF($5, ''), $6, $7, $7, $8, $9, $10, NULLIF($11, ''))`,
			m.id, m.state, m.class, m.reason, m.lastErr, m.attempts, enq, next, backfillAt, abandonedAt, m.abandoned)
		// An unmarked terminal row owes its mark, as its writer records it.
		stExec(t, pool, testenv.OweBackfillSQL, []int64{m.id})
	}
}

// stScenarioPG builds the known scenario of the status tests in PostgreSQL:
//   - cursor W=10 seeded "min" two days ago, hole 11..13 open for 12 minutes;
//   - released holes 3..4 and 7 (3 IDs), late row 4;
//   - proc_state rows in every state, DEAD of three classes (two within the
//     last hour), SKIPPED of every reason class, two abandoned marks, one
//     overdue pending mark, and a FAILED head an hour old.
func stScenarioPG(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	stExec(t, pool, `INSERT INTO inbox_cursor (id, watermark, hole_since, hole_end, seed_mode, seeded_at, updated_at)
		VALUES (1, 10, $1, 13, 'min', $2, $1)`, stNow.Add(-12*time.Minute), stNow.Add(-48*time.Hour))
	stExec(t, pool, `INSERT INTO inbox_hole (first_id, last_id, observed_at, released_at, reason) VALUES
		(3, 4, $1, $2, 'aged'), (7, 7, $3, $4, 'probe')`,
		stNow.Add(-47*time.Hour-5*time.Minute), stNow.Add(-47*time.Hour), stNow.Add(-46*time.Hour-time.Second), stNow.Add(-46*time.Hour))
	stExec(t, pool, `INSERT INTO inbox_late_row (msg_id, hole_id, seen_at) VALUES (4, 3, $1)`, stNow.Add(-40*time.Hour))
	h := time.Hour
	stInsertMsgs(t, pool, []stMsg{
		{id: 101, state: "SUCCEEDED", age: 5 * h, marked: true},
		{id: 102, state: "SUCCEEDED", age: 5 * h},
		{id: 103, state: "SUCCEEDED", age: 800 * h, abandoned: message.AbandonTransientDeadline},
		{id: 104, state: "SKIPPED", reason: "duplicate-of:101", age: 5 * h, marked: true},
		{id: 105, state: "SKIPPED", reason: "ignored:LDM-*", age: 5 * h, marked: true},
		{id: 106, state: "SKIPPED", reason: "ignored:EROR-*", age: 800 * h},
		{id: 107, state: "SKIPPED", reason: "unsupported:ABCD-EFGH", age: 5 * h, marked: true},
		{id: 108, state: "SKIPPED", reason: "no-match", age: 5 * h, marked: true},
		{id: 109, state: "DEAD", class: "MALFORMED", lastErr: "MALFORMED: not XML", age: 5 * h, marked: true},
		{id: 110, state: "DEAD", class: "MALFORMED", lastErr: "no META", age: 5 * h, abandoned: message.AbandonMissingRow},
		{id: 111, state: "DEAD", class: "PROTOCOL", lastErr: "RECS=3 but 2 records", age: 30 * time.Minute, marked: true},
		{id: 112, state: "DEAD", class: "EXHAUSTED", lastErr: "CODEC_ERROR: unparseable date 2026-13-40", age: 10 * time.Minute},
		{id: 113, state: "ARCHIVED", age: 900 * h, marked: true},
		{id: 150, state: "FAILED", class: "CODEC_ERROR", lastErr: "bad date", age: h, attempts: 3, nextInSecs: 4},
		{id: 151, state: "PENDING", age: time.Minute},
		{id: 152, state: "PENDING", age: time.Minute},
		{id: 153, state: "ROUTED", age: time.Minute},
	})
}

// stScenarioMySQL fills the inbox: IDs 1..25 without the holes 3, 7 and
// the open hole 11..13, plus the late row 4. Row 14, the first after the
// hole, was received 12 minutes ago.
func stScenarioMySQL(t *testing.T, db *sql.DB) {
	t.Helper()
	for id := int64(1); id <= 25; id++ {
		if id == 3 || id == 7 || (id >= 11 && id <= 13) {
			continue
		}
		rec := stNow.Add(-48 * time.Hour).Add(time.Duration(id) * time.Minute)
		if id >= 14 {
			rec = stNow.Add(-12 * time.Minute).Add(time.Duration(id-14) * time.Second)
		}
		if _, err := db.Exec(`INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
			VALUES (?, '<MSG/>', ?, 'VALID')`, id, rec); err != nil {
			t.Fatal(err)
		}
	}
}

// stGroups are msgx's goka groups with the default topic names.
var stGroups = []kafka.Group{
	{Group: "msgx-router", Topics: []string{"msgx.inbox"}},
	{Group: "msgx-flights", Topics: []string{"msgx.flight-transitions", "msgx-flights-loop"}},
	{Group: "msgx-refdata", Topics: []string{"msgx.refdata-transitions"}},
}

// stConfig is the configuration from an empty environment (its
// defaults), changed by change.
func stConfig(t *testing.T, change ...func(*status.Config)) status.Config {
	t.Helper()
	cfg, err := env.ParseAsWithOptions[status.Config](env.Options{Environment: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range change {
		c(&cfg)
	}
	return cfg
}

// stCollect takes the report at stNow with stConfig(t, change...).
func stCollect(t *testing.T, deps status.Deps, change ...func(*status.Config)) (status.Report, error) {
	t.Helper()
	c, err := status.New(stConfig(t, change...), deps)
	if err != nil {
		return status.Report{}, err
	}
	return c.Collect(context.Background(), stNow), nil
}

// New names what is missing or wrong.
func TestNewRefusesIncompleteDeps(t *testing.T) {
	t.Parallel()
	_, err := status.New(stConfig(t), status.Deps{})
	for _, want := range []string{"no PostgreSQL pool", "MSGX_DB_TIMEOUT", "no consumer groups"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with empty deps: %v, want it to name %q", err, want)
		}
	}
	_, err = status.New(stConfig(t, func(c *status.Config) { c.GroupLag, c.DeadWindow = -1, 0 }), status.Deps{})
	for _, want := range []string{"MSGX_STATUS_GROUP_LAG", "MSGX_STATUS_DEAD_WINDOW"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with a bad configuration: %v, want it to name %q", err, want)
		}
	}
}

// stScenarioKafka creates the groups' topics with records and commits part
// of them: msgx-router 7 of 10 on msgx.inbox, msgx-flights 4 of 4 on the
// transitions and nothing on its empty loop topic, msgx-refdata nothing of
// 2.
func stScenarioKafka(t *testing.T, brokers []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	counts := map[string]int{"msgx.inbox": 10, "msgx.flight-transitions": 4, "msgx-flights-loop": 0, "msgx.refdata-transitions": 2}
	topics := slices.Sorted(maps.Keys(counts))
	resp, err := adm.CreateTopics(ctx, 1, 1, nil, topics...)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		for i := range counts[tp] {
			r := &kgo.Record{Topic: tp, Key: []byte(fmt.Sprint(i)), Value: []byte("x")}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("producing to %s: %v", tp, err)
			}
		}
	}
	commit := func(group, topic string, at int64) {
		var os kadm.Offsets
		os.AddOffset(topic, 0, at, -1)
		if err := adm.CommitAllOffsets(ctx, group, os); err != nil {
			t.Fatalf("committing %s %s@%d: %v", group, topic, at, err)
		}
	}
	commit("msgx-router", "msgx.inbox", 7)
	commit("msgx-flights", "msgx.flight-transitions", 4)
}

// stWant compares one figure.
func stWant[T comparable](t *testing.T, name string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func stWantMap(t *testing.T, name string, got, want map[string]int64) {
	t.Helper()
	if !maps.Equal(got, want) || got == nil {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

// stWantAlerts checks the alerts one by one: each must contain every
// fragment of its line, in order of the rules.
func stWantAlerts(t *testing.T, got []string, want [][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d alerts, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range min(len(got), len(want)) {
		for _, frag := range want[i] {
			if !strings.Contains(got[i], frag) {
				t.Errorf("alert %d = %q, want it to contain %q", i, got[i], frag)
			}
		}
	}
}

// The whole scenario: every figure of the report from real PostgreSQL,
// MariaDB and Kafka, and the alerts they raise.
func TestCollectReportScenario(t *testing.T) {
	t.Parallel()
	pool := stPG(t, sinktest.NewPG(t))
	my := sinktest.OpenMySQL(t, testenv.NewMySQL(t))
	// kfake, in-process: the report's reading of groups and lags is the
	// subject; the report on Apache Kafka runs in cmd/msgx (TestRunAgainstSASLCluster).
	brokers := testenv.NewBroker(t)
	stScenarioPG(t, pool)
	stScenarioMySQL(t, my)
	stScenarioKafka(t, brokers)

	r, err := stCollect(t, status.Deps{
		PG: pool, Inbox: sinktest.Tables(t, my, nil, "cminmsgs", 10*time.Second), Brokers: brokers, Kafka: testenv.KafkaConfig(brokers), Groups: stGroups,
		Timeout: 10 * time.Second,
	}, func(c *status.Config) { c.GroupLag = 2 })
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		var b bytes.Buffer
		_ = r.Text(&b)
		t.Log("\n" + b.String())
	}
	stWant(t, "GeneratedAt", r.GeneratedAt, stNow)

	in := r.Inbox
	stWant(t, "Seeded", in.Seeded, true)
	stWant(t, "SeedMode", in.SeedMode, "min")
	if in.SeededAt == nil || !in.SeededAt.Equal(stNow.Add(-48*time.Hour)) {
		t.Errorf("SeededAt = %v", in.SeededAt)
	}
	stWant(t, "Watermark", in.Watermark, 10)
	stWant(t, "MaxID", in.MaxID, 25)
	stWant(t, "Lag", in.Lag, 15)
	stWant(t, "MaxIDError", in.MaxIDError, "")
	if u := in.OldestUnread; u == nil {
		t.Error("OldestUnread = nil")
	} else {
		stWant(t, "OldestUnread.MsgID", u.MsgID, 14)
		stWant(t, "OldestUnread.AgeSeconds", u.AgeSeconds, 720)
	}
	if h := in.Hole; h == nil {
		t.Error("Hole = nil")
	} else {
		stWant(t, "Hole", *h, status.OpenHole{From: 11, To: 13, Since: h.Since, AgeSeconds: 720})
		stWant(t, "Hole.Since", h.Since.Equal(stNow.Add(-12*time.Minute)), true)
	}
	stWant(t, "PermanentHoles", in.PermanentHoles, 2)
	stWant(t, "PermanentHoleIDs", in.PermanentHoleIDs, 3)
	if len(in.RecentHoles) != 2 || in.RecentHoles[0].From != 7 || in.RecentHoles[1].From != 3 ||
		in.RecentHoles[1].To != 4 || in.RecentHoles[0].Reason != "probe" {
		t.Errorf("RecentHoles = %+v", in.RecentHoles)
	}
	stWant(t, "LateRows", in.LateRows, 1)
	stWant(t, "LateRowIDs", fmt.Sprint(in.LateRowIDs), "[4]")
	if len(in.Errors) > 0 {
		t.Errorf("Inbox.Errors = %v", in.Errors)
	}

	m := r.Messages
	stWantMap(t, "ByState", m.ByState, map[string]int64{
		"PENDING": 2, "FAILED": 1, "ROUTED": 1, "SUCCEEDED": 3, "SKIPPED": 5, "DEAD": 4, "ARCHIVED": 1})
	stWant(t, "Backlog", m.Backlog, 4)
	if h := m.OldestUnfinished; h == nil {
		t.Error("OldestUnfinished = nil")
	} else {
		stWant(t, "OldestUnfinished.MsgID", h.MsgID, 150)
		stWant(t, "OldestUnfinished.State", h.State, "FAILED")
		stWant(t, "OldestUnfinished.AgeSeconds", h.AgeSeconds, 3600)
		stWant(t, "OldestUnfinished.Attempts", h.Attempts, 3)
		stWant(t, "OldestUnfinished.ErrorClass", h.ErrorClass, "CODEC_ERROR")
		stWant(t, "OldestUnfinished.LastError", h.LastError, "bad date")
		if h.NextAttemptAt == nil || !h.NextAttemptAt.Equal(stNow.Add(4*time.Second)) {
			t.Errorf("OldestUnfinished.NextAttemptAt = %v", h.NextAttemptAt)
		}
	}
	stWantMap(t, "DeadByClass", m.DeadByClass, map[string]int64{"MALFORMED": 2, "PROTOCOL": 1, "EXHAUSTED": 1})
	stWant(t, "DeadReplayable", fmt.Sprint(m.DeadReplayable), fmt.Sprint(map[string]bool{"MALFORMED": false, "PROTOCOL": false, "EXHAUSTED": true}))
	stWant(t, "DeadRecent", m.DeadRecent, 2)
	stWant(t, "DeadRecentWindowSeconds", m.DeadRecentWindowSeconds, 3600)
	if d := m.LatestDead; d == nil {
		t.Error("LatestDead = nil")
	} else {
		stWant(t, "LatestDead.MsgID", d.MsgID, 112)
		stWant(t, "LatestDead.ErrorClass", d.ErrorClass, "EXHAUSTED")
		stWant(t, "LatestDead.LastError", d.LastError, "CODEC_ERROR: unparseable date 2026-13-40")
	}
	latest := map[string]string{}
	for class, ds := range m.DeadLatestByClass {
		for _, d := range ds {
			latest[class] += fmt.Sprintf("%d %s %s; ", d.MsgID, d.ErrorClass, d.LastError)
		}
	}
	stWant(t, "DeadLatestByClass", fmt.Sprint(latest), fmt.Sprint(map[string]string{
		"MALFORMED": "110 MALFORMED no META; 109 MALFORMED not XML; ",
		"PROTOCOL":  "111 PROTOCOL RECS=3 but 2 records; ",
		"EXHAUSTED": "112 EXHAUSTED CODEC_ERROR: unparseable date 2026-13-40; ",
	}))
	stWantMap(t, "SkippedByReasonClass", m.SkippedByReasonClass,
		map[string]int64{"duplicate": 1, "ignored": 2, "unsupported": 1, "no-match": 1})
	if len(m.Errors) > 0 {
		t.Errorf("Messages.Errors = %v", m.Errors)
	}

	b := r.Backfill
	stWant(t, "Backfill.Pending", b.Pending, 3) // 102, 106, 112
	stWant(t, "Backfill.Overdue", b.Overdue, 1) // 106, enqueued 800h ago
	stWant(t, "Backfill.OverdueAfterSeconds", b.OverdueAfterSeconds, 720*3600)
	stWant(t, "Backfill.OldestPendingAgeSeconds", b.OldestPendingAgeSeconds, 800*3600)
	stWantMap(t, "Backfill.Abandoned", b.Abandoned, map[string]int64{"MISSING_ROW": 1, "TRANSIENT_DEADLINE": 1})
	if len(b.Errors) > 0 {
		t.Errorf("Backfill.Errors = %v", b.Errors)
	}

	stWant(t, "GroupsError", r.GroupsError, "")
	type lagRow struct {
		group, topic        string
		members, partitions int
		committed, end, lag int64
		err                 string
	}
	var gotGroups []lagRow
	for _, g := range r.Groups {
		gotGroups = append(gotGroups, lagRow{g.Group, g.Topic, g.Members, g.Partitions, g.Committed, g.End, g.Lag, g.Error})
		if g.State == "" || g.State == "Stable" {
			t.Errorf("group %s state %q: want a group without members", g.Group, g.State)
		}
	}
	wantGroups := []lagRow{
		{"msgx-router", "msgx.inbox", 0, 1, 7, 10, 3, ""},
		{"msgx-flights", "msgx.flight-transitions", 0, 1, 4, 4, 0, ""},
		{"msgx-flights", "msgx-flights-loop", 0, 1, -1, 0, 0, ""},
		{"msgx-refdata", "msgx.refdata-transitions", 0, 1, -1, 2, 2, ""},
	}
	if !slices.Equal(gotGroups, wantGroups) {
		t.Errorf("Groups =\n%+v\nwant\n%+v", gotGroups, wantGroups)
	}
	stWant(t, "len(Components)", len(r.Components), 0)

	// Lag, the sampled subset, agrees with the report.
	c, err := status.New(stConfig(t), status.Deps{
		PG: pool, Inbox: sinktest.Tables(t, my, nil, "cminmsgs", 10*time.Second), Brokers: brokers, Kafka: testenv.KafkaConfig(brokers), Groups: stGroups,
		Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	lag := c.Lag(context.Background())
	stWant(t, "Lag", fmt.Sprint(lag.Watermark, lag.MaxID, lag.Inbox, len(lag.Errors)), "10 25 15 0")
	var lagGroups []lagRow
	for _, g := range lag.Groups {
		lagGroups = append(lagGroups, lagRow{g.Group, g.Topic, g.Members, g.Partitions, g.Committed, g.End, g.Lag, g.Error})
	}
	if !slices.Equal(lagGroups, wantGroups) {
		t.Errorf("Lag.Groups =\n%+v\nwant\n%+v", lagGroups, wantGroups)
	}

	stWantAlerts(t, r.Alerts, [][]string{
		{"inbox hole at IDs 11-13 open for 12m (threshold 10m)", "W=10"},
		{"oldest unfinished message #150 is FAILED (CODEC_ERROR, 3 attempts)", "blocks", "enqueued 1h ago (threshold 5m): bad date"},
		{"consumer group msgx-router has no running member", "3 records waiting"},
		{"consumer group msgx-router is 3 records behind on msgx.inbox (threshold 2)"},
		{"consumer group msgx-flights has no running member", "0 records waiting"},
		{"consumer group msgx-refdata has no running member", "2 records waiting"},
		{"1 late inbox row never processed (IDs 4)", "reconcile"},
		{"4 DEAD messages to decide on", "EXHAUSTED 1, MALFORMED 2, PROTOCOL 1", "2 new in the last 1h",
			"latest #112 EXHAUSTED: CODEC_ERROR: unparseable date"},
		{"2 processed marks abandoned (MISSING_ROW 1, TRANSIENT_DEADLINE 1)", "msgx backfill abandoned"},
		{"1 processed mark overdue (pending longer than 30d)"},
	})

	// The daemon adds its components: a paused one becomes an alert, a
	// running one does not; a second Merge replaces by name.
	errAt := stNow.Add(-90 * time.Second)
	r.Merge([]status.ComponentState{
		{Name: "router", State: status.ComponentPaused, LastError: "postgres: connection refused", LastErrorAt: &errAt},
		{Name: "ingest", State: status.ComponentRunning},
	})
	stWant(t, "component order", r.Components[0].Name+","+r.Components[1].Name, "ingest,router")
	if last := r.Alerts[len(r.Alerts)-1]; last != "component router is paused: postgres: connection refused (1m30s ago)" {
		t.Errorf("last alert = %q", last)
	}
	n := len(r.Alerts)
	r.Merge([]status.ComponentState{{Name: "router", State: status.ComponentRunning}})
	stWant(t, "alerts after the router resumed", len(r.Alerts), n-1)
	stWant(t, "components after the second merge", len(r.Components), 2)

	// JSON: the documented names, unknown figures never faked.
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"generatedAt", "alerts", "inbox.watermark", "inbox.maxId", "inbox.lag", "inbox.hole.from", "inbox.hole.ageSeconds",
		"inbox.permanentHoles", "inbox.permanentHoleIds", "inbox.lateRows", "inbox.seeded", "inbox.oldestUnread.msgId",
		"messages.byState.DEAD", "messages.backlog", "messages.oldestUnfinished.msgId", "messages.oldestUnfinished.ageSeconds",
		"messages.deadByClass.PROTOCOL", "messages.skippedByReasonClass.no-match", "messages.deadRecent",
		"backfill.pending", "backfill.overdue", "backfill.abandoned.MISSING_ROW", "groups", "components",
	} {
		var cur any = doc
		for _, k := range strings.Split(path, ".") {
			obj, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			cur = obj[k]
		}
		if cur == nil {
			t.Errorf("JSON has no %s:\n%s", path, raw)
		}
	}
	if g := doc["groups"].([]any)[0].(map[string]any); g["group"] != "msgx-router" || g["lag"] != 3.0 || g["committed"] != 7.0 {
		t.Errorf("groups[0] = %v", g)
	}
}

// DEAD rows without a class (rows older than the classes) are listed under
// UNKNOWN with the others, newest first, at most DeadLatestPerClass each.
func TestDeadLatestByClassUnknown(t *testing.T) {
	t.Parallel()
	pool := stPG(t, sinktest.NewPG(t))
	stInsertMsgs(t, pool, []stMsg{
		{id: 1, state: "DEAD", lastErr: "one"}, {id: 2, state: "DEAD", lastErr: "two"},
		{id: 3, state: "DEAD", lastErr: "three"}, {id: 4, state: "DEAD", lastErr: "four"},
		{id: 5, state: "DEAD", class: "PROTOCOL", lastErr: "five"}, {id: 6, state: "SUCCEEDED", lastErr: "six"},
	})
	r, err := stCollect(t, status.Deps{PG: pool, Groups: stGroups, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	latest := map[string]string{}
	for class, ds := range r.Messages.DeadLatestByClass {
		for _, d := range ds {
			latest[class] += fmt.Sprintf("%d %s; ", d.MsgID, d.LastError)
		}
	}
	stWant(t, "DeadLatestByClass", fmt.Sprint(latest), fmt.Sprint(map[string]string{
		"UNKNOWN": "4 four; 3 three; 2 two; ", "PROTOCOL": "5 five; "}))
	if len(r.Messages.Errors) > 0 {
		t.Errorf("Messages.Errors = %v", r.Messages.Errors)
	}
}

// An empty, freshly migrated msgx with nothing configured but PostgreSQL:
// zero everywhere, never -1, no nil maps, and the two alerts that matter.
func TestCollectReportEmpty(t *testing.T) {
	t.Parallel()
	pool := stPG(t, sinktest.NewPG(t))
	r, err := stCollect(t, status.Deps{PG: pool, Groups: stGroups, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stWant(t, "Seeded", r.Inbox.Seeded, false)
	stWant(t, "Watermark", r.Inbox.Watermark, 0)
	stWant(t, "MaxID", r.Inbox.MaxID, -1)
	stWant(t, "MaxIDError", r.Inbox.MaxIDError, "MySQL not configured")
	stWant(t, "PermanentHoles", r.Inbox.PermanentHoles, 0)
	stWant(t, "LateRows", r.Inbox.LateRows, 0)
	stWant(t, "Backlog", r.Messages.Backlog, 0)
	stWant(t, "DeadRecent", r.Messages.DeadRecent, 0)
	stWant(t, "OldestUnfinished", r.Messages.OldestUnfinished == nil, true)
	stWant(t, "LatestDead", r.Messages.LatestDead == nil, true)
	stWant(t, "Pending", r.Backfill.Pending, 0)
	stWant(t, "OldestPendingAgeSeconds", r.Backfill.OldestPendingAgeSeconds, -1)
	stWantMap(t, "ByState", r.Messages.ByState, map[string]int64{
		"PENDING": 0, "FAILED": 0, "ROUTED": 0, "SUCCEEDED": 0, "SKIPPED": 0, "DEAD": 0, "ARCHIVED": 0})
	stWantMap(t, "DeadByClass", r.Messages.DeadByClass, map[string]int64{})
	stWant(t, "DeadLatestByClass", fmt.Sprint(r.Messages.DeadLatestByClass == nil, len(r.Messages.DeadLatestByClass)), "false 0")
	stWantMap(t, "SkippedByReasonClass", r.Messages.SkippedByReasonClass, map[string]int64{})
	stWantMap(t, "Abandoned", r.Backfill.Abandoned, map[string]int64{})
	stWantAlerts(t, r.Alerts, [][]string{
		{"cannot read the MySQL inbox: MySQL not configured"},
		{"cannot read the Kafka consumer groups: Kafka brokers not configured"},
		{"ingest is not seeded"},
	})
	raw, _ := json.Marshal(r)
	for _, frag := range []string{`"deadByClass":{}`, `"deadLatestByClass":{}`, `"recentHoles":[]`, `"lateRowIds":[]`, `"alerts":[`, `"hole":null`} {
		if !bytes.Contains(raw, []byte(frag)) {
			t.Errorf("JSON lacks %s: %s", frag, raw)
		}
	}
}

// stProxiedMySQL opens the scenario inbox through a proxy the test can cut.
func stProxiedMySQL(t *testing.T) (*sql.DB, *testenv.Proxy) {
	t.Helper()
	dsn := testenv.NewMySQL(t)
	stScenarioMySQL(t, sinktest.OpenMySQL(t, dsn))
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, mc.Addr)
	mc.Addr = proxy.Addr()
	return sinktest.OpenMySQL(t, mc.FormatDSN()), proxy
}

// MySQL down: the report still comes, with the inbox's MySQL figures
// unknown and said so, everything read from PostgreSQL and Kafka intact.
func TestCollectReportMySQLDown(t *testing.T) {
	t.Parallel()
	pool := stPG(t, sinktest.NewPG(t))
	stScenarioPG(t, pool)
	my, proxy := stProxiedMySQL(t)
	brokers := testenv.NewBroker(t)
	stScenarioKafka(t, brokers)
	deps := status.Deps{PG: pool, Inbox: sinktest.Tables(t, my, nil, "cminmsgs", 3*time.Second), Brokers: brokers, Groups: stGroups, Timeout: 3 * time.Second}

	// Up first: the proxy itself is not what the figures depend on.
	r, err := stCollect(t, deps)
	if err != nil {
		t.Fatal(err)
	}
	stWant(t, "MaxID through the proxy", r.Inbox.MaxID, 25)

	proxy.Down()
	start := time.Now()
	r, err = stCollect(t, deps)
	if err != nil {
		t.Fatalf("Collect with MySQL down: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("report took %s with MySQL down", d)
	}
	stWant(t, "MaxID", r.Inbox.MaxID, -1)
	stWant(t, "Lag", r.Inbox.Lag, -1)
	stWant(t, "OldestUnread", r.Inbox.OldestUnread == nil, true)
	if !strings.Contains(r.Inbox.MaxIDError, "MAX(CMINMSGS_ID)") {
		t.Errorf("MaxIDError = %q", r.Inbox.MaxIDError)
	}
	// Everything else is still there.
	stWant(t, "Watermark", r.Inbox.Watermark, 10)
	stWant(t, "Hole.From", r.Inbox.Hole != nil && r.Inbox.Hole.From == 11, true)
	stWant(t, "Backlog", r.Messages.Backlog, 4)
	stWant(t, "Pending", r.Backfill.Pending, 3)
	stWant(t, "len(Groups)", len(r.Groups), 4)
	if len(r.Alerts) == 0 || !strings.HasPrefix(r.Alerts[0], "status incomplete: cannot read the MySQL inbox: ") {
		t.Errorf("first alert = %q", r.Alerts)
	}
	var b bytes.Buffer
	if err := r.Text(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "MAX(CMINMSGS_ID)  ?") {
		t.Errorf("text does not show the unknown MAX:\n%s", b.String())
	}
	// Lag: the inbox lag unknown and said so, W and the groups still read.
	c, err := status.New(stConfig(t), deps)
	if err != nil {
		t.Fatal(err)
	}
	lag := c.Lag(context.Background())
	stWant(t, "Lag", fmt.Sprint(lag.Watermark, lag.MaxID, lag.Inbox, len(lag.Groups)), "10 -1 -1 4")
	if len(lag.Errors) != 1 || !strings.Contains(lag.Errors[0], "MAX(CMINMSGS_ID)") {
		t.Errorf("Lag.Errors = %q", lag.Errors)
	}
}

// PostgreSQL and Kafka down as well as MySQL: still a report, every figure
// unknown rather than zero, and alerts that say what could not be read.
func TestCollectReportEverythingDown(t *testing.T) {
	t.Parallel()
	dsn := sinktest.NewPG(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pgProxy := testenv.NewProxy(t, fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port))
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", stPort(t, pgProxy.Addr())
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	my, myProxy := stProxiedMySQL(t)
	brokers := testenv.NewBroker(t)
	kProxy := testenv.NewProxy(t, brokers[0])
	pgProxy.Down()
	myProxy.Down()
	kProxy.Down()

	start := time.Now()
	r, err := stCollect(t, status.Deps{
		PG: pool, Inbox: sinktest.Tables(t, my, nil, "cminmsgs", 2*time.Second), Brokers: []string{kProxy.Addr()}, Groups: stGroups, Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatalf("Collect with everything down: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("report took %s", d)
	}
	stWant(t, "Watermark", r.Inbox.Watermark, -1)
	stWant(t, "PermanentHoles", r.Inbox.PermanentHoles, -1)
	stWant(t, "LateRows", r.Inbox.LateRows, -1)
	stWant(t, "MaxID", r.Inbox.MaxID, -1)
	stWant(t, "Backlog", r.Messages.Backlog, -1)
	stWant(t, "ByState nil", r.Messages.ByState == nil, true)
	stWant(t, "DeadByClass nil", r.Messages.DeadByClass == nil, true)
	stWant(t, "DeadLatestByClass nil", r.Messages.DeadLatestByClass == nil, true)
	stWant(t, "Pending", r.Backfill.Pending, -1)
	stWant(t, "Abandoned nil", r.Backfill.Abandoned == nil, true)
	stWant(t, "Groups nil", r.Groups == nil, true)
	if r.GroupsError == "" {
		t.Error("GroupsError empty")
	}
	stWantAlerts(t, r.Alerts, [][]string{
		{"status incomplete: cannot read the inbox section from PostgreSQL: reading inbox_cursor", "more)"},
		{"status incomplete: cannot read the messages section"},
		{"status incomplete: cannot read the backfill section"},
		{"status incomplete: cannot read the requests section"},
		{"status incomplete: cannot read the MySQL inbox"},
		{"status incomplete: cannot read the Kafka consumer groups: listing end offsets"},
	})
	stWant(t, "UnpairedErors", r.Requests.UnpairedErors, -1)
	stWant(t, "ByKind nil", r.Requests.ByKind == nil, true)
	var b bytes.Buffer
	if err := r.Text(&b); err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{"watermark W       ?", "backlog    ?", "pending    ?", "error: reading inbox_cursor"} {
		if !strings.Contains(b.String(), frag) {
			t.Errorf("text lacks %q:\n%s", frag, b.String())
		}
	}
}

// stBlackhole accepts connections and never answers: a server that hangs
// (a network partition, a stuck host), unlike a refused connection.
func stBlackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// Sources that hang instead of refusing: the report costs about one
// timeout, not one per query — the first PostgreSQL timeout stops the
// remaining PostgreSQL calls, and the three sources wait in parallel.
func TestCollectReportHangingSources(t *testing.T) {
	t.Parallel()
	hole := stBlackhole(t)
	cfg, err := pgxpool.ParseConfig("postgres://postgres@" + hole + "/msgx?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	my, err := sql.Open("mysql", "root@tcp("+hole+")/x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { my.Close() })

	const timeout = time.Second
	start := time.Now()
	r, err := stCollect(t, status.Deps{
		PG: pool, Inbox: sinktest.Tables(t, my, nil, "cminmsgs", timeout), Brokers: []string{hole}, Groups: stGroups, Timeout: timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 4*timeout {
		t.Errorf("report took %s with every source hanging (timeout %s)", d, timeout)
	}
	stWant(t, "Watermark", r.Inbox.Watermark, -1)
	stWant(t, "MaxID", r.Inbox.MaxID, -1)
	stWant(t, "Backlog", r.Messages.Backlog, -1)
	stWant(t, "Pending", r.Backfill.Pending, -1)
	stWant(t, "Groups nil", r.Groups == nil, true)
	if len(r.Backfill.Errors) == 0 || !strings.Contains(r.Backfill.Errors[0], "not tried, PostgreSQL unreachable") {
		t.Errorf("Backfill.Errors = %q", r.Backfill.Errors)
	}
	stWant(t, "alerts", len(r.Alerts), 6)
}

func stPort(t *testing.T, addr string) uint16 {
	t.Helper()
	var port uint16
	if _, err := fmt.Sscanf(addr[strings.LastIndexByte(addr, ':')+1:], "%d", &port); err != nil {
		t.Fatal(err)
	}
	return port
}

// The human table of the scenario: alerts first, then the sections with
// their key lines (not byte-exact).
func TestReportText(t *testing.T) {
	t.Parallel()
	pool := stPG(t, sinktest.NewPG(t))
	my := sinktest.OpenMySQL(t, testenv.NewMySQL(t))
	brokers := testenv.NewBroker(t)
	stScenarioPG(t, pool)
	stScenarioMySQL(t, my)
	stScenarioKafka(t, brokers)
	r, err := stCollect(t, status.Deps{PG: pool, Inbox: sinktest.Tables(t, my, nil, "cminmsgs", 10*time.Second), Brokers: brokers, Groups: stGroups, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.Merge([]status.ComponentState{{Name: "ingest", State: status.ComponentRunning}})
	r.Inbox.Zone = "+08:00 (MySQL session time_zone +08:00)"
	var b bytes.Buffer
	if err := r.Text(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	lines := strings.Split(out, "\n")
	stWant(t, "first line", lines[0], "msgx status at 2026-03-10T01:00:00Z")
	stWant(t, "alerts header", lines[2], fmt.Sprintf("ALERTS (%d)", len(r.Alerts)))
	stWant(t, "first alert", strings.HasPrefix(lines[3], "  ! inbox hole at IDs 11-13"), true)
	order := []string{"ALERTS", "\nINBOX\n", "\nMESSAGES\n", "\nBACKFILL", "\nKAFKA GROUPS\n", "\nCOMPONENTS\n"}
	last := -1
	for _, h := range order {
		i := strings.Index(out, h)
		if i <= last {
			t.Errorf("section %q at %d, after %d", h, i, last)
		}
		last = i
	}
	for _, frag := range []string{
		"  watermark W       10     seeded min at 2026-03-08T01:00:00Z\n",
		"  MAX(CMINMSGS_ID)  25\n",
		"  lag               15     IDs above W\n",
		"  next unread       #14    received 12m ago\n",
		"  open hole         11-13  open 12m (since 2026-03-10T00:48:00Z)",
		"  permanent holes   2      3 IDs; last 7 released 2026-03-08T03:00:00Z (probe)\n",
		"  late rows         1      IDs 4\n",
		"  STATE      COUNT  DETAIL\n",
		"  FAILED     1\n",
		"  SKIPPED    5      duplicate 1, ignored 2, no-match 1, unsupported 1\n",
		"  DEAD       4      EXHAUSTED 1, MALFORMED 2, PROTOCOL 1; 2 in the last 1h\n",
		"  backlog    4      PENDING + FAILED + ROUTED\n",
		"  oldest unfinished  #150 FAILED, enqueued 1h ago, 3 attempts, CODEC_ERROR, next attempt 2026-03-10T01:00:04Z: bad date\n",
		"  latest DEAD        #112 EXHAUSTED: CODEC_ERROR: unparseable date 2026-13-40\n",
		"  pending    3  oldest enqueued 33d8h ago\n",
		"  overdue    1  pending longer than 30d\n",
		"  abandoned  2  MISSING_ROW 1, TRANSIENT_DEADLINE 1\n",
		"  GROUP         TOPIC                     STATE",
		"  msgx-router   msgx.inbox ",
		"  msgx-refdata  msgx.refdata-transitions  Dead   0        none       2    2\n",
		"  NAME    STATE    LAST ERROR\n  ingest  running\n",
		"CMINMSGS_DATE_* read and written in +08:00 (MySQL session time_zone +08:00)\n",
	} {
		if !strings.Contains(out, frag) {
			t.Errorf("text lacks %q", frag)
		}
	}
	// Columns are aligned: every group line has its lag under LAG.
	lagCol, rows := -1, 0
	for _, l := range lines {
		if strings.HasPrefix(l, "  GROUP") {
			lagCol = strings.Index(l, "LAG")
		}
		if strings.HasPrefix(l, "  msgx-") && lagCol > 0 {
			rows++
			if len(l) <= lagCol || l[lagCol-1] != ' ' || l[lagCol] < '0' || l[lagCol] > '9' {
				t.Errorf("group line not aligned under LAG (column %d): %q", lagCol, l)
			}
		}
	}
	stWant(t, "group lines", rows, 4)

	// All well: one reassuring line instead of the alerts.
	var ok bytes.Buffer
	if err := (status.Report{GeneratedAt: stNow, Alerts: []string{}}).Text(&ok); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ok.String(), "ALERTS: none (keeping up, nothing stuck)") || !strings.Contains(ok.String(), "COMPONENTS\n  none reported\n") {
		t.Errorf("all-well text:\n%s", ok.String())
	}
	ok.Reset()
	if err := (status.Report{GeneratedAt: stNow, ComponentsError: "no msgx daemon answered"}).Text(&ok); err != nil ||
		!strings.Contains(ok.String(), "COMPONENTS\n  not reached: no msgx daemon answered\n") {
		t.Errorf("text without the daemon's components (%v):\n%s", err, ok.String())
	}
}

// The publisher's section: transactions, fencing and position with
// exactly-once publishing, the de-duplication advice without it.
func TestReportTextPublisher(t *testing.T) {
	t.Parallel()
	fencedAt := stNow.Add(-time.Minute)
	for _, tc := range []struct {
		pub  status.PublisherStatus
		want []string
	}{
		{status.PublisherStatus{ExactlyOnce: true, TransactionalID: "t2.msgx-publisher", Committed: 120, Aborted: 2, Position: 9876,
			Published: 4000, Reconciled: 3, Deduplicated: 5}, []string{
			"\nEVENT PUBLISHER (event_outbox → Kafka)\n",
			"  mode exactly once Kafka transactions as \"t2.msgx-publisher\"; consumers read with isolation.level=read_committed\n",
			"  transactions  120 committed  2 aborted\n",
			"  fenced        no\n",
			"  position      9876  last event_outbox id committed with its events\n",
			"  events        4000 published  5 duplicates not published; 3 reconciled at start-up\n",
		}},
		{status.PublisherStatus{ExactlyOnce: true, TransactionalID: "msgx-publisher", Fenced: "fenced: another producer …", FencedAt: &fencedAt}, []string{
			"  fenced        YES since 2026-03-10T00:59:00Z  fenced: another producer …\n",
		}},
		{status.PublisherStatus{Published: 7}, []string{
			"  mode    at least once  MSGX_EXACTLY_ONCE=false: consumers de-duplicate by (FLID, stateVersion)\n",
			"  events  7 published    0 duplicates not published; 0 reconciled at start-up\n",
		}},
	} {
		var b bytes.Buffer
		pub := tc.pub
		if err := (status.Report{GeneratedAt: stNow, Alerts: []string{}, Publisher: &pub}).Text(&b); err != nil {
			t.Fatal(err)
		}
		// Column widths depend on the other rows: compare with single spaces.
		squeeze := func(s string) string { return regexp.MustCompile(` {2,}`).ReplaceAllString(s, " ") }
		for _, frag := range tc.want {
			if !strings.Contains(squeeze(b.String()), squeeze(frag)) {
				t.Errorf("text lacks %q:\n%s", frag, b.String())
			}
		}
	}
	var b bytes.Buffer
	if err := (status.Report{GeneratedAt: stNow, Alerts: []string{}}).Text(&b); err != nil || strings.Contains(b.String(), "PUBLISHER") {
		t.Errorf("a report without the publisher shows it (%v):\n%s", err, b.String())
	}
}

// The alert rules, one figure at a time, from a report built by hand.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	at := stNow.Add(-time.Minute)
	base := func() status.Report {
		return status.Report{
			GeneratedAt: stNow,
			Inbox:       status.InboxStatus{Seeded: true, Watermark: 100, MaxID: 100, Lag: 0, RecentHoles: []status.ReleasedHole{}, LateRowIDs: []int64{}},
			Messages: status.MessageStatus{
				ByState: map[string]int64{}, DeadByClass: map[string]int64{}, SkippedByReasonClass: map[string]int64{},
				DeadRecentWindowSeconds: 3600,
			},
			Backfill: status.BackfillStatus{Abandoned: map[string]int64{}, OverdueAfterSeconds: 720 * 3600, OldestPendingAgeSeconds: -1},
			Groups:   []status.GroupLag{{Group: "msgx-router", Topic: "msgx.inbox", State: "Stable", Members: 1, Committed: 100, End: 100}},
		}
	}
	th := status.Config{MaxCommitDelay: 5 * time.Minute, OldestUnfinishedAge: 5 * time.Minute, InboxLag: 100,
		UnreadAge: 5 * time.Minute, GroupLag: 50, DeadWindow: time.Hour, BackfillOverdue: 720 * time.Hour}
	tests := []struct {
		name   string
		change func(r *status.Report)
		want   []string // one fragment per expected alert, in order
	}{
		{"all well", func(*status.Report) {}, nil},
		{"hole younger than the threshold", func(r *status.Report) {
			r.Inbox.Hole = &status.OpenHole{From: 101, To: 101, AgeSeconds: 599}
		}, nil},
		{"hole at the threshold", func(r *status.Report) {
			r.Inbox.Hole = &status.OpenHole{From: 101, To: 103, AgeSeconds: 600}
			r.Inbox.OldestUnread = &status.UnreadRow{MsgID: 104, AgeSeconds: 600} // explained by the hole
		}, []string{"inbox hole at IDs 101-103 open for 10m (threshold 10m)"}},
		{"single-ID hole", func(r *status.Report) {
			r.Inbox.Hole = &status.OpenHole{From: 101, To: 101, AgeSeconds: 3700}
		}, []string{"inbox hole at IDs 101 open for 1h1m"}},
		{"inbox lag", func(r *status.Report) { r.Inbox.MaxID, r.Inbox.Lag = 201, 101 },
			[]string{"ingest is 101 IDs behind the inbox (W=100, MAX(CMINMSGS_ID)=201; threshold 100)"}},
		{"watermark beyond the inbox", func(r *status.Report) { r.Inbox.MaxID = 40 },
			[]string{"watermark W=100 is beyond MAX(CMINMSGS_ID)=40: new inbox rows with IDs up to W would never be read"}},
		{"empty inbox, not seeded", func(r *status.Report) { r.Inbox.Seeded, r.Inbox.Watermark, r.Inbox.MaxID = false, 0, 0 },
			[]string{"ingest is not seeded"}},
		{"inbox lag at the threshold", func(r *status.Report) { r.Inbox.MaxID, r.Inbox.Lag = 200, 100 }, nil},
		{"unread row waiting", func(r *status.Report) { r.Inbox.OldestUnread = &status.UnreadRow{MsgID: 101, AgeSeconds: 301} },
			[]string{"inbox row #101 has waited 5m1s for ingest"}},
		{"unread row without receive time", func(r *status.Report) { r.Inbox.OldestUnread = &status.UnreadRow{MsgID: 101, AgeSeconds: -1} }, nil},
		{"not seeded", func(r *status.Report) { r.Inbox.Seeded, r.Inbox.Watermark = false, 0 }, []string{"ingest is not seeded"}},
		{"cursor unknown is not 'not seeded'", func(r *status.Report) {
			r.Inbox.Seeded, r.Inbox.Watermark, r.Inbox.Errors = false, -1, []string{"reading inbox_cursor: refused", "counting inbox_hole: refused"}
		}, []string{"cannot read the inbox section from PostgreSQL: reading inbox_cursor: refused (and 1 more)"}},
		{"FAILED head", func(r *status.Report) {
			r.Messages.OldestUnfinished = &status.UnfinishedMessage{MsgID: 7, State: "FAILED", AgeSeconds: 300, Attempts: 2, ErrorClass: "INFRA", LastError: "boom"}
		}, []string{"oldest unfinished message #7 is FAILED (INFRA, 2 attempts) and blocks every message behind it; enqueued 5m ago (threshold 5m): boom"}},
		{"ROUTED head", func(r *status.Report) {
			r.Messages.OldestUnfinished = &status.UnfinishedMessage{MsgID: 7, State: "ROUTED", AgeSeconds: 900}
		}, []string{"#7 is ROUTED and still waits for the flights/refdata processors"}},
		{"PENDING head", func(r *status.Report) {
			r.Messages.OldestUnfinished = &status.UnfinishedMessage{MsgID: 7, State: "PENDING", AgeSeconds: 900}
		}, []string{"#7 is PENDING: the router has not decided it"}},
		{"young head", func(r *status.Report) {
			r.Messages.OldestUnfinished = &status.UnfinishedMessage{MsgID: 7, State: "FAILED", AgeSeconds: 299}
		}, nil},
		{"group lag", func(r *status.Report) { r.Groups[0].End, r.Groups[0].Lag = 151, 51 },
			[]string{"consumer group msgx-router is 51 records behind on msgx.inbox (threshold 50)"}},
		{"group without members", func(r *status.Report) {
			r.Groups = append(r.Groups, status.GroupLag{Group: "msgx-flights", Topic: "a", State: "Empty", Lag: 2},
				status.GroupLag{Group: "msgx-flights", Topic: "b", State: "Empty", Lag: 60})
		}, []string{"consumer group msgx-flights has no running member (state Empty): nothing consumes its input; 62 records waiting",
			"consumer group msgx-flights is 60 records behind on b"}},
		{"group state unknown", func(r *status.Report) {
			r.Groups[0] = status.GroupLag{Group: "msgx-router", Topic: "msgx.inbox", Error: "describing groups: timeout"}
		}, []string{"consumer group msgx-router on msgx.inbox: describing groups: timeout"}},
		{"late rows", func(r *status.Report) { r.Inbox.LateRows, r.Inbox.LateRowIDs = 25, []int64{80, 90} },
			[]string{"25 late inbox rows never processed (IDs newest 2: 80, 90)"}},
		{"old DEAD", func(r *status.Report) {
			r.Messages.DeadByClass = map[string]int64{"PROTOCOL": 1}
			r.Messages.LatestDead = &status.DeadMessage{MsgID: 9, ErrorClass: "PROTOCOL"}
		}, []string{"1 DEAD message to decide on (replay or accept): PROTOCOL 1; latest #9 PROTOCOL"}},
		{"DEAD growing", func(r *status.Report) {
			r.Messages.DeadByClass = map[string]int64{"PROTOCOL": 1, "MALFORMED": 3}
			r.Messages.DeadRecent = 3
		}, []string{"4 DEAD messages to decide on (replay or accept): MALFORMED 3, PROTOCOL 1; 3 new in the last 1h"}},
		{"abandoned", func(r *status.Report) { r.Backfill.Abandoned = map[string]int64{"MISSING_ROW": 1} },
			[]string{"1 processed mark abandoned (MISSING_ROW 1)"}},
		{"overdue", func(r *status.Report) { r.Backfill.Pending, r.Backfill.Overdue = 9, 2 },
			[]string{"2 processed marks overdue (pending longer than 30d)"}},
		{"pending only", func(r *status.Report) { r.Backfill.Pending = 9 }, nil},
		{"components", func(r *status.Report) {
			r.Components = []status.ComponentState{
				{Name: "backfill", State: status.ComponentStandby},
				{Name: "flights", State: status.ComponentStopped, LastError: "emit failed", LastErrorAt: &at},
				{Name: "ingest", State: status.ComponentRunning, LastError: "old"},
				{Name: "router", State: status.ComponentPaused},
			}
		}, []string{"component flights is stopped: emit failed (1m ago)", "component router is paused"}},
		{"sources unreadable", func(r *status.Report) {
			r.Inbox.MaxID, r.Inbox.Lag, r.Inbox.MaxIDError = -1, -1, "reading MAX(CMINMSGS_ID) from cminmsgs: refused"
			r.Messages.Errors = []string{"counting unfinished messages: timeout"}
			r.Backfill.Errors = []string{"counting abandoned backfills: timeout"}
			r.Groups, r.GroupsError = nil, "listing end offsets of msgx.inbox: dial refused"
		}, []string{
			"status incomplete: cannot read the messages section from PostgreSQL: counting unfinished messages: timeout",
			"status incomplete: cannot read the backfill section",
			"status incomplete: cannot read the MySQL inbox: reading MAX",
			"status incomplete: cannot read the Kafka consumer groups: listing end offsets",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			tc.change(&r)
			got := status.Alerts(r, th)
			if got == nil {
				t.Fatal("Alerts returned nil; want [] when all is well")
			}
			want := make([][]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = []string{w}
			}
			stWantAlerts(t, got, want)
		})
	}

	// The defaults.
	r := base()
	r.Inbox.Hole = &status.OpenHole{From: 101, To: 101, AgeSeconds: 599}
	r.Groups[0].Lag = 1000
	if got := status.Alerts(r, stConfig(t)); len(got) != 0 {
		t.Errorf("defaults: %q", got)
	}
	r.Inbox.Hole.AgeSeconds, r.Groups[0].Lag = 600, 1001
	if got := status.Alerts(r, stConfig(t)); len(got) != 2 {
		t.Errorf("defaults: %q", got)
	}
}

// The status queries use the indexes the package comment promises on a
// proc_state large enough for the planner to care.
func TestStatusQueryPlans(t *testing.T) {
	t.Parallel()
	pool := stPG(t, sinktest.NewPG(t))
	// 200k messages: 84% SUCCEEDED, 15% SKIPPED, 0.5% DEAD, 0.5% ARCHIVED,
	// 100 unfinished, the last 1000 terminal ones still owing their mark.
	stExec(t, pool, `INSERT INTO proc_state (msg_id, state, error_class, reason, attempts, enqueued_at, updated_at, backfill_at)
		SELECT g,
			CASE WHEN g % 200 = 0 THEN 'DEAD' WHEN g % 200 = 1 THEN 'ARCHIVED' WHEN g % 100 < 16 THEN 'SKIPPED' ELSE 'SUCCEEDED' END,
			CASE WHEN g % 200 = 0 THEN 'PROTOCOL' END,
			CASE WHEN g % 100 < 16 THEN 'ignored:LDM-*' END,
			1, $1::timestamptz - (200000 - g) * interval '10 seconds', $1, CASE WHEN g <= 199000 THEN $1::timestamptz END
		FROM generate_series(1, 200000) g`, stNow)
	stExec(t, pool, testenv.OweBackfillSQL, nil)
	stExec(t, pool, `INSERT INTO proc_state (msg_id, state, attempts, enqueued_at, updated_at)
		SELECT 200000 + g, CASE WHEN g = 1 THEN 'FAILED' ELSE 'PENDING' END, 0, $1, $1 FROM generate_series(1, 100) g`, stNow)
	stExec(t, pool, `VACUUM ANALYZE proc_state`)

	args := map[string][]any{
		"deadRecent":      {stNow.Add(-time.Hour)},
		"deadOne":         {int64(200)},
		"deadLatest":      {[]string{"PROTOCOL", "MALFORMED"}, status.DeadLatestPerClass},
		"deadLatestNull":  {status.DeadLatestPerClass},
		"backfillPending": {stNow.Add(-720 * time.Hour)},
	}
	// want: the index each query must use (alternatives separated by |),
	// or "Seq Scan" where none exists (documented).
	want := map[string]string{
		"openByState":     "proc_state_open|proc_state_state",
		"head":            "proc_state_open",
		"terminalByState": "proc_state_state",
		"deadByClass":     "proc_state_state",
		"deadRecent":      "proc_state_state|proc_state_dead",
		"deadOne":         "proc_state_pkey",
		"deadLatest":      "proc_state_dead",
		"deadLatestNull":  "proc_state_state|proc_state_dead",
		"skippedByReason": "proc_state_state",
		"backfillPending": "backfill_owed", // the queue itself, whole
		"abandoned":       "proc_state_abandoned",
		"cursor":          "inbox_cursor_pkey",
	}
	for name, q := range status.Queries {
		var plan []map[string]any
		err := pool.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+q, args[name]...).Scan(&plan)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var nodes []string
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			s := fmt.Sprint(n["Node Type"])
			if rel, ok := n["Relation Name"]; ok {
				s += " on " + fmt.Sprint(rel)
			}
			if ix, ok := n["Index Name"]; ok {
				s += " using " + fmt.Sprint(ix)
			}
			nodes = append(nodes, s)
			if kids, ok := n["Plans"].([]any); ok {
				for _, k := range kids {
					walk(k.(map[string]any))
				}
			}
		}
		walk(plan[0]["Plan"].(map[string]any))
		joined := strings.Join(nodes, " / ")
		t.Logf("%-16s %s", name, joined)
		w, ok := want[name]
		if !ok {
			continue // inbox_hole / inbox_late_row: a few rows, read whole
		}
		if !slices.ContainsFunc(strings.Split(w, "|"), func(ix string) bool { return strings.Contains(joined, ix) }) {
			t.Errorf("%s: plan %s does not use %s", name, joined, w)
		}
		if w != "Seq Scan" && strings.Contains(joined, "Seq Scan on proc_state") {
			t.Errorf("%s: plan %s scans proc_state sequentially", name, joined)
		}
	}
}
