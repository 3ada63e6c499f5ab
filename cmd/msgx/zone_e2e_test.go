package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"msgx/inspect/status"
	"msgx/inspect/trace"
)

// The inbox's DATETIMEs are the MySQL server's zone, not the airport's
// (MSGX_AIRPORT_TZ stays Asia/Shanghai here): with the MySQL session in UTC
// and in +08:00, a row the AODB inserts with SYSDATE() and a row POSTed to
// /cminmsgs/send read back as received when they were, in order; the
// processed mark is written in the same zone (at the server's NOW(), not
// eight hours off); trace, status and the start-up log name the zone.
func TestInboxTimesInTheMySQLSessionZone(t *testing.T) {
	for _, tz := range []string{"+00:00", "+08:00"} {
		t.Run(tz, func(t *testing.T) {
			httpAddr := freeAddr(t)
			cfg, myDSN := testConfig(t, map[string]string{"MSGX_HTTP_ADDR": httpAddr, "MSGX_BACKFILL_PERIOD": "100ms",
				"MSGX_HOLE_PROBE": "false"}) // a hole waits MSGX_MAX_COMMIT_DELAY (5m)
			mc, err := mysql.ParseDSN(myDSN)
			if err != nil {
				t.Fatal(err)
			}
			mc.Params = map[string]string{"time_zone": "'" + tz + "'"}
			cfg.DB.MySQLDSN = mc.FormatDSN() // every msgx connection's session
			// The AODB's own session, in the same zone.
			aodb, err := sql.Open("mysql", cfg.DB.MySQLDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer aodb.Close()
			stop := start(t, cfg)
			defer stop()
			pool := openPool(t, cfg)
			base := "http://" + httpAddr
			waitFor(t, "/readyz", time.Minute, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })

			before := time.Now().Truncate(time.Second)
			res, err := aodb.Exec("INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES ('<MSG/>', SYSDATE(), 'VALID')")
			if err != nil {
				t.Fatal(err)
			}
			first, _ := res.LastInsertId()
			resp, err := http.Post(base+"/cminmsgs/send", "application/xml", strings.NewReader("<MSG/>"))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("POST /cminmsgs/send: %v %v", resp, err)
			}
			resp.Body.Close()
			second := first + 1
			waitFor(t, "both marks written", time.Minute, func() bool {
				return count(t, pool, `SELECT count(*) FROM proc_state WHERE msg_id = ANY($1) AND `+markConfirmed, []int64{first, second}) == 2
			})
			after := time.Now()

			// The marks, as the server sees them: written now, in its zone.
			var behind int
			if err := aodb.QueryRow("SELECT MAX(TIMESTAMPDIFF(SECOND, CMINMSGS_DATE_PROCESSED, NOW())) FROM cminmsgs").Scan(&behind); err != nil {
				t.Fatal(err)
			}
			if behind < 0 || behind > 60 {
				t.Fatalf("a processed mark is %d s behind the server's NOW(): written in another zone", behind)
			}

			traceOf := func(id int64) trace.Message {
				t.Helper()
				c, body := get(t, fmt.Sprintf("%s/trace/%d", base, id))
				var m trace.Message
				if c != 200 || json.Unmarshal([]byte(body), &m) != nil || m.Inbox == nil || m.Inbox.ReceivedAt == nil || m.Inbox.ProcessedAt == nil {
					t.Fatalf("trace %d: %d %s", id, c, body)
				}
				return m
			}
			var prev time.Time
			for _, id := range []int64{first, second} {
				in := traceOf(id).Inbox
				if in.ReceivedAt.Before(before) || in.ReceivedAt.After(after) || in.ReceivedAt.Before(prev) {
					t.Errorf("message %d received %v: want between %v and %v, not before %v", id, in.ReceivedAt, before, after, prev)
				}
				if in.ProcessedAt.Before(in.ReceivedAt.Truncate(time.Second)) || in.ProcessedAt.After(after) {
					t.Errorf("message %d processed mark %v: want between its receipt %v and %v", id, in.ProcessedAt, in.ReceivedAt, after)
				}
				if !strings.Contains(in.Zone, tz) && !(tz == "+00:00" && strings.HasPrefix(in.Zone, "UTC")) {
					t.Errorf("message %d: zone %q does not name %s", id, in.Zone, tz)
				}
				prev = *in.ReceivedAt
			}
			c, text := get(t, fmt.Sprintf("%s/trace/%d?format=text", base, second))
			if c != 200 || !strings.Contains(text, "its DATETIMEs read in ") || !strings.Contains(text, "(times in UTC)") {
				t.Errorf("trace text does not name the zones:\n%s", text)
			}

			// The status report names the zone too, and the next unread row's
			// age is its real age: an inbox row inserted behind a hole the
			// bridge waits on.
			if _, err := aodb.Exec("INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES (?, '<MSG/>', NOW())", second+5); err != nil {
				t.Fatal(err)
			}
			var rep status.Report
			waitFor(t, "the row behind the hole in the report", 30*time.Second, func() bool {
				_, body := get(t, base+"/status")
				return json.Unmarshal([]byte(body), &rep) == nil && rep.Inbox.OldestUnread != nil
			})
			if u := rep.Inbox.OldestUnread; u.AgeSeconds < 0 || u.AgeSeconds > 60 {
				t.Errorf("next unread row %d is %d s old", u.MsgID, u.AgeSeconds)
			}
			if !strings.Contains(rep.Inbox.Zone, "MySQL session time_zone "+tz) {
				t.Errorf("status inbox zone %q", rep.Inbox.Zone)
			}
		})
	}
}
