// Package routetest builds the SIS messages the routing tests decide: the
// tests of tables/route and of the router around it (processors/router)
// share them.
package routetest

import (
	"fmt"
	"strings"
	"time"
)

// Shanghai is the airport time zone of the tests.
var Shanghai = func() *time.Location {
	l, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return l
}()

// Msg is a message of TYPE typ and STYP styp from the AODB, with SEQN seqn
// and body after its META.
func Msg(typ, styp, seqn, body string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%s</SEQN><DTTM>20261130080000</DTTM><TYPE>%s</TYPE><STYP>%s</STYP></META>%s</MSG>`, seqn, typ, styp, body)
}

// Fltr is a schedule record of flight flid scheduled at sodt ("-": no
// SODT), with extra inside.
func Fltr(flid, sodt string, extra string) string {
	s := "<FLTR><FLID>" + flid + "</FLID>"
	if sodt != "-" {
		s += "<SODT>" + sodt + "</SODT>"
	}
	return s + extra + "</FLTR>"
}

// Dnld is a SCHD DNLD declaring n records and carrying fltrs.
func Dnld(n int, fltrs ...string) string {
	return Msg("SCHD", "DNLD", "77", fmt.Sprintf("<SCHD><RECS>%d</RECS>%s</SCHD>", n, strings.Join(fltrs, "")))
}

// Season is a seasonal schedule (SCHS) of STYP styp.
func Season(styp, body string) string {
	return Msg("SCHS", styp, "88", "<SCHS>"+body+"</SCHS>")
}

// Rsta is a resource-status message of the given records.
func Rsta(styp string, recs ...string) string {
	return Msg("RSTA", styp, "1", fmt.Sprintf("<RECS>%d</RECS>%s", len(recs), strings.Join(recs, "")))
}

// RstaRec is an RSTA record; empty values are left out.
func RstaRec(rtyp, rsid, stat, strt, endt string) string {
	s := "<RSTA><RTYP>" + rtyp + "</RTYP><RSID>" + rsid + "</RSID>"
	for _, f := range [][2]string{{"STAT", stat}, {"STRT", strt}, {"ENDT", endt}} {
		if f[1] != "" {
			s += "<" + f[0] + ">" + f[1] + "</" + f[0] + ">"
		}
	}
	return s + "</RSTA>"
}

// Abdg is an ABDG message (keyed by its records' first child) whose record
// starts with tag first.
func Abdg(styp, first string) string {
	rec := map[string]string{"ABCD": "<ABCD>212</ABCD><DESC>Airbridge 212</DESC>", "DESC": "<DESC>Airbridge 212</DESC><ABCD>212</ABCD>"}[first]
	return Msg("ABDG", styp, "1", "<RECS>1</RECS><ABDG>"+rec+"</ABDG>")
}

// Day is the operation day s (YYYY-MM-DD).
func Day(s string) *time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return &t
}
