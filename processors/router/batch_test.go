package router

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"msgx/ingest"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/internal/workload"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/refdata"
	"msgx/tables/route"
	"msgx/tables/route/routetest"
)

// batchRig drives the batch worker directly (no goka consumer), so that
// many messages can be put in one batch, against a real PostgreSQL; what
// the worker produces goes to goka's tester queues.
type batchRig struct {
	t     *testing.T
	r     *Router
	w     *worker
	msgs  *sink.Messages
	clock *clock.Fake
	out   map[string]*tester.QueueTracker
	mu    sync.Mutex
	// committed lists the MSG_IDs whose deferred commit was called with
	// nil, in call order; failed those called with an error.
	committed []int64
	failed    []int64
}

func newBatchRig(t *testing.T, mut func(*Config)) *batchRig {
	t.Helper()
	return newBatchRigOn(t, mut, sinktest.NewPG(t))
}

func newBatchRigOn(t *testing.T, mut func(*Config), dsn string) *batchRig {
	t.Helper()
	cfg := testConfig()
	if mut != nil {
		mut(&cfg)
	}
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: dsn, Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	br := &batchRig{t: t, msgs: sink.NewMessages(pool, 10*time.Second), clock: clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)),
		out: map[string]*tester.QueueTracker{}}
	if br.r, err = New(cfg, Deps{Messages: br.msgs, Clock: br.clock, Log: testenv.Logger(t), Loc: routetest.Shanghai}); err != nil {
		t.Fatal(err)
	}
	tt := tester.New(t)
	for topic, codec := range map[string]goka.Codec{cfg.FlightTopic: kafka.JSON[flight.Transition]{},
		cfg.RefdataTopic: kafka.JSON[refdata.Transition]{}, string(cfg.Table()): kafka.JSON[Entry]{}} {
		tt.RegisterEmitter(goka.Stream(topic), codec)
		br.out[topic] = tt.NewQueueTracker(topic)
	}
	prod, err := tt.ProducerBuilder()(nil, "test", goka.DefaultHasher())
	if err != nil {
		t.Fatal(err)
	}
	br.w = newWorker(br.r, prod)
	return br
}

// item is an inbox record for the worker, as the callback queues it.
func (br *batchRig) item(id int64, raw string) item {
	rec := &ingest.Record{MsgID: id, EnqueuedAt: br.clock.Now(), Raw: raw}
	return item{rec: rec, plan: br.r.prepare(rec), delivered: br.clock.Now(), done: func(err error) {
		br.mu.Lock()
		defer br.mu.Unlock()
		if err != nil {
			br.failed = append(br.failed, id)
		} else {
			br.committed = append(br.committed, id)
		}
	}}
}

// run decides the records as batches of the given sizes, in order.
func (br *batchRig) run(raws []string, sizes ...int) {
	br.t.Helper()
	var items []item
	for i, raw := range raws {
		items = append(items, br.item(int64(i+1), raw))
	}
	for _, n := range sizes {
		if err := br.process(context.Background(), items[:n]); err != nil {
			br.t.Fatal(err)
		}
		items = items[n:]
	}
	if len(items) > 0 {
		br.t.Fatalf("%d records left", len(items))
	}
}

