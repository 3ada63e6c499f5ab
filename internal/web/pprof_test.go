package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"msgx/internal/clock"
)

// MSGX_PPROF serves the profiler behind the read token, and only then.
func TestPprofBehindTheReadToken(t *testing.T) {
	cfg := testConfig()
	cfg.Pprof = true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "MSGX_HTTP_READ_TOKEN") {
		t.Fatalf("pprof without a read token: %v", err)
	}
	cfg.ReadToken = "r3ad"
	srv := httptest.NewServer(newServer(t, cfg, routes(), clock.Real{}).Handler())
	defer srv.Close()
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		if c := call(t, "GET", srv.URL+p, ""); c != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, c)
		}
	}
	req, _ := http.NewRequest("GET", srv.URL+"/debug/pprof/goroutine?debug=1", nil)
	req.Header.Set("Authorization", "Bearer r3ad")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("goroutine profile: %d %.200s", resp.StatusCode, body)
	}

	cfg.Pprof = false
	off := httptest.NewServer(newServer(t, cfg, routes(), clock.Real{}).Handler())
	defer off.Close()
	if c := call(t, "GET", off.URL+"/debug/pprof/", "Bearer r3ad"); c != http.StatusNotFound {
		t.Errorf("pprof off: GET /debug/pprof/ %d, want 404", c)
	}
}
