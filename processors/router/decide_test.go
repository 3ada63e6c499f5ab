package router

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"msgx/internal/sample"
	"msgx/tables/flight"
	"msgx/tables/message"
)

var shanghai = func() *time.Location {
	l, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return l
}()

func settings(mut ...func(*Config)) Settings {
	c := Config{IgnoreRules: "LDM-*,EROR-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}
	for _, m := range mut {
		m(&c)
	}
	return c.Settings(shanghai)
}

func msg(typ, styp, seqn, body string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%s</SEQN><DTTM>20261130080000</DTTM><TYPE>%s</TYPE><STYP>%s</STYP></META>%s</MSG>`, seqn, typ, styp, body)
}

func fltr(flid, sodt string, extra string) string {
	s := "<FLTR><FLID>" + flid + "</FLID>"
	if sodt != "-" {
		s += "<SODT>" + sodt + "</SODT>"
	}
	return s + extra + "</FLTR>"
}

func dnld(n int, fltrs ...string) string {
	return msg("SCHD", "DNLD", "77", fmt.Sprintf("<SCHD><RECS>%d</RECS>%s</SCHD>", n, strings.Join(fltrs, "")))
}

func day(s string) *time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return &t
}

func sampleXML(t *testing.T, file string, index int) string {
	t.Helper()
	all, err := sample.Load(sample.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.File == file && s.Index == index {
			return s.XML
		}
	}
	t.Fatalf("no sample %s#%d", file, index)
	return ""
}

func TestDecide(t *testing.T) {
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	known := message.Lookups{Days: map[string]message.FlightDay{"15": {FLID: "15", Day: day("2021-01-23"), FirstMsgID: 1}}}
	for _, tc := range []struct {
		name     string
		raw      string
		set      Settings
		lookups  message.Lookups
		state    string
		class    string
		reason   string // prefix
		flights  int
		refdata  int
		index    int
		failure  string
		identity bool
	}{
		{name: "raw missing", raw: "  ", state: message.StateDead, class: message.ClassMalformed, reason: "raw-missing"},
		{name: "not XML", raw: "hello", state: message.StateDead, class: message.ClassMalformed},
		{name: "no META", raw: "<MSG><FLOP/></MSG>", state: message.StateDead, class: message.ClassMalformed},
		{name: "undecodable DTTM is a codec error", raw: strings.Replace(msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT>23JAN210600</ESTT></FLOP>"), "20261130080000", "2026-11-30", 1),
			failure: message.ClassCodecError},
		{name: "ignored LDM", raw: msg("LDM", "ANY", "1", "<LDM/>"), state: message.StateSkipped, reason: "ignored:LDM-*"},
		{name: "ignore rules are case-insensitive", raw: msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT/></FLOP>"),
			set: settings(func(c *Config) { c.IgnoreRules = "flop-estt" }), state: message.StateSkipped, reason: "ignored:FLOP-ESTT"},
		{name: "duplicate", raw: msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT/></FLOP>"), lookups: message.Lookups{Owner: 5},
			state: message.StateSkipped, reason: "duplicate-of:5"},
		{name: "own identity is not a duplicate", raw: msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT>23JAN210600</ESTT></FLOP>"),
			lookups: message.Lookups{Owner: 100, Days: known.Days}, state: message.StateRouted, flights: 1, identity: true},
		{name: "FLOP on a known flight", raw: msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT>23JAN210600</ESTT></FLOP>"),
			lookups: known, state: message.StateRouted, flights: 1, identity: true},
		{name: "FLOP on an unknown flight", raw: msg("FLOP", "ESTT", "1", "<FLOP><FLID>99</FLID><ESTT>23JAN210600</ESTT></FLOP>"),
			state: message.StateSkipped, reason: "no-match", identity: true},
		{name: "FLOP without its payload", raw: msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID></FLOP>"), lookups: known,
			state: message.StateDead, class: message.ClassMalformed, reason: "FLOP-ESTT carries no ESTT", identity: true},
		{name: "unsupported FLOP STYP", raw: sampleXML(t, "INSERT_CMINMSGS_COBT.sql", 0), lookups: known,
			state: message.StateSkipped, reason: "unsupported:FLOP-COBT", identity: true},
		{name: "FDEL", raw: sampleXML(t, "INSERT_CMINMSGS_FDEL.sql", 0), lookups: known, state: message.StateRouted, flights: 1, identity: true},
		{name: "unsupported type", raw: msg("ZZZZ", "DNLD", "1", "<X/>"), state: message.StateSkipped, reason: "unsupported:ZZZZ-DNLD", identity: true},
		{name: "DNLD sample", raw: sampleXML(t, "INSERT_CMINMSGS_SCHD.sql", 0), state: message.StateRouted, flights: 2, index: 2, identity: true},
		{name: "DNLD count mismatch", raw: dnld(3, fltr("1", "23JAN210535", ""), fltr("2", "23JAN210535", "")),
			state: message.StateDead, class: message.ClassProtocol, reason: "SCHD-DNLD declares RECS=3 but carries 2", identity: true},
		{name: "DNLD without RECS", raw: msg("SCHD", "DNLD", "1", "<SCHD>"+fltr("1", "23JAN210535", "")+"</SCHD>"),
			state: message.StateDead, class: message.ClassProtocol, identity: true},
		{name: "DNLD without FLID", raw: dnld(1, "<FLTR><SODT>23JAN210535</SODT></FLTR>"), state: message.StateDead, class: message.ClassProtocol, reason: "FLTR 1 has no FLID", identity: true},
		{name: "DNLD without SODT", raw: dnld(1, fltr("1", "-", "")), state: message.StateDead, class: message.ClassProtocol, reason: "FLTR 1 (FLID 1) has no SODT", identity: true},
		{name: "DNLD with a FLID twice", raw: dnld(2, fltr("1", "23JAN210535", ""), fltr("1", "23JAN210535", "")), state: message.StateDead, class: message.ClassProtocol, identity: true},
		{name: "DNLD operation-day conflict rejects the package", raw: dnld(2, fltr("2", "23JAN210535", ""), fltr("15", "24JAN210535", "")),
			lookups: known, state: message.StateDead, class: message.ClassProtocol, reason: "FLID 15: operation day 2021-01-24 conflicts", identity: true},
		{name: "DNLD SODT in an unknown format", raw: dnld(1, fltr("1", "2021-01-23", "")), failure: message.ClassCodecError},
		{name: "empty DNLD is terminal at once", raw: dnld(0), state: message.StateSucceeded, identity: true},
		{name: "ADFT without SODT creates an undated flight", raw: msg("SCHD", "ADFT", "1", "<SCHD>"+fltr("9", "-", "<FLNO>CA1</FLNO>")+"</SCHD>"),
			state: message.StateRouted, flights: 1, index: 1, identity: true},
		{name: "reference data", raw: sampleXML(t, "INSERT_CMINMSGS_AIRL.sql", 0), state: message.StateRouted, refdata: 1, identity: true},
		{name: "reference data keyed by first child", raw: sampleXML(t, "INSERT_CMINMSGS_ABDG.sql", 0), state: message.StateRouted, refdata: 1, identity: true},
		{name: "reference full replace with a wrong count", raw: msg("AIRL", "DNLD", "1", "<RECS>2</RECS><AIRL><ITOP>CA</ITOP></AIRL>"),
			state: message.StateDead, class: message.ClassProtocol, identity: true},
		{name: "reference record without its key", raw: msg("AIRL", "ADD", "1", "<RECS>1</RECS><AIRL><ICOP>CCA</ICOP></AIRL>"),
			state: message.StateDead, class: message.ClassProtocol, identity: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := tc.set
			if set.Loc == nil {
				set = settings()
			}
			p := Prepare(100, tc.raw, set)
			v, fail := Decide(p, tc.lookups, at)
			if tc.failure != "" {
				if fail == nil || fail.Class != tc.failure {
					t.Fatalf("failure %v, want %s (verdict %+v)", fail, tc.failure, v)
				}
				return
			}
			if fail != nil {
				t.Fatalf("unexpected failure %v", fail)
			}
			if v.State != tc.state || v.ErrorClass != tc.class || !strings.HasPrefix(v.Reason, tc.reason) {
				t.Fatalf("verdict %s/%s %q, want %s/%s %q…", v.State, v.ErrorClass, v.Reason, tc.state, tc.class, tc.reason)
			}
			if len(v.Flights) != tc.flights || len(v.Refdata) != tc.refdata || len(v.Index) != tc.index {
				t.Fatalf("emits %d flight / %d refdata, indexes %d; want %d / %d / %d", len(v.Flights), len(v.Refdata), len(v.Index), tc.flights, tc.refdata, tc.index)
			}
			if (v.IdentityKey != "") != tc.identity {
				t.Fatalf("identity key %q bound=%v, want %v", v.IdentityKey, v.IdentityKey != "", tc.identity)
			}
			if v.State != message.StateRouted && v.N() != 0 {
				t.Fatalf("a %s verdict emits transitions", v.State)
			}
		})
	}
}

func TestDecideScheduleTransitions(t *testing.T) {
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	p := Prepare(7, sampleXML(t, "INSERT_CMINMSGS_SCHD.sql", 0), settings())
	v, fail := Decide(p, message.Lookups{}, at)
	if fail != nil {
		t.Fatal(fail)
	}
	f := v.Flights[0]
	if f.FLID != "15" || f.Kind != flight.KindSchedule || f.MsgID != 7 || f.Source != "SCHD-DNLD" || !f.At.Equal(at) ||
		f.OperationDay != "2021-01-23" || f.Fields["FLNO"] != "YG9028" || len(f.Collections["ERUT"]) != 2 {
		t.Fatalf("transition %+v", f)
	}
	if v.IdentityKey != "AODB|SCHD|DNLD|345935" {
		t.Fatalf("identity %q", v.IdentityKey)
	}
	if v.Index[1].FLID != "16" || v.Index[1].Day.Format(time.DateOnly) != "2021-01-23" {
		t.Fatalf("index %+v", v.Index)
	}
}

func TestDecideAbsentFlightsDeleted(t *testing.T) {
	raw := dnld(1, fltr("1", "23JAN210535", ""))
	l := message.Lookups{Earlier: map[string][]string{"2021-01-23": {"1", "2", "3"}}}
	keep := Prepare(50, raw, settings())
	if v, _ := Decide(keep, l, time.Time{}); len(v.Flights) != 1 {
		t.Fatalf("keep mode emitted %d transitions", len(v.Flights))
	}
	del := Prepare(50, raw, settings(func(c *Config) { c.ScheduleAbsent = "delete" }))
	if len(del.Days) != 1 || del.Days[0].Format(time.DateOnly) != "2021-01-23" {
		t.Fatalf("days %v", del.Days)
	}
	v, _ := Decide(del, l, time.Time{})
	if len(v.Flights) != 3 || v.Flights[1].Kind != flight.KindDelete || v.Flights[1].FLID != "2" || v.Flights[2].FLID != "3" {
		t.Fatalf("delete mode transitions %+v", v.Flights)
	}
}

func TestIdentityDayBoundary(t *testing.T) {
	raw := msg("FLOP", "ESTT", "9", "<FLOP><FLID>15</FLID><ESTT/></FLOP>")
	if k := Prepare(1, raw, settings()).IdentityKey; k != "AODB|FLOP|ESTT|9" {
		t.Fatalf("key %q", k)
	}
	if k := Prepare(1, raw, settings(func(c *Config) { c.IdentityDayBoundary = true })).IdentityKey; k != "AODB|FLOP|ESTT|9|2026-11-30" {
		t.Fatalf("day-bounded key %q", k)
	}
}

func TestOperationDay(t *testing.T) {
	sodt := time.Date(2021, 1, 23, 2, 30, 0, 0, shanghai)
	if d := OperationDay(sodt, shanghai, 0); d.Format(time.DateOnly) != "2021-01-23" {
		t.Fatal(d)
	}
	if d := OperationDay(sodt, shanghai, 3*time.Hour); d.Format(time.DateOnly) != "2021-01-22" {
		t.Fatalf("02:30 before a 03:00 cut-over belongs to the previous day, got %v", d)
	}
	if d := OperationDay(sodt.UTC(), shanghai, 0); d.Format(time.DateOnly) != "2021-01-23" {
		t.Fatalf("the day is local to the airport, got %v", d)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{InboxTopic: "msgx.inbox", FlightTopic: "a", RefdataTopic: "b", Partitions: 1, MaxAttempts: 5, Backoff: "1s,2s,4s,8s", BackoffCap: time.Minute,
		IgnoreRules: "LDM-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Backoff = "1s,2s,4s,8s,16s" }, "MSGX_BACKOFF has 5 tiers but MSGX_MAX_ATTEMPTS=5"},
		{func(c *Config) { c.MaxAttempts = 3 }, "MSGX_BACKOFF has 4 tiers"},
		{func(c *Config) { c.IgnoreRules = "LDM" }, "MSGX_IGNORE_RULES"},
		{func(c *Config) { c.OpdayCutover = "25:00" }, "MSGX_OPDAY_CUTOVER"},
		{func(c *Config) { c.ScheduleAbsent = "drop" }, "MSGX_SCHEDULE_ABSENT"},
	} {
		c := good
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want %q", err, tc.want)
		}
	}
}

func TestRespGuard(t *testing.T) {
	resp := strings.Replace(strings.Replace(dnld(1, fltr("1", "23JAN210535", "")), "<STYP>DNLD<", "<STYP>RESP<", 1), "<SEQN>77<", "<SEQN>80<", 1)
	off := Prepare(1, resp, settings())
	if off.NeedsRequest {
		t.Fatal("guard off asks for a request")
	}
	if v, _ := Decide(off, message.Lookups{}, time.Time{}); v.State != message.StateRouted {
		t.Fatalf("guard off: %+v", v)
	}
	on := Prepare(1, resp, settings(func(c *Config) { c.RespGuard = true }))
	if !on.NeedsRequest {
		t.Fatal("guard on does not ask for a request")
	}
	if v, _ := Decide(on, message.Lookups{}, time.Time{}); v.State != message.StateSkipped || v.Reason != "no-match" || v.N() != 0 {
		t.Fatalf("RESP without an open request: %+v", v)
	}
	if v, _ := Decide(on, message.Lookups{RequestOpen: true}, time.Time{}); v.State != message.StateRouted || v.N() != 1 {
		t.Fatalf("RESP answering an open request: %+v", v)
	}
	// A DNLD is never guarded.
	if p := Prepare(1, dnld(1, fltr("1", "23JAN210535", "")), settings(func(c *Config) { c.RespGuard = true })); p.NeedsRequest {
		t.Fatal("a DNLD needs a request")
	}
}