// state is everything the router leaves: rows, indexes and what it
// produced, in order, as comparable text.
func (br *batchRig) state() []string {
	br.t.Helper()
	ctx := context.Background()
	var out []string
	rows, err := br.msgs.Pool().Query(ctx, `SELECT msg_id, state, COALESCE(identity_key, '-'), COALESCE(error_class, '-'),
		COALESCE(reason, '-'), COALESCE(n_transitions, -1), routed_at IS NOT NULL, backfill_next_at IS NOT NULL, replay_gen
		FROM proc_state ORDER BY msg_id`)
	if err != nil {
		br.t.Fatal(err)
	}
	for rows.Next() {
		var id, gen int64
		var state, key, class, reason string
		var n int
		var routed, backfill bool
		if err := rows.Scan(&id, &state, &key, &class, &reason, &n, &routed, &backfill, &gen); err != nil {
			br.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("row %d %s %s %s %q n=%d routed=%v backfill=%v gen=%d", id, state, key, class, reason, n, routed, backfill, gen))
	}
	rows.Close()
	rows, err = br.msgs.Pool().Query(ctx, `SELECT flid, COALESCE(operation_day::text, '-'), first_msg_id, COALESCE(state, '-'),
		COALESCE(maid, '-'), COALESCE(flno, '-') FROM flight_index ORDER BY flid`)
	if err != nil {
		br.t.Fatal(err)
	}
	for rows.Next() {
		var flid, day, state, maid, flno string
		var first int64
		if err := rows.Scan(&flid, &day, &first, &state, &maid, &flno); err != nil {
			br.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("index %s %s by %d: %s maid %s flno %s", flid, day, first, state, maid, flno))
	}
	rows.Close()
	rows, err = br.msgs.Pool().Query(ctx, `SELECT msg_id, flight_plan::text FROM proc_state WHERE flight_plan IS NOT NULL ORDER BY msg_id`)
	if err != nil {
		br.t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var plan string
		if err := rows.Scan(&id, &plan); err != nil {
			br.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("plan %d %s", id, plan))
	}
	rows.Close()
	// The schedule trace: written with a batch's decisions, or alone after
	// a message decided alone (sink.AppendSnapLogTx, AppendSnapLog).
	rows, err = br.msgs.Pool().Query(ctx, `SELECT msg_id, styp, operation_days::text, flights, recv_at, scope_end::text
		FROM schd_snap_log ORDER BY msg_id`)
	if err != nil {
		br.t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var styp, days, scope string
		var n int
		var recv time.Time
		if err := rows.Scan(&id, &styp, &days, &n, &recv, &scope); err != nil {
			br.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("snap %d %s days %s flights %d recv %s scope %s", id, styp, days, n, recv.UTC().Format(time.RFC3339), scope))
	}
	rows.Close()
	rows, err = br.msgs.Pool().Query(ctx, `SELECT rtype, key_tag, msg_id FROM refdata_key_index ORDER BY rtype`)
	if err != nil {
		br.t.Fatal(err)
	}
	for rows.Next() {
		var rtype, tag string
		var by int64
		if err := rows.Scan(&rtype, &tag, &by); err != nil {
			br.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("key %s %s by %d", rtype, tag, by))
	}
	rows.Close()
	topics := make([]string, 0, len(br.out))
	for topic := range br.out {
		topics = append(topics, topic)
	}
	sort.Strings(topics)
	for _, topic := range topics {
		for {
			k, v, ok := br.out[topic].Next()
			if !ok {
				break
			}
			if e, isEntry := v.(*Entry); isEntry {
				v = e.State + " " + e.Reason // the rest is the row's
			}
			b, _ := json.Marshal(v)
			out = append(out, fmt.Sprintf("%s %s %s", topic, k, b))
		}
	}
	return out
}

// batchCase is a backlog whose messages depend on each other through the
// router's own writes: identities, the flight index, the key-tag index and
// a MSG_ID delivered twice.
func batchCase(t *testing.T) []string {
	return []string{
		routetest.Dnld(2, routetest.Fltr("15", "23JAN210535", ""), routetest.Fltr("16", "23JAN210535", "")),           // 1: indexes 15 and 16
		flop("10", "15", "ESTT", "<ESTT>23JAN210600</ESTT>"),                                                          // 2: 15 is known from 1
		flop("10", "15", "ESTT", "<ESTT>23JAN210610</ESTT>"),                                                          // 3: duplicate of 2
		flop("11", "404", "ESTT", "<ESTT>23JAN210600</ESTT>"),                                                         // 4: no-match
		routetest.Msg("SCHD", "ADFT", "12", "<SCHD>"+routetest.Fltr("30", "-", "<ESTT>23JAN210600</ESTT>")+"</SCHD>"), // 5: 30 without a day
		routetest.Msg("SCHD", "ADFT", "13", "<SCHD>"+routetest.Fltr("30", "24JAN210535", "")+"</SCHD>"),               // 6: gives 30 its day
		strings.Replace(routetest.Dnld(1, routetest.Fltr("30", "25JAN210535", "")), "<SEQN>77<", "<SEQN>79<", 1),      // 7: conflicts with 6's day
		routetest.Abdg("DNLD", "ABCD"),                       // 8: keys ABDG by ABCD
		routetest.Abdg("UPD", "DESC"),                        // 9: keyed otherwise
		routetest.Abdg("RESP", "DESC"),                       // 10: re-keys
		routetest.Abdg("DEL", "DESC"),                        // 11: fine now
		"not xml at all",                                     // 12
		routetest.Msg("LDM", "X", "1", "<LDM/>"),             // 13
		flop("14", "16", "ESTT", "<ESTT>23JAN210600</ESTT>"), // 14
	}
}

