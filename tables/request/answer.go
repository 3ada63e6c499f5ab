package request

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Answer types: the message that answered (or tried to answer) a request.
const (
	// AnswerRESP is a RESP: reference data of one category, or SCHD RESP.
	AnswerRESP = "RESP"
	// AnswerEROR is an EROR: the AODB refused a request.
	AnswerEROR = "EROR"
)

// Outcomes of an answer, recorded with it (req_answer.outcome).
const (
	// OutcomeDone: the RESP completed its request (DONE).
	OutcomeDone = "DONE"
	// OutcomeAnswered: the RESP answered one category of an RQRD that
	// still waits for others.
	OutcomeAnswered = "ANSWERED"
	// OutcomeFailed: the EROR closed its request as FAILED.
	OutcomeFailed = "FAILED"
	// OutcomeLate: the EROR names a request that was already closed; it
	// changes nothing.
	OutcomeLate = "LATE"
	// OutcomeUnpaired: the answer pairs with no request; Detail says why.
	OutcomeUnpaired = "UNPAIRED"
)

// Ways an EROR is paired with its request (Answer.PairedBy).
const (
	// PairedBySEQN: the EROR's body carries the request's SEQN.
	PairedBySEQN = "SEQN"
	// PairedByType: the EROR names the kind it answers (META STYP, or TYPE
	// / STYP in its body); it pairs with the one open request of that kind.
	PairedByType = "TYPE"
)

// Answer is the recorded outcome of one answer message: which request it
// closed or answered, or why none. Every RESP that reaches request tracking
// and every EROR gets one, so that no answer is dropped without a trace.
type Answer struct {
	// MsgID is the answer's inbox message (CMINMSGS_ID).
	MsgID int64 `json:"msgId"`
	// Type is AnswerRESP or AnswerEROR.
	Type string `json:"type"`
	// Kind is the kind of request it answers, when known.
	Kind Kind `json:"kind,omitempty"`
	// RequestID and SEQN name the request it paired with (0: none).
	RequestID int64 `json:"requestId,omitempty"`
	SEQN      int64 `json:"seqn,omitempty"`
	// Outcome is one of the Outcome* values.
	Outcome string `json:"outcome"`
	// PairedBy says how an EROR found its request (PairedBySEQN,
	// PairedByType); empty for a RESP and for an EROR that names nothing.
	PairedBy string `json:"pairedBy,omitempty"`
	// Detail says what happened in words, and why for UNPAIRED and LATE.
	Detail string `json:"detail"`
	// Code and Text are the EROR's error code and text.
	Code string `json:"code,omitempty"`
	Text string `json:"text,omitempty"`
	// At is when the answer was recorded.
	At time.Time `json:"at"`
}

// ErorAnswer is an EROR as request tracking sees it: where it may name a
// request, and what it says.
type ErorAnswer struct {
	// MsgID is the EROR's inbox message id.
	MsgID int64
	// MetaSTYP is its META STYP; RefSEQN, RefTYPE and RefSTYP the first
	// SEQN, TYPE and STYP elements of its body ("" when absent).
	MetaSTYP, RefSEQN, RefTYPE, RefSTYP string
	// DTTM is its META DTTM; zero when absent.
	DTTM time.Time
	// Code and Text are its error code and text (tables/sis).
	Code, Text string
	// At is the instant the EROR is recorded.
	At time.Time
}

// Pairing is how an EROR names its request: by SEQN, by kind, or not at
// all (Why says why).
type Pairing struct {
	// By is PairedBySEQN, PairedByType or "" (pairs with nothing).
	By string
	// SEQN is the request's SEQN when By is PairedBySEQN.
	SEQN int64
	// Kind is the kind the EROR names, if it names exactly one (also with
	// a SEQN, where it must agree with the request's kind).
	Kind Kind
	// Why explains a pairing with nothing.
	Why string
}

