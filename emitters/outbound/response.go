package outbound

import (
	"context"

	"github.com/jackc/pgx/v5"

	"msgx/tables/flight"
	"msgx/tables/refdata"
	"msgx/tables/request"
)

// schdResp is the source the router gives the transitions of a SCHD RESP
// (TYPE-STYP).
const schdResp = "SCHD-RESP"

// flightAnswer is the slot whose request the message of a flight
// transition answers: a SCHD RESP answers the RQFD; nothing else answers a
// request.
func flightAnswer(t *flight.Transition) (request.Kind, string, bool) {
	if t.Source != schdResp {
		return "", "", false
	}
	return request.RQFD, request.STYPNone, true
}

// refdataAnswer is the slot whose request a reference transition answers:
// a RESP of category T answers the RQRD of T; nothing else answers a
// request.
func refdataAnswer(t *refdata.Transition) (request.Kind, string, bool) {
	if t.STYP != refdata.STYPRESP {
		return "", "", false
	}
	return request.RQRD, t.RType, true
}

// CompleteFlightResponse is the flights processor's OnMessageDone: in the
// transaction that applied the last transition of a message, a SCHD RESP
// completes the open RQFD, so the request is DONE exactly when its
// answer's data is applied. Any other message completes nothing.
func (s *Requests) CompleteFlightResponse(ctx context.Context, tx pgx.Tx, t *flight.Transition) error {
	kind, styp, ok := flightAnswer(t)
	if !ok {
		return nil
	}
	return s.Complete(ctx, tx, kind, styp, t.MsgID, t.MsgDTTM, s.clk.Now())
}

// CompleteRefdataResponse is the refdata processor's OnApplied: in the
// transaction that wrote the category, a RESP completes the open RQRD of
// its type, so the request closes only once its answer's data is applied.
// Any other transition completes nothing.
func (s *Requests) CompleteRefdataResponse(ctx context.Context, tx pgx.Tx, t *refdata.Transition) error {
	kind, styp, ok := refdataAnswer(t)
	if !ok {
		return nil
	}
	return s.Complete(ctx, tx, kind, styp, t.MsgID, t.MsgDTTM, s.clk.Now())
}