// A backlog decided in batches leaves exactly what it leaves decided one
// message at a time: every decision in a batch sees the ones before it.
func TestBatchDecidesAsOneByOne(t *testing.T) {
	for _, absent := range []string{"keep", "delete"} {
		t.Run(absent, func(t *testing.T) {
			mut := func(c *Config) { c.ScheduleAbsent = absent }
			raws := batchCase(t)
			if absent == "delete" {
				// A later package of day 23 without 16 deletes it.
				raws = append(raws, strings.Replace(routetest.Dnld(1, routetest.Fltr("15", "23JAN210535", "")), "<SEQN>77<", "<SEQN>80<", 1))
			}
			ones := make([]int, len(raws))
			for i := range ones {
				ones[i] = 1
			}
			want := newBatchRig(t, mut)
			want.run(raws, ones...)
			got := newBatchRig(t, mut)
			got.run(raws, len(raws))
			w, g := want.state(), got.state()
			if strings.Join(w, "\n") != strings.Join(g, "\n") {
				t.Errorf("one batch leaves\n%s\n\none by one leaves\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
			}
			if got.r.Stats().Batches != 1 {
				t.Errorf("%d batches, want 1", got.r.Stats().Batches)
			}
			if len(got.committed) != len(raws) || len(got.failed) != 0 {
				t.Fatalf("committed %v, failed %v", got.committed, got.failed)
			}
			for i, id := range got.committed {
				if id != int64(i+1) {
					t.Fatalf("offsets committed out of order: %v", got.committed)
				}
			}
		})
	}
}

// codeshareCase is a backlog of shared flights whose transitions depend on
// the router's flight index: children before their masters, a child's FLNO
// and MAID changes, a master deleted with a child and a grandchild, a LINK
// to a deleted master, a child's own deletion.
func codeshareCase() []string {
	maid := func(m string) string { return "<FLNO>C" + m + "</FLNO><MAID>" + m + "</MAID>" }
	return []string{
		routetest.Dnld(3, routetest.Fltr("21", "23JAN210535", maid("10")), routetest.Fltr("10", "23JAN210535", "<FLNO>CA10</FLNO>"),
			routetest.Fltr("22", "23JAN210535", maid("10"))), // 1: a child before its master, one after
		flop("2", "21", "FLNO", "<FLNO>MU21</FLNO>"),                                                                              // 2: a LINK with the new FLNO
		flop("3", "22", "MAID", "<MAID>11</MAID>"),                                                                                // 3: moves to 11, a placeholder
		routetest.Msg("SCHD", "ADFT", "4", "<SCHD>"+routetest.Fltr("23", "23JAN210535", maid("21"))+"</SCHD>"),                    // 4: a grandchild of 10
		flop("5", "10", "FDEL", ""),                                                                                               // 5: cascades to 21, then 23
		routetest.Msg("SCHD", "ADFT", "6", "<SCHD>"+routetest.Fltr("24", "23JAN210535", maid("10"))+"</SCHD>"),                    // 6: links to the deleted 10
		flop("7", "22", "FDEL", ""),                                                                                               // 7: leaves 11's placeholder
		routetest.Dnld(1, routetest.Fltr("10", "23JAN210535", "<FLNO>CA10</FLNO>")),                                               // 8: 10 again (SEQN 77: a duplicate)
		strings.Replace(routetest.Dnld(1, routetest.Fltr("10", "23JAN210535", "<FLNO>CA10</FLNO>")), "<SEQN>77<", "<SEQN>81<", 1), // 9: 10 revived
		routetest.Msg("SCHD", "ADFT", "10", "<SCHD>"+routetest.Fltr("25", "23JAN210535", "<FLNO>CA25</FLNO>")+"</SCHD>"),          // 10
		routetest.Msg("SCHD", "ADFT", "11", "<SCHD>"+routetest.Fltr("26", "23JAN210535", maid("25"))+"</SCHD>"),                   // 11: a child of 25
		flop("12", "25", "MAID", "<MAID>10</MAID>"),                                                                               // 12: 25 (with its child) goes under 10
		flop("13", "10", "FDEL", ""),                                                                                              // 13: cascades to 25, then to 26
	}
}

// codeshareSplit is where codeshareCase is cut into two batches: the second
// re-links a flight with a child under a master it then deletes, while the
// store knows only the child's old link.
const codeshareSplit = 11

// The codeshare transitions of a backlog are the same whether it is decided
// message by message on the per-message path, one per batch or all in one
// batch: each decision reads the links the ones before it left.
func TestBatchCodeshareAsOneByOne(t *testing.T) {
	for _, absent := range []string{"keep", "delete"} {
		t.Run(absent, func(t *testing.T) {
			mut := func(c *Config) { c.ScheduleAbsent = absent }
			raws := codeshareCase()
			if absent == "delete" {
				// A package of day 23 carrying 24 only: 10 and the rest
				// are absent, and 10's deletion cascades to 24.
				raws = append(raws, strings.Replace(routetest.Dnld(1, routetest.Fltr("24", "23JAN210535", "<FLNO>C10</FLNO><MAID>10</MAID>")), "<SEQN>77<", "<SEQN>82<", 1))
			}
			single := newBatchRig(t, mut)
			for i, raw := range raws {
				if err := single.w.single(context.Background(), single.item(int64(i+1), raw)); err != nil {
					t.Fatal(err)
				}
			}
			ones := make([]int, len(raws))
			for i := range ones {
				ones[i] = 1
			}
			one := newBatchRig(t, mut)
			one.run(raws, ones...)
			all := newBatchRig(t, mut)
			all.run(raws, len(raws))
			split := newBatchRig(t, mut)
			split.run(raws, codeshareSplit, len(raws)-codeshareSplit)
			s, o, a, sp := strings.Join(single.state(), "\n"), strings.Join(one.state(), "\n"), strings.Join(all.state(), "\n"),
				strings.Join(split.state(), "\n")
			if s != o || o != a || a != sp {
				t.Fatalf("per message\n%s\n\none per batch\n%s\n\none batch\n%s\n\ntwo batches\n%s", s, o, a, sp)
			}
			for _, want := range []string{
				"index 21 2021-01-23 by 1: DELETED maid 10 flno MU21", "index 23 2021-01-23 by 4: DELETED maid 21 flno C21",
				"index 22 2021-01-23 by 1: DELETED maid 11 flno C10", "index 26 2021-01-23 by 11: DELETED maid 25 flno C25",
				`msgx.flight-transitions 11 {"msgId":7,"source":"DERIVED-LINK","kind":"LINK","flid":"11","at":`,
			} {
				if !strings.Contains(a, want) {
					t.Errorf("missing %q in\n%s", want, a)
				}
			}
		})
	}
}

// A master created and deleted in one batch cascades to the child that was
// indexed before it (in an earlier batch): the batch reads the index before
// any of its decisions, when the master has no entry yet, and must still
// find the children naming it.
func TestBatchCascadeOfAMasterCreatedInTheBatch(t *testing.T) {
	raws := []string{
		routetest.Dnld(1, routetest.Fltr("21", "23JAN210535", "<FLNO>C10</FLNO><MAID>10</MAID>")),                       // 1: the child first
		routetest.Msg("SCHD", "ADFT", "2", "<SCHD>"+routetest.Fltr("10", "23JAN210535", "<FLNO>CA10</FLNO>")+"</SCHD>"), // 2: its master
		flop("3", "10", "FDEL", ""), // 3: deletes the master: cascades to 21
	}
	one := newBatchRig(t, nil)
	one.run(raws, 1, 1, 1)
	split := newBatchRig(t, nil)
	split.run(raws, 1, 2)
	o, sp := strings.Join(one.state(), "\n"), strings.Join(split.state(), "\n")
	if o != sp {
		t.Fatalf("one per batch\n%s\n\nthe master's creation and deletion in one batch\n%s", o, sp)
	}
	for _, want := range []string{"row 3 ROUTED AODB|FLOP|FDEL|3 - \"-\" n=2", "index 21 2021-01-23 by 1: DELETED maid 10 flno C10"} {
		if !strings.Contains(sp, want) {
			t.Errorf("missing %q in\n%s", want, sp)
		}
	}
}

// However a codeshare-heavy day is cut into batches, every decision and
// every index entry equals the serial store's (an Overlay started empty,
// as internal/serial uses it): a batch's overlay must hold every entry its
// decisions read.
func TestBatchingsOfACodeshareDay(t *testing.T) {
	if testing.Short() {
		t.Skip("a few hundred messages, several times")
	}
	msgs := workload.Day(workload.Options{Seed: 5, Flights: 300, Ops: 2500, Codeshare: true})[:800]
	// The serial store's decisions and index entries, in batchRig.state's
	// words.
	type decision struct {
		state string
		n     int
	}
	set := testConfig().Settings(routetest.Shanghai)
	mem := route.NewOverlay(message.BatchLookups{})
	want := map[int64]decision{}
	flids := map[string]bool{}
	for i, raw := range msgs {
		id := int64(i + 1)
		p := route.Prepare(id, raw, set)
		v := route.Decide(p, mem.Lookups(p), time.Time{})
		mem.Record(id, v)
		want[id] = decision{v.State, v.N()}
		for _, e := range v.Index {
			flids[e.FLID] = true
		}
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	wantIndex := map[string]string{}
	for flid := range flids {
		e, _ := mem.Index(flid)
		day := "-"
		if e.Day != nil {
			day = e.Day.Format(time.DateOnly)
		}
		wantIndex[flid] = fmt.Sprintf("%s %s by %d: %s maid %s flno %s", flid, day, e.FirstMsgID, dash(e.Link.State), dash(e.Link.MAID), dash(e.Link.FLNO))
	}

	rng := rand.New(rand.NewPCG(5, 7))
	for run := range 3 {
		var sizes []int
		for left := len(msgs); left > 0; {
			n := min(left, 1+rng.IntN(150))
			sizes = append(sizes, n)
			left -= n
		}
		br := newBatchRig(t, nil)
		br.run(msgs, sizes...)
		rows, err := br.msgs.Pool().Query(context.Background(), `SELECT msg_id, state, COALESCE(n_transitions, 0) FROM proc_state ORDER BY msg_id`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]decision{}
		for rows.Next() {
			var id int64
			var d decision
			if err := rows.Scan(&id, &d.state, &d.n); err != nil {
				t.Fatal(err)
			}
			got[id] = d
		}
		rows.Close()
		for id := int64(1); id <= int64(len(msgs)); id++ {
			if got[id] != want[id] {
				t.Fatalf("batches %v: message #%d is %v, %v decided serially", sizes, id, got[id], want[id])
			}
		}
		index := map[string]string{}
		for _, line := range br.state() {
			if rest, ok := strings.CutPrefix(line, "index "); ok {
				flid, _, _ := strings.Cut(rest, " ")
				index[flid] = rest
			}
		}
		for flid, w := range wantIndex {
			if index[flid] != w {
				t.Fatalf("batches %v: index\n got %s\nwant %s", sizes, index[flid], w)
			}
		}
		t.Logf("run %d: %d batches, every decision and index entry as decided serially", run, len(sizes))
	}
}

// A message found ROUTED again re-emits exactly the transitions it was
// routed with, derived ones included, although the index has moved on.
func TestRerouteReemitsTheCodeshareTransitions(t *testing.T) {
	br := newBatchRig(t, nil)
	raws := codeshareCase()
	br.run(raws[:5], 5)
	first := br.state()
	var fdel []string
	for _, l := range first {
		if strings.Contains(l, `"msgId":5,`) {
			fdel = append(fdel, l)
		}
	}
	if err := br.process(context.Background(), []item{br.item(6, raws[5]), br.item(7, raws[6])}); err != nil {
		t.Fatal(err)
	}
	br.state()
	// Message 5 again, as after a crash before its offset was committed.
	if err := br.process(context.Background(), []item{br.item(5, raws[4])}); err != nil {
		t.Fatal(err)
	}
	var again []string
	for _, l := range br.state() {
		if strings.Contains(l, `"msgId":5,`) {
			again = append(again, l)
		}
	}
	if len(fdel) != 3 || strings.Join(again, "\n") != strings.Join(fdel, "\n") {
		t.Fatalf("re-routed\n%s\nwant\n%s", strings.Join(again, "\n"), strings.Join(fdel, "\n"))
	}
}

// A MSG_ID met twice in a batch (an ingest duplicate) is decided once; the
// second copy sees the first one's recorded decision and re-emits it as a
// redelivery does.
func TestBatchRepeatedMsgID(t *testing.T) {
	raw := flop("10", "15", "ESTT", "<ESTT>23JAN210600</ESTT>")
	dn := routetest.Dnld(1, routetest.Fltr("15", "23JAN210535", ""))
	for _, sizes := range [][]int{{1, 1, 1}, {3}} {
		br := newBatchRig(t, nil)
		items := []item{br.item(1, dn), br.item(2, raw), br.item(2, raw)}
		for _, n := range sizes {
			if err := br.process(context.Background(), items[:n]); err != nil {
				t.Fatal(err)
			}
			items = items[n:]
		}
		var flights int
		for {
			if _, _, ok := br.out[br.r.cfg.FlightTopic].Next(); !ok {
				break
			}
			flights++
		}
		// DNLD's transition, FLOP's, and FLOP's again.
		if m, _, _ := br.msgs.Get(context.Background(), 2); m.State != "ROUTED" || flights != 3 || len(br.committed) != 3 {
			t.Fatalf("sizes %v: message 2 %s, %d flight transitions, committed %v", sizes, m.State, flights, br.committed)
		}
	}
}

// A batch whose transaction fails (here a trigger rejecting one flight) is
// decided message by message: the failing message is FAILED and retried in
// place, nothing behind it moves, and nothing of the batch before it is
// lost.
func TestBatchFailureFallsBackToOneByOne(t *testing.T) {
	br := newBatchRig(t, nil)
	if _, err := br.msgs.Pool().Exec(context.Background(), `CREATE FUNCTION reject_flid() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.flid = '666' THEN RAISE EXCEPTION 'flight 666 rejected by test trigger'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER reject_flid BEFORE INSERT ON flight_index FOR EACH ROW EXECUTE FUNCTION reject_flid()`); err != nil {
		t.Fatal(err)
	}
	items := []item{br.item(1, routetest.Dnld(1, routetest.Fltr("15", "23JAN210535", ""))),
		br.item(2, strings.Replace(routetest.Dnld(1, routetest.Fltr("666", "23JAN210535", "")), "<SEQN>77<", "<SEQN>78<", 1)),
		br.item(3, routetest.Msg("LDM", "X", "1", "<LDM/>"))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- br.process(ctx, items) }()
	// Message 2 fails and waits its first backoff; 1 is decided.
	if err := br.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if m, _, _ := br.msgs.Get(ctx, 1); m.State != "ROUTED" {
		t.Fatalf("message 1 %s", m.State)
	}
	if m, _, _ := br.msgs.Get(ctx, 2); m.State != "FAILED" || m.Attempts != 1 {
		t.Fatalf("message 2 %s after %d attempts", m.State, m.Attempts)
	}
	if _, ok, _ := br.msgs.Get(ctx, 3); ok {
		t.Fatal("message 3 moved while the head was failing")
	}
	br.mu.Lock()
	committed := strconv.Quote(fmt.Sprint(br.committed))
	br.mu.Unlock()
	if committed != `"[1]"` {
		t.Fatalf("committed %s while 2 is failing, want [1]", committed)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("process returned without an error after its context ended")
	}
}

// A PostgreSQL outage during a batch pauses the router without counting it
// against any message (I7); once PostgreSQL is back every message of the
// batch is decided and committed in order.
func TestBatchOutagePauses(t *testing.T) {
	dsn := sinktest.NewPG(t)
	proxy := testenv.NewProxy(t, "127.0.0.1:5432")
	br := newBatchRigOn(t, nil, strings.Replace(dsn, "127.0.0.1:5432", proxy.Addr(), 1))
	direct, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: dsn, Timeout: 10 * time.Second, PGMaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	raws := batchCase(t)
	var items []item
	for i, raw := range raws {
		items = append(items, br.item(int64(i+1), raw))
	}
	proxy.Down()
	done := make(chan error, 1)
	go func() { done <- br.process(context.Background(), items) }()
	// The head waits out the outage on the clock.
	if err := br.clock.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if st := br.r.Stats(); !st.Paused || st.Retries != 0 {
		t.Fatalf("during the outage: paused %v, retries %d", st.Paused, st.Retries)
	}
	proxy.Up()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Millisecond):
			br.clock.Advance(time.Second)
			continue
		}
		break
	}
	var n, attempts int
	if err := direct.QueryRow(context.Background(), "SELECT COUNT(*), COALESCE(SUM(attempts), 0) FROM proc_state WHERE state <> 'PENDING' AND state <> 'FAILED'").Scan(&n, &attempts); err != nil {
		t.Fatal(err)
	}
	if n != len(raws) || attempts != 0 {
		t.Fatalf("after the outage %d of %d decided, %d attempts counted", n, len(raws), attempts)
	}
	if br.r.Stats().Paused {
		t.Error("still paused")
	}
	for i, id := range br.committed {
		if id != int64(i+1) {
			t.Fatalf("offsets committed out of order: %v", br.committed)
		}
	}
	if len(br.committed) != len(raws) {
		t.Fatalf("committed %v", br.committed)
	}
}

