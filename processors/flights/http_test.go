package flights_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"msgx/internal/testenv"
	"msgx/processors/flights"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// flGet sends a request and returns the status, the Content-Type and the
// body.
func flGet(t *testing.T, method, url string) (int, string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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

func TestFlightsHTTP(t *testing.T) {
	pool := flPool(t)
	a := flRich(t, "20", 10)
	b := flApply(t, flRich(t, "3", 11), flDelete(12, "3"))
	flWrite(t, pool, a, b)
	srv := httptest.NewServer(&flights.Handler{Pool: pool, Timeout: 5 * time.Second, Log: testenv.Logger(t)})
	t.Cleanup(srv.Close)

	code, ctype, body := flGet(t, http.MethodGet, srv.URL+"/flights/20")
	if code != http.StatusOK || ctype != "application/json" {
		t.Fatalf("GET /flights/20: %d %s %s", code, ctype, body)
	}
	flSameJSON(t, body, a.View())
	// The body is the stored document itself: what GetFlight returns.
	stored, _, _ := sink.GetFlight(context.Background(), pool, "20")
	if string(body) != string(stored) {
		t.Fatalf("served %s, stored %s", body, stored)
	}
	// A deleted flight is still readable, with its state.
	code, _, body = flGet(t, http.MethodGet, srv.URL+"/flights/3")
	if code != http.StatusOK {
		t.Fatalf("GET /flights/3: %d %s", code, body)
	}
	flSameJSON(t, body, b.View())

	if code, _, body := flGet(t, http.MethodGet, srv.URL+"/flights/999"); code != http.StatusNotFound {
		t.Errorf("unknown flight: %d %s", code, body)
	}

	code, ctype, body = flGet(t, http.MethodGet, srv.URL+"/flights?day=2026-01-23")
	if code != http.StatusOK || ctype != "application/json" {
		t.Fatalf("GET /flights?day: %d %s %s", code, ctype, body)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(body, &list); err != nil || len(list) != 2 {
		t.Fatalf("list %s: %v", body, err)
	}
	flSameJSON(t, list[0], b.View())
	flSameJSON(t, list[1], a.View())
	if code, _, body := flGet(t, http.MethodGet, srv.URL+"/flights?day=2026-02-01"); code != http.StatusOK || string(body) != "[]" {
		t.Errorf("empty day: %d %s", code, body)
	}

	for _, q := range []string{"", "?day=", "?day=2026-1-23", "?day=23JAN26", "?day=" + url.QueryEscape("2026-02-30")} {
		if code, _, body := flGet(t, http.MethodGet, srv.URL+"/flights"+q); code != http.StatusBadRequest {
			t.Errorf("GET /flights%s: %d %s, want 400", q, code, body)
		}
	}
	if code, _, _ := flGet(t, http.MethodPost, srv.URL+"/flights/20"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", code)
	}
	// The handler mounts beside other routes too.
	mux := http.NewServeMux()
	(&flights.Handler{Pool: pool, Timeout: 5 * time.Second}).Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/flights/20", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"YG9001"`) {
		t.Errorf("registered route: %d %s", rec.Code, rec.Body)
	}
}

func TestFlightsHTTPPostgresDown(t *testing.T) {
	dsn := sinktest.NewPG(t)
	proxy := testenv.NewProxy(t, "127.0.0.1:5432")
	pool, err := sink.OpenPG(context.Background(), sink.Config{
		PGDSN: strings.Replace(dsn, "127.0.0.1:5432", proxy.Addr(), 1), Timeout: 2 * time.Second, PGMaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	flWrite(t, pool, flApply(t, nil, flSchedule(1, "5", map[string]string{"FLNO": "X5"}, nil)))
	srv := httptest.NewServer(&flights.Handler{Pool: pool, Timeout: 2 * time.Second, Log: testenv.Logger(t)})
	t.Cleanup(srv.Close)

	proxy.Down()
	for _, path := range []string{"/flights/5", "/flights?day=2026-01-23"} {
		if code, _, body := flGet(t, http.MethodGet, srv.URL+path); code != http.StatusServiceUnavailable {
			t.Errorf("GET %s with PostgreSQL down: %d %s, want 503", path, code, body)
		}
	}
	proxy.Up()
	code, _, body := flGet(t, http.MethodGet, srv.URL+"/flights/5")
	var doc struct {
		Fields map[string]string `json:"fields"`
		State  string            `json:"state"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &doc) != nil || doc.Fields["FLNO"] != "X5" || doc.State != flight.StateActive {
		t.Fatalf("after the outage: %d %s", code, body)
	}
}

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
