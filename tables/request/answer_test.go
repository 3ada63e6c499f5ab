package request

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// flightsSent is a SENT RQFD sent at t0.
func flightsSent(id, seqn int64) ReqTrack {
	r, err := NewFlights(t0.Add(24*time.Hour), t0.Add(48*time.Hour), seqn, "MSGX", t0.Add(-time.Second))
	if err != nil {
		panic(err)
	}
	r.ID = id
	r, _ = Attempted(r, 10)
	if r, err = Sent(r, 100+id, t0); err != nil {
		panic(err)
	}
	return r
}

func TestPairEror(t *testing.T) {
	cases := []struct {
		name string
		e    ErorAnswer
		want Pairing
		why  string // in Why when it pairs with nothing
	}{
		{"body SEQN", ErorAnswer{RefSEQN: " 17 "}, Pairing{By: PairedBySEQN, SEQN: 17}, ""},
		{"body SEQN and the kind", ErorAnswer{MetaSTYP: "RQFD", RefSEQN: "17"}, Pairing{By: PairedBySEQN, SEQN: 17, Kind: RQFD}, ""},
		{"META STYP", ErorAnswer{MetaSTYP: "rqfd"}, Pairing{By: PairedByType, Kind: RQFD}, ""},
		{"body TYPE", ErorAnswer{MetaSTYP: "NONE", RefTYPE: "RQRD", RefSTYP: "AIRL"}, Pairing{By: PairedByType, Kind: RQRD}, ""},
		{"body STYP", ErorAnswer{RefTYPE: "REQ", RefSTYP: "RQFD"}, Pairing{By: PairedByType, Kind: RQFD}, ""},
		{"the same kind twice", ErorAnswer{MetaSTYP: "RQFD", RefTYPE: "RQFD"}, Pairing{By: PairedByType, Kind: RQFD}, ""},
		{"both kinds", ErorAnswer{MetaSTYP: "RQFD", RefTYPE: "RQRD"}, Pairing{}, "both RQRD and RQFD"},
		{"both kinds beat a SEQN", ErorAnswer{MetaSTYP: "RQFD", RefTYPE: "RQRD", RefSEQN: "17"}, Pairing{}, "both RQRD and RQFD"},
		{"nothing", ErorAnswer{MetaSTYP: "NONE"}, Pairing{}, "neither a request's SEQN nor a kind"},
		{"SEQN not a number", ErorAnswer{MetaSTYP: "RQFD", RefSEQN: "A17"}, Pairing{Kind: RQFD}, `body SEQN "A17"`},
		{"SEQN zero", ErorAnswer{RefSEQN: "0"}, Pairing{}, `body SEQN "0"`},
	}
	for _, c := range cases {
		got := PairEror(c.e)
		why := got.Why
		got.Why = ""
		if got != c.want || (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
			t.Errorf("%s: %+v (why %q), want %+v (why %q)", c.name, got, why, c.want, c.why)
		}
	}
}

