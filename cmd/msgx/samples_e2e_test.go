package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"msgx/internal/contract"
	"msgx/internal/sample"
	"msgx/internal/testenv"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
)

// TestEverySampleEndToEnd runs every message of testdata/sis-samples through
// the whole gateway, as a new user would: each message with a SEQN of its
// own, the flights the FLOPs name created first. Every message must end
// SUCCEEDED except the two broken samples, and what the new families carry
// (A-CDM times, RUNW, FLAB, PORT, PSHT, TIPT, the seasonal schedule) must be
// readable from PostgreSQL, from the flight JSON and from the msg events.
func TestEverySampleEndToEnd(t *testing.T) {
	cfg, myDSN := testConfig(t, map[string]string{"MSGX_SCHD_FLUSH_PERIOD": "200ms"})
	my := sinktest.OpenMySQL(t, myDSN)
	samples, err := sample.Load(sample.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 172 {
		t.Fatalf("%d samples, want 172", len(samples))
	}

	// Inserted as `msgx samples` does: in sample.Ordered's order, each
	// with its own SEQN.
	order := sample.Ordered(samples)
	ids, err := insertSamples(context.Background(), sinktest.Tables(t, my, nil, "cminmsgs", 10*time.Second), order, 700000)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]sample.Sample{}
	idOf := map[string]int64{}
	for i, s := range order {
		byID[ids[i]] = s
		idOf[s.Name()] = ids[i]
	}
	stop := start(t, cfg)
	defer stop()
	pool := openPool(t, cfg)
	ctx := context.Background()
	n := len(order)
	waitFor(t, "every sample terminal", 2*time.Minute, func() bool {
		return count(t, pool, "SELECT COUNT(*) FROM proc_state WHERE state IN ('SUCCEEDED','SKIPPED','DEAD')") == n
	})

	// Every outcome, and the outcome table.
	want := map[string]string{
		"INSERT_CMINMSGS_ABNR.sql#2(ADD)":  "DEAD MALFORMED", // </MSG> twice
		"INSERT_CMINMSGS_AIRC.sql#0(DNLD)": "DEAD PROTOCOL",  // RECS=1, 2 records
	}
	table := map[string]int{}
	rows, err := pool.Query(ctx, "SELECT msg_id, state, COALESCE(error_class, ''), COALESCE(reason, '') FROM proc_state")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var state, class, reason string
		if err := rows.Scan(&id, &state, &class, &reason); err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSpace(state + " " + class)
		table[got]++
		s := byID[id]
		w, ok := want[s.Name()]
		if !ok {
			w = "SUCCEEDED"
		}
		if got != w {
			t.Errorf("%s (message %d): %s %q, want %s", s.Name(), id, got, reason, w)
		}
	}
	rows.Close()
	var lines []string
	for k, v := range table {
		lines = append(lines, fmt.Sprintf("%-16s %d", k, v))
	}
	sort.Strings(lines)
	t.Logf("outcomes of %d messages (172 samples + 1 creating DNLD):\n%s", n, strings.Join(lines, "\n"))

	// PostgreSQL: the new columns and collection tables.
	expect := func(sql string, want string) {
		t.Helper()
		var got string
		if err := pool.QueryRow(ctx, sql).Scan(&got); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if got != want {
			t.Errorf("%s\n got %s\nwant %s", sql, got, want)
		}
	}
	expect(`SELECT concat_ws('|', cobt, ctot, eobt, COALESCE(tobt, '-'), iest, runw, potm, poid) FROM flight_schd WHERE flid = '121112312'`,
		"10AUG181840|10AUG181855|10AUG181335|-|10AUG181855|02L|10AUG181855|O")
	expect(`SELECT string_agg(concat_ws('|', ordinal, source_seq, pstm, psid, pust), ',' ORDER BY ordinal) FROM flight_psht WHERE flid = '121112312'`,
		"1|1|10AUG181346|IN|504")
	expect(`SELECT string_agg(concat_ws('|', ordinal, COALESCE(source_seq, '-'), trtm, trst), ',' ORDER BY ordinal) FROM flight_tipt WHERE flid = '15'`,
		"1|-|10AUG181350|503,2|-|10AUG181344|504")
	// FLAB: set, then cleared twice (ARES="" with no text, then empty).
	expect(`SELECT concat_ws('|', state, COALESCE(flab, '-'), COALESCE(ares, '-')) FROM flight_schd WHERE flid = '15'`, "DELETED|-|-")

	// The flight JSON as stored (doc) carries the same values.
	var doc []byte
	if err := pool.QueryRow(ctx, "SELECT doc FROM flight_schd WHERE flid = '121112312'").Scan(&doc); err != nil {
		t.Fatal(err)
	}
	var f flight.State
	if err := json.Unmarshal(doc, &f); err != nil {
		t.Fatal(err)
	}
	for tag, v := range map[string]string{"COBT": "10AUG181840", "CTOT": "10AUG181855", "EOBT": "10AUG181335", "IEST": "10AUG181855",
		"RUNW": "02L", "POTM": "10AUG181855", "POID": "O"} {
		if f.Fields[tag] != v {
			t.Errorf("flight 121112312 JSON %s = %q, want %q", tag, f.Fields[tag], v)
		}
	}
	if _, ok := f.Fields["TOBT"]; ok {
		t.Errorf("FLOP-TOBT without a TOBT set one: %v", f.Fields)
	}
	if p := f.Collections["PSHT"]; len(p) != 1 || p[0]["PSHN"] != "1" || p[0]["PUST"] != "504" {
		t.Errorf("flight 121112312 JSON PSHT = %v", p)
	}

	// The msg events, read by an independent client: each change of a new
	// family is announced with the flight JSON after it.
	waitFor(t, "the event outbox drained", time.Minute, func() bool {
		return count(t, pool, "SELECT COUNT(*) FROM event_outbox") == 0
	})
	events := map[int64][]flight.Event{}
	for _, r := range testenv.ReadTopic(t, []string{cfg.Kafka.EmbeddedAddr}, "msgx.msg", 1<<20, 3*time.Second) {
		var ev flight.Event
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatal(err)
		}
		events[ev.MsgID] = append(events[ev.MsgID], ev)
	}
	// changedTags is an event's change list without FFID, which the samples
	// vary from one message to the next.
	changedTags := func(ev flight.Event) string {
		var out []string
		for _, c := range ev.Changed {
			if c != "FFID" {
				out = append(out, c)
			}
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		sample  string
		changed string
		fields  map[string]string // "" = absent
		coll    string
		n       int
	}{
		{sample: "INSERT_CMINMSGS_COBT.sql#0(UPD)", changed: "COBT", fields: map[string]string{"COBT": "10AUG181840"}},
		{sample: "INSERT_CMINMSGS_CTOT.sql#0(UPD)", changed: "CTOT", fields: map[string]string{"CTOT": "10AUG181855"}},
		{sample: "INSERT_CMINMSGS_EOBT.sql#0(UPD)", changed: "EOBT", fields: map[string]string{"EOBT": "10AUG181335"}},
		{sample: "INSERT_CMINMSGS_IEST.sql#0(UPD)", changed: "IEST", fields: map[string]string{"IEST": "10AUG181855"}},
		{sample: "INSERT_CMINMSGS_RUNW.sql#0(UPD)", changed: "RUNW", fields: map[string]string{"RUNW": "02L"}},
		{sample: "INSERT_CMINMSGS_FLAB.sql#0(UPD)", changed: "FLAB,ARES", fields: map[string]string{"FLAB": "POOR VISIBILITY", "ARES": "G"}},
		{sample: "INSERT_CMINMSGS_FLAB.sql#1(UPD)", changed: "FLAB,ARES", fields: map[string]string{"FLAB": "", "ARES": ""}},
		{sample: "INSERT_CMINMSGS_PORT.sql#0(UPD)", changed: "POTM,POID", fields: map[string]string{"POTM": "10AUG181855", "POID": "O"}},
		{sample: "INSERT_CMINMSGS_PSHT.sql#0(UPD)", changed: "PSHT", coll: "PSHT", n: 1},
		{sample: "INSERT_CMINMSGS_TIPT.sql#0(UPD)", changed: "TIPT", coll: "TIPT", n: 2},
		// Nothing but its identity: the time is neither set nor cleared.
		{sample: "INSERT_CMINMSGS_TOBT.sql#0(UPD)", changed: "", fields: map[string]string{"TOBT": ""}},
	} {
		evs := events[idOf[tc.sample]]
		if len(evs) != 1 {
			t.Errorf("%s: %d events, want 1", tc.sample, len(evs))
			continue
		}
		ev := evs[0]
		if changedTags(ev) != tc.changed || ev.Source != "FLOP-"+tc.sample[16:20] {
			t.Errorf("%s: event source %s changed %v, want %s", tc.sample, ev.Source, ev.Changed, tc.changed)
		}
		for tag, v := range tc.fields {
			if got, ok := ev.Flight.Fields[tag]; got != v || ok != (v != "") {
				t.Errorf("%s: event flight %s = %q (%v), want %q", tc.sample, tag, got, ok, v)
			}
		}
		if tc.coll != "" && len(ev.Flight.Collections[tc.coll]) != tc.n {
			t.Errorf("%s: event flight %s = %v, want %d entries", tc.sample, tc.coll, ev.Flight.Collections[tc.coll], tc.n)
		}
	}
	// Every record the samples produced is what deploy/schemas promises.
	contracts, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	validateTopics(t, contracts, []string{cfg.Kafka.EmbeddedAddr})

	// The second FLAB clear changes nothing: SUCCEEDED, no event.
	if evs := events[idOf["INSERT_CMINMSGS_FLAB.sql#2(UPD)"]]; len(evs) != 0 {
		t.Errorf("a repeated FLAB clear emitted %+v", evs)
	}

	// The seasonal schedule: one reference record per season in ref_master,
	// the RESP (applied last) replacing the DNLD's season; no flight.
	expect(`SELECT concat_ws('|', count(*), min(rkey), min(attributes->>'APCD'), min(jsonb_array_length(attributes->'FLTR')),
		min(attributes->'FLTR'->0->>'STDT'), min(attributes->'FLTR'->0->'ROUT'->1->>'SCAT'), min(attributes->'FLTR'->1->'ERUT'->0->>'SCDT'))
		FROM ref_master WHERE rtype = 'SCHS'`, "1|Winter|CTU|2|14NOV20|1125|23NOV200325")
	if c := count(t, pool, "SELECT COUNT(*) FROM flight_schd WHERE flno IN ('LH724', 'CA002')"); c != 0 {
		t.Errorf("the seasonal schedule created %d flights", c)
	}
	// ... and readable like reference data through `msgx table`.
	var out strings.Builder
	if err := runCommand(ctx, cfg, "table", []string{"list", "refdata", "SCHS"}, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	var seasons []struct {
		Key   string         `json:"key"`
		Attrs map[string]any `json:"attrs"`
	}
	if err := json.Unmarshal([]byte(out.String()), &seasons); err != nil || len(seasons) != 1 || seasons[0].Key != "Winter" {
		t.Fatalf("msgx table list refdata SCHS: %v\n%s", err, out.String())
	}
	if fltr, _ := seasons[0].Attrs["FLTR"].([]any); len(fltr) != 2 {
		t.Fatalf("season Winter in the table: %v", seasons[0].Attrs)
	}
}

// msgx samples inserts every sample, each with its own SEQN, and says where
// they went; it refuses a production deployment.
func TestSamplesCommand(t *testing.T) {
	cfg, myDSN := testConfig(t, nil)
	ctx := context.Background()
	var out strings.Builder
	if err := runCommand(ctx, cfg, "samples", nil, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	my := sinktest.OpenMySQL(t, myDSN)
	var rows, seqns int
	if err := my.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT REGEXP_SUBSTR(CMINMSGS_CLOB_MSG, '<SEQN>[0-9]+</SEQN>')) FROM cminmsgs`).
		Scan(&rows, &seqns); err != nil {
		t.Fatal(err)
	}
	if rows != 173 || seqns != 173 || !strings.HasPrefix(out.String(), "inserted 173 sample messages from ") ||
		!strings.Contains(out.String(), "as inbox rows 1-173") || !strings.Contains(out.String(), "msgx trace <MSG_ID>") {
		t.Errorf("%d rows, %d SEQNs; output:\n%s", rows, seqns, out.String())
	}
	cfg.Env = "production"
	if err := runCommand(ctx, cfg, "samples", nil, &out, testenv.Logger(t)); err == nil || !strings.Contains(err.Error(), "development inboxes only") {
		t.Errorf("msgx samples in production: %v", err)
	}
}
