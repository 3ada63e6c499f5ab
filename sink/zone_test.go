package sink_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"msgx/internal/testenv"
	"msgx/sink"
)

// withSessionZone is dsn with every connection's time_zone set to tz (as
// an operator's MSGX_MYSQL_DSN may do, and as a server's global setting
// does for every session); "" leaves the server's own.
func withSessionZone(t *testing.T, dsn, tz string) string {
	t.Helper()
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if tz != "" {
		if mc.Params == nil {
			mc.Params = map[string]string{}
		}
		mc.Params["time_zone"] = "'" + tz + "'"
	}
	return mc.FormatDSN()
}

// The inbox's DATETIMEs are read and written in the MySQL session's zone:
// a row the AODB inserts with NOW() or SYSDATE() reads back as the instant
// it was inserted, and a time msgx writes (the processed mark, a
// /cminmsgs/send receipt) is stored as the session's wall clock, whatever
// zone the server runs in and whatever the airport's zone is. Explicit
// MSGX_INBOX_TZ wins over the session.
func TestInboxZoneFollowsTheMySQLSession(t *testing.T) {
	base := testenv.NewMySQL(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, session, explicit string
		wantOffset              time.Duration // of the zone msgx reads in
		wantSource              string
	}{
		{name: "server default (SYSTEM)", session: "", wantSource: "MySQL session time_zone SYSTEM"},
		{name: "UTC session", session: "+00:00", wantOffset: 0, wantSource: "MySQL session time_zone +00:00"},
		{name: "+08:00 session", session: "+08:00", wantOffset: 8 * time.Hour, wantSource: "MySQL session time_zone +08:00"},
		{name: "-05:30 session", session: "-05:30", wantOffset: -(5*time.Hour + 30*time.Minute), wantSource: "time_zone -05:30"},
		{name: "explicit beats the session", session: "+08:00", explicit: "Asia/Shanghai", wantOffset: 8 * time.Hour, wantSource: "MSGX_INBOX_TZ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := withSessionZone(t, base, tc.session)
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			c := sink.Config{MySQLDSN: dsn, InboxTZ: tc.explicit, Timeout: 10 * time.Second}
			zone, err := sink.NewInboxZone(c, log)
			if err != nil {
				t.Fatal(err)
			}
			db, err := sink.OpenMySQL(c, zone, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// What the server itself says its session offset is.
			var serverOffset int
			if err := db.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())").Scan(&serverOffset); err != nil {
				t.Fatal(err)
			}
			if tc.session == "" {
				tc.wantOffset = time.Duration(serverOffset) * time.Second
			}
			loc, source, ok := zone.Known()
			if !ok {
				t.Fatal("zone not known after a connection")
			}
			if _, off := time.Now().In(loc).Zone(); time.Duration(off)*time.Second != tc.wantOffset {
				t.Fatalf("zone %v (%s), offset %ds, want %v", loc, source, off, tc.wantOffset)
			}
			if !strings.Contains(source, tc.wantSource) || !strings.Contains(zone.String(), source) {
				t.Fatalf("source %q (%s), want it to say %q", source, zone, tc.wantSource)
			}
			if n := strings.Count(logs.String(), "inbox DATETIMEs are read and written in"); n != 1 {
				t.Fatalf("zone reported %d times:\n%s", n, logs.String())
			}

			// A row inserted by the AODB with the server's clock.
			before := time.Now().Truncate(time.Second)
			res, err := db.ExecContext(ctx, "INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES ('<MSG/>', SYSDATE())")
			if err != nil {
				t.Fatal(err)
			}
			id, _ := res.LastInsertId()
			// msgx's mark, written as a time.Time.
			mark := time.Now()
			if _, err := db.ExecContext(ctx, "UPDATE cminmsgs SET CMINMSGS_DATE_PROCESSED = ? WHERE CMINMSGS_ID = ?", mark, id); err != nil {
				t.Fatal(err)
			}
			var received, processed time.Time
			var markBehindNow int
			if err := db.QueryRowContext(ctx, "SELECT CMINMSGS_DATE_RECEIVED, CMINMSGS_DATE_PROCESSED, "+
				"TIMESTAMPDIFF(SECOND, CMINMSGS_DATE_PROCESSED, NOW()) FROM cminmsgs WHERE CMINMSGS_ID = ?", id).
				Scan(&received, &processed, &markBehindNow); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			// With an explicit zone that is not the session's, the reading is
			// off by the difference: MSGX_INBOX_TZ is what msgx believes.
			skew := tc.wantOffset - time.Duration(serverOffset)*time.Second
			if got := received.Add(-skew); got.Before(before) || got.After(after) {
				t.Fatalf("SYSDATE() row read as %v, want between %v and %v (skew %v)", received, before, after, skew)
			}
			if !processed.Equal(mark.Truncate(time.Second)) && !processed.Equal(mark.Round(time.Second)) {
				t.Fatalf("mark %v read back as %v", mark, processed)
			}
			if d := time.Duration(markBehindNow)*time.Second + skew; d < -2*time.Second || d > 2*time.Second {
				t.Fatalf("the mark is %v behind the server's NOW() (skew %v): written in the wrong zone", d, skew)
			}
		})
	}
}

func TestParseZone(t *testing.T) {
	const bad = 1 // not an offset anyone has
	for in, want := range map[string]int{"+08:00": 8 * 3600, "-05:30": -(5*3600 + 1800), "+00:00": 0, "UTC": 0, "Asia/Shanghai": 8 * 3600, "8:00": bad,
		"+15:00": bad, "Mars/Olympus": bad, "": 0} {
		loc, err := sink.ParseZone(in)
		if want == bad {
			if err == nil {
				t.Errorf("ParseZone(%q) = %v, want an error", in, loc)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseZone(%q): %v", in, err)
			continue
		}
		if _, off := time.Date(2026, 12, 1, 0, 0, 0, 0, loc).Zone(); off != want {
			t.Errorf("ParseZone(%q) offset %d, want %d", in, off, want)
		}
	}
	if got := sink.ZoneName(testenv.Shanghai, time.Now()); got != "+08:00 Asia/Shanghai" {
		t.Errorf("ZoneName(Shanghai) = %q", got)
	}
	if got := sink.ZoneName(time.UTC, time.Now()); got != "UTC" {
		t.Errorf("ZoneName(UTC) = %q", got)
	}
	if err := (sink.Config{PGDSN: "postgres://x@y/z", MySQLDSN: "root@tcp(h:3306)/d", InboxTZ: "Nowhere/Land", Timeout: time.Second,
		PGMaxConns: 2, LockRetry: time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "MSGX_INBOX_TZ") {
		t.Errorf("Validate with a bad MSGX_INBOX_TZ: %v", err)
	}
}
