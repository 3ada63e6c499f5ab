package refdata_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/testenv"
	refdataproc "msgx/processors/refdata"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/refdata"
)

// refHTTPFixture loads AIRL, GLST and RSTA rows through the real Apply and
// WriteRefData and serves them with a fake clock.
func refHTTPFixture(t *testing.T) (*pgxpool.Pool, *clock.Fake, *httptest.Server) {
	t.Helper()
	pool := newRefPool(t)
	refApply(t, pool, refdata.NewState("AIRL"), refTr(1, "AIRL", refdata.STYPDNLD, refAirlUA(), refAirlAA(), refAirlCX()))
	refApply(t, pool, refdata.NewState("GLST"), refTr(2, "GLST", refdata.STYPDNLD,
		refdata.Record{"GCOD": "G/1", "GNAM": "Gate one", "GTML": ""}))
	rsta := refdata.NewState(refdata.RSTA)
	refApply(t, pool, rsta, refTr(3, refdata.RSTA, refdata.STYPDNLD, refRSTA("GATE", "21", "D", "10MAR261000", "10MAR261200")))
	refApply(t, pool, rsta, refTr(4, refdata.RSTA, refdata.STYPRESP, refRSTA("BELT", "3", "D", "", ""), refRSTA("STND", "212", "E", "", "")))

	clk := clock.NewFake(time.Date(2026, 3, 10, 9, 0, 0, 0, testenv.Shanghai))
	h := &refdataproc.Handler{Pool: pool, Timeout: refTimeout, Clock: clk, Loc: testenv.Shanghai, Log: testenv.Logger(t)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return pool, clk, srv
}

// refDo sends a request and returns the status, the Content-Type and the body.
func refDo(t *testing.T, method, url string) (int, string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), refTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// refGetJSON fetches url expecting 200 JSON and decodes the body into v.
func refGetJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, ctype, body := refDo(t, http.MethodGet, url)
	if code != http.StatusOK || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("GET %s: %d %s %s", url, code, ctype, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: decoding %s: %v", url, body, err)
	}
}

func refFieldNames(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestRefHTTPListAndGet(t *testing.T) {
	_, _, srv := refHTTPFixture(t)

	var list []map[string]any
	refGetJSON(t, srv.URL+"/refdata/AIRL", &list)
	var keys []string
	for _, e := range list {
		keys = append(keys, e["key"].(string))
		if got, want := refFieldNames(e), []string{"attrs", "key", "lastMsgId", "updatedAt"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("AIRL element fields %v, want %v", got, want)
		}
	}
	if want := []string{"AA", "CX", "UA"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("AIRL keys %v, want %v (sorted)", keys, want)
	}
	if got, want := list[2]["attrs"], refRecordValue(t, refAirlUA()); !reflect.DeepEqual(got, want) {
		t.Fatalf("UA attrs\n got %v\nwant %v", got, want)
	}
	if list[2]["lastMsgId"] != float64(1) || list[2]["updatedAt"] != "2026-03-10T01:01:00Z" {
		t.Fatalf("UA bookkeeping: %v %v", list[2]["lastMsgId"], list[2]["updatedAt"])
	}

	// The RTYPE is matched case-insensitively.
	var lower []map[string]any
	refGetJSON(t, srv.URL+"/refdata/airl", &lower)
	if len(lower) != 3 {
		t.Fatalf("/refdata/airl: %d entries", len(lower))
	}

	// A supported category without rows is an empty array, not a 404.
	code, _, body := refDo(t, http.MethodGet, srv.URL+"/refdata/BLST")
	if code != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
		t.Fatalf("empty BLST: %d %s", code, body)
	}

	var ua map[string]any
	refGetJSON(t, srv.URL+"/refdata/AIRL/UA", &ua)
	if ua["key"] != "UA" || !reflect.DeepEqual(ua["attrs"], refRecordValue(t, refAirlUA())) {
		t.Fatalf("AIRL/UA: %v", ua)
	}
	// An empty tag is served as "" (unavailable), not dropped.
	if trml := ua["attrs"].(map[string]any)["TRML"].(map[string]any); trml["@MVIN"] != "" {
		t.Fatalf("UA TRML %v", trml)
	}

	// A key with a slash, escaped in its one path segment.
	var g map[string]any
	refGetJSON(t, srv.URL+"/refdata/GLST/G%2F1", &g)
	if g["key"] != "G/1" {
		t.Fatalf("GLST G/1: %v", g)
	}

	for _, c := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/refdata/AIRL/XX", http.StatusNotFound},   // unknown key
		{http.MethodGet, "/refdata/CLST/UA", http.StatusNotFound},   // key of another category
		{http.MethodGet, "/refdata/FLOP", http.StatusNotFound},      // not reference data
		{http.MethodGet, "/refdata/NOPE/UA", http.StatusNotFound},   // not reference data
		{http.MethodGet, "/refdata", http.StatusNotFound},           // no route
		{http.MethodGet, "/refdata/AIRL/UA/x", http.StatusNotFound}, // no route
		{http.MethodGet, "/refdata/AIRL/", http.StatusNotFound},     // empty key
		{http.MethodPost, "/refdata/AIRL", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/refdata/AIRL/UA", http.StatusMethodNotAllowed},
	} {
		if code, _, body := refDo(t, c.method, srv.URL+c.path); code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.code)
		}
	}
}