// PairEror decides how e names its request. The rule
// (docs/design.md#requests): a body SEQN, if the EROR carries one, names
// the request with that SEQN and nothing else; otherwise the kind it
// answers (RQRD or RQFD in META STYP, body TYPE or body STYP) names the one
// open request of that kind (one per kind, US-09 AC1; answers pair with the
// open request by type, US-09 AC2). An EROR naming both kinds, neither a
// SEQN nor a kind, or a SEQN that is not a number pairs with nothing.
func PairEror(e ErorAnswer) Pairing {
	var p Pairing
	var named []Kind
	for _, v := range []string{e.MetaSTYP, e.RefTYPE, e.RefSTYP} {
		k := Kind(strings.ToUpper(strings.TrimSpace(v)))
		if (k == RQRD || k == RQFD) && !slices.Contains(named, k) {
			named = append(named, k)
		}
	}
	if len(named) > 1 {
		p.Why = "it names both RQRD and RQFD (META STYP, body TYPE/STYP)"
		return p
	}
	if len(named) == 1 {
		p.Kind = named[0]
	}
	if ref := strings.TrimSpace(e.RefSEQN); ref != "" {
		seqn, err := strconv.ParseInt(ref, 10, 64)
		if err != nil || seqn <= 0 {
			p.Why = fmt.Sprintf("its body SEQN %q is not the SEQN of a request", ref)
			return p
		}
		p.By, p.SEQN = PairedBySEQN, seqn
		return p
	}
	if p.Kind == "" {
		p.Why = fmt.Sprintf("it names neither a request's SEQN nor a kind (META STYP %q, body TYPE %q, STYP %q)",
			e.MetaSTYP, e.RefTYPE, e.RefSTYP)
		return p
	}
	p.By = PairedByType
	return p
}

// FailByEror decides what the EROR e does, paired by p with r: the request
// with p's SEQN (any state) or the open request of p's kind; nil when the
// lookup found none. It returns the request closed as FAILED (nil when e
// changes no request) and the answer to record.
//
// By SEQN, an open request fails (PENDING too: an EROR naming its SEQN
// proves the AODB read it); a closed one is left alone (LATE); a request
// of another kind than e names is a contradiction and pairs with nothing.
// By kind, the answer carries no request id, so it must pass the rule a
// RESP passes (Complete): the request is SENT and e's DTTM is not before
// SentAt − skew. An old EROR, replayed or rebuilt, thus never fails a newer
// request, and an EROR without DTTM pairs by kind with nothing.
func FailByEror(r *ReqTrack, p Pairing, e ErorAnswer, skew time.Duration) (*ReqTrack, Answer, error) {
	if e.MsgID <= 0 || e.At.IsZero() {
		return nil, Answer{}, fmt.Errorf("%w: EROR message %d at %v", ErrInvalid, e.MsgID, e.At)
	}
	a := Answer{MsgID: e.MsgID, Type: AnswerEROR, Kind: p.Kind, Outcome: OutcomeUnpaired, PairedBy: p.By,
		Code: e.Code, Text: e.Text, At: e.At}
	unpaired := func(format string, args ...any) (*ReqTrack, Answer, error) {
		a.Detail = fmt.Sprintf(format, args...)
		return nil, a, nil
	}
	switch {
	case p.By == "":
		a.PairedBy = ""
		return unpaired("pairs with no request: %s", p.Why)
	case r == nil && p.By == PairedBySEQN:
		return unpaired("pairs with no request: SEQN %d is no request of msgx", p.SEQN)
	case r == nil:
		return unpaired("pairs with no request: no %s is open", p.Kind)
	}
	a.Kind, a.RequestID, a.SEQN = r.Kind, r.ID, r.SEQN
	if p.By == PairedBySEQN {
		if p.Kind != "" && p.Kind != r.Kind {
			a.RequestID, a.SEQN = 0, 0
			return unpaired("pairs with no request: SEQN %d is %s request %d, but the EROR names %s", r.SEQN, r.Kind, r.ID, p.Kind)
		}
		failed, err := Fail(*r, Eror{SEQN: p.SEQN, MsgID: e.MsgID, At: e.At})
		if err != nil {
			a.Outcome = OutcomeLate
			a.Detail = fmt.Sprintf("names %s request %d (SEQN %d), already %s: changes nothing", r.Kind, r.ID, r.SEQN, r.State)
			return nil, a, nil
		}
		a.Outcome = OutcomeFailed
		a.Detail = fmt.Sprintf("closed %s request %d (SEQN %d) as FAILED, named by its SEQN", r.Kind, r.ID, r.SEQN)
		return &failed, a, nil
	}
	if r.Kind != p.Kind || !r.Open() {
		return nil, Answer{}, fmt.Errorf("%w: an EROR naming %s is paired by kind with %s request %d (%s)", ErrInvalid, p.Kind, r.Kind, r.ID, r.State)
	}
	unmatched := func(format string, args ...any) (*ReqTrack, Answer, error) {
		a.RequestID, a.SEQN = 0, 0
		return unpaired("pairs with no request: the open %s %d (SEQN %d) "+format, append([]any{r.Kind, r.ID, r.SEQN}, args...)...)
	}
	if r.State != StateSent {
		return unmatched("is not confirmed sent, so nothing can be answering it")
	}
	if e.DTTM.IsZero() {
		return unmatched("is named by kind only, and the EROR has no META DTTM to show it is not older than the request")
	}
	if skew = max(skew, 0); e.DTTM.Before(r.SentAt.Add(-skew)) {
		return unmatched("was sent %s; the EROR is dated %s, earlier (skew %s)",
			r.SentAt.UTC().Format(time.RFC3339), e.DTTM.UTC().Format(time.RFC3339), skew)
	}
	failed, err := Fail(*r, Eror{SEQN: r.SEQN, MsgID: e.MsgID, At: e.At})
	if err != nil {
		return nil, Answer{}, err
	}
	a.Outcome = OutcomeFailed
	a.Detail = fmt.Sprintf("closed %s request %d (SEQN %d) as FAILED, named by its kind", r.Kind, r.ID, r.SEQN)
	return &failed, a, nil
}

