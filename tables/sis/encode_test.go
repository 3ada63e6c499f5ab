package sis

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestEncodeRQRDRoundTrip encodes reference data requests and decodes them.
func TestEncodeRQRDRoundTrip(t *testing.T) {
	loc := shanghai(t)
	dttm := time.Date(2024, 3, 1, 8, 0, 5, 0, loc)
	tests := []struct {
		name   string
		meta   Meta
		rtypes []string
		styp   string
		want   []string
	}{
		{"one type", Meta{SNDR: "MSGX", SEQN: "101", DTTM: dttm}, []string{"AIRL"}, "AIRL", []string{"AIRL"}},
		{"several, normalised", Meta{SNDR: "MSGX", RCVR: "AODB", SEQN: "102", DTTM: dttm},
			[]string{" airl", "ARPT ", "", "rsta"}, "AIRL,ARPT,RSTA", []string{"AIRL", "ARPT", "RSTA"}},
		{"escaped sender, raw DTTM", Meta{SNDR: "A&B<C>", SEQN: "x1", DTTMRaw: "20240301080005", DDTMRaw: "20240301080000"},
			[]string{"CLST"}, "CLST", []string{"CLST"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.meta
			raw.TYPE, raw.STYP = "IGNORED", "IGNORED"
			b := EncodeRQRD(raw, tc.rtypes)
			if !strings.HasPrefix(string(b), `<?xml version="1.0" encoding="UTF-8"?>`) {
				t.Errorf("no declaration: %s", b)
			}
			m, err := Decode(b, loc)
			if err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if m.Kind != KindRefDataRequest || !reflect.DeepEqual(m.RefDataRequest.Types, tc.want) {
				t.Errorf("request = %+v", m.RefDataRequest)
			}
			got := m.Meta
			if got.TYPE != "RQRD" || got.STYP != tc.styp || got.SNDR != tc.meta.SNDR || got.RCVR != tc.meta.RCVR ||
				got.SEQN != tc.meta.SEQN || !got.DTTM.Equal(dttm) || got.DDTMRaw != tc.meta.DDTMRaw {
				t.Errorf("meta = %+v", got)
			}
		})
	}
}

// TestEncodeRQFDRoundTrip encodes a flight data request and decodes it.
func TestEncodeRQFDRoundTrip(t *testing.T) {
	loc := shanghai(t)
	from := time.Date(2024, 3, 1, 0, 0, 0, 0, loc)
	to := time.Date(2024, 3, 2, 23, 59, 0, 0, loc)
	b := EncodeRQFD(Meta{SNDR: "MSGX", SEQN: "7", DTTM: time.Date(2024, 2, 29, 22, 0, 0, 0, loc)}, from, to)
	if !strings.Contains(string(b), "<STDB>01MAR240000</STDB>") || !strings.Contains(string(b), "<STDE>02MAR242359</STDE>") {
		t.Errorf("encoded:\n%s", b)
	}
	m, err := Decode(b, loc)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	want := &FlightRequest{FromRaw: "01MAR240000", ToRaw: "02MAR242359", From: from, To: to}
	if m.Kind != KindFlightRequest || m.Meta.TYPE != "RQFD" || m.Meta.STYP != "NONE" || !reflect.DeepEqual(m.FlightRequest, want) {
		t.Errorf("message = %+v / %+v", m.Meta, m.FlightRequest)
	}
}
