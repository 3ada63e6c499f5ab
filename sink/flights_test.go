package sink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
	"msgx/tables/message"
)

var flT0 = time.Date(2026, 1, 23, 5, 0, 0, 0, time.UTC)

// newPool returns a pool on a fresh, migrated database.
func flPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// apply runs the real transition function: the states under test carry the
// JSON the processor will really write.
func flApply(t testing.TB, s *flight.State, tr flight.Transition) *flight.State {
	t.Helper()
	r, err := flight.Apply(s, tr, flight.Options{})
	if err != nil {
		t.Fatalf("Apply(%s %s msg %d): %v", tr.Kind, tr.FLID, tr.MsgID, err)
	}
	if r.State == nil {
		t.Fatalf("Apply(%s %s msg %d): no state (%s)", tr.Kind, tr.FLID, tr.MsgID, r.Outcome)
	}
	return r.State
}

func flSchedule(msg int64, flid string, fields map[string]string, colls map[string][]flight.Element) flight.Transition {
	return flight.Transition{MsgID: msg, Source: "SCHD-DNLD", Kind: flight.KindSchedule, FLID: flid,
		OperationDay: "2026-01-23", At: flT0.Add(time.Duration(msg) * time.Second), Fields: fields, Collections: colls}
}

func flFLOP(msg int64, flid, styp string, fields map[string]string, colls map[string][]flight.Element) flight.Transition {
	return flight.Transition{MsgID: msg, Source: "FLOP-" + styp, Kind: flight.KindFLOP, STYP: styp, FLID: flid,
		At: flT0.Add(time.Duration(msg) * time.Second), Fields: fields, Collections: colls}
}

func flDelete(msg int64, flid string) flight.Transition {
	return flight.Transition{MsgID: msg, Source: "FDEL", Kind: flight.KindDelete, FLID: flid, At: flT0.Add(time.Duration(msg) * time.Second)}
}

// richFlight is a flight with scalars, an attributed element, a derived flag
// and every kind of collection, including equal resource numbers and keys
// without a column.
func flRich(t testing.TB, flid string, msg int64) *flight.State {
	return flApply(t, nil, flSchedule(msg, flid,
		map[string]string{"ALCD": "YG", "FLNO": "YG9001", "SODT": "23JAN260800", "MVIN": "D", "BOTM": "23JAN260730",
			"FDIV": "WX", "DDES": "HKG", "DDIR": "TO", "FFID": "YG9001-20260123"},
		map[string][]flight.Element{
			"GTDT": {{"GTNO": "1", "GATE": "G28", "GOTM": "23JAN260700"}, {"GTNO": "1", "GATE": "G29", "XTRA": "x"}},
			"DELY": {{"CODE": "YY", "STRT": "15DEC031605", "DURA": "0200", "TEXT": "YYYYYYY"}},
			"ROUT": {{"RTNO": "1", "APCD": "PEK"}, {"RTNO": "2", "APCD": "SHA", "SCAT": "23JAN260900"}},
			"ERUT": {{"RTNO": "1", "APCD": "CAN"}},
			"SRVT": {{"RAW": "<SRVT><OPER>A</OPER></SRVT>"}},
			"VIPF": {{"RAW": "<VIPF><VPCD>1</VPCD></VIPF>"}, {"RAW": "<VIPF><VPCD>2</VPCD></VIPF>"}},
		}))
}