func TestFailByEror(t *testing.T) {
	rqfd := flightsSent(1, 11)
	rqrd := sent(2, "AIRL", 12)
	pend := pending(3, "AIRL", 13)
	closed, _ := Complete(flightsSent(4, 14), Response{RQFD, STYPNone, 50, at(time.Minute), at(time.Minute)}, 0)
	skew := 2 * time.Minute
	eror := func(metaSTYP, seqn string, dttm time.Duration) ErorAnswer {
		e := ErorAnswer{MsgID: 70, MetaSTYP: metaSTYP, RefSEQN: seqn, Code: "E1", Text: "refused", At: at(5 * time.Minute)}
		if dttm != 0 {
			e.DTTM = at(dttm)
		}
		return e
	}
	ptr := func(r ReqTrack) *ReqTrack { return &r }
	cases := []struct {
		name    string
		r       *ReqTrack
		e       ErorAnswer
		outcome string
		by      string
		request int64
		detail  string
	}{
		{"by SEQN", ptr(rqfd), eror("EROR", "11", 0), OutcomeFailed, PairedBySEQN, 1, "named by its SEQN"},
		{"by SEQN, PENDING", ptr(pend), eror("", "13", 0), OutcomeFailed, PairedBySEQN, 3, "named by its SEQN"},
		{"by SEQN, without DTTM and dated before", ptr(rqfd), eror("RQFD", "11", -time.Hour), OutcomeFailed, PairedBySEQN, 1, ""},
		{"by SEQN, closed", ptr(closed), eror("RQFD", "14", 0), OutcomeLate, PairedBySEQN, 4, "already DONE"},
		{"by SEQN, unknown", nil, eror("RQFD", "99", 0), OutcomeUnpaired, PairedBySEQN, 0, "SEQN 99 is no request"},
		{"by SEQN, another kind", ptr(rqrd), eror("RQFD", "12", 0), OutcomeUnpaired, PairedBySEQN, 0, "but the EROR names RQFD"},
		{"by type", ptr(rqfd), eror("RQFD", "", time.Minute), OutcomeFailed, PairedByType, 1, "named by its kind"},
		{"by type within the skew", ptr(rqfd), eror("RQFD", "", -time.Minute), OutcomeFailed, PairedByType, 1, ""},
		{"by type, stale", ptr(rqfd), eror("RQFD", "", -time.Hour), OutcomeUnpaired, PairedByType, 0, "earlier"},
		{"by type, no DTTM", ptr(rqfd), eror("RQFD", "", 0), OutcomeUnpaired, PairedByType, 0, "no META DTTM"},
		{"by type, PENDING", ptr(pend), eror("RQRD", "", time.Minute), OutcomeUnpaired, PairedByType, 0, "not confirmed sent"},
		{"by type, none open", nil, eror("RQFD", "", time.Minute), OutcomeUnpaired, PairedByType, 0, "no RQFD is open"},
		{"names nothing", ptr(rqfd), eror("NONE", "", time.Minute), OutcomeUnpaired, "", 0, "neither a request's SEQN nor a kind"},
	}
	for _, c := range cases {
		p := PairEror(c.e)
		var before ReqTrack
		if c.r != nil {
			before = *c.r
		}
		next, a, err := FailByEror(c.r, p, c.e, skew)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if a.Outcome != c.outcome || a.PairedBy != c.by || a.RequestID != c.request || !strings.Contains(a.Detail, c.detail) ||
			a.MsgID != 70 || a.Type != AnswerEROR || a.Code != "E1" || a.Text != "refused" || !a.At.Equal(c.e.At) {
			t.Errorf("%s: answer %+v", c.name, a)
		}
		if c.r != nil && !Equal(*c.r, before) {
			t.Errorf("%s: the input request changed", c.name)
		}
		switch {
		case c.outcome == OutcomeFailed && (next == nil || next.State != StateFailed || next.ResponseMsgID != 70 || !next.ClosedAt.Equal(c.e.At)):
			t.Errorf("%s: FAILED answer, request %+v", c.name, next)
		case c.outcome != OutcomeFailed && next != nil:
			t.Errorf("%s: %s answer changed the request: %+v", c.name, c.outcome, next)
		}
	}
	if _, _, err := FailByEror(nil, Pairing{}, ErorAnswer{At: t0}, skew); !errors.Is(err, ErrInvalid) {
		t.Errorf("EROR without message id: %v", err)
	}
}

func TestRespond(t *testing.T) {
	two := sent(1, "AIRL,COUL", 11)
	resp := func(kind Kind, rtype string, id int64) Response {
		return Response{Kind: kind, RType: rtype, MsgID: id, DTTM: at(time.Minute), At: at(time.Minute)}
	}
	next, a, err := Respond(&two, resp(RQRD, "AIRL", 50), 0)
	if err != nil || next == nil || a.Outcome != OutcomeAnswered || a.RequestID != 1 || !strings.Contains(a.Detail, "1 of 2") {
		t.Fatalf("first category: %v %+v %v", next, a, err)
	}
	done, a, err := Respond(next, resp(RQRD, "COUL", 51), 0)
	if err != nil || done == nil || done.State != StateDone || a.Outcome != OutcomeDone || a.Type != AnswerRESP {
		t.Fatalf("second category: %v %+v %v", done, a, err)
	}
	if n, a, _ := Respond(next, resp(RQRD, "AIRL", 52), 0); n != nil || a.Outcome != OutcomeUnpaired || !strings.Contains(a.Detail, "already answered") {
		t.Errorf("a category again: %v %+v", n, a)
	}
	if n, a, _ := Respond(nil, resp(RQFD, STYPNone, 53), 0); n != nil || a.Outcome != OutcomeUnpaired || a.Detail != "SCHD RESP answers no request: no RQFD is open" {
		t.Errorf("nothing open: %v %+v", n, a)
	}
	if _, _, err := Respond(nil, Response{Kind: RQFD}, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid response: %v", err)
	}
}
