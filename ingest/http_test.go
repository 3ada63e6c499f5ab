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
	"msgx/sink/aodb"
	"msgx/sink/sinktest"
)

func TestSendEndpoint(t *testing.T) {
	dsn := testenv.NewMySQL(t)
	db := sinktest.OpenMySQL(t, dsn)
	now := time.Date(2026, 11, 30, 9, 30, 0, 0, testenv.Shanghai)
	h := &SendHandler{
		Inbox: sinktest.Tables(t, db, nil, "cminmsgs", 5*time.Second),
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
	// The stored text is UTF-8 and says so: a reader that honours the
	// declaration decodes it right.
	if want := `<?xml version="1.0" encoding="UTF-8"?><MSG><X>登机口</X></MSG>`; stored != want {
		t.Fatalf("GB2312 body stored as %q, want %q", stored, want)
	}
	// The bearer scheme is case-insensitive (RFC 7235).
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(msg))
	req.Header.Set("Authorization", "bearer s3cret")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("lowercase bearer scheme: %v %v", resp.StatusCode, err)
	} else {
		resp.Body.Close()
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
	if err := db.QueryRow("SELECT COUNT(*) FROM cminmsgs").Scan(&n); err != nil || n != 3 {
		t.Fatalf("rejected requests wrote rows: %d", n)
	}
}

