package main

import (
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"msgx/inspect/status"
	"msgx/internal/browser"
	"msgx/internal/testenv"
)

// With MSGX_ENV=production a token on a plain-HTTP listener that is not
// loopback is refused unless a TLS proxy is declared, and a token shorter
// than 16 bytes is refused: each one line naming the variables, never the
// token.
func TestProductionRefusesHTTPTokensInClear(t *testing.T) {
	prod := func(extra map[string]string) map[string]string {
		env := map[string]string{"MSGX_ENV": "production", "MSGX_KAFKA_BROKERS": "k1:9092",
			"MSGX_PG_DSN": "postgres://msgx@db:5432/msgx", "MSGX_MYSQL_DSN": "msgx:pw@tcp(aodb:3306)/aodbinterface"}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	const send, read = "s3nd-t0ken-0f-24-bytes..", "r3ad-t0ken-0f-24-bytes.."
	for _, tc := range []struct {
		env  map[string]string
		want string // "" accepted
	}{
		{map[string]string{"MSGX_HTTP_ADDR": "0.0.0.0:8080", "MSGX_HTTP_TOKEN": send},
			"MSGX_ENV=production: MSGX_HTTP_TOKEN would cross the network in clear on the plain-HTTP MSGX_HTTP_ADDR=0.0.0.0:8080; set MSGX_HTTP_TLS_CERT and MSGX_HTTP_TLS_KEY, or MSGX_HTTP_BEHIND_TLS_PROXY=true when a proxy in front terminates TLS"},
		{map[string]string{"MSGX_HTTP_ADDR": "10.1.2.3:8080", "MSGX_HTTP_TOKEN": send, "MSGX_HTTP_READ_TOKEN": read},
			"MSGX_ENV=production: MSGX_HTTP_TOKEN and MSGX_HTTP_READ_TOKEN would cross the network in clear on the plain-HTTP MSGX_HTTP_ADDR=10.1.2.3:8080"},
		{map[string]string{"MSGX_HTTP_ADDR": ":8080", "MSGX_HTTP_READ_TOKEN": read}, "MSGX_ENV=production: MSGX_HTTP_READ_TOKEN would cross the network in clear"},
		{map[string]string{"MSGX_HTTP_ADDR": "msgx.airport.example:8080", "MSGX_HTTP_READ_TOKEN": read}, "MSGX_ENV=production: MSGX_HTTP_READ_TOKEN would cross the network in clear"},
		{map[string]string{"MSGX_HTTP_ADDR": "[::]:8080", "MSGX_HTTP_READ_TOKEN": read}, "MSGX_ENV=production: MSGX_HTTP_READ_TOKEN would cross the network in clear"},
		{map[string]string{"MSGX_HTTP_ADDR": "0.0.0.0:8080", "MSGX_HTTP_TOKEN": send, "MSGX_HTTP_BEHIND_TLS_PROXY": "true"}, ""},
		{map[string]string{"MSGX_HTTP_ADDR": "0.0.0.0:8443", "MSGX_HTTP_TOKEN": send, "MSGX_HTTP_TLS_CERT": "/etc/msgx/tls.crt", "MSGX_HTTP_TLS_KEY": "/etc/msgx/tls.key"}, ""},
		{map[string]string{"MSGX_HTTP_ADDR": "127.0.0.1:8080", "MSGX_HTTP_TOKEN": send, "MSGX_HTTP_READ_TOKEN": read}, ""},
		{map[string]string{"MSGX_HTTP_ADDR": "[::1]:8080", "MSGX_HTTP_TOKEN": send}, ""},
		{map[string]string{"MSGX_HTTP_ADDR": "localhost:8080", "MSGX_HTTP_TOKEN": send}, ""},
		{map[string]string{"MSGX_HTTP_ADDR": "0.0.0.0:8080"}, ""}, // no token, nothing to protect
		{map[string]string{"MSGX_HTTP_TOKEN": "short-secret"}, "MSGX_ENV=production: MSGX_HTTP_TOKEN is 12 bytes, shorter than 16; use a random one (openssl rand -hex 32)"},
		{map[string]string{"MSGX_HTTP_READ_TOKEN": "fifteen-bytes!!", "MSGX_HTTP_BEHIND_TLS_PROXY": "true"}, "MSGX_ENV=production: MSGX_HTTP_READ_TOKEN is 15 bytes, shorter than 16"},
	} {
		_, err := loadConfig(prod(tc.env))
		var lines []string
		if err != nil {
			lines = splitErrors(err)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v refused: %v", tc.env, err)
		case tc.want != "" && (len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want)):
			t.Errorf("%v: %q, want one line starting %q", tc.env, lines, tc.want)
		}
		for _, secret := range []string{send, read, "short-secret", "fifteen-bytes!!"} {
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("the refusal prints the token: %v", err)
			}
		}
	}
	// Both at once: one line each.
	_, err := loadConfig(prod(map[string]string{"MSGX_HTTP_ADDR": "0.0.0.0:8080", "MSGX_HTTP_TOKEN": "short"}))
	if lines := splitErrors(err); len(lines) != 2 {
		t.Errorf("a short token in clear: %q, want two lines", lines)
	}
	// Outside production the same settings are development's business.
	if _, err := loadConfig(map[string]string{"MSGX_HTTP_ADDR": "0.0.0.0:8080", "MSGX_HTTP_TOKEN": "short"}); err != nil {
		t.Errorf("development refused a short token in clear: %v", err)
	}
	// As the operator sees it: the command stops before touching anything.
	code, _, errOut := cli(t, prod(map[string]string{"MSGX_HTTP_ADDR": "0.0.0.0:8080", "MSGX_HTTP_READ_TOKEN": read}), "run")
	if code != 2 || strings.Count(errOut, "\n") != 2 || !strings.Contains(errOut, "  MSGX_ENV=production: MSGX_HTTP_READ_TOKEN would cross the network in clear") {
		t.Errorf("msgx run: status %d, stderr %q", code, errOut)
	}
}