func TestRefHTTPRSTAStatusFollowsTheClock(t *testing.T) {
	_, clk, srv := refHTTPFixture(t)
	start := time.Date(2026, 3, 10, 10, 0, 0, 0, testenv.Shanghai)
	end := time.Date(2026, 3, 10, 12, 0, 0, 0, testenv.Shanghai)
	stamp := func(t time.Time) any { return t.UTC().Format(time.RFC3339) }

	for _, c := range []struct {
		name   string
		now    time.Time
		status string
		until  any // nil: JSON null
	}{
		{"before the window", start.Add(-time.Hour), refdata.StatusEnabled, stamp(start)},
		{"inside the window", start.Add(30 * time.Minute), refdata.StatusDisabled, stamp(end)},
		{"after the window: restored", end, refdata.StatusEnabled, nil},
	} {
		clk.Set(c.now)
		for _, path := range []string{"/refdata/RSTA/GATE%7C21", "/refdata/RSTA/GATE|21"} {
			var e map[string]any
			refGetJSON(t, srv.URL+path, &e)
			until, present := e["statusUntil"]
			if e["key"] != "GATE|21" || e["status"] != c.status || !present || until != c.until {
				t.Errorf("%s, %s: %v, want status %s until %v", c.name, path, e, c.status, c.until)
			}
		}
	}

	// The list carries status and statusUntil on every RSTA entry.
	var list []map[string]any
	refGetJSON(t, srv.URL+"/refdata/RSTA", &list)
	got := map[string][2]any{}
	for _, e := range list {
		if fields := refFieldNames(e); !reflect.DeepEqual(fields, []string{"attrs", "key", "lastMsgId", "status", "statusUntil", "updatedAt"}) {
			t.Fatalf("RSTA element fields %v", fields)
		}
		got[e["key"].(string)] = [2]any{e["status"], e["statusUntil"]}
	}
	want := map[string][2]any{
		"BELT|3":   {refdata.StatusDisabled, nil}, // D without a window: until a new event
		"GATE|21":  {refdata.StatusEnabled, nil},
		"STND|212": {refdata.StatusEnabled, nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RSTA list %v, want %v", got, want)
	}
	if code, _, _ := refDo(t, http.MethodGet, srv.URL+"/refdata/RSTA/GATE%7C99"); code != http.StatusNotFound {
		t.Fatalf("unknown RSTA resource: %d", code)
	}
}

func TestRefHTTPDatabaseFailures(t *testing.T) {
	// Nothing listens on port 1: PostgreSQL is unreachable, an outage.
	down, err := sink.OpenPG(context.Background(), sink.Config{
		PGDSN: "postgres://postgres@127.0.0.1:1/msgx?sslmode=disable", Timeout: 2 * time.Second, PGMaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	clk := clock.NewFake(refT0)
	srv := httptest.NewServer(&refdataproc.Handler{Pool: down, Timeout: 2 * time.Second, Clock: clk, Log: testenv.Logger(t)})
	t.Cleanup(srv.Close)
	for _, path := range []string{"/refdata/AIRL", "/refdata/AIRL/UA"} {
		if code, _, body := refDo(t, http.MethodGet, srv.URL+path); code != http.StatusServiceUnavailable {
			t.Errorf("GET %s with PostgreSQL down: %d %s, want 503", path, code, body)
		}
	}

	// A handler without a database timeout is misconfigured: a 500, not a
	// silently unbounded query.
	pool := newRefPool(t)
	bad := httptest.NewServer(&refdataproc.Handler{Pool: pool, Clock: clk, Log: testenv.Logger(t)})
	t.Cleanup(bad.Close)
	if code, _, body := refDo(t, http.MethodGet, bad.URL+"/refdata/AIRL"); code != http.StatusInternalServerError {
		t.Errorf("GET without Timeout: %d %s, want 500", code, body)
	}
}

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
