package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"

	"msgx/internal/kafka"
	"msgx/internal/sample"
	"msgx/internal/testenv"
	"msgx/internal/workload"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
	"msgx/tables/refdata"
)

// state is everything a rebuild must reproduce: the derived PostgreSQL
// tables (without the wall-clock columns a new run sets again) and the goka
// tables.
func rebuildState(t *testing.T, cfg Config, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, q := range map[string]string{
		"proc_state": `SELECT msg_id, state, identity_key, error_class, reason, n_transitions, n_applied, enqueued_at, attempts
			FROM proc_state ORDER BY msg_id`,
		"flight_schd":   `SELECT flid, state, state_version, last_msg_id, operation_day, doc FROM flight_schd ORDER BY flid`,
		"flight_gtdt":   `SELECT flid, ordinal, source_seq, gate, pgot FROM flight_gtdt ORDER BY flid, ordinal`,
		"flight_route":  `SELECT flid, route_kind, ordinal, apcd FROM flight_route_point ORDER BY 1, 2, 3`,
		"ref_master":    `SELECT rtype, rkey, attributes, updated_at, last_msg_id FROM ref_master ORDER BY rtype, rkey`,
		"flight_index":  `SELECT flid, operation_day, first_msg_id, state, maid, flno FROM flight_index ORDER BY flid`,
		"refdata_keys":  `SELECT rtype, key_tag, msg_id FROM refdata_key_index ORDER BY rtype`,
		"transitions":   `SELECT msg_id, kind, key, outcome, state_version FROM transition_applied ORDER BY 1, 2, 3`,
		"flight_change": `SELECT flid, state_version, msg_id, source, state, changed, at FROM flight_change ORDER BY 1, 2`,
		"placeholders":  `SELECT flid, last_msg_id, table_state FROM flight_placeholder ORDER BY flid`,
		"schd_snap_log": `SELECT msg_id, styp, operation_days, flights FROM schd_snap_log ORDER BY msg_id`,
	} {
		rows, err := pool.Query(context.Background(), q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var lines []string
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(vals)
			lines = append(lines, string(b))
		}
		rows.Close()
		out[name] = strings.Join(lines, "\n")
	}
	brokers := brokersOf(cfg)
	for _, tbl := range []struct {
		table goka.Table
		codec goka.Codec
	}{{cfg.Flights.Table(), kafka.JSON[flight.State]{}}, {cfg.Refdata.Table(), kafka.JSON[refdata.State]{}}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := kafka.ReadTable(ctx, brokers, cfg.Kafka, tbl.table, tbl.codec, testenv.Logger(t), func(v *goka.View) error {
			it, err := v.Iterator()
			if err != nil {
				return err
			}
			var lines []string
			for it.Next() {
				val, err := it.Value()
				if err != nil {
					return err
				}
				b, _ := json.Marshal(val)
				lines = append(lines, it.Key()+"="+string(b))
			}
			sort.Strings(lines)
			out[string(tbl.table)] = strings.Join(lines, "\n")
			return nil
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRebuildReproducesState processes a codeshare-heavy day of messages
// on Apache Kafka, stops the daemon, rebuilds everything from msgx.inbox
// and compares: every decision, flight, collection, version history line,
// placeholder, index entry, applied mark and goka table value.
func TestRebuildReproducesState(t *testing.T) {
	t.Parallel() // a long run of the binary: beside the others
	cfg, myDSN := testConfig(t, onKafka(testenv.RealKafka(t)))
	my := sinktest.OpenMySQL(t, myDSN)
	for _, m := range workload.Day(workload.Options{Seed: 3, Flights: 120, Ops: 1200, Codeshare: true}) {
		testenv.InsertInbox(t, my, m)
	}
	samples, err := sample.Load(sample.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if strings.HasPrefix(s.File, "INSERT_CMINMSGS_AIRL") || strings.HasPrefix(s.File, "INSERT_CMINMSGS_CLST") ||
			strings.HasPrefix(s.File, "INSERT_CMINMSGS_ABDG") {
			testenv.InsertInbox(t, my, strings.Replace(s.XML, "<SEQN>1243</SEQN>", fmt.Sprintf("<SEQN>%d</SEQN>", 800000+s.Index), 1))
		}
	}
	// A shared flight whose master never comes: a placeholder to rebuild.
	testenv.InsertInbox(t, my, `<MSG><META><SNDR>AODB</SNDR><SEQN>900002</SEQN><DTTM>20210123060000</DTTM><TYPE>SCHD</TYPE><STYP>ADFT</STYP></META>`+
		`<SCHD><RECS>1</RECS><FLTR><FLID>990001</FLID><FLNO>MU9901</FLNO><SODT>23JAN210900</SODT><MAID>990000</MAID></FLTR></SCHD></MSG>`)
	// A message the codec cannot handle is DEAD at once, in the run and in
	// the rebuild alike: neither sleeps through the backoffs it used to be
	// retried with (1+2+4+8 s), and the row is the same.
	codec := testenv.InsertInbox(t, my, `<MSG><META><SNDR>AODB</SNDR><SEQN>900001</SEQN><DTTM>2026-11-30</DTTM><TYPE>FLOP</TYPE><STYP>ESTT</STYP></META>`+
		`<FLOP><FLID>1</FLID><ESTT>23JAN210600</ESTT></FLOP></MSG>`)
	var total int
	if err := my.QueryRow("SELECT COUNT(*) FROM cminmsgs").Scan(&total); err != nil {
		t.Fatal(err)
	}
	brokers := brokersOf(cfg)
	stop := start(t, cfg)
	pool := openPool(t, cfg)
	waitFor(t, "every message terminal", 2*time.Minute, func() bool {
		return count(t, pool, "SELECT COUNT(*) FROM proc_state WHERE state IN ('SUCCEEDED','SKIPPED','DEAD')") == total
	})
	testenv.WaitCaughtUp(t, brokers, string(cfg.Flights.Group()), []string{cfg.Router.FlightTopic}, time.Minute)
	testenv.WaitCaughtUp(t, brokers, string(cfg.Refdata.Group()), []string{cfg.Router.RefdataTopic}, time.Minute)
	testenv.WaitCaughtUp(t, brokers, string(cfg.Router.Group()), []string{cfg.Ingest.Topic}, time.Minute)
	stop()
	wantCodecDead(t, pool, codec)

	before := rebuildState(t, cfg, pool)
	for name, v := range before {
		n := strings.Count(v, "\n") + 1
		if v == "" || (name == "flight_schd" && n < 100) {
			t.Fatalf("%s: nothing to rebuild (%d rows)", name, n)
		}
		t.Logf("%s: %d rows to reproduce", name, n)
	}

	var out strings.Builder
	if err := runCommand(context.Background(), cfg, "rebuild", []string{"--yes"}, &out, testenv.Logger(t)); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("%d/%d messages", total, total)) || !strings.Contains(out.String(), "rebuild: done") {
		t.Fatalf("no progress reaching %d/%d:\n%s", total, total, out.String())
	}
	after := rebuildState(t, cfg, pool)
	wantCodecDead(t, pool, codec)
	assertIndexFollowsTable(t, pool, brokers, cfg.Kafka.Prefix)
	for name, want := range before {
		if after[name] != want {
			t.Errorf("%s differs after rebuild:\n%s", name, lineDiff(want, after[name]))
		}
	}
}

func wantCodecDead(t *testing.T, pool *pgxpool.Pool, id int64) {
	t.Helper()
	var state, class string
	var attempts int
	if err := pool.QueryRow(context.Background(), `SELECT state, error_class, attempts FROM proc_state WHERE msg_id = $1`, id).
		Scan(&state, &class, &attempts); err != nil {
		t.Fatal(err)
	}
	if state != "DEAD" || class != "CODEC_ERROR" || attempts != 0 {
		t.Fatalf("codec error %d is %s %s after %d attempts, want DEAD CODEC_ERROR at once", id, state, class, attempts)
	}
}

// lineDiff lists the lines only one of before and after has (at most 20).
func lineDiff(before, after string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	b, a := count(before), count(after)
	var out []string
	for l, n := range b {
		if a[l] < n {
			out = append(out, "- "+l)
		}
	}
	for l, n := range a {
		if b[l] < n {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out[:min(len(out), 20)], "\n")
}
