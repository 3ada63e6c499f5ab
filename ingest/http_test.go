package ingest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"msgx/internal/clock"
	"msgx/internal/testenv"
	"msgx/sink"
)

func TestSendEndpoint(t *testing.T) {
	dsn := testenv.NewMySQL(t)
	db := testenv.OpenMySQL(t, dsn)
	now := time.Date(2026, 11, 30, 9, 30, 0, 0, testenv.Shanghai)
	h := &SendHandler{
		Inbox: NewInbox(db, nil, "cminmsgs", 5*time.Second),
		Cfg:   HTTPConfig{MaxBody: 2048, Token: "s3cret", Timeout: 5 * time.Second},
		Clock: clock.NewFake(now), Log: testenv.Logger(t),
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(body []byte, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	msg := `<?xml version="1.0" encoding="UTF-8"?><MSG><META><TYPE>FLOP</TYPE></META><X>登机口</X></MSG>`
	code, body := post([]byte(msg), "s3cret")
	if code != 200 {
		t.Fatalf("valid message: %d %s", code, body)
	}
	id, err := strconv.ParseInt(body, 10, 64)
	if err != nil {
		t.Fatalf("200 body %q is not an ID", body)
	}
	var stored string
	var received time.Time
	if err := db.QueryRow("SELECT CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED FROM cminmsgs WHERE CMINMSGS_ID = ?", id).Scan(&stored, &received); err != nil {
		t.Fatal(err)
	}
	if stored != msg || !received.Equal(now) {
		t.Fatalf("stored %q at %v", stored, received)
	}

	// GBK bytes declared GB2312 are stored as UTF-8 text.
	gb, _ := simplifiedchinese.GBK.NewEncoder().String(`<?xml version="1.0" encoding="GB2312"?><MSG><X>登机口</X></MSG>`)
	code, body = post([]byte(gb), "s3cret")
	if code != 200 {
		t.Fatalf("GB2312 message: %d %s", code, body)
	}
	gid, _ := strconv.ParseInt(body, 10, 64)
	if err := db.QueryRow("SELECT CMINMSGS_CLOB_MSG FROM cminmsgs WHERE CMINMSGS_ID = ?", gid).Scan(&stored); err != nil || !strings.Contains(stored, "登机口") {
		t.Fatalf("GB2312 body stored as %q (%v)", stored, err)
	}

	for _, tc := range []struct {
		name  string
		body  []byte
		token string
		code  int
	}{
		{"no token", []byte(msg), "", 401},
		{"wrong token", []byte(msg), "nope", 401},
		{"empty", []byte("  \n"), "s3cret", 400},
		{"not xml", []byte("hello world"), "s3cret", 400},
		{"truncated xml", []byte("<MSG><META>"), "s3cret", 400},
		{"two roots", []byte("<A/><B/>"), "s3cret", 400},
		{"invalid utf-8", []byte{'<', 'A', '>', 0xff, '<', '/', 'A', '>'}, "s3cret", 400},
		{"too large", []byte("<MSG>" + strings.Repeat("x", 4096) + "</MSG>"), "s3cret", 413},
	} {
		if code, body := post(tc.body, tc.token); code != tc.code {
			t.Errorf("%s: %d %q, want %d", tc.name, code, body, tc.code)
		}
	}
	resp, err := http.Get(srv.URL)
	if err != nil || resp.StatusCode != 405 {
		t.Fatalf("GET: %v %v", resp.StatusCode, err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM cminmsgs").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rejected requests wrote rows: %d", n)
	}
}

func TestSendEndpointDatabaseFailure(t *testing.T) {
	dsn := testenv.NewMySQL(t)
	proxy := testenv.NewProxy(t, "127.0.0.1:3306")
	db, err := sink.OpenMySQL(sink.Config{MySQLDSN: strings.Replace(dsn, "127.0.0.1:3306", proxy.Addr(), 1), Timeout: 2 * time.Second}, testenv.Shanghai, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := &SendHandler{Inbox: NewInbox(db, nil, "cminmsgs", 2*time.Second), Cfg: HTTPConfig{MaxBody: 1 << 20, Timeout: 3 * time.Second},
		Clock: clock.NewFake(time.Now()), Log: testenv.Logger(t)}
	proxy.Down()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/cminmsgs/send", strings.NewReader("<MSG/>")))
	if rec.Code < 500 {
		t.Fatalf("database down answered %d %q; never a false 200", rec.Code, rec.Body.String())
	}
	// A table that does not exist is a failure too.
	direct := testenv.OpenMySQL(t, dsn)
	h.Inbox = NewInbox(direct, nil, "missing_table", 2*time.Second)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/cminmsgs/send", strings.NewReader("<MSG/>")))
	if rec.Code != 500 {
		t.Fatalf("missing table answered %d", rec.Code)
	}
	h.Disabled = "shadow mode: msgx never writes to MySQL"
	rec = httptest.NewRecorder()
	h.Inbox = NewInbox(direct, nil, "cminmsgs", 2*time.Second)
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/cminmsgs/send", strings.NewReader("<MSG/>")))
	if rec.Code != 503 {
		t.Fatalf("disabled endpoint answered %d", rec.Code)
	}
}