// The HTTP surface of a running gateway on its own TLS listener, with a
// client CA for the AODB and both tokens: Go's client and curl, trusting
// the test CA, reach every endpoint; plain HTTP to the port gets nothing;
// /cminmsgs/send needs the AODB's client certificate and its token; the
// session cookie is Secure and HSTS is sent; msgx status reads the daemon
// over TLS; the status page loads in Chromium over TLS (the test
// certificate trusted for the run by its SPKI hash), logs in and shows the
// demo day; the sixth wrong login from one address within a minute gets
// 429 while the right one from another address works, counted on /metrics.
func TestHTTPSurfaceOverTLS(t *testing.T) {
	ca := testenv.NewCA(t, "msgx test CA")
	leaf := ca.Server("msgx")
	b := browser.New(t, browser.TrustSPKI(leaf.SPKIHash())) // first: without Chromium the test fails at once
	aodbCA := testenv.NewCA(t, "AODB client CA")
	aodb := aodbCA.Client("aodb")
	const readToken, sendToken = "r3ad-t0ken-0f-the-tls-test", "s3nd-t0ken-0f-the-tls-test"
	httpAddr := freeAddr(t)
	cfg, myDSN := testConfig(t, map[string]string{
		"MSGX_HTTP_ADDR": httpAddr, "MSGX_HOLE_PROBE": "false",
		"MSGX_HTTP_TLS_CERT": leaf.CertFile, "MSGX_HTTP_TLS_KEY": leaf.KeyFile, "MSGX_HTTP_TLS_CLIENT_CA": aodbCA.File,
		"MSGX_HTTP_READ_TOKEN": readToken, "MSGX_HTTP_TOKEN": sendToken,
	})
	base := "https://" + httpAddr
	stop := start(t, cfg)
	defer stop()
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	aodbClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{aodb.Pair}}}}
	call := func(c *http.Client, method, path, auth, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	waitFor(t, "/readyz ready over TLS", 60*time.Second, func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	// The demo day in the inbox, and one message through /cminmsgs/send.
	demo, err := os.ReadFile("../../testdata/demo.sql")
	if err != nil {
		t.Fatal(err)
	}
	multi, err := sql.Open("mysql", myDSN+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer multi.Close()
	if _, err := multi.Exec(string(demo)); err != nil {
		t.Fatal(err)
	}
	msg := `<MSG><META><SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20210122220000</DTTM><TYPE>FLOP</TYPE><STYP>BDPB</STYP></META></MSG>`
	if resp, body := call(client, "POST", "/cminmsgs/send", "Bearer "+sendToken, msg); resp.StatusCode != 403 || !strings.Contains(body, "client certificate required") {
		t.Errorf("send without a client certificate: %d %q", resp.StatusCode, body)
	}
	if resp, _ := call(aodbClient, "POST", "/cminmsgs/send", "", msg); resp.StatusCode != 401 {
		t.Errorf("send with the certificate but without the token: %d, want 401", resp.StatusCode)
	}
	resp, sent := call(aodbClient, "POST", "/cminmsgs/send", "Bearer "+sendToken, msg)
	if resp.StatusCode != 200 {
		t.Fatalf("send with the AODB's certificate and token: %d %q", resp.StatusCode, sent)
	}
	if code, body := testenv.Curl(t, "--cacert", ca.File, "--cert", aodb.CertFile, "--key", aodb.KeyFile,
		"-H", "Authorization: Bearer "+sendToken, "--data-binary", msg, base+"/cminmsgs/send"); code != 200 {
		t.Errorf("curl send with the AODB's certificate: %d %q", code, body)
	}
	if code, _ := testenv.Curl(t, "--cacert", ca.File, "-H", "Authorization: Bearer "+sendToken, "--data-binary", msg, base+"/cminmsgs/send"); code != 403 {
		t.Errorf("curl send without a client certificate: %d, want 403", code)
	}
	var rep status.Report
	waitFor(t, "the demo day and the sent messages decided", 60*time.Second, func() bool {
		_, body := call(client, "GET", "/status", "Bearer "+readToken, "")
		return json.Unmarshal([]byte(body), &rep) == nil && rep.Messages.Backlog == 0 && rep.Inbox.Lag == 0 &&
			rep.Messages.ByState["SUCCEEDED"] > 0 && rep.Inbox.Watermark > 0
	})
	var airl []struct {
		Key string `json:"key"`
	}
	if _, body := call(client, "GET", "/refdata/AIRL", "Bearer "+readToken, ""); json.Unmarshal([]byte(body), &airl) != nil || len(airl) == 0 {
		t.Fatalf("/refdata/AIRL: %s", body)
	}

	// Every endpoint of docs/operations.md#http-endpoints, with Go's client and curl.
	for _, e := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/healthz", 200}, {"GET", "/readyz", 200}, {"GET", "/metrics", 200}, {"GET", "/", 200},
		{"GET", "/assets/page.js", 200}, {"GET", "/status", 200}, {"GET", "/status/history", 200},
		{"GET", "/replay/dry-run?class=EXHAUSTED", 200}, {"GET", "/login", 200}, {"POST", "/logout", 303},
		{"GET", "/trace/" + sent, 200}, {"GET", "/trace/flights/15", 200}, {"GET", "/flights/15", 200},
		{"GET", "/flights?day=2021-01-23", 200}, {"GET", "/refdata/AIRL", 200},
		{"GET", "/refdata/AIRL/" + url.PathEscape(airl[0].Key), 200},
	} {
		resp, body := call(client, e.method, e.path, "Bearer "+readToken, "")
		if resp.StatusCode != e.code || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
			t.Errorf("%s %s over TLS: %d, want %d\n%.300s", e.method, e.path, resp.StatusCode, e.code, body)
		}
		if resp.Header.Get("Strict-Transport-Security") == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: headers %v", e.method, e.path, resp.Header)
		}
		if code, body := testenv.Curl(t, "--cacert", ca.File, "-X", e.method, "-H", "Authorization: Bearer "+readToken, base+e.path); code != e.code {
			t.Errorf("curl %s %s: %d, want %d\n%.300s", e.method, e.path, code, e.code, body)
		}
	}
	// Plain HTTP to the TLS port serves nothing.
	if resp, err := http.Get("http://" + httpAddr + "/status"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || strings.Contains(string(b), "inbox") {
			t.Errorf("plain HTTP to the TLS port: %d %q", resp.StatusCode, b)
		}
	}
	// The login cookie is Secure on the TLS listener.
	form := url.Values{"token": {readToken}, "next": {"/"}}.Encode()
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err = client.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cs := resp.Cookies(); resp.StatusCode != 303 || len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly {
		t.Errorf("login over TLS: %d, cookies %+v, want one Secure HttpOnly cookie", resp.StatusCode, cs)
	}
	// msgx status reads the daemon over TLS (the report has the
	// components only the daemon knows).
	var out strings.Builder
	if err := runCommand(context.Background(), cfg, "status", []string{"--json"}, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	var fromDaemon status.Report
	if err := json.Unmarshal([]byte(out.String()), &fromDaemon); err != nil || len(fromDaemon.Components) == 0 {
		t.Errorf("msgx status did not read the daemon over TLS (%v):\n%.500s", err, out.String())
	}

	// Chromium over TLS: the form, the login, the page with the demo's data.
	if err := b.Do(30*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "the login form over TLS", `location.protocol === "https:" && location.pathname === "/login" && document.querySelector("#token") !== null`, 30*time.Second)
	if err := b.Do(20*time.Second,
		chromedp.SendKeys(chromedp.CSS("#token"), readToken),
		chromedp.Submit(chromedp.CSS("#token")),
	); err != nil {
		t.Fatal(err)
	}
	b.WaitFor(t, "the page after logging in", `location.pathname === "/" && document.body.dataset.refreshes >= 1`, 30*time.Second)
	b.WaitFor(t, "the demo day's SUCCEEDED count on the page",
		`(document.querySelector('#messages tr[data-state="SUCCEEDED"]') || {}).textContent?.includes("`+fmt.Sprint(rep.Messages.ByState["SUCCEEDED"])+`")`, 30*time.Second)
	for _, c := range fromDaemon.Components {
		if got, _ := b.Text(`#components tr[data-component="` + c.Name + `"]`); !strings.Contains(got, c.Name) {
			t.Errorf("component %s on the page: %q", c.Name, got)
		}
	}
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("browser errors: %q", errs)
	}

	// Throttling: five wrong logins from 127.0.0.2, the sixth refused;
	// the right token from 127.0.0.1 still works.
	wrong := func() int {
		code, _ := testenv.Curl(t, "--cacert", ca.File, "--interface", "127.0.0.2", "-o", "/dev/null",
			"--data-urlencode", "token=guess", base+"/login")
		return code
	}
	for i := 1; i <= 5; i++ {
		if code := wrong(); code != 401 {
			t.Fatalf("wrong login %d: %d, want 401", i, code)
		}
	}
	if code := wrong(); code != 429 {
		t.Fatalf("6th wrong login within a minute: %d, want 429", code)
	}
	if code, body := testenv.Curl(t, "--cacert", ca.File, "-o", "/dev/null", "--data-urlencode", "token="+readToken, base+"/login"); code != 303 {
		t.Fatalf("the right token from another address: %d %q", code, body)
	}
	_, metrics := call(client, "GET", "/metrics", "Bearer "+readToken, "")
	for name, want := range map[string]float64{`msgx_http_refused_total{reason="throttled"}`: 1,
		"msgx_http_wrong_credentials_total": 5, "msgx_http_throttled_clients": 1,
		"msgx_http_tls_certificate_expiry_timestamp_seconds": float64(leaf.Cert.NotAfter.Unix()),
		`msgx_http_refused_total{reason="no-client-cert"}`:   2} {
		n, labels, _ := strings.Cut(strings.TrimSuffix(name, "}"), "{")
		if got := metricValue(metrics, n, labels); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}
