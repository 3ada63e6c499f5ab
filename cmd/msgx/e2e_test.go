package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/testenv"
	"msgx/processors/flights"
	"msgx/processors/router"
	"msgx/sink/sinktest"
	"msgx/tables/sis"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// count runs a COUNT query; -1 when it fails (e.g. the schema is not
// migrated yet while waiting for start-up).
func count(t *testing.T, pool *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Logf("%s: %v", q, err)
		return -1
	}
	return n
}

// TestGatewayEndToEnd runs the whole gateway in-process on the demo day
// (testdata/demo.sql) and checks every output from outside: message states,
// the PostgreSQL read model, the msg and schd topics read by an independent
// Kafka client, the processed marks in the inbox, that delivering every
// inbox record again changes nothing, and an outbound request closed by its
// response.
func TestGatewayEndToEnd(t *testing.T) {
	cfg, myDSN := testConfig(t, map[string]string{
		"MSGX_SCHD_FLUSH_PERIOD": "200ms", "MSGX_BACKFILL_PERIOD": "300ms", "MSGX_REQUEST_CHECK_INTERVAL": "200ms",
	})
	my := sinktest.OpenMySQL(t, myDSN)
	demo, err := os.ReadFile("../../testdata/demo.sql")
	if err != nil {
		t.Fatal(err)
	}
	multi, err := sql.Open("mysql", myDSN+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer multi.Close()
	if _, err := multi.Exec(string(demo)); err != nil {
		t.Fatal(err)
	}
	brokers := []string{cfg.Kafka.EmbeddedAddr}
	stop := start(t, cfg)
	defer stop()
	pool := openPool(t, cfg)
	const n = 13
	waitFor(t, "every demo message terminal", time.Minute, func() bool {
		return count(t, pool, "SELECT COUNT(*) FROM proc_state WHERE state IN ('SUCCEEDED','SKIPPED','DEAD')") == n
	})

	// Message outcomes.
	got := map[int64]string{}
	rows, _ := pool.Query(context.Background(), "SELECT msg_id, state || ' ' || COALESCE(reason, '') FROM proc_state")
	for rows.Next() {
		var id int64
		var s string
		_ = rows.Scan(&id, &s)
		got[id] = strings.TrimSpace(s)
	}
	rows.Close()
	for id, want := range map[int64]string{1: "SUCCEEDED", 2: "SUCCEEDED", 5: "SUCCEEDED", 6: "SKIPPED duplicate-of:2",
		7: "SKIPPED ignored:LDM-*", 9: "SKIPPED unsupported:FLOP-BDPB", 10: "SKIPPED no-match", 12: "SUCCEEDED", 13: "SUCCEEDED"} {
		if got[id] != want {
			t.Errorf("message %d: %q, want %q", id, got[id], want)
		}
	}
	if !strings.HasPrefix(got[8], "DEAD") {
		t.Errorf("malformed message: %q", got[8])
	}

	// The read model.
	if c := count(t, pool, "SELECT COUNT(*) FROM flight_schd WHERE (flid, state) IN (('15','ACTIVE'),('16','DELETED'),('17','ACTIVE'))"); c != 3 {
		t.Fatalf("flight rows: %d of 3", c)
	}
	if c := count(t, pool, "SELECT COUNT(*) FROM flight_gtdt WHERE flid = '15'"); c != 2 {
		t.Fatalf("flight 15 has %d gates, want 2", c)
	}
	if c := count(t, pool, "SELECT COUNT(*) FROM flight_dely WHERE flid = '16' AND code = 'WX'"); c != 1 {
		t.Fatalf("flight 16 delays: %d", c)
	}
	waitFor(t, "flight 15 lists its shared flight 17", 30*time.Second, func() bool {
		return count(t, pool, `SELECT COUNT(*) FROM flight_schd WHERE flid = '15' AND doc->'mafl' @> '[{"FLID":"17"}]'`) == 1
	})
	if c := count(t, pool, "SELECT COUNT(*) FROM ref_master WHERE rtype = 'AIRL'"); c != 3 {
		t.Fatalf("AIRL records: %d", c)
	}
	var v15 int64
	_ = pool.QueryRow(context.Background(), "SELECT state_version FROM flight_schd WHERE flid = '15'").Scan(&v15)

	// msg: every version of every flight, read by an independent client.
	testenv.WaitCaughtUp(t, brokers, flights.BaseGroup, []string{"msgx.flight-transitions"}, time.Minute)
	events := map[string]bool{}
	var tombstone16 bool
	for _, r := range testenv.ReadTopic(t, brokers, "msgx.msg", 1<<20, 3*time.Second) {
		var ev struct {
			EventType    string `json:"eventType"`
			FLID         string `json:"flid"`
			StateVersion int64  `json:"stateVersion"`
		}
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatal(err)
		}
		events[fmt.Sprintf("%s@%d", ev.FLID, ev.StateVersion)] = true
		tombstone16 = tombstone16 || (ev.FLID == "16" && ev.EventType == "TOMBSTONE")
	}
	for v := int64(1); v <= v15; v++ {
		if !events[fmt.Sprintf("15@%d", v)] {
			t.Errorf("flight 15 version %d missing from msgx.msg", v)
		}
	}
	if !tombstone16 {
		t.Error("no TOMBSTONE for flight 16 on msgx.msg")
	}
	// schd: the latest state per FLID, a null value for the deleted flight.
	latest := map[string]*kgo.Record{}
	waitFor(t, "schd carries the latest version of 15, 16 and 17", 30*time.Second, func() bool {
		for _, r := range testenv.ReadTopic(t, brokers, "msgx.schd", 1<<20, time.Second) {
			latest[string(r.Key)] = r
		}
		var doc struct {
			StateVersion int64 `json:"stateVersion"`
		}
		if r := latest["15"]; r == nil || json.Unmarshal(r.Value, &doc) != nil || doc.StateVersion != v15 {
			return false
		}
		return latest["16"] != nil && latest["17"] != nil
	})
	if latest["16"].Value != nil {
		t.Fatalf("schd for deleted flight 16 is %s, want a tombstone", latest["16"].Value)
	}

	// Processed marks, within a few sweep periods.
	waitFor(t, "every inbox row marked processed", 30*time.Second, func() bool {
		var c int
		_ = my.QueryRow("SELECT COUNT(*) FROM cminmsgs WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL").Scan(&c)
		return c == n
	})

	// Every inbox record delivered again (as after an ingest crash) changes
	// nothing: the messages are finished.
	before := snapshot(t, pool)
	dupes := testenv.ReadTopic(t, brokers, "msgx.inbox", n, 10*time.Second)
	produce(t, brokers, dupes)
	testenv.WaitCaughtUp(t, brokers, router.BaseGroup, []string{"msgx.inbox"}, time.Minute)
	testenv.WaitCaughtUp(t, brokers, flights.BaseGroup, []string{"msgx.flight-transitions"}, time.Minute)
	if after := snapshot(t, pool); after != before {
		t.Fatalf("re-delivering the inbox changed state:\nbefore %s\nafter  %s", before, after)
	}

	// An RQRD written by `msgx request`, answered by an AIRL RESP.
	var out strings.Builder
	if err := runCommand(context.Background(), cfg, "request", []string{"refdata", "AIRL"}, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	var xmlOut string
	if err := my.QueryRow("SELECT COUTMSGS_CLOB_MSG FROM coutmsgs ORDER BY COUTMSGS_ID DESC LIMIT 1").Scan(&xmlOut); err != nil {
		t.Fatal(err)
	}
	req, err := sis.Decode([]byte(xmlOut), cfg.Location())
	if err != nil || req.Meta.SNDR != "MSGX" || req.Meta.TYPE != "RQRD" || req.Meta.STYP != "AIRL" {
		t.Fatalf("COUTMSGS row %q (%v)", xmlOut, err)
	}
	resp := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>990001</SEQN><DTTM>%s</DTTM><TYPE>AIRL</TYPE><STYP>RESP</STYP></META><RECS>1</RECS><AIRL><ITOP>MU</ITOP><ONAM>CHINA EASTERN</ONAM></AIRL></MSG>`,
		time.Now().In(cfg.Location()).Format("20060102150405"))
	testenv.InsertInbox(t, my, resp)
	waitFor(t, "the request DONE after its RESP was applied", 30*time.Second, func() bool {
		return count(t, pool, "SELECT COUNT(*) FROM req_track WHERE styp = 'AIRL' AND state = 'DONE'") == 1
	})
	if c := count(t, pool, "SELECT COUNT(*) FROM ref_master WHERE rtype = 'AIRL'"); c != 1 {
		t.Fatalf("the AIRL RESP did not replace the category: %d records", c)
	}
}

func snapshot(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT string_agg(msg_id || state || updated_at::text, ',' ORDER BY msg_id) FROM proc_state) ||
		(SELECT string_agg(flid || state_version || updated_at::text, ',' ORDER BY flid) FROM flight_schd)`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func produce(t *testing.T, brokers []string, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, r := range recs {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}