func flWrite(t testing.TB, pool *pgxpool.Pool, states ...*flight.State) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, s := range states {
			if err := sink.WriteFlight(ctx, tx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// flGroupWrite writes, in one transaction with sink.QueueFlightGroup, the
// newest state of each chunk as a group commit does: chunk is a run of
// consecutive states of one flight, after before (nil: none).
func flGroupWrite(t testing.TB, pool *pgxpool.Pool, chunks ...flChunk) {
	t.Helper()
	ctx := context.Background()
	var flights []sink.GroupFlight
	for _, c := range chunks {
		newest := c.states[len(c.states)-1]
		e, err := sink.EncodeFlight(newest)
		if err != nil {
			t.Fatal(err)
		}
		g := sink.GroupFlight{Enc: e, Base: newest.StateVersion}
		prev := int64(0)
		if c.before != nil {
			prev = c.before.StateVersion
		}
		for _, st := range c.states {
			if st.StateVersion > prev {
				g.Base = min(g.Base, prev)
				for _, tag := range st.Last.Changed {
					if !slices.Contains(g.Changed, tag) {
						g.Changed = append(g.Changed, tag)
					}
				}
			}
			prev = st.StateVersion
		}
		if c.before != nil && g.Base > c.before.StateVersion {
			g.Base = c.before.StateVersion
		}
		flights = append(flights, g)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return flWriteGroup(ctx, tx, flights) }); err != nil {
		t.Fatal(err)
	}
}

// flWriteGroup writes flights inside tx as a group commit does:
// QueueFlightGroup, its batch, then its finish.
func flWriteGroup(ctx context.Context, tx pgx.Tx, flights []sink.GroupFlight) error {
	b := &pgx.Batch{}
	finish, err := sink.QueueFlightGroup(ctx, tx, b, flights)
	if err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	_, err = finish(ctx, tx)
	return err
}

// flChunk is a run of consecutive states of one flight for flGroupWrite.
type flChunk struct {
	before *flight.State
	states []*flight.State
}

// rows returns a query's rows as strings ("<nil>" for NULL), one line per row.
func flRows(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rs, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		vals, err := rs.Values()
		if err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
				parts[i] = "<nil>"
			case map[string]any:
				b, _ := json.Marshal(v)
				parts[i] = string(b)
			default:
				parts[i] = fmt.Sprint(v)
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func flExpectRows(t testing.TB, pool *pgxpool.Pool, want []string, sql string, args ...any) {
	t.Helper()
	if got := flRows(t, pool, sql, args...); !slices.Equal(got, want) {
		t.Fatalf("%s\n got %q\nwant %q", sql, got, want)
	}
}

// sameJSON compares two JSON documents by value: jsonb does not keep key
// order or spacing.
func flSameJSON(t testing.TB, got []byte, want any) {
	t.Helper()
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("stored doc is not JSON: %v: %s", err, got)
	}
	_ = json.Unmarshal(wb, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("doc\n got %s\nwant %s", got, wb)
	}
}

func TestSchemaCoversVocabulary(t *testing.T) {
	pool := flPool(t)
	cols := flRows(t, pool, `SELECT column_name FROM information_schema.columns WHERE table_name = 'flight_schd'`)
	for _, tag := range flight.FieldTags {
		if !slices.Contains(cols, sink.FlightColumn(tag)) {
			t.Errorf("flight_schd has no column for %s", tag)
		}
	}
	// Every column is a fixed one or a field tag: the writer sets them all.
	fixed := []string{"flid", "operation_day", "state", "state_version", "last_msg_id", "updated_at", "doc", "table_state", "schd_sent_version", "schd_due_since"}
	if len(cols) != len(fixed)+len(flight.FieldTags) {
		t.Errorf("flight_schd has %d columns, want %d", len(cols), len(fixed)+len(flight.FieldTags))
	}
	for _, table := range sink.FlightTables {
		if n := flRows(t, pool, `SELECT 1 FROM information_schema.tables WHERE table_name = $1`, table); len(n) != 1 {
			t.Errorf("table %s missing", table)
		}
	}
	// Every collection of the vocabulary is persisted somewhere: write one
	// element of each and count the detail rows.
	colls := map[string][]flight.Element{}
	for _, c := range flight.Collections {
		e := flight.Element{"K": "v"}
		if c.SeqAttr != "" {
			e[c.SeqAttr] = "1"
		}
		if c.Raw {
			e = flight.Element{flight.RawKey: "<" + c.Name + ">x</" + c.Name + ">"}
		}
		colls[c.Name] = []flight.Element{e}
	}
	flWrite(t, pool, flApply(t, nil, flSchedule(1, "7", nil, colls)))
	var total int
	for _, table := range sink.FlightTables[1:] {
		total += len(flRows(t, pool, "SELECT 1 FROM "+table+" WHERE flid = '7'"))
	}
	if total != len(flight.Collections) {
		t.Fatalf("%d detail rows for %d collections", total, len(flight.Collections))
	}
}

func TestWriteFlightStoresEveryPart(t *testing.T) {
	pool := flPool(t)
	s := flRich(t, "1001", 10)
	flWrite(t, pool, s)

	flExpectRows(t, pool, []string{"1001|2026-01-23|ACTIVE|1|10|YG|YG9001|WX|HKG|TO|Y|<nil>|YG9001-20260123|0"},
		`SELECT flid, operation_day::text, state, state_version, last_msg_id, alcd, flno, fdiv, ddes, ddir, bdst, lcst, ffid, schd_sent_version
		 FROM flight_schd`)
	var updated time.Time
	var doc []byte
	if err := pool.QueryRow(context.Background(), "SELECT updated_at, doc FROM flight_schd WHERE flid = '1001'").Scan(&updated, &doc); err != nil {
		t.Fatal(err)
	}
	if !updated.Equal(s.UpdatedAt) {
		t.Fatalf("updated_at %v, want %v", updated, s.UpdatedAt)
	}
	flSameJSON(t, doc, s.View())

	// Equal resource numbers are two allocations, in message order; the key
	// without a column lands in extra.
	flExpectRows(t, pool, []string{"1|1|G28|23JAN260700|<nil>", `2|1|G29|<nil>|{"XTRA":"x"}`},
		`SELECT ordinal, source_seq, gate, gotm, extra FROM flight_gtdt WHERE flid = '1001' ORDER BY ordinal`)
	flExpectRows(t, pool, []string{"1|<nil>|YY|15DEC031605|0200|YYYYYYY|<nil>"},
		`SELECT ordinal, source_seq, code, strt, dura, "text", extra FROM flight_dely WHERE flid = '1001'`)
	flExpectRows(t, pool, []string{"ERUT|1|1|CAN|<nil>", "ROUT|1|1|PEK|<nil>", "ROUT|2|2|SHA|23JAN260900"},
		`SELECT route_kind, ordinal, rtno, apcd, scat FROM flight_route_point WHERE flid = '1001' ORDER BY route_kind, ordinal`)
	flExpectRows(t, pool, []string{"1|<SRVT><OPER>A</OPER></SRVT>"}, `SELECT ordinal, raw FROM flight_srvt WHERE flid = '1001'`)
	flExpectRows(t, pool, []string{"1|<VIPF><VPCD>1</VPCD></VIPF>", "2|<VIPF><VPCD>2</VPCD></VIPF>"},
		`SELECT ordinal, raw FROM flight_vipf WHERE flid = '1001' ORDER BY ordinal`)

	got, ok, err := sink.GetFlight(context.Background(), pool, "1001")
	if err != nil || !ok {
		t.Fatalf("GetFlight: %v %v", ok, err)
	}
	flSameJSON(t, got, s.View())
}

func TestWriteFlightReplacesCollectionsAndClearsScalars(t *testing.T) {
	pool := flPool(t)
	s1 := flRich(t, "1001", 10)
	// A new GTDT list replaces the old one as a whole; the other
	// collections are kept.
	s2 := flApply(t, s1, flFLOP(11, "1001", "GTDT", nil, map[string][]flight.Element{"GTDT": {{"GTNO": "3", "GATE": "G01"}}}))
	// An empty BOTM clears the time and its derived flag.
	s3 := flApply(t, s2, flFLOP(12, "1001", "BOTM", map[string]string{"BOTM": ""}, nil))
	flWrite(t, pool, s1)
	flWrite(t, pool, s2, s3)
	flExpectRows(t, pool, []string{"1|3|G01"}, `SELECT ordinal, source_seq, gate FROM flight_gtdt WHERE flid = '1001'`)
	flExpectRows(t, pool, []string{"3|12|<nil>|<nil>"}, `SELECT state_version, last_msg_id, botm, bdst FROM flight_schd`)
	flExpectRows(t, pool, []string{"3"}, `SELECT count(*) FROM flight_route_point WHERE flid = '1001'`)

	// "No allocation now" empties the collection.
	s4 := flApply(t, s3, flFLOP(13, "1001", "GTDT", nil, map[string][]flight.Element{"GTDT": {{"GTNO": "0"}}}))
	flWrite(t, pool, s4)
	flExpectRows(t, pool, nil, `SELECT * FROM flight_gtdt`)
	var doc []byte
	_ = pool.QueryRow(context.Background(), "SELECT doc FROM flight_schd").Scan(&doc)
	flSameJSON(t, doc, s4.View())
}

func TestWriteFlightNeverGoesBackwards(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	s1 := flRich(t, "1001", 10)
	s2 := flApply(t, s1, flFLOP(11, "1001", "GTDT", nil, map[string][]flight.Element{"GTDT": {{"GTNO": "3", "GATE": "G01"}}}))
	s3 := flApply(t, s2, flFLOP(12, "1001", "ESTT", map[string]string{"ESTT": "23JAN260815"}, nil))
	flWrite(t, pool, s3)

	// A replay of older states, in separate transactions and in one batch.
	flWrite(t, pool, s1)
	flWrite(t, pool, s2, s1)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n, err := sink.WriteFlights(ctx, tx, []*flight.State{s1, s2})
		if n != 0 {
			t.Errorf("WriteFlights of older states wrote %d", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	flExpectRows(t, pool, []string{"3|12|23JAN260815"}, `SELECT state_version, last_msg_id, estt FROM flight_schd`)
	flExpectRows(t, pool, []string{"1|G01"}, `SELECT ordinal, gate FROM flight_gtdt`)
	got, _, _ := sink.GetFlight(ctx, pool, "1001")
	flSameJSON(t, got, s3.View())

	// A message that changes nothing keeps the version but moves lastMsgId:
	// that is newer, and is written; its replay (lower lastMsgId) is not.
	s3b := flApply(t, s3, flFLOP(13, "1001", "ESTT", map[string]string{"ESTT": "23JAN260815"}, nil))
	if s3b.StateVersion != 3 || s3b.LastMsgID != 13 {
		t.Fatalf("no-change state v%d msg %d", s3b.StateVersion, s3b.LastMsgID)
	}
	flWrite(t, pool, s3b)
	flWrite(t, pool, s3)
	flExpectRows(t, pool, []string{"3|13"}, `SELECT state_version, last_msg_id FROM flight_schd`)

	// Within one batch the newest state of a FLID wins, whatever the order.
	s4 := flApply(t, s3b, flDelete(14, "1001"))
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n, err := sink.WriteFlights(ctx, tx, []*flight.State{s4, s3, s1})
		if n != 1 {
			t.Errorf("wrote %d flights, want 1", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	flExpectRows(t, pool, []string{"DELETED|4|14"}, `SELECT state, state_version, last_msg_id FROM flight_schd`)
}

func TestWriteFlightIdempotent(t *testing.T) {
	pool := flPool(t)
	s := flRich(t, "1001", 10)
	flWrite(t, pool, s)
	snapshot := func() []string {
		var all []string
		for _, table := range sink.FlightTables {
			all = append(all, flRows(t, pool, "SELECT * FROM "+table+" ORDER BY 1, 2, 3")...)
		}
		return all
	}
	before := snapshot()
	flWrite(t, pool, s, s)
	flWrite(t, pool, s)
	if after := snapshot(); !slices.Equal(before, after) {
		t.Fatalf("rewrite changed the read model:\n%q\n%q", before, after)
	}
}

func TestWriteFlightRollsBackWithTransaction(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.WriteFlight(ctx, tx, flRich(t, "1001", 10)); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	for _, table := range sink.FlightTables {
		flExpectRows(t, pool, nil, "SELECT * FROM "+table)
	}
}

func TestWriteFlightRejectsBadStates(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	for _, s := range []*flight.State{nil, {State: flight.StateActive}, {FLID: "1", State: "GONE"}} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return sink.WriteFlight(ctx, tx, s) })
		if err == nil {
			t.Errorf("WriteFlight(%+v) accepted", s)
		}
	}
}

func TestFlightsByDay(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	a := flRich(t, "20", 10)
	b := flApply(t, flRich(t, "3", 11), flDelete(12, "3"))
	c := flApply(t, nil, flight.Transition{MsgID: 13, Source: "SCHD-DNLD", Kind: flight.KindSchedule, FLID: "100",
		OperationDay: "2026-01-24", At: flT0, Fields: map[string]string{"FLNO": "X1"}})
	flWrite(t, pool, a, b, c)

	day := time.Date(2026, 1, 23, 0, 0, 0, 0, testenv.Shanghai)
	docs, err := sink.FlightsByDay(ctx, pool, day)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d flights on %s", len(docs), day)
	}
	// Numeric FLID order; a deleted flight is still listed (with its state).
	flSameJSON(t, docs[0], b.View())
	flSameJSON(t, docs[1], a.View())
	docs, err = sink.FlightsByDay(ctx, pool, time.Date(2026, 1, 25, 0, 0, 0, 0, time.UTC))
	if err != nil || docs == nil || len(docs) != 0 {
		t.Fatalf("empty day: %v %v", docs, err)
	}
	if _, ok, err := sink.GetFlight(ctx, pool, "999"); ok || err != nil {
		t.Fatalf("unknown flight: %v %v", ok, err)
	}
}

// history is a flight's life through every kind of change: creation with
// collections, collection replacements and clears, scalar-only changes, a
// no-change message, a deletion and a revival. Every state is the real
// output of flight.Apply.
func flHistory(t testing.TB, flid string) []*flight.State {
	steps := []flight.Transition{
		flSchedule(10, flid, map[string]string{"ALCD": "YG", "FLNO": "YG9001", "SODT": "23JAN260800"},
			map[string][]flight.Element{
				"GTDT": {{"GTNO": "1", "GATE": "G28"}, {"GTNO": "1", "GATE": "G29"}},
				"ROUT": {{"RTNO": "1", "APCD": "PEK"}},
				"SRVT": {{"RAW": "<SRVT><OPER>A</OPER></SRVT>"}},
			}),
		flFLOP(11, flid, "ESTT", map[string]string{"ESTT": "23JAN260815"}, nil),
		flFLOP(12, flid, "GTDT", nil, map[string][]flight.Element{"GTDT": {{"GTNO": "2", "GATE": "G01", "NEWK": "n"}}}),
		flFLOP(13, flid, "DELY", nil, map[string][]flight.Element{"DELY": {{"CODE": "YY", "DURA": "0200", "TEXT": "late"}, {"CODE": "XX"}}}),
		flFLOP(14, flid, "ROUT", nil, map[string][]flight.Element{"ROUT": {{"RTNO": "1", "APCD": "PEK"}, {"RTNO": "2", "APCD": "SHA"}}}),
		flFLOP(15, flid, "ESTT", map[string]string{"ESTT": "23JAN260815"}, nil), // no change: lastMsgId only
		flFLOP(16, flid, "GTDT", nil, map[string][]flight.Element{"GTDT": {{"GTNO": "0"}}}),
		flFLOP(17, flid, "BOTM", map[string]string{"BOTM": "23JAN260730"}, nil),
		flSchedule(18, flid, map[string]string{"FLNO": "YG9001"}, map[string][]flight.Element{
			"CKDT": {{"CKNO": "1", "CHKC": "A01"}}, "ERUT": {{"RTNO": "1", "APCD": "CAN"}}, "SRVT": {{"RAW": "<SRVT></SRVT>"}},
		}),
		flDelete(19, flid),
		flSchedule(20, flid, nil, map[string][]flight.Element{"VIPF": {{"RAW": "<VIPF><VPCD>1</VPCD></VIPF>"}}}),
	}
	var out []*flight.State
	var s *flight.State
	for _, tr := range steps {
		s = flApply(t, s, tr)
		out = append(out, s)
	}
	return out
}

// readModel returns everything stored for flid, without the FLID itself, so
// that two flights written differently can be compared.
func flReadModel(t testing.TB, pool *pgxpool.Pool, flid string) []string {
	t.Helper()
	// schd_due_since is the time of the first version the schd topic has
	// not seen: it depends on which versions were written, not only on
	// the state (TestSchdDueSince).
	out := flRows(t, pool, `SELECT (to_jsonb(f) - 'flid' - 'doc' - 'table_state' - 'schd_due_since')::text, (f.doc - 'flid')::text, (f.table_state - 'flid')::text FROM flight_schd f WHERE flid = $1`, flid)
	for _, table := range sink.FlightTables[1:] {
		out = append(out, table)
		out = append(out, flRows(t, pool, `SELECT (to_jsonb(t) - 'flid')::text AS r FROM `+table+` t WHERE flid = $1 ORDER BY r`, flid)...)
	}
	return out
}

func TestWriteFlightIncrementalEqualsFull(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	// 1: every version, one transaction each (the incremental path).
	// 2: only the final state (a first write at a later version).
	// 3: every other version (versions skipped: the full-write fallback).
	// 4: every version in one transaction, and one batch of all.
	// 5: every version, then each older one again (replays are ignored).
	h1, h2, h3, h4, h5 := flHistory(t, "1"), flHistory(t, "2"), flHistory(t, "3"), flHistory(t, "4"), flHistory(t, "5")
	for _, s := range h1 {
		flWrite(t, pool, s)
	}
	flWrite(t, pool, h2[len(h2)-1])
	for i := 0; i < len(h3); i += 2 {
		flWrite(t, pool, h3[i])
	}
	flWrite(t, pool, h3[len(h3)-1])
	flWrite(t, pool, h4...)
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := sink.WriteFlights(ctx, tx, h4); return err }); err != nil {
		t.Fatal(err)
	}
	flWrite(t, pool, h5...)
	for i := len(h5) - 1; i >= 0; i-- {
		flWrite(t, pool, h5[i])
	}

	// 6: groups of three versions (the group commit's incremental write);
	// 7: the first four, then all but the next three in one group (the
	// stored row is older than the group's base: written whole);
	// 8: the whole history in one group, beside flight 6's first group;
	// 9: every version, then the older ones again in groups (replays).
	h6, h7, h8, h9 := flHistory(t, "6"), flHistory(t, "7"), flHistory(t, "8"), flHistory(t, "9")
	for i := 0; i < len(h6); i += 3 {
		c := flChunk{states: h6[i:min(i+3, len(h6))]}
		if i > 0 {
			c.before = h6[i-1]
		}
		if i == 0 {
			flGroupWrite(t, pool, c, flChunk{states: h8})
		} else {
			flGroupWrite(t, pool, c)
		}
	}
	flGroupWrite(t, pool, flChunk{states: h7[:4]})
	flGroupWrite(t, pool, flChunk{before: h7[6], states: h7[7:]})
	for i := range h9 {
		c := flChunk{states: h9[i : i+1]}
		if i > 0 {
			c.before = h9[i-1]
		}
		flGroupWrite(t, pool, c)
	}
	flGroupWrite(t, pool, flChunk{states: h9[:3]})
	flGroupWrite(t, pool, flChunk{before: h9[3], states: h9[4:6]})

	final := h1[len(h1)-1]
	if final.State != flight.StateActive || final.StateVersion < 9 {
		t.Fatalf("history ends at %s v%d", final.State, final.StateVersion)
	}
	want := flReadModel(t, pool, "1")
	for _, flid := range []string{"2", "3", "4", "5", "6", "7", "8", "9"} {
		if got := flReadModel(t, pool, flid); !slices.Equal(got, want) {
			t.Errorf("flight %s differs from flight 1:\n got %q\nwant %q", flid, got, want)
		}
	}
	got, _, _ := sink.GetFlight(ctx, pool, "1")
	flSameJSON(t, got, final.View())
	// Every scalar column is the final state's field, NULL when cleared:
	// the statements read them from doc.
	for _, tag := range flight.FieldTags {
		var v *string
		if err := pool.QueryRow(ctx, `SELECT `+sink.FlightColumn(tag)+` FROM flight_schd WHERE flid = '1'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if want := final.Fields[tag]; (v == nil) != (want == "") || v != nil && *v != want {
			got := "NULL"
			if v != nil {
				got = fmt.Sprintf("%q", *v)
			}
			t.Errorf("flight_schd.%s = %s, want %q", sink.FlightColumn(tag), got, want)
		}
	}
	// And flight 1's detail rows are exactly the final collections.
	flExpectRows(t, pool, []string{"1|A01"}, `SELECT source_seq, chkc FROM flight_ckdt WHERE flid = '1'`)
	// SCHEDULE keeps what the FLTR does not carry (ROUT); ROUT and ERUT
	// are separate collections with their own ordinals.
	flExpectRows(t, pool, []string{"ERUT|1|CAN", "ROUT|1|PEK", "ROUT|2|SHA"},
		`SELECT route_kind, ordinal, apcd FROM flight_route_point WHERE flid = '1' ORDER BY route_kind, ordinal`)
	for _, table := range []string{"flight_gtdt", "flight_srvt"} {
		flExpectRows(t, pool, nil, `SELECT * FROM `+table+` WHERE flid = '1'`)
	}
}

// flBenchStates returns n distinct rich flights at version 1.
func flBenchStates(b *testing.B, n, base int) []*flight.State {
	out := make([]*flight.State, n)
	for i := range out {
		out[i] = flRich(b, fmt.Sprint(base+i), 1)
	}
	return out
}

// BenchmarkWriteFlight measures WriteFlight as the processor calls it: one
// call per applied transition, 100 calls per transaction, on 2,000 existing
// flights. Reported as flights/s (transition building is not timed).
//   - scalar: FLOP-ESTT, the common case (the upsert alone);
//   - collection: FLOP-GTDT (one detail table replaced);
//   - full: states without provenance (every detail table rewritten).
func BenchmarkWriteFlight(b *testing.B) {
	next := map[string]func(s *flight.State, msg int64) *flight.State{
		"scalar": func(s *flight.State, msg int64) *flight.State {
			return flApply(b, s, flFLOP(msg, s.FLID, "ESTT", map[string]string{"ESTT": fmt.Sprint(msg)}, nil))
		},
		"collection": func(s *flight.State, msg int64) *flight.State {
			return flApply(b, s, flFLOP(msg, s.FLID, "GTDT", nil, map[string][]flight.Element{
				"GTDT": {{"GTNO": "1", "GATE": fmt.Sprint("G", msg)}, {"GTNO": "2", "GATE": "G02"}}}))
		},
		"full": func(s *flight.State, msg int64) *flight.State {
			n := flApply(b, s, flFLOP(msg, s.FLID, "ESTT", map[string]string{"ESTT": fmt.Sprint(msg)}, nil))
			n.Last = nil
			return n
		},
	}
	for _, name := range []string{"scalar", "collection", "full"} {
		b.Run(name, func(b *testing.B) {
			flBenchWrite(b, next[name], func(ctx context.Context, tx pgx.Tx, batch []*flight.State) error {
				for _, s := range batch {
					if err := sink.WriteFlight(ctx, tx, s); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}

// BenchmarkWriteFlights measures one WriteFlights call of 100 flights per
// transaction (a full write of each).
func BenchmarkWriteFlights(b *testing.B) {
	flBenchWrite(b, func(s *flight.State, msg int64) *flight.State {
		return flApply(b, s, flFLOP(msg, s.FLID, "ESTT", map[string]string{"ESTT": fmt.Sprint(msg)}, nil))
	}, func(ctx context.Context, tx pgx.Tx, batch []*flight.State) error {
		_, err := sink.WriteFlights(ctx, tx, batch)
		return err
	})
}

func flBenchWrite(b *testing.B, next func(*flight.State, int64) *flight.State, fn func(context.Context, pgx.Tx, []*flight.State) error) {
	const perTx, flights = 100, 2000
	pool := flPool(b)
	ctx := context.Background()
	states := flBenchStates(b, flights, 10000)
	for i := 0; i < flights; i += perTx {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := sink.WriteFlights(ctx, tx, states[i:i+perTx]); return err }); err != nil {
			b.Fatal(err)
		}
	}
	msg := int64(100)
	var elapsed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		k := (i * perTx) % flights
		batch := states[k : k+perTx]
		for j, s := range batch {
			msg++
			batch[j] = next(s, msg)
		}
		b.StartTimer()
		start := time.Now()
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return fn(ctx, tx, batch) }); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(b.N*perTx)/elapsed.Seconds(), "flights/s")
}

// The table value is stored as doc plus its bookkeeping in table_state:
// EncodeFlight's whole value is json.Marshal's, and the flight's table
// value reads back from PostgreSQL whole, bookkeeping or none.
func TestTableValueIsDocAndBookkeeping(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	h := flHistory(t, "31")
	flWrite(t, pool, h...)
	linked := h[len(h)-1].Clone()
	linked.FLID = "32"
	linked.Links = map[string]flight.ChildLink{"33": {FLNO: "MU5101", Live: true}, "34": {Live: false}}
	linked.Replayed = &message.ReplayMark{Gen: 2, MsgID: 14}
	bare := h[0].Clone()
	bare.FLID, bare.Last = "35", nil
	for _, s := range []*flight.State{h[0], h[len(h)-1], linked, bare} {
		e, err := sink.EncodeFlight(s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s)
		if string(e.TableValue()) != string(want) {
			t.Fatalf("table value of %s:\n%s\nwant\n%s", s.FLID, e.TableValue(), want)
		}
		if s == h[0] {
			continue // another version of flight 31, written below
		}
		flWrite(t, pool, s)
		got, found, err := sink.TableState(ctx, pool, s.FLID)
		if err != nil || !found {
			t.Fatalf("reading %s back: %v %v", s.FLID, found, err)
		}
		g, _ := json.Marshal(got)
		if string(g) != string(want) {
			t.Fatalf("table value of %s read back:\n%s\nwant\n%s", s.FLID, g, want)
		}
	}
	// A row written before the table value was split holds it whole in
	// table_state: read alike.
	whole, _ := json.Marshal(linked)
	if _, err := pool.Exec(ctx, `UPDATE flight_schd SET table_state = $2 WHERE flid = $1`, "32", string(whole)); err != nil {
		t.Fatal(err)
	}
	got, _, err := sink.TableState(ctx, pool, "32")
	if g, _ := json.Marshal(got); err != nil || string(g) != string(whole) {
		t.Fatalf("whole table_state read back: %v\n%s", err, g)
	}
}

// TestBatchPlanning: a batch's transaction plans without a generic plan
// and without JIT, and only that transaction.
func TestBatchPlanning(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	settings := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var mode, jit string
		if err := q.QueryRow(ctx, `SELECT current_setting('plan_cache_mode'), current_setting('jit')`).Scan(&mode, &jit); err != nil {
			t.Fatal(err)
		}
		return mode + " jit=" + jit
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	before := settings(conn)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sink.BatchPlanning); err != nil {
			return err
		}
		if got := settings(tx); got != "force_custom_plan jit=off" {
			t.Errorf("in the transaction: %q", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := settings(conn); got != before {
		t.Fatalf("after the transaction: %q, want %q", got, before)
	}
}

// TestSchdDueSince checks the schd mark the writer keeps (migration 0032):
// a flight is due from the first version above schd_sent_version, the mark
// keeps that time while more versions come, a write of no newer version
// leaves a sent flight alone, and a write to a flight already due is a HOT
// update (no new index entries).
func TestSchdDueSince(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	v1 := flApply(t, nil, flSchedule(1, "1", map[string]string{"FLNO": "YG1", "SODT": "23JAN260800"}, nil))
	v2 := flApply(t, v1, flFLOP(2, "1", "ESTT", map[string]string{"ESTT": "23JAN260815"}, nil))
	v3 := flApply(t, v2, flFLOP(3, "1", "ESTT", map[string]string{"ESTT": "23JAN260820"}, nil))
	due := func() *time.Time {
		t.Helper()
		var since *time.Time
		if err := pool.QueryRow(ctx, `SELECT schd_due_since FROM flight_schd WHERE flid = '1'`).Scan(&since); err != nil {
			t.Fatal(err)
		}
		return since
	}
	var hot int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, s := range []*flight.State{v1, v2} {
			if err := sink.WriteFlight(ctx, tx, s); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_hot_updated('flight_schd'::regclass)`).Scan(&hot)
	})
	if err != nil {
		t.Fatal(err)
	}
	if hot != 1 {
		t.Errorf("the write of v2 to a flight due since v1: %d HOT updates, want 1", hot)
	}
	if got := due(); got == nil || !got.Equal(v1.UpdatedAt) {
		t.Fatalf("after v1 and v2: due since %v, want v1's %v", got, v1.UpdatedAt)
	}
	// The flusher sent v2 (emitters/schd marks so).
	if _, err := pool.Exec(ctx, `UPDATE flight_schd SET schd_sent_version = 2, schd_due_since = NULL WHERE flid = '1'`); err != nil {
		t.Fatal(err)
	}
	flWrite(t, pool, v2) // a redelivery: no newer version
	if got := due(); got != nil {
		t.Fatalf("v2 written again after it was sent: due since %v, want not due", got)
	}
	flWrite(t, pool, v3)
	if got := due(); got == nil || !got.Equal(v3.UpdatedAt) {
		t.Fatalf("after v3: due since %v, want v3's %v", got, v3.UpdatedAt)
	}
}

