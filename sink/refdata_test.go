package sink_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/refdata"
)

// The records below are hand-built the way the SIS codec builds them from
// testdata/sis-samples (INSERT_CMINMSGS_AIRL.sql, _CLST.sql, _CHLT.sql,
// _ABDG.sql). The samples carry no RSTA message; its records follow the tag
// names of tables/refdata.

const refTimeout = 10 * time.Second

var refT0 = time.Date(2026, 3, 10, 1, 0, 0, 0, time.UTC)

func refAirlUA() refdata.Record {
	return refdata.Record{
		"ITOP": "UA", "ICOP": "UAL", "ONAM": "UNITED AIRLINES", "ONMC": "UNITED 航空公司", "CTRY": "USA",
		"TRML": map[string]any{"@MVIN": "", "@FLIN": ""},
		"OGRP": "STAR ALLIANCE",
		"SUBC": []any{
			map[string]any{"CODE": "001", "NAME": "First Subcompany", "NAMC": "第一子公司"},
			map[string]any{"CODE": "002", "NAME": "Second Subcompany", "NAMC": "第二子公司"},
		},
		"DORI": "I",
	}
}

func refAirlAA() refdata.Record {
	return refdata.Record{
		"ITOP": "AA", "ICOP": "AAL", "ONAM": "AMERICAN AIRLINES", "ONMC": "美国航空公司", "CTRY": "USA",
		"TRML": map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T2"},
		"OGRP": "ONE WORLD", "DORI": "I",
	}
}

func refAirlCX() refdata.Record {
	return refdata.Record{
		"ITOP": "CX", "ICOP": "CPA", "ONAM": "CATHAY PACIFIC", "ONMC": "香港航空公司", "CTRY": "HKG",
		"TRML": []any{
			map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T3A"},
			map[string]any{"@MVIN": "D", "@FLIN": "I", "#text": "T3B"},
		},
		"OGRP": []any{"ONE WORLD", "CHINA WORLD"},
		"DORI": "I",
	}
}

// refAirlAB and refAirlZZ are the records of the sample's AIRL ADD.
func refAirlAB() refdata.Record {
	return refdata.Record{
		"ITOP": "AB", "ICOP": "AB", "ONAM": "AMERICAN AIRLINES", "ONMC": "美国BBB公司", "CTRY": "USA",
		"TRML": map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T1"},
		"OGRP": "ONE WORLD",
		"SUBC": []any{
			map[string]any{"CODE": "001", "NAME": "First Subcompany", "NAMC": "子公司"},
			map[string]any{"CODE": "002", "NAME": "Second Subcompany", "NAMC": "第二子公司"},
		},
		"DORI": "I",
	}
}

func refAirlZZ() refdata.Record {
	return refdata.Record{
		"ITOP": "ZZ", "ICOP": "ZZZ", "ONAM": "CATHAY PACIFIC", "ONMC": "香港航空公司", "CTRY": "HKG",
		"TRML": []any{
			map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T3A"},
			map[string]any{"@MVIN": "D", "@FLIN": "I", "#text": "T3B"},
		},
		"OGRP": []any{"ONE WORLD", "CHINA WORLD"},
		"SUBC": map[string]any{"CODE": "001", "NAME": "Subcompany", "NAMC": "第一子公司"},
		"DORI": "I",
	}
}

func refClstC11() refdata.Record {
	return refdata.Record{"CCOD": "C11", "CTNM": "Desk 11 North side", "CNMC": "北方柜台十一", "CCAT": "D", "CTML": "T3A", "CTRA": "Y"}
}

func refChltC11() refdata.Record {
	return refdata.Record{"CCOD": "C11", "CHNM": "Chute 11 North side", "CNMC": "北方行李传送带十一", "CTML": "T3A", "CCAT": "D"}
}

func refAbdg212() refdata.Record {
	return refdata.Record{"ABCD": "212", "DESC": "Airbridge 212", "CDSC": "登机桥 212", "AHGT": "", "ATML": "T2",
		"ATHE": "N", "STND": "212", "GATE": "21", "AMNO": "1"}
}

func refAbdg112() refdata.Record {
	return refdata.Record{"ABCD": "112", "DESC": "Airbridge 112", "CDSC": "登机桥 112", "AHGT": "", "ATML": "T1",
		"ATHE": "Y", "STND": []any{"112", "111"}, "GATE": []any{"11A", "11B"}, "AMNO": "2"}
}

