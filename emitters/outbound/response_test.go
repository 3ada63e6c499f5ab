package outbound

import (
	"testing"

	"msgx/tables/flight"
	"msgx/tables/refdata"
	"msgx/tables/request"
)

// Which applied transitions answer which request.
func TestResponseRules(t *testing.T) {
	type answer struct {
		kind request.Kind
		styp string
		ok   bool
	}
	for _, tc := range []struct {
		source string
		want   answer
	}{
		{"SCHD-RESP", answer{request.RQFD, request.STYPNone, true}},
		{"SCHD-DNLD", answer{}},
		{"FLOP-ESTT", answer{}},
		{"ADFT-NONE", answer{}},
		{flight.SourceCascade, answer{}},
		{flight.SourceHistory, answer{}},
		{"", answer{}},
	} {
		kind, styp, ok := flightAnswer(&flight.Transition{MsgID: 1, Source: tc.source, FLID: "15"})
		if got := (answer{kind, styp, ok}); got != tc.want {
			t.Errorf("flight transition from %q answers %+v, want %+v", tc.source, got, tc.want)
		}
	}
	for _, tc := range []struct {
		rtype, styp string
		want        answer
	}{
		{"AIRL", refdata.STYPRESP, answer{request.RQRD, "AIRL", true}},
		{"RSTA", refdata.STYPRESP, answer{request.RQRD, "RSTA", true}},
		{"AIRL", refdata.STYPDNLD, answer{}},
		{"AIRL", refdata.STYPADD, answer{}},
		{"AIRL", refdata.STYPUPD, answer{}},
		{"AIRL", refdata.STYPDEL, answer{}},
	} {
		kind, styp, ok := refdataAnswer(&refdata.Transition{MsgID: 1, RType: tc.rtype, STYP: tc.styp})
		if got := (answer{kind, styp, ok}); got != tc.want {
			t.Errorf("%s %s answers %+v, want %+v", tc.rtype, tc.styp, got, tc.want)
		}
	}
}