// TestFlightGroupsInOneTransaction: a transaction can write several groups
// (the flights processor splits a group at each purge). The second group
// writes only its own flights: a flight the first one staged and a purge
// then deleted does not come back.
func TestFlightGroupsInOneTransaction(t *testing.T) {
	pool := flPool(t)
	ctx := context.Background()
	group := func(tx pgx.Tx, s *flight.State) error {
		e, err := sink.EncodeFlight(s)
		if err != nil {
			return err
		}
		return flWriteGroup(ctx, tx, []sink.GroupFlight{{Enc: e, Base: s.StateVersion - 1, Changed: s.Last.Changed}})
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := group(tx, flRich(t, "A", 1)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM flight_schd WHERE flid = 'A'`); err != nil {
			return err
		}
		return group(tx, flRich(t, "B", 2))
	})
	if err != nil {
		t.Fatal(err)
	}
	flExpectRows(t, pool, []string{"B|1"}, `SELECT flid, state_version FROM flight_schd ORDER BY flid`)
	// A later transaction writes only its own flights too.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return group(tx, flRich(t, "C", 3)) })
	if err != nil {
		t.Fatal(err)
	}
	flExpectRows(t, pool, []string{"B|1", "C|1"}, `SELECT flid, state_version FROM flight_schd ORDER BY flid`)
}
