package route

import (
	"strings"
	"testing"
	"time"

	"msgx/internal/sample"
	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/route/routetest"
)

// config is what the decisions read of the router's configuration, named
// as processors/router's Config names it (Config.Settings parses it).
type config struct {
	IgnoreRules, ScheduleAbsent    string
	IdentityDayBoundary, RespGuard bool
}

func settings(mut ...func(*config)) Settings {
	c := config{IgnoreRules: "LDM-*,EROR-*", ScheduleAbsent: "keep"}
	for _, m := range mut {
		m(&c)
	}
	rules, err := ParseRules(c.IgnoreRules)
	if err != nil {
		panic(err)
	}
	return Settings{Rules: rules, DayBoundary: c.IdentityDayBoundary, Loc: routetest.Shanghai, AbsentDelete: c.ScheduleAbsent == "delete",
		RespGuard: c.RespGuard}
}

func TestDecide(t *testing.T) {
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	known := message.Lookups{Days: map[string]message.FlightDay{"15": {FLID: "15", Day: routetest.Day("2021-01-23"), FirstMsgID: 1}}}
	known121 := message.Lookups{Days: map[string]message.FlightDay{"121112312": {FLID: "121112312", Day: routetest.Day("2018-08-10"), FirstMsgID: 1}}}
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
		identity bool
		msgID    int64
	}{
		{name: "raw missing", raw: "  ", state: message.StateDead, class: message.ClassMalformed, reason: "raw-missing"},
		{name: "not XML", raw: "hello", state: message.StateDead, class: message.ClassMalformed},
		{name: "no META", raw: "<MSG><FLOP/></MSG>", state: message.StateDead, class: message.ClassMalformed},
		{name: "undecodable DTTM is a codec error, DEAD at once", raw: strings.Replace(routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT>23JAN210600</ESTT></FLOP>"), "20261130080000", "2026-11-30", 1),
			state: message.StateDead, class: message.ClassCodecError, reason: `META/DTTM "2026-11-30": unknown date format`},
		{name: "undecodable payload is a codec error, DEAD at once", raw: strings.Replace(routetest.Dnld(1), "<RECS>1<", "<RECS>many<", 1),
			state: message.StateDead, class: message.ClassCodecError, reason: `SCHD/RECS "many": not a non-negative integer`},
		{name: "a message ID that is not positive", raw: routetest.Msg("LDM", "ANY", "1", "<LDM/>"), msgID: -1, state: message.StateDead, class: message.ClassMalformed},
		{name: "ignored LDM", raw: routetest.Msg("LDM", "ANY", "1", "<LDM/>"), state: message.StateSkipped, reason: "ignored:LDM-*"},
		{name: "ignore rules are case-insensitive", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT/></FLOP>"),
			set: settings(func(c *config) { c.IgnoreRules = "flop-estt" }), state: message.StateSkipped, reason: "ignored:FLOP-ESTT"},
		{name: "an ignored type is never judged by its payload (malformed)", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><ESTT/></FLOP>"),
			set: settings(func(c *config) { c.IgnoreRules = "FLOP-*" }), state: message.StateSkipped, reason: "ignored:FLOP-*"},
		{name: "an ignored type is never judged by its payload (codec error)", raw: strings.Replace(routetest.Dnld(1), "<RECS>1<", "<RECS>many<", 1),
			set: settings(func(c *config) { c.IgnoreRules = "schd-dnld" }), state: message.StateSkipped, reason: "ignored:SCHD-DNLD"},
		{name: "the same payload not ignored", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><ESTT/></FLOP>"),
			state: message.StateDead, class: message.ClassMalformed, reason: "FLOP without FLID"},
		{name: "duplicate", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT/></FLOP>"), lookups: message.Lookups{Owner: 5},
			state: message.StateSkipped, reason: "duplicate-of:5"},
		{name: "own identity is not a duplicate", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT>23JAN210600</ESTT></FLOP>"),
			lookups: message.Lookups{Owner: 100, Days: known.Days}, state: message.StateRouted, flights: 1, identity: true},
		{name: "FLOP on a known flight", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT>23JAN210600</ESTT></FLOP>"),
			lookups: known, state: message.StateRouted, flights: 1, identity: true},
		{name: "FLOP on an unknown flight", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>99</FLID><ESTT>23JAN210600</ESTT></FLOP>"),
			state: message.StateSkipped, reason: "no-match", identity: true},
		{name: "FLOP without its payload", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID></FLOP>"), lookups: known,
			state: message.StateDead, class: message.ClassMalformed, reason: "FLOP-ESTT carries no ESTT", identity: true},
		{name: "unsupported FLOP STYP", raw: routetest.Msg("FLOP", "BDPB", "1", "<FLOP><FLID>15</FLID><BDPB>1</BDPB></FLOP>"), lookups: known,
			state: message.StateSkipped, reason: "unsupported:FLOP-BDPB", identity: true},
		{name: "A-CDM sample", raw: sample.XML(t, "INSERT_CMINMSGS_COBT.sql", 0), lookups: known121,
			state: message.StateRouted, flights: 1, identity: true},
		{name: "FLOP-TOBT without its element (the AODB's sample)", raw: sample.XML(t, "INSERT_CMINMSGS_TOBT.sql", 0), lookups: known121,
			state: message.StateRouted, flights: 1, identity: true},
		{name: "FLOP-PORT sample", raw: sample.XML(t, "INSERT_CMINMSGS_PORT.sql", 0), lookups: known121,
			state: message.StateRouted, flights: 1, identity: true},
		{name: "FLOP-FLAB empty sample", raw: sample.XML(t, "INSERT_CMINMSGS_FLAB.sql", 2), lookups: known,
			state: message.StateRouted, flights: 1, identity: true},
		// Time-valued tags (docs/design.md#time-values): a value in no SIS
		// format is DEAD(CODEC_ERROR) before anything is emitted; like every
		// verdict of dispatch, it binds the identity.
		{name: "a time in no SIS format", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT>notadate</ESTT></FLOP>"), lookups: known,
			state: message.StateDead, class: message.ClassCodecError, reason: `FLOP-ESTT (FLID 15) ESTT "notadate": unknown date format`, identity: true},
		{name: "any time the FLOP carries is checked", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT>23JAN210600</ESTT><ACTT>0600</ACTT></FLOP>"),
			lookups: known, state: message.StateDead, class: message.ClassCodecError, reason: `FLOP-ESTT (FLID 15) ACTT "0600"`, identity: true},
		{name: "a time inside a collection element", raw: routetest.Msg("FLOP", "GTDT", "1",
			`<FLOP><FLID>15</FLID><GTDT GTNO="1"><GATE>G1</GATE><PGOT>15DEC031805</PGOT></GTDT><GTDT GTNO="2"><PGOT>18:05</PGOT></GTDT></FLOP>`),
			lookups: known, state: message.StateDead, class: message.ClassCodecError, reason: `FLOP-GTDT (FLID 15) GTDT[2]/PGOT "18:05": unknown date format`, identity: true},
		{name: "a time in a FLTR", raw: routetest.Dnld(2, routetest.Fltr("2", "23JAN210535", ""), routetest.Fltr("3", "23JAN210535", "<ROUT RTNO=\"1\"><SCAT>tomorrow</SCAT></ROUT>")),
			state: message.StateDead, class: message.ClassCodecError, reason: `FLTR 2 (FLID 3) ROUT[1]/SCAT "tomorrow": unknown date format`, identity: true},
		{name: "a new A-CDM time is checked", raw: routetest.Msg("FLOP", "TOBT", "1", "<FLOP><FLID>15</FLID><TOBT>32JAN211200</TOBT></FLOP>"),
			lookups: known, state: message.StateDead, class: message.ClassCodecError, reason: `FLOP-TOBT (FLID 15) TOBT "32JAN211200": date or time out of range`, identity: true},
		{name: "an empty time clears", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT> </ESTT></FLOP>"), lookups: known,
			state: message.StateRouted, flights: 1, identity: true},
		{name: "a delete applies nothing it carries", raw: routetest.Msg("FLOP", "FDEL", "1", "<FLOP><FLID>15</FLID><ESTT>x</ESTT><FDEL/></FLOP>"),
			lookups: known, state: message.StateRouted, flights: 1, identity: true},
		{name: "an unsupported STYP is skipped whatever it carries", raw: routetest.Msg("FLOP", "BDPB", "1", "<FLOP><FLID>15</FLID><ESTT>x</ESTT></FLOP>"),
			lookups: known, state: message.StateSkipped, reason: "unsupported:FLOP-BDPB", identity: true},
		{name: "an ignored message is ignored whatever it carries", raw: routetest.Msg("FLOP", "ESTT", "1", "<FLOP><FLID>15</FLID><ESTT>x</ESTT></FLOP>"),
			set: settings(func(c *config) { c.IgnoreRules = "FLOP-ESTT" }), state: message.StateSkipped, reason: "ignored:FLOP-ESTT"},
		// Seasonal schedules: stored as one reference record per season.
		{name: "SCHS DNLD sample", raw: sample.XML(t, "INSERT_CMINMSGS_SCHS.sql", 0), state: message.StateRouted, refdata: 1, identity: true},
		{name: "SCHS RESP sample", raw: sample.XML(t, "INSERT_CMINMSGS_SCHS.sql", 1), state: message.StateRouted, refdata: 1, identity: true},
		{name: "SCHS count mismatch", raw: routetest.Season("DNLD", "<SNAM>W</SNAM><RECS>2</RECS><FLTR><FLNO>CA1</FLNO></FLTR>"),
			state: message.StateDead, class: message.ClassProtocol, reason: "SCHS-DNLD declares RECS=2 but carries 1 FLTR", identity: true},
		{name: "SCHS without RECS", raw: routetest.Season("RESP", "<SNAM>W</SNAM><FLTR><FLNO>CA1</FLNO></FLTR>"),
			state: message.StateDead, class: message.ClassProtocol, reason: "SCHS-RESP without RECS", identity: true},
		{name: "SCHS without SNAM", raw: routetest.Season("DNLD", "<SNAM> </SNAM><RECS>0</RECS>"),
			state: message.StateDead, class: message.ClassProtocol, reason: "SCHS-DNLD without SNAM", identity: true},
		{name: "SCHS time", raw: routetest.Season("DNLD", "<SNAM>W</SNAM><RECS>1</RECS><FLTR><SCHT>10:23</SCHT></FLTR>"),
			state: message.StateDead, class: message.ClassCodecError, reason: `SCHS-DNLD SCHS/FLTR[1]/SCHT "10:23": unknown date format`, identity: true},
		{name: "SCHS other STYP", raw: routetest.Season("ADD", "<SNAM>W</SNAM><RECS>0</RECS>"), state: message.StateSkipped, reason: "unsupported:SCHS-ADD", identity: true},
		{name: "FDEL", raw: sample.XML(t, "INSERT_CMINMSGS_FDEL.sql", 0), lookups: known, state: message.StateRouted, flights: 1, identity: true},
		{name: "unsupported type", raw: routetest.Msg("ZZZZ", "DNLD", "1", "<X/>"), state: message.StateSkipped, reason: "unsupported:ZZZZ-DNLD", identity: true},
		{name: "DNLD sample", raw: sample.XML(t, "INSERT_CMINMSGS_SCHD.sql", 0), state: message.StateRouted, flights: 2, index: 2, identity: true},
		{name: "DNLD count mismatch", raw: routetest.Dnld(3, routetest.Fltr("1", "23JAN210535", ""), routetest.Fltr("2", "23JAN210535", "")),
			state: message.StateDead, class: message.ClassProtocol, reason: "SCHD-DNLD declares RECS=3 but carries 2", identity: true},
		{name: "DNLD without RECS", raw: routetest.Msg("SCHD", "DNLD", "1", "<SCHD>"+routetest.Fltr("1", "23JAN210535", "")+"</SCHD>"),
			state: message.StateDead, class: message.ClassProtocol, identity: true},
		{name: "DNLD without FLID", raw: routetest.Dnld(1, "<FLTR><SODT>23JAN210535</SODT></FLTR>"), state: message.StateDead, class: message.ClassProtocol, reason: "FLTR 1 has no FLID", identity: true},
		{name: "DNLD without SODT", raw: routetest.Dnld(1, routetest.Fltr("1", "-", "")), state: message.StateDead, class: message.ClassProtocol, reason: "FLTR 1 (FLID 1) has no SODT", identity: true},
		{name: "DNLD with a FLID twice", raw: routetest.Dnld(2, routetest.Fltr("1", "23JAN210535", ""), routetest.Fltr("1", "23JAN210535", "")), state: message.StateDead, class: message.ClassProtocol, identity: true},
		{name: "DNLD operation-day conflict rejects the package", raw: routetest.Dnld(2, routetest.Fltr("2", "23JAN210535", ""), routetest.Fltr("15", "24JAN210535", "")),
			lookups: known, state: message.StateDead, class: message.ClassProtocol, reason: "FLID 15: operation day 2021-01-24 conflicts", identity: true},
		{name: "DNLD SODT in an unknown format is a codec error, DEAD at once", raw: routetest.Dnld(1, routetest.Fltr("1", "2021-01-23", "")),
			state: message.StateDead, class: message.ClassCodecError, reason: `FLTR 1 (FLID 1) SODT "2021-01-23": unknown date format`, identity: true},
		{name: "DNLD with an impossible SODT date rejects the package", raw: routetest.Dnld(2, routetest.Fltr("1", "23JAN210535", ""), routetest.Fltr("2", "31NOV260800", "")),
			state: message.StateDead, class: message.ClassProtocol, reason: `FLTR 2 (FLID 2) SODT "31NOV260800": date or time out of range: the operation day cannot be derived`, identity: true},
		{name: "DNLD with an impossible SODT time rejects the package", raw: routetest.Dnld(1, routetest.Fltr("1", "30NOV262561", "")),
			state: message.StateDead, class: message.ClassProtocol, reason: `FLTR 1 (FLID 1) SODT "30NOV262561": date or time out of range`, identity: true},
		{name: "ADFT with an impossible SODT", raw: routetest.Msg("SCHD", "ADFT", "1", "<SCHD>"+routetest.Fltr("9", "29FEB251000", "")+"</SCHD>"),
			state: message.StateDead, class: message.ClassProtocol, reason: `FLTR 1 (FLID 9) SODT "29FEB251000"`, identity: true},
		{name: "empty DNLD is terminal at once", raw: routetest.Dnld(0), state: message.StateSucceeded, identity: true},
		{name: "ADFT without SODT creates an undated flight", raw: routetest.Msg("SCHD", "ADFT", "1", "<SCHD>"+routetest.Fltr("9", "-", "<FLNO>CA1</FLNO>")+"</SCHD>"),
			state: message.StateRouted, flights: 1, index: 1, identity: true},
		{name: "reference data", raw: sample.XML(t, "INSERT_CMINMSGS_AIRL.sql", 0), state: message.StateRouted, refdata: 1, identity: true},
		{name: "reference data keyed by first child", raw: sample.XML(t, "INSERT_CMINMSGS_ABDG.sql", 0), state: message.StateRouted, refdata: 1, identity: true},
		{name: "reference full replace with a wrong count", raw: routetest.Msg("AIRL", "DNLD", "1", "<RECS>2</RECS><AIRL><ITOP>CA</ITOP></AIRL>"),
			state: message.StateDead, class: message.ClassProtocol, identity: true},
		{name: "reference record without its key", raw: routetest.Msg("AIRL", "ADD", "1", "<RECS>1</RECS><AIRL><ICOP>CCA</ICOP></AIRL>"),
			state: message.StateDead, class: message.ClassProtocol, reason: "AIRL-ADD record 1: missing key tag ITOP", identity: true},
		{name: "resource status", raw: routetest.Rsta("ADD", routetest.RstaRec("GATE", "21", "D", "30NOV260800", "30NOV261000")),
			state: message.StateRouted, refdata: 1, identity: true},
		{name: "resource status with a STAT other than E/D", raw: routetest.Rsta("RESP", routetest.RstaRec("GATE", "21", "D", "", ""), routetest.RstaRec("BELT", "3", "X", "", "")),
			state: message.StateDead, class: message.ClassProtocol, reason: `RSTA-RESP record 2: STAT "X" is not E or D`, identity: true},
		{name: "resource status ending before it starts", raw: routetest.Rsta("UPD", routetest.RstaRec("GATE", "21", "D", "30NOV261000", "30NOV260800")),
			state: message.StateDead, class: message.ClassProtocol, reason: "RSTA-UPD record 1: ENDT is not after STRT", identity: true},
		{name: "resource status with an unparseable window", raw: routetest.Rsta("ADD", routetest.RstaRec("GATE", "21", "D", "tomorrow", "")),
			state: message.StateDead, class: message.ClassProtocol, reason: `RSTA-ADD record 1: STRT "tomorrow" is not SIS time`, identity: true},
		{name: "a resource status deletion carries only the key", raw: routetest.Rsta("DEL", routetest.RstaRec("GATE", "21", "", "", "")),
			state: message.StateRouted, refdata: 1, identity: true},
		{name: "first-child category keyed as indexed", raw: routetest.Abdg("ADD", "ABCD"), lookups: message.Lookups{KeyTag: "ABCD"},
			state: message.StateRouted, refdata: 1, identity: true},
		{name: "first-child category keyed by another tag than indexed", raw: routetest.Abdg("UPD", "DESC"), lookups: message.Lookups{KeyTag: "ABCD"},
			state: message.StateDead, class: message.ClassProtocol, reason: "ABDG-UPD keyed by DESC but the stored records are keyed by ABCD", identity: true},
		{name: "a full replace may change the key tag", raw: routetest.Abdg("DNLD", "DESC"), lookups: message.Lookups{KeyTag: "ABCD"},
			state: message.StateRouted, refdata: 1, identity: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := tc.set
			if set.Loc == nil {
				set = settings()
			}
			id := tc.msgID
			if id == 0 {
				id = 100
			}
			v := Decide(Prepare(id, tc.raw, set), tc.lookups, at)
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
	p := Prepare(7, sample.XML(t, "INSERT_CMINMSGS_SCHD.sql", 0), settings())
	v := Decide(p, message.Lookups{}, at)
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
	raw := routetest.Dnld(1, routetest.Fltr("1", "23JAN210535", ""))
	l := message.Lookups{Earlier: map[string][]string{"2021-01-23": {"1", "2", "3"}}}
	keep := Prepare(50, raw, settings())
	if v := Decide(keep, l, time.Time{}); len(v.Flights) != 1 {
		t.Fatalf("keep mode emitted %d transitions", len(v.Flights))
	}
	del := Prepare(50, raw, settings(func(c *config) { c.ScheduleAbsent = "delete" }))
	if len(del.Days) != 1 || del.Days[0].Format(time.DateOnly) != "2021-01-23" {
		t.Fatalf("days %v", del.Days)
	}
	v := Decide(del, l, time.Time{})
	if len(v.Flights) != 3 || v.Flights[1].Kind != flight.KindDelete || v.Flights[1].FLID != "2" || v.Flights[2].FLID != "3" {
		t.Fatalf("delete mode transitions %+v", v.Flights)
	}
}

func TestIdentityDayBoundary(t *testing.T) {
	raw := routetest.Msg("FLOP", "ESTT", "9", "<FLOP><FLID>15</FLID><ESTT/></FLOP>")
	if k := Prepare(1, raw, settings()).IdentityKey; k != "AODB|FLOP|ESTT|9" {
		t.Fatalf("key %q", k)
	}
	if k := Prepare(1, raw, settings(func(c *config) { c.IdentityDayBoundary = true })).IdentityKey; k != "AODB|FLOP|ESTT|9|2026-11-30" {
		t.Fatalf("day-bounded key %q", k)
	}
}

func TestOperationDay(t *testing.T) {
	sodt := time.Date(2021, 1, 23, 2, 30, 0, 0, routetest.Shanghai)
	if d := OperationDay(sodt, routetest.Shanghai, 0); d.Format(time.DateOnly) != "2021-01-23" {
		t.Fatal(d)
	}
	if d := OperationDay(sodt, routetest.Shanghai, 3*time.Hour); d.Format(time.DateOnly) != "2021-01-22" {
		t.Fatalf("02:30 before a 03:00 cut-over belongs to the previous day, got %v", d)
	}
	if d := OperationDay(sodt.UTC(), routetest.Shanghai, 0); d.Format(time.DateOnly) != "2021-01-23" {
		t.Fatalf("the day is local to the airport, got %v", d)
	}
}

func TestRespGuard(t *testing.T) {
	resp := strings.Replace(strings.Replace(routetest.Dnld(1, routetest.Fltr("1", "23JAN210535", "")), "<STYP>DNLD<", "<STYP>RESP<", 1), "<SEQN>77<", "<SEQN>80<", 1)
	off := Prepare(1, resp, settings())
	if off.NeedsRequest {
		t.Fatal("guard off asks for a request")
	}
	if v := Decide(off, message.Lookups{}, time.Time{}); v.State != message.StateRouted {
		t.Fatalf("guard off: %+v", v)
	}
	on := Prepare(1, resp, settings(func(c *config) { c.RespGuard = true }))
	if !on.NeedsRequest {
		t.Fatal("guard on does not ask for a request")
	}
	if v := Decide(on, message.Lookups{}, time.Time{}); v.State != message.StateSkipped || v.Reason != "no-match" || v.N() != 0 {
		t.Fatalf("RESP without an open request: %+v", v)
	}
	if v := Decide(on, message.Lookups{RequestOpen: true}, time.Time{}); v.State != message.StateRouted || v.N() != 1 {
		t.Fatalf("RESP answering an open request: %+v", v)
	}
	// A DNLD is never guarded.
	if p := Prepare(1, routetest.Dnld(1, routetest.Fltr("1", "23JAN210535", "")), settings(func(c *config) { c.RespGuard = true })); p.NeedsRequest {
		t.Fatal("a DNLD needs a request")
	}
}

// An ignored EROR is decided on its META, yet still names the request it
// answers (afterDecision closes it).
func TestIgnoredErorKeepsItsAnswer(t *testing.T) {
	p := Prepare(1, routetest.Msg("EROR", "RQRD", "5", "<EROR><SEQN>1700000001</SEQN><TYPE>RQRD</TYPE></EROR>"), settings())
	if v := Decide(p, message.Lookups{}, time.Time{}); v.State != message.StateSkipped || v.Reason != "ignored:EROR-*" || v.IdentityKey != "" {
		t.Fatalf("verdict %+v", v)
	}
	if p.Msg == nil || p.Msg.ErrorAnswer == nil || p.Msg.ErrorAnswer.RefSEQN != "1700000001" {
		t.Fatalf("ignored EROR lost its answer: %+v", p.Msg)
	}
}

// A message routed to a category keyed by its first child sets the index
// entry the next incremental message is checked against.
func TestDecideRefKeyIndex(t *testing.T) {
	p := Prepare(3, routetest.Abdg("DNLD", "DESC"), settings())
	if p.RefType != "ABDG" || p.Query().RefType != "ABDG" {
		t.Fatalf("plan looks up %q", p.RefType)
	}
	v := Decide(p, message.Lookups{KeyTag: "ABCD"}, time.Time{})
	if v.RefKey == nil || *v.RefKey != (message.RefKey{RType: "ABDG", KeyTag: "DESC"}) {
		t.Fatalf("index entry %+v", v.RefKey)
	}
	// Categories with a fixed key tag need no index.
	if p := Prepare(4, sample.XML(t, "INSERT_CMINMSGS_AIRL.sql", 0), settings()); p.RefType != "" || Decide(p, message.Lookups{}, time.Time{}).RefKey != nil {
		t.Fatal("AIRL looks up its key tag")
	}
}

// A SCHEDULE or ADFT whose FLID no older message named is marked
// FirstSeen (the flights processor then skips its divergence lookup); one
// indexed by an older message is not, and one indexed by this very message
// (a re-decision after a crash) is again.
func TestFirstSeen(t *testing.T) {
	day := time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)
	raw := routetest.Dnld(2, routetest.Fltr("15", "23JAN210535", ""), routetest.Fltr("16", "23JAN210535", ""))
	p := Prepare(9, raw, settings())
	for _, tc := range []struct {
		name  string
		index map[string]message.FlightDay
		want  map[string]bool
	}{
		{"unknown flights", nil, map[string]bool{"15": true, "16": true}},
		{"16 indexed by message 4", map[string]message.FlightDay{"16": {FLID: "16", Day: &day, FirstMsgID: 4}}, map[string]bool{"15": true, "16": false}},
		{"16 indexed by this message", map[string]message.FlightDay{"16": {FLID: "16", Day: &day, FirstMsgID: 9}}, map[string]bool{"15": true, "16": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := message.Lookups{Days: map[string]message.FlightDay{}}
			for k, v := range tc.index {
				l.Days[k] = v
			}
			v := Decide(p, l, time.Now())
			if v.State != message.StateRouted || len(v.Flights) != 2 {
				t.Fatalf("verdict %+v", v)
			}
			for _, tr := range v.Flights {
				if tr.FirstSeen != tc.want[tr.FLID] {
					t.Errorf("FLID %s: FirstSeen %v, want %v", tr.FLID, tr.FirstSeen, tc.want[tr.FLID])
				}
			}
		})
	}
}