// Respond decides what the RESP resp does to r, the open request of its
// kind (nil: none is open), under Complete's rule, and returns the request
// it answered (nil when none) and the answer to record: DONE, ANSWERED (a
// category of an RQRD that waits for more) or UNPAIRED with the reason.
func Respond(r *ReqTrack, resp Response, skew time.Duration) (*ReqTrack, Answer, error) {
	if resp.MsgID <= 0 || resp.At.IsZero() {
		return nil, Answer{}, fmt.Errorf("%w: response message %d at %v", ErrInvalid, resp.MsgID, resp.At)
	}
	a := Answer{MsgID: resp.MsgID, Type: AnswerRESP, Kind: resp.Kind, Outcome: OutcomeUnpaired, At: resp.At}
	what := "SCHD RESP"
	if resp.Kind == RQRD {
		what = resp.RType + " RESP"
	}
	if r == nil {
		a.Detail = fmt.Sprintf("%s answers no request: no %s is open", what, resp.Kind)
		return nil, a, nil
	}
	next, err := Complete(*r, resp, skew)
	if err != nil {
		a.Detail = fmt.Sprintf("%s answers no request: %v", what, err)
		return nil, a, nil
	}
	a.RequestID, a.SEQN = next.ID, next.SEQN
	if next.State == StateDone {
		a.Outcome = OutcomeDone
		a.Detail = fmt.Sprintf("%s completed %s request %d (SEQN %d): DONE", what, next.Kind, next.ID, next.SEQN)
	} else {
		a.Outcome = OutcomeAnswered
		a.Detail = fmt.Sprintf("%s answered %s request %d (SEQN %d) in part: %d of %d categories", what, next.Kind, next.ID,
			next.SEQN, len(next.Answered), len(next.RTypes))
	}
	return &next, a, nil
}
