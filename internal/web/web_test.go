package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"msgx/internal/clock"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testConfig is a valid configuration whose throttle does not get in the
// way of the tests that present many wrong tokens (throttle_test.go sets
// the default 5 a minute).
func testConfig() Config {
	return Config{ReadTimeout: 10 * time.Second, WriteTimeout: time.Minute, MaxConcurrent: 64, BindTimeout: time.Second, LoginTTL: time.Hour,
		ThrottleFailures: 1000, ThrottlePeriod: time.Minute}
}

// routes answers "ok" on the daemon's kinds of routes.
func routes() *http.ServeMux {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }
	for _, p := range []string{"GET /{$}", "GET /flights/{flid}", "GET /flights", "GET /refdata/{rtype}", "GET /status",
		"GET /metrics", "GET /healthz", "GET /readyz", "POST /cminmsgs/send", "GET /later"} {
		mux.HandleFunc(p, ok)
	}
	return mux
}

func newServer(t *testing.T, cfg Config, h http.Handler, c clock.Clock) *Server {
	t.Helper()
	s, err := New(cfg, Deps{Addr: "127.0.0.1:0", Handler: h, ShutdownTimeout: 5 * time.Second, Clock: c, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func call(t *testing.T, method, url, auth string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(""))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// With MSGX_HTTP_READ_TOKEN set every read endpoint, including one added
// later, needs it; the probes and the compatibility endpoint do not. Without
// it everything answers.
func TestReadTokenGuardsEveryReadEndpoint(t *testing.T) {
	read := []string{"/", "/flights/15", "/flights?day=2026-11-30", "/refdata/AIRL", "/status", "/metrics", "/later"}
	open := [][2]string{{"GET", "/healthz"}, {"GET", "/readyz"}, {"POST", "/cminmsgs/send"}}

	cfg := testConfig()
	cfg.ReadToken = "r3ad"
	s := newServer(t, cfg, routes(), clock.Real{})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	refused := 0
	for _, p := range read {
		for _, auth := range []string{"", "Bearer nope", "Basic cjNhZA==", "Bearer", "r3ad"} {
			if c := call(t, "GET", srv.URL+p, auth); c != 401 {
				t.Errorf("GET %s with %q: %d, want 401", p, auth, c)
			}
			refused++
		}
		for _, auth := range []string{"Bearer r3ad", "bearer r3ad", "BEARER  r3ad"} {
			if c := call(t, "GET", srv.URL+p, auth); c != 200 {
				t.Errorf("GET %s with %q: %d, want 200", p, auth, c)
			}
		}
	}
	for _, o := range open {
		if c := call(t, o[0], srv.URL+o[1], ""); c != 200 {
			t.Errorf("%s %s without a token: %d, want 200", o[0], o[1], c)
		}
	}
	if got := s.Stats().Unauthorized; got != int64(refused) {
		t.Errorf("unauthorized counted %d, want %d", got, refused)
	}

	s = newServer(t, testConfig(), routes(), clock.Real{})
	srv2 := httptest.NewServer(s.Handler())
	defer srv2.Close()
	for _, p := range read {
		if c := call(t, "GET", srv2.URL+p, ""); c != 200 {
			t.Errorf("no read token configured: GET %s %d, want 200", p, c)
		}
	}
}

func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	for auth, want := range map[string]string{"Bearer t": "t", "bearer t": "t", "bEaReR   t ": "t", "Bearer": "", "Basic t": "", "": "", "Bearert": ""} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", auth)
		if got, ok := Bearer(r); got != want || ok != (want != "") {
			t.Errorf("Bearer(%q) = %q %v, want %q", auth, got, ok, want)
		}
	}
}

// Requests beyond MSGX_HTTP_MAX_CONCURRENT are refused at once with 503 and
// counted; /healthz still answers while the slots are taken.
func TestConcurrentRequestsBounded(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	mux := routes()
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
		entered.Done()
		<-release
	})
	cfg := testConfig()
	cfg.MaxConcurrent = 2
	s := newServer(t, cfg, mux, clock.Real{})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	done := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() { done <- call(t, "GET", srv.URL+"/slow", "") }()
	}
	entered.Wait()
	if c := call(t, "GET", srv.URL+"/status", ""); c != 503 {
		t.Fatalf("third request while two are served: %d, want 503", c)
	}
	if c := call(t, "GET", srv.URL+"/healthz", ""); c != 200 {
		t.Fatalf("/healthz while the slots are taken: %d", c)
	}
	close(release)
	for i := 0; i < 2; i++ {
		if c := <-done; c != 200 {
			t.Fatalf("served request %d", c)
		}
	}
	if c := call(t, "GET", srv.URL+"/status", ""); c != 200 {
		t.Fatalf("after the slots freed: %d", c)
	}
	if got := s.Stats().Busy; got != 1 {
		t.Fatalf("busy counted %d, want 1", got)
	}
}