// The worker decides a lone message at once, waits the linger only while
// messages keep coming, and never beyond a full batch.
func TestGatherLinger(t *testing.T) {
	br := newBatchRig(t, func(c *Config) { c.Batch, c.Linger = 3, 5*time.Millisecond })
	ctx := context.Background()
	gather := func() chan []item {
		got := make(chan []item, 1)
		go func() {
			b, _, err := br.w.gather(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- b
		}()
		return got
	}
	raw := routetest.Msg("LDM", "X", "1", "<LDM/>")

	// Idle: one message, no wait.
	br.w.in <- br.item(1, raw)
	if b := <-gather(); len(b) != 1 || br.clock.Waiters() != 0 {
		t.Fatalf("lone message: %d gathered, %d clock waiters", len(b), br.clock.Waiters())
	}
	// A backlog: two queued, the batch waits for more until the linger.
	br.w.in <- br.item(2, raw)
	br.w.in <- br.item(3, raw)
	got := gather()
	if err := br.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		t.Fatalf("gathered %d before the linger ended", len(b))
	default:
	}
	br.clock.Advance(5 * time.Millisecond)
	if b := <-got; len(b) != 2 {
		t.Fatalf("after the linger: %d gathered, want 2", len(b))
	}
	// Full at once: no wait.
	for id := int64(4); id <= 6; id++ {
		br.w.in <- br.item(id, raw)
	}
	if b := <-gather(); len(b) != 3 || b[0].rec.MsgID != 4 {
		t.Fatalf("full batch: %d gathered", len(b))
	}
	// Two queued, a third arrives during the linger: the batch is full
	// and closes without waiting the linger out.
	br.w.in <- br.item(7, raw)
	br.w.in <- br.item(8, raw)
	got = gather()
	if err := br.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	br.w.in <- br.item(9, raw)
	if b := <-got; len(b) != 3 {
		t.Fatalf("filled during the linger: %d gathered, want 3", len(b))
	}
}

// process decides items as the worker's loop does and, as the loop does
// once nothing is queued, waits for the last batch's acknowledgements and
// commits.
func (br *batchRig) process(ctx context.Context, items []item) error {
	if err := br.w.process(ctx, items); err != nil {
		return err
	}
	return br.w.flush(ctx)
}
