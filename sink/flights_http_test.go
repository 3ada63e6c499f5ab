package sink_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/tables/flight"
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
	srv := httptest.NewServer(&sink.FlightsHandler{Pool: pool, Timeout: 5 * time.Second, Log: testenv.Logger(t)})
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
	(&sink.FlightsHandler{Pool: pool, Timeout: 5 * time.Second}).Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/flights/20", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"YG9001"`) {
		t.Errorf("registered route: %d %s", rec.Code, rec.Body)
	}
}

func TestFlightsHTTPPostgresDown(t *testing.T) {
	dsn := testenv.NewPG(t)
	proxy := testenv.NewProxy(t, "127.0.0.1:5432")
	pool, err := sink.OpenPG(context.Background(), sink.Config{
		PGDSN: strings.Replace(dsn, "127.0.0.1:5432", proxy.Addr(), 1), Timeout: 2 * time.Second, PGMaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	flWrite(t, pool, flApply(t, nil, flSchedule(1, "5", map[string]string{"FLNO": "X5"}, nil)))
	srv := httptest.NewServer(&sink.FlightsHandler{Pool: pool, Timeout: 2 * time.Second, Log: testenv.Logger(t)})
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