// Clients that send their body (or their headers) one byte at a time are
// cut off once MSGX_HTTP_READ_TIMEOUT has passed, and counted. This runs on
// the real clock because the cut-off is a socket deadline; the bound the
// test waits for (10 s for a 300 ms timeout) is generous on purpose.
func TestSlowClientsCutOffAndCounted(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /cminmsgs/send", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "too slow", http.StatusRequestTimeout)
			return
		}
		_, _ = io.WriteString(w, "1")
	})
	cfg := testConfig()
	cfg.ReadTimeout = 300 * time.Millisecond
	s := newServer(t, cfg, mux, clock.Real{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	for s.Addr() == "" {
		time.Sleep(5 * time.Millisecond)
	}

	const bodies, headers = 20, 5
	var wg sync.WaitGroup
	closed := make(chan time.Duration, bodies+headers)
	trickle := func(prefix string) {
		defer wg.Done()
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		start := time.Now()
		if _, err := io.WriteString(c, prefix); err != nil {
			t.Error(err)
			return
		}
		// Reads whatever the server answers until it closes the connection.
		go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(c)) }()
		for time.Since(start) < 10*time.Second {
			if _, err := c.Write([]byte("x")); err != nil {
				closed <- time.Since(start)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Error("slow client still connected after 10 s")
	}
	for i := 0; i < bodies; i++ {
		wg.Add(1)
		go trickle("POST /cminmsgs/send HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n<MSG>")
	}
	for i := 0; i < headers; i++ {
		wg.Add(1)
		go trickle("POST /cminmsgs/send HTTP/1.1\r\nX-Slow: ")
	}
	wg.Wait()
	close(closed)
	n := 0
	for range closed {
		n++
	}
	if n != bodies+headers {
		t.Fatalf("%d of %d slow clients cut off", n, bodies+headers)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().SlowClients < bodies+headers && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := s.Stats().SlowClients; got != bodies+headers {
		t.Fatalf("slow clients counted %d, want %d", got, bodies+headers)
	}
	// A prompt client is served as usual.
	resp, err := http.Post("http://"+s.Addr()+"/cminmsgs/send", "text/xml", strings.NewReader("<MSG/>"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("prompt client: %v %v", resp, err)
	}
	resp.Body.Close()
}

// Start-up right after a kill -9: the address is still in use for a
// moment. The server retries binding (on the injected clock) and serves
// once it is free.
func TestBindRetriesWhileAddressInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.BindTimeout = 30 * time.Second
	s, err := New(cfg, Deps{Addr: busy.Addr().String(), Handler: routes(), ShutdownTimeout: time.Second, Clock: fake, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for i := 0; i < 20; i++ { // 5 s of retries
		if err := fake.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		fake.Advance(bindRetry)
	}
	if err := fake.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	busy.Close()
	fake.Advance(bindRetry)
	url := fmt.Sprintf("http://%s/healthz", busy.Addr())
	var code int
	for i := 0; i < 200 && code != 200; i++ {
		if resp, err := http.Get(url); err == nil {
			code = resp.StatusCode
			resp.Body.Close()
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if code != 200 {
		t.Fatalf("not serving after the address was freed: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// An address that stays in use fails start-up once MSGX_HTTP_BIND_TIMEOUT
// has passed.
func TestBindGivesUpAfterBindTimeout(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	fake := clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.BindTimeout = 2 * time.Second
	s, err := New(cfg, Deps{Addr: busy.Addr().String(), Handler: routes(), ShutdownTimeout: time.Second, Clock: fake, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	for i := 0; ; i++ {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "address already in use") {
				t.Fatalf("Run = %v, want address already in use", err)
			}
			if i != 8 {
				t.Fatalf("gave up after %d retries, want 8 (2 s / 250 ms)", i)
			}
			return
		default:
		}
		wctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if fake.BlockUntil(wctx, 1) == nil {
			fake.Advance(bindRetry)
		} else {
			i--
		}
		cancel()
	}
}