func TestSendEndpointDatabaseFailure(t *testing.T) {
	dsn := testenv.NewMySQL(t)
	proxy := testenv.NewProxy(t, "127.0.0.1:3306")
	db, err := sink.OpenMySQL(sink.Config{MySQLDSN: strings.Replace(dsn, "127.0.0.1:3306", proxy.Addr(), 1), Timeout: 2 * time.Second}, sinktest.ShanghaiInbox, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := &SendHandler{Inbox: sinktest.Tables(t, db, nil, "cminmsgs", 2*time.Second), Cfg: HTTPConfig{MaxBody: 1 << 20, Timeout: 3 * time.Second},
		Clock: clock.NewFake(time.Now()), Log: testenv.Logger(t)}
	proxy.Down()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/cminmsgs/send", strings.NewReader("<MSG/>")))
	if rec.Code < 500 {
		t.Fatalf("database down answered %d %q; never a false 200", rec.Code, rec.Body.String())
	}
	// A table that does not exist is a failure too.
	direct := sinktest.OpenMySQL(t, dsn)
	h.Inbox = sinktest.Tables(t, direct, nil, "missing_table", 2*time.Second)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/cminmsgs/send", strings.NewReader("<MSG/>")))
	if rec.Code != 500 {
		t.Fatalf("missing table answered %d", rec.Code)
	}
	h.Disabled = "shadow mode: msgx never writes to MySQL"
	rec = httptest.NewRecorder()
	h.Inbox = sinktest.Tables(t, direct, nil, "cminmsgs", 2*time.Second)
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/cminmsgs/send", strings.NewReader("<MSG/>")))
	if rec.Code != 503 {
		t.Fatalf("disabled endpoint answered %d", rec.Code)
	}
}

// The declaration of a stored text names UTF-8 whatever the body declared,
// since the stored text is UTF-8.
func TestCheckXMLRewritesTheDeclaration(t *testing.T) {
	gbk, _ := simplifiedchinese.GBK.NewEncoder().String(`<?xml version='1.0' encoding='gbk' standalone="yes"?><MSG>航班</MSG>`)
	for in, want := range map[string]string{
		gbk: `<?xml version='1.0' encoding='UTF-8' standalone="yes"?><MSG>航班</MSG>`,
		`<?xml version="1.0" encoding="GB2312"?><MSG>航班</MSG>`: `<?xml version="1.0" encoding="UTF-8"?><MSG>航班</MSG>`,
		`<?xml version="1.0" encoding="utf-8"?><MSG>航班</MSG>`:  `<?xml version="1.0" encoding="utf-8"?><MSG>航班</MSG>`,
		`<?xml version="1.0"?><MSG>航班</MSG>`:                   `<?xml version="1.0"?><MSG>航班</MSG>`,
		`<MSG encoding="GBK">航班</MSG>`:                         `<MSG encoding="GBK">航班</MSG>`,
	} {
		got, err := CheckXML([]byte(in))
		if err != nil || got != want {
			t.Errorf("CheckXML(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// 200 means "will be processed": whatever the bridge would record DEAD
// raw-too-large (too large a record once converted to UTF-8 and
// JSON-escaped) is answered 413 and not stored, and the default body limit
// is what a record can carry.
func TestSendEndpointRefusesWhatThePipelineWould(t *testing.T) {
	dsn := testenv.NewMySQL(t)
	db := sinktest.OpenMySQL(t, dsn)
	const maxMessage = 65536
	h := &SendHandler{Inbox: sinktest.Tables(t, db, nil, "cminmsgs", 5*time.Second), Cfg: HTTPConfig{Timeout: 5 * time.Second},
		MaxMessageBytes: maxMessage, Clock: clock.NewFake(time.Now()), Log: testenv.Logger(t)}
	srv := httptest.NewServer(h)
	defer srv.Close()
	xmlOf := func(n int, fill string) string {
		head, tail := `<?xml version="1.0" encoding="UTF-8"?><MSG>`, `</MSG>`
		return head + strings.Repeat(fill, (n-len(head)-len(tail))/len(fill)) + tail
	}
	gbkOf := func(n int) string {
		s, _ := simplifiedchinese.GBK.NewEncoder().String(`<?xml version="1.0" encoding="GBK"?><MSG>` + strings.Repeat("航", (n-50)/2) + `</MSG>`)
		return s
	}
	limit := MaxRawBytes(maxMessage)
	for _, tc := range []struct {
		name string
		body string
		code int
		dead bool // the bridge would record the row DEAD raw-too-large
	}{
		{"largest plain body", xmlOf(limit, "x"), 200, false},
		{"one byte over the body limit", xmlOf(limit+1, "x"), 413, false},
		{"fits the body limit, not the record once JSON-escaped", xmlOf(limit-100, `"`), 413, true},
		{"fits the body limit as GBK, not the record as UTF-8", gbkOf(limit - 100), 413, true},
		{"small GBK body", gbkOf(1000), 200, false},
	} {
		if len(tc.body) > limit && tc.code != 413 {
			t.Fatalf("%s: test body too large", tc.name)
		}
		resp, err := http.Post(srv.URL, "text/xml", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s (%d bytes): %d %s, want %d", tc.name, len(tc.body), resp.StatusCode, b, tc.code)
			continue
		}
		// What the endpoint accepted, the bridge produces whole; what it
		// refused, the bridge would have recorded DEAD.
		text, err := CheckXML([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		_, oversize, err := Message(aodb.Row{ID: 123456789, Raw: text, ReceivedAt: &at}, "msgx.inbox", at, maxMessage)
		if err != nil || oversize != tc.dead {
			t.Errorf("%s: answered %d but the bridge's oversize verdict is %v (%v)", tc.name, tc.code, oversize, err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM cminmsgs").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows stored, want the 2 accepted (%v)", n, err)
	}
}

func TestBodyLimitAboveRecordLimitRefused(t *testing.T) {
	for _, tc := range []struct {
		body int64
		ok   bool
	}{{0, true}, {int64(MaxRawBytes(1000000)), true}, {int64(MaxRawBytes(1000000)) + 1, false}, {1 << 20, false}} {
		err := HTTPConfig{MaxBody: tc.body, Timeout: time.Second}.CheckRecordLimit(1000000)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "MSGX_HTTP_MAX_BODY")) {
			t.Errorf("MaxBody %d: %v", tc.body, err)
		}
	}
}
