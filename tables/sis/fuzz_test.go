package sis

import (
	"errors"
	"strings"
	"testing"
)

// FuzzDecode checks that Decode never panics, that every error is a
// *DecodeError with a known class, and that a decoded message is coherent.
func FuzzDecode(f *testing.F) {
	for _, s := range loadSamples(f) {
		f.Add([]byte(s.XML))
	}
	for _, s := range []string{
		"", "<MSG/>", "<MSG><META/></MSG>", "\xEF\xBB\xBF<MSG>",
		`<?xml version="1.0" encoding="GB2312"?>` + "<MSG>\xB5\xC7</MSG>",
		envelope(metaOf("RQFD", "NONE"), "<RQFD><STDB>01MAR240000</STDB><STDE/></RQFD>"),
		envelope(metaOf("RQRD", "AIRL"), "<RQRD><RTYP>AIRL</RTYP></RQRD>"),
		envelope(metaOf("EROR", "X"), "<EROR><SEQN>1</SEQN></EROR>"),
		envelope(metaOf("FDEL", "X"), "<FDEL><FLID>1</FLID></FDEL>"),
		envelope(metaOf("SCHS", "DNLD"), "<SCHS><SNAM>S</SNAM><RECS>1</RECS><FLTR><SCHT>2400</SCHT><ROUT/></FLTR></SCHS>"),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := Decode(raw, nil)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecodeError", err, err)
			}
			if de.Class != Malformed && de.Class != CodecError {
				t.Fatalf("unknown class %q", de.Class)
			}
			if de.Reason == "" || strings.HasPrefix(de.Reason, "internal error") {
				t.Fatalf("bad reason: %v", de)
			}
			if m != nil {
				t.Fatal("message and error both set")
			}
			return
		}
		if m == nil || m.Meta.TYPE == "" || m.Meta.STYP == "" || m.Meta.SNDR == "" || m.Meta.SEQN == "" {
			t.Fatalf("incoherent message %+v", m)
		}
		ok := false
		switch m.Kind {
		case KindSchedule:
			ok = m.Schedule != nil
		case KindFlightOp, KindFlightDelete:
			ok = m.Flight != nil && m.Flight.FLID != ""
		case KindRefData:
			ok = m.RefData != nil
		case KindRefDataRequest:
			ok = m.RefDataRequest != nil && len(m.RefDataRequest.Types) > 0
		case KindFlightRequest:
			ok = m.FlightRequest != nil
		case KindError:
			ok = m.ErrorAnswer != nil
		case KindSeason:
			ok = m.Season != nil
			// The time checks and the record never panic.
			_ = m.Season.CheckTimes()
			_ = m.Season.Record()
		case KindLDM, KindUnknown:
			ok = true
		}
		if !ok {
			t.Fatalf("kind %s without its payload: %+v", m.Kind, m)
		}
		// Raw collection entries must be well-formed XML of one element.
		var flights []FlightRecord
		if m.Schedule != nil {
			flights = m.Schedule.Flights
		}
		if m.Flight != nil {
			flights = append(flights, m.Flight.FlightRecord)
		}
		for _, fr := range flights {
			_ = fr.CheckTimes()
			for _, name := range []string{"SRVT", "VIPF"} {
				for _, e := range fr.Collections[name] {
					n, derr := parseTree([]byte(e[RawKey]))
					if derr != nil {
						t.Fatalf("raw %s does not re-parse: %v\n%s", name, derr, e[RawKey])
					}
					if n.XML() != e[RawKey] {
						t.Fatalf("raw %s is not stable:\n%s\n%s", name, e[RawKey], n.XML())
					}
				}
			}
		}
	})
}