func refAbdg213() refdata.Record {
	return refdata.Record{"ABCD": "213", "DESC": "Airbridge 213", "CDSC": "登机桥 213", "AHGT": "", "ATML": "T2",
		"ATHE": "N", "STND": []any{"213", "", "613"}, "GATE": []any{"23", "", "223"}, "AMNO": ""}
}

func refRSTA(rtyp, rsid, stat, strt, endt string) refdata.Record {
	r := refdata.Record{refdata.TagRTYP: rtyp, refdata.TagRSID: rsid, refdata.TagSTAT: stat}
	if strt != "" {
		r[refdata.TagSTRT] = strt
	}
	if endt != "" {
		r[refdata.TagENDT] = endt
	}
	return r
}

// refTr builds transition id of rtype; ABDG is keyed by its first child ABCD
// as in the samples.
func refTr(id int64, rtype, styp string, recs ...refdata.Record) refdata.Transition {
	t := refdata.Transition{MsgID: id, RType: rtype, STYP: styp, At: refT0.Add(time.Duration(id) * time.Minute), Records: recs}
	if rtype == "ABDG" {
		t.FirstChild = "ABCD"
	}
	return t
}

func newRefPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	dsn := sinktest.NewPG(t)
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: dsn, Timeout: refTimeout, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// refWrite runs WriteRefData in its own transaction, as the processor does
// (without the completion mark, which TestRefWriteWithCompletionMark covers).
func refWrite(t *testing.T, pool *pgxpool.Pool, s *refdata.State, r refdata.Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), refTimeout)
	defer cancel()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return sink.WriteRefData(ctx, tx, s, r)
	}); err != nil {
		t.Fatalf("WriteRefData: %v", err)
	}
}

// refApply applies tr to s with the real refdata.Apply and writes the result.
func refApply(t *testing.T, pool *pgxpool.Pool, s *refdata.State, tr refdata.Transition) refdata.Result {
	t.Helper()
	r, err := refdata.Apply(s, tr)
	if err != nil {
		t.Fatalf("Apply %s-%s %d: %v", tr.RType, tr.STYP, tr.MsgID, err)
	}
	refWrite(t, pool, s, r)
	return r
}

// refRows reads every row of rtype keyed by rkey.
func refRows(t *testing.T, pool *pgxpool.Pool, rtype string) map[string]sink.RefRow {
	t.Helper()
	rows, err := sink.RefRecords(context.Background(), pool, refTimeout, rtype, refT0, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]sink.RefRow, len(rows))
	for _, r := range rows {
		out[r.RKey] = r
	}
	return out
}

// refJSONValue decodes JSON into plain maps for comparison.
func refJSONValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// refRecordValue is rec as refJSONValue sees it.
func refRecordValue(t *testing.T, rec refdata.Record) any {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return refJSONValue(t, b)
}

// refCheckMatchesState asserts that the rows of s.RType are exactly the
// records of s: same keys, attributes, updated_at and last_msg_id.
func refCheckMatchesState(t *testing.T, pool *pgxpool.Pool, s *refdata.State) {
	t.Helper()
	rows := refRows(t, pool, s.RType)
	var got, want []string
	for k := range rows {
		got = append(got, k)
	}
	for k := range s.Records {
		want = append(want, k)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s rows %v, state keys %v", s.RType, got, want)
	}
	for k, e := range s.Records {
		row := rows[k]
		if g, w := refJSONValue(t, row.Attributes), refRecordValue(t, e.Attrs); !reflect.DeepEqual(g, w) {
			t.Errorf("%s %s attributes\n got %v\nwant %v", s.RType, k, g, w)
		}
		if !row.UpdatedAt.Equal(e.UpdatedAt) || row.LastMsgID != e.LastMsgID {
			t.Errorf("%s %s: row (%v, %d), state (%v, %d)", s.RType, k, row.UpdatedAt, row.LastMsgID, e.UpdatedAt, e.LastMsgID)
		}
	}
}

// refSnapshot is every row of ref_master, for "nothing changed" checks.
func refSnapshot(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), refTimeout)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT rtype || '/' || rkey || ' ' || attributes::text || ' ' || updated_at::text || ' ' || last_msg_id
		FROM ref_master ORDER BY rtype, rkey`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refCloneState deep-copies s through its goka codec: a state as an older
// table value would hold it.
func refCloneState(t *testing.T, s *refdata.State) *refdata.State {
	t.Helper()
	b, err := kafka.JSON[refdata.State]{}.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := kafka.JSON[refdata.State]{}.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return v.(*refdata.State)
}

func refAttr(t *testing.T, row sink.RefRow, tag string) (any, bool) {
	t.Helper()
	m, ok := refJSONValue(t, row.Attributes).(map[string]any)
	if !ok {
		t.Fatalf("attributes of %s %s are not an object: %s", row.RType, row.RKey, row.Attributes)
	}
	v, ok := m[tag]
	return v, ok
}

func TestRefAIRLFullReplaceAndIncrements(t *testing.T) {
	pool := newRefPool(t)
	s := refdata.NewState("AIRL")

	// DNLD: the whole category.
	refApply(t, pool, s, refTr(1, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAA(), refAirlCX()))
	refCheckMatchesState(t, pool, s)
	if n := len(refRows(t, pool, "AIRL")); n != 3 {
		t.Fatalf("after DNLD: %d rows, want 3", n)
	}

	// ADD: two more, the others untouched.
	refApply(t, pool, s, refTr(2, "AIRL", refdata.STYPADD, refAirlAB(), refAirlZZ()))
	refCheckMatchesState(t, pool, s)
	rows := refRows(t, pool, "AIRL")
	if rows["UA"].LastMsgID != 1 || rows["AB"].LastMsgID != 2 || rows["ZZ"].LastMsgID != 2 {
		t.Fatalf("after ADD: last_msg_id UA=%d AB=%d ZZ=%d", rows["UA"].LastMsgID, rows["AB"].LastMsgID, rows["ZZ"].LastMsgID)
	}

	// UPD with an empty tag: the value is unavailable, the record and the
	// tag stay.
	aa := refAirlAA()
	aa["ONMC"] = ""
	aa["TRML"] = map[string]any{"@MVIN": "A", "@FLIN": "I", "#text": "T3"}
	refApply(t, pool, s, refTr(3, "AIRL", refdata.STYPUPD, aa))
	refCheckMatchesState(t, pool, s)
	row, ok, err := sink.RefRecord(context.Background(), pool, refTimeout, "AIRL", "AA", refT0, nil)
	if err != nil || !ok {
		t.Fatalf("RefRecord AA: ok=%v err=%v", ok, err)
	}
	if v, present := refAttr(t, row, "ONMC"); !present || v != "" {
		t.Fatalf("AA ONMC = %v (present %v), want \"\" kept", v, present)
	}
	if row.LastMsgID != 3 || !row.UpdatedAt.Equal(refT0.Add(3*time.Minute)) {
		t.Fatalf("AA after UPD: last_msg_id %d updated_at %v", row.LastMsgID, row.UpdatedAt)
	}

	// UPD of a missing key creates it (upsert).
	refApply(t, pool, s, refTr(4, "AIRL", refdata.STYPUPD, refdata.Record{"ITOP": "MU", "ONAM": ""}))
	refCheckMatchesState(t, pool, s)

	// DEL by key only.
	refApply(t, pool, s, refTr(5, "AIRL", refdata.STYPDEL, refdata.Record{"ITOP": "CX"}))
	refCheckMatchesState(t, pool, s)
	if _, ok, err := sink.RefRecord(context.Background(), pool, refTimeout, "AIRL", "CX", refT0, nil); err != nil || ok {
		t.Fatalf("CX after DEL: ok=%v err=%v", ok, err)
	}

	// A second DNLD removes every key it does not carry.
	refApply(t, pool, s, refTr(6, "AIRL", refdata.STYPDNLD, aa, refAirlAB()))
	refCheckMatchesState(t, pool, s)
	rows = refRows(t, pool, "AIRL")
	if len(rows) != 2 || rows["AA"].LastMsgID != 3 || rows["AB"].LastMsgID != 2 {
		t.Fatalf("after second DNLD: %v", rows)
	}

	// An empty RESP empties the category.
	refApply(t, pool, s, refTr(7, "AIRL", refdata.STYPRESP))
	if rows := refRows(t, pool, "AIRL"); len(rows) != 0 {
		t.Fatalf("after empty RESP: %d rows", len(rows))
	}
}

func TestRefCLSTAndCHLTKeptApart(t *testing.T) {
	pool := newRefPool(t)
	clst, chlt := refdata.NewState("CLST"), refdata.NewState("CHLT")
	refApply(t, pool, clst, refTr(1, "CLST", refdata.STYPDNLD, refClstC11()))
	refApply(t, pool, chlt, refTr(2, "CHLT", refdata.STYPDNLD, refChltC11()))
	refApply(t, pool, clst, refTr(3, "CLST", refdata.STYPADD, refdata.Record{"CCOD": "C12", "CTNM": "Desk 12", "CNMC": "", "CCAT": "D", "CTML": "T3A", "CTRA": "Y"}))
	refCheckMatchesState(t, pool, clst)
	refCheckMatchesState(t, pool, chlt)

	desk, _ := refAttr(t, refRows(t, pool, "CLST")["C11"], "CTNM")
	chute, _ := refAttr(t, refRows(t, pool, "CHLT")["C11"], "CHNM")
	if desk != "Desk 11 North side" || chute != "Chute 11 North side" {
		t.Fatalf("CLST C11 CTNM=%v, CHLT C11 CHNM=%v", desk, chute)
	}

	// Deleting the chute leaves the counter of the same CCOD alone.
	refApply(t, pool, chlt, refTr(4, "CHLT", refdata.STYPDEL, refdata.Record{"CCOD": "C11"}))
	refCheckMatchesState(t, pool, chlt)
	refCheckMatchesState(t, pool, clst)
	if len(refRows(t, pool, "CHLT")) != 0 || len(refRows(t, pool, "CLST")) != 2 {
		t.Fatal("DEL of CHLT C11 touched CLST")
	}
	// A CHLT full replace does not remove CLST rows either.
	refApply(t, pool, chlt, refTr(5, "CHLT", refdata.STYPDNLD, refdata.Record{"CCOD": "C99", "CHNM": "Chute 99"}))
	refCheckMatchesState(t, pool, clst)
	refCheckMatchesState(t, pool, chlt)
}

func TestRefABDGKeyedByFirstChild(t *testing.T) {
	pool := newRefPool(t)
	s := refdata.NewState("ABDG")
	refApply(t, pool, s, refTr(1, "ABDG", refdata.STYPDNLD, refAbdg212(), refAbdg112(), refAbdg213()))
	refCheckMatchesState(t, pool, s)
	rows := refRows(t, pool, "ABDG")
	if len(rows) != 3 {
		t.Fatalf("ABDG rows %v", rows)
	}
	// Repeated tags with empty members keep their order and their "".
	if v, _ := refAttr(t, rows["213"], "STND"); !reflect.DeepEqual(v, []any{"213", "", "613"}) {
		t.Fatalf("ABDG 213 STND = %v", v)
	}

	upd := refdata.Record{"ABCD": "213", "DESC": "T2 Airbridge 213", "CDSC": "登机桥 213", "AHGT": "", "ATML": "T2",
		"ATHE": "N", "STND": []any{"213", "256"}, "GATE": []any{"123", "233"}, "AMNO": ""}
	refApply(t, pool, s, refTr(2, "ABDG", refdata.STYPUPD, upd))
	refApply(t, pool, s, refTr(3, "ABDG", refdata.STYPDEL, refdata.Record{"ABCD": "112"}))
	refCheckMatchesState(t, pool, s)
	if v, _ := refAttr(t, refRows(t, pool, "ABDG")["213"], "DESC"); v != "T2 Airbridge 213" {
		t.Fatalf("ABDG 213 DESC = %v", v)
	}
}

func TestRefReplaysChangeNothing(t *testing.T) {
	pool := newRefPool(t)
	s := refdata.NewState("AIRL")
	refApply(t, pool, s, refTr(1, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAA(), refAirlCX()))
	r2 := refApply(t, pool, s, refTr(2, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAB()))
	before := refSnapshot(t, pool)

	// The same Result written again (a retried transaction).
	refWrite(t, pool, s, r2)
	if after := refSnapshot(t, pool); !reflect.DeepEqual(after, before) {
		t.Fatalf("rewriting the same result changed rows\nbefore %v\nafter  %v", before, after)
	}

	// Redeliveries of the last and of an older message: Apply reports a
	// replay, the state is untouched and the re-listed writes converge.
	for _, tr := range []refdata.Transition{
		refTr(2, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAB()),
		refTr(1, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAA(), refAirlCX()),
	} {
		r := refApply(t, pool, s, tr)
		if !r.Replay {
			t.Fatalf("redelivery of %d not a replay: %+v", tr.MsgID, r)
		}
		if after := refSnapshot(t, pool); !reflect.DeepEqual(after, before) {
			t.Fatalf("replay of %d changed rows\nbefore %v\nafter  %v", tr.MsgID, before, after)
		}
	}
	refCheckMatchesState(t, pool, s)
}

func TestRefReplayRepeatsLostWrites(t *testing.T) {
	pool := newRefPool(t)
	s := refdata.NewState("AIRL")
	refApply(t, pool, s, refTr(1, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAA(), refAirlCX()))

	// Message 2 reached the goka table but its PostgreSQL transaction was
	// lost (crash between the two): the rows still show message 1.
	if _, err := refdata.Apply(s, refTr(2, "AIRL", refdata.STYPDNLD, refAirlAA(), refAirlZZ())); err != nil {
		t.Fatal(err)
	}
	if rows := refRows(t, pool, "AIRL"); len(rows) != 3 {
		t.Fatalf("rows before redelivery: %v", rows)
	}
	// Its redelivery is a replay that repeats the upsert and the deletes.
	r := refApply(t, pool, s, refTr(2, "AIRL", refdata.STYPDNLD, refAirlAA(), refAirlZZ()))
	if !r.Replay || !reflect.DeepEqual(r.Upserts, []string{"ZZ"}) || !reflect.DeepEqual(r.Deletes, []string{"CX", "UA"}) {
		t.Fatalf("replay result %+v", r)
	}
	refCheckMatchesState(t, pool, s)
}

func TestRefStaleReplayNeitherResurrectsNorOverwrites(t *testing.T) {
	pool := newRefPool(t)
	s := refdata.NewState("AIRL")
	refApply(t, pool, s, refTr(1, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAA(), refAirlCX()))
	s1 := refCloneState(t, s)
	refApply(t, pool, s, refTr(2, "AIRL", refdata.STYPDEL, refdata.Record{"ITOP": "CX"}))
	s2 := refCloneState(t, s)
	r2 := refdata.Result{Deletes: []string{"CX"}, Changed: true}
	ua := refAirlUA()
	ua["ONAM"] = "UNITED"
	refApply(t, pool, s, refTr(3, "AIRL", refdata.STYPUPD, ua))
	refApply(t, pool, s, refTr(4, "AIRL", refdata.STYPADD, refAirlCX()))
	refApply(t, pool, s, refTr(5, "AIRL", refdata.STYPDEL, refdata.Record{"ITOP": "AA"}))
	refCheckMatchesState(t, pool, s)
	before := refSnapshot(t, pool)

	// A redelivered old message, applied to the current state: AA (deleted
	// by 5) is not resurrected, UA (updated by 3) not rolled back.
	r := refApply(t, pool, s, refTr(1, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAA(), refAirlCX()))
	if !r.Replay || len(r.Upserts) != 0 || len(r.Deletes) != 0 {
		t.Fatalf("replay of 1 after 5: %+v", r)
	}
	if after := refSnapshot(t, pool); !reflect.DeepEqual(after, before) {
		t.Fatalf("stale replay changed rows\nbefore %v\nafter  %v", before, after)
	}

	// Stale writes that reach the sink anyway (a state older than the rows):
	// the last_msg_id guard keeps the newer UA and the re-added CX.
	refWrite(t, pool, s2, r2) // DEL CX of message 2, CX re-added by 4
	upd := refdata.Result{Upserts: []string{"UA"}, Replay: true}
	refWrite(t, pool, s1, upd) // UA as of message 1, updated by 3
	if after := refSnapshot(t, pool); !reflect.DeepEqual(after, before) {
		t.Fatalf("stale writes changed rows\nbefore %v\nafter  %v", before, after)
	}
	rows := refRows(t, pool, "AIRL")
	if name, _ := refAttr(t, rows["UA"], "ONAM"); name != "UNITED" || rows["CX"].LastMsgID != 4 {
		t.Fatalf("UA ONAM %v, CX last_msg_id %d", name, rows["CX"].LastMsgID)
	}
}

func TestRefLargeDownloadIsBatched(t *testing.T) {
	pool := newRefPool(t)
	s := refdata.NewState("SLST")
	const n = 2500 // more than one pipeline chunk
	recs := make([]refdata.Record, n)
	for i := range recs {
		recs[i] = refdata.Record{"SCOD": fmt.Sprintf("S%04d", i), "SNAM": fmt.Sprintf("Stand %d", i), "STML": ""}
	}
	refApply(t, pool, s, refTr(1, "SLST", refdata.STYPDNLD, recs...))
	if got := len(refRows(t, pool, "SLST")); got != n {
		t.Fatalf("%d rows, want %d", got, n)
	}
	refCheckMatchesState(t, pool, s)
	r := refApply(t, pool, s, refTr(2, "SLST", refdata.STYPDNLD, recs[:10]...))
	if len(r.Deletes) != n-10 {
		t.Fatalf("%d deletes", len(r.Deletes))
	}
	refCheckMatchesState(t, pool, s)
}

func TestRefRSTAStatusAndWindow(t *testing.T) {
	pool := newRefPool(t)
	s := refdata.NewState(refdata.RSTA)
	refApply(t, pool, s, refTr(1, refdata.RSTA, refdata.STYPDNLD, refRSTA("GATE", "21", "D", "10MAR261000", "10MAR261200")))
	refApply(t, pool, s, refTr(2, refdata.RSTA, refdata.STYPRESP, refRSTA("BELT", "3", "D", "", ""), refRSTA("STND", "212", "E", "", "")))
	refCheckMatchesState(t, pool, s) // GATE|21 is kept: RSTA never deletes by absence
	ctx := context.Background()

	start := time.Date(2026, 3, 10, 10, 0, 0, 0, testenv.Shanghai)
	end := time.Date(2026, 3, 10, 12, 0, 0, 0, testenv.Shanghai)
	for _, c := range []struct {
		at     time.Time
		status string
		until  *time.Time
	}{
		{start.Add(-time.Minute), refdata.StatusEnabled, &start},
		{start, refdata.StatusDisabled, &end},
		{end.Add(-time.Second), refdata.StatusDisabled, &end},
		{end, refdata.StatusEnabled, nil},
	} {
		row, ok, err := sink.RefRecord(ctx, pool, refTimeout, refdata.RSTA, "GATE|21", c.at, testenv.Shanghai)
		if err != nil || !ok {
			t.Fatalf("GATE|21: ok=%v err=%v", ok, err)
		}
		if row.Status != c.status || !refTimePtrEqual(row.StatusUntil, c.until) {
			t.Errorf("at %v: status %s until %v, want %s until %v", c.at, row.Status, row.StatusUntil, c.status, c.until)
		}
	}
	rows, err := sink.RefRecords(ctx, pool, refTimeout, refdata.RSTA, start, testenv.Shanghai)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.RKey+"="+r.Status)
	}
	if want := []string{"BELT|3=D", "GATE|21=D", "STND|212=E"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("RSTA rows %v, want %v", got, want)
	}

	// DEL removes the status: the resource is back to its default.
	refApply(t, pool, s, refTr(3, refdata.RSTA, refdata.STYPDEL, refdata.Record{refdata.TagRTYP: "BELT", refdata.TagRSID: "3"}))
	refCheckMatchesState(t, pool, s)
	// Other categories carry no status.
	as := refdata.NewState("AIRL")
	refApply(t, pool, as, refTr(4, "AIRL", refdata.STYPDNLD, refAirlUA()))
	if row := refRows(t, pool, "AIRL")["UA"]; row.Status != "" || row.StatusUntil != nil {
		t.Fatalf("AIRL row with a status: %+v", row)
	}
}

func refTimePtrEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func TestRefWriteWithCompletionMark(t *testing.T) {
	pool := newRefPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), refTimeout)
	defer cancel()
	if _, err := pool.Exec(ctx, `INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at, n_transitions)
		VALUES (7, 'ROUTED', $1, $1, 1)`, refT0); err != nil {
		t.Fatal(err)
	}
	s := refdata.NewState("AIRL")
	r, err := refdata.Apply(s, refTr(7, "AIRL", refdata.STYPDNLD, refAirlUA()))
	if err != nil {
		t.Fatal(err)
	}

	// A transaction that fails after the write leaves neither rows nor mark.
	boom := errors.New("boom")
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := sink.WriteRefData(ctx, tx, s, r); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || len(refRows(t, pool, "AIRL")) != 0 {
		t.Fatalf("rolled-back write: err=%v rows=%v", err, refRows(t, pool, "AIRL"))
	}

	var completed bool
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := sink.WriteRefData(ctx, tx, s, r); err != nil {
			return err
		}
		completed, err = sink.MarkApplied(ctx, tx, 7, "refdata", "AIRL", sink.Applied{Outcome: "applied", StateVersion: 1}, refT0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !completed {
		t.Fatal("message 7 not completed")
	}
	refCheckMatchesState(t, pool, s)
}

func TestRefWriteRejectsMismatchedInput(t *testing.T) {
	pool := newRefPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), refTimeout)
	defer cancel()
	write := func(s *refdata.State, r refdata.Result) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return sink.WriteRefData(ctx, tx, s, r) })
	}
	if err := write(nil, refdata.Result{}); err != nil {
		t.Fatalf("empty result on nil state: %v", err)
	}
	if err := write(nil, refdata.Result{Deletes: []string{"UA"}}); err == nil {
		t.Fatal("non-empty result on nil state accepted")
	}
	if err := write(refdata.NewState("AIRL"), refdata.Result{Upserts: []string{"UA"}}); err == nil {
		t.Fatal("upsert of a key absent from the state accepted")
	}
	if _, err := sink.RefRecords(ctx, pool, 0, "AIRL", refT0, nil); err == nil {
		t.Fatal("RefRecords with no timeout accepted")
	}
	if _, _, err := sink.RefRecord(ctx, pool, 0, "AIRL", "UA", refT0, nil); err == nil {
		t.Fatal("RefRecord with no timeout accepted")
	}
	rows, err := sink.RefRecords(ctx, pool, refTimeout, "GLST", refT0, nil)
	if err != nil || rows == nil || len(rows) != 0 {
		t.Fatalf("empty category: %v %v", rows, err)
	}
}

// A replayed older message (docs/design.md#replay) writes over the rows a
// newer message wrote, and a replayed full replace deletes rows a newer
// message wrote; the stale state from before the replay still cannot roll a
// row back.
func TestRefReplayedOlderMessageWrites(t *testing.T) {
	pool := newRefPool(t)
	s := refdata.NewState("AIRL")
	refApply(t, pool, s, refTr(1, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAA()))
	ua := refAirlUA()
	ua["ONAM"] = "UNITED 5"
	refApply(t, pool, s, refTr(5, "AIRL", refdata.STYPUPD, ua))
	before := refCloneState(t, s)

	ua3 := refAirlUA()
	ua3["ONAM"] = "UNITED 3"
	replayed := refTr(3, "AIRL", refdata.STYPUPD, ua3)
	replayed.Replay = 7
	if r := refApply(t, pool, s, replayed); r.Replay || !reflect.DeepEqual(r.Upserts, []string{"UA"}) {
		t.Fatalf("replayed UPD: %+v", r)
	}
	refCheckMatchesState(t, pool, s)
	if name, _ := refAttr(t, refRows(t, pool, "AIRL")["UA"], "ONAM"); name != "UNITED 3" {
		t.Fatalf("UA after the replay of message 3: %v", name)
	}
	// The state from before the replay, written late, changes nothing.
	after := refSnapshot(t, pool)
	refWrite(t, pool, before, refdata.Result{Upserts: []string{"UA"}, Replay: true})
	if got := refSnapshot(t, pool); !reflect.DeepEqual(got, after) {
		t.Fatalf("a stale write changed rows\nbefore %v\nafter  %v", after, got)
	}

	// A replayed DNLD of message 2 without UA deletes the row.
	dnld := refTr(2, "AIRL", refdata.STYPDNLD, refAirlAA())
	dnld.Replay = 8
	if r := refApply(t, pool, s, dnld); !reflect.DeepEqual(r.Deletes, []string{"UA"}) {
		t.Fatalf("replayed DNLD: %+v", r)
	}
	refCheckMatchesState(t, pool, s)
}
