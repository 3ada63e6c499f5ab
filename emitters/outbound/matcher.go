package outbound

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/tables/request"
)

// Matcher is what the router and the applying processors need from request
// tracking. *Requests implements it.
//
// Answers: a reference RESP of TYPE T answers the open RQRD if it names T,
// (kind request.RQRD, rtype T); a SCHD RESP answers the open RQFD (kind
// request.RQFD, rtype request.STYPNone or "").
type Matcher interface {
	// OpenFor returns the open (PENDING or SENT) request of kind that a
	// RESP of rtype would answer, if any: the RESP guard's question "is
	// anything waiting for this?".
	OpenFor(ctx context.Context, kind request.Kind, rtype string) (*request.ReqTrack, bool, error)
	// Accepts reports whether a RESP of rtype (message respMsgID dated
	// respDTTM) would answer r: nil if it would, otherwise the
	// tables/request reason (ErrNotSent, ErrNoDTTM, ErrStale, ErrClosed,
	// …). Pure; the RESP guard uses it with the request OpenFor returned.
	Accepts(r request.ReqTrack, rtype string, respMsgID int64, respDTTM, now time.Time) error
	// Complete records the RESP on the open request of kind if it answers
	// it (DONE once every category of an RQRD is answered). It must run in
	// tx, the PostgreSQL transaction that applies the RESP's data, so that
	// the request is DONE exactly when the data is applied. A RESP that
	// answers nothing (no open request, another category, late, stale,
	// already applied) is a no-op and returns nil; an error is a database
	// failure and tx should be rolled back.
	Complete(ctx context.Context, tx pgx.Tx, kind request.Kind, rtype string, respMsgID int64, respDTTM, now time.Time) error
	// Eror records what the EROR e does (request.PairEror, FailByEror):
	// the request it names closed as FAILED, or why it changes none. An
	// EROR whose outcome is already recorded (a redelivery, a rebuild) is a
	// no-op. An error is a database failure.
	Eror(ctx context.Context, e request.ErorAnswer) (request.Answer, error)
}

var _ Matcher = (*Requests)(nil)

// OpenFor implements Matcher.
func (s *Requests) OpenFor(ctx context.Context, kind request.Kind, rtype string) (*request.ReqTrack, bool, error) {
	rtype, err := request.Answering(kind, rtype)
	if err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	open, err := openOfKind(ctx, s.pg, kind, false)
	if err != nil {
		return nil, false, fmt.Errorf("reading the open %s: %w", kind, err)
	}
	if len(open) == 0 || (kind == request.RQRD && !slices.Contains(open[0].RTypes, rtype)) {
		return nil, false, nil
	}
	return &open[0], true, nil
}

// Accepts implements Matcher with the configured clock skew.
func (s *Requests) Accepts(r request.ReqTrack, rtype string, respMsgID int64, respDTTM, now time.Time) error {
	rtype, err := request.Answering(r.Kind, rtype)
	if err != nil {
		return err
	}
	_, err = request.Complete(r, request.Response{Kind: r.Kind, RType: rtype, MsgID: respMsgID, DTTM: respDTTM, At: now}, s.cfg.ClockSkew)
	return err
}

// Complete implements Matcher.
func (s *Requests) Complete(ctx context.Context, tx pgx.Tx, kind request.Kind, rtype string, respMsgID int64, respDTTM, now time.Time) error {
	_, _, err := s.complete(ctx, tx, kind, rtype, respMsgID, respDTTM, now)
	return err
}

// complete is Complete reporting the request and whether it recorded the
// answer on it.
func (s *Requests) complete(ctx context.Context, tx pgx.Tx, kind request.Kind, rtype string, respMsgID int64, respDTTM, now time.Time) (request.ReqTrack, bool, error) {
	rtype, err := request.Answering(kind, rtype)
	if err != nil {
		return request.ReqTrack{}, false, fmt.Errorf("completing a request: %w", err)
	}
	log := s.log.With("kind", string(kind), "rtype", rtype, "msg_id", respMsgID)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	// A redelivered RESP (crash before the offset commit, a replay) finds
	// its own earlier completion and changes nothing, even when a newer
	// request of the slot has been opened since.
	var already bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM req_track WHERE response_msg_id = $1 AND state = 'DONE')`,
		respMsgID).Scan(&already); err != nil {
		return request.ReqTrack{}, false, fmt.Errorf("completing an %s: %w", kind, err)
	}
	if !already {
		// Its first outcome stands, whatever it was (answered in part, or
		// nothing): a redelivery must not pair with what is open now.
		_, already, err = getAnswer(ctx, tx, respMsgID)
		if err != nil {
			return request.ReqTrack{}, false, fmt.Errorf("completing an %s: %w", kind, err)
		}
	}
	if already {
		log.Debug("response already recorded")
		return request.ReqTrack{}, false, nil
	}
	// Locked until the caller's transaction ends: Run's expiry, an EROR or
	// a second RESP for the same request wait, then see it closed.
	open, err := openOfKind(ctx, tx, kind, true)
	if err != nil {
		return request.ReqTrack{}, false, fmt.Errorf("completing an %s: %w", kind, err)
	}
	var r *request.ReqTrack
	if len(open) > 0 {
		r = &open[0]
	}
	next, answer, err := request.Respond(r, request.Response{Kind: kind, RType: rtype, MsgID: respMsgID, DTTM: respDTTM, At: now}, s.cfg.ClockSkew)
	if err != nil {
		return request.ReqTrack{}, false, fmt.Errorf("completing an %s: %w", kind, err)
	}
	if next != nil {
		if err := saveReq(ctx, tx, *next); err != nil {
			return *r, false, fmt.Errorf("completing request %d: %w", r.ID, err)
		}
	}
	if _, err := insertAnswer(ctx, tx, answer); err != nil {
		return request.ReqTrack{}, false, fmt.Errorf("recording the answer of message %d: %w", respMsgID, err)
	}
	if next == nil {
		log.Info("response answers no open request", "reason", answer.Detail)
		if r != nil {
			return *r, false, nil
		}
		return request.ReqTrack{}, false, nil
	}
	// Audit of the degraded match (docs/design.md#requests): the answer carries
	// no request id; this line records which message answered which request.
	if next.State == request.StateDone {
		log.Info("request completed", "seqn", next.SEQN, "request_id", next.ID, "resp_dttm", respDTTM, "sent_at", next.SentAt)
	} else {
		log.Info("request answered in part", "seqn", next.SEQN, "request_id", next.ID, "answered", next.Answered,
			"asked", next.RTypes, "resp_dttm", respDTTM, "sent_at", next.SentAt)
	}
	return *next, true, nil
}

// Eror implements Matcher. It pairs e in one transaction with the request
// it names, locked, records the outcome in req_answer and, for a FAILED
// one, the request's new state; a FAILED request and an EROR that pairs
// with nothing are logged as warnings beside the status alert they raise.
func (s *Requests) Eror(ctx context.Context, e request.ErorAnswer) (request.Answer, error) {
	log := s.log.With("msg_id", e.MsgID)
	p := request.PairEror(e)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var answer request.Answer
	var recorded bool
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		// The first outcome stands: a redelivered or rebuilt EROR must not
		// pair again with whatever is open now.
		prev, found, err := getAnswer(ctx, tx, e.MsgID)
		if err != nil || found {
			answer = prev
			return err
		}
		var r *request.ReqTrack
		switch p.By {
		case request.PairedBySEQN:
			got, err := scanReq(tx.QueryRow(ctx, `SELECT `+reqCols+` FROM req_track WHERE seqn = $1 FOR UPDATE`, p.SEQN))
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return err
			default:
				r = &got
			}
		case request.PairedByType:
			open, err := openOfKind(ctx, tx, p.Kind, true)
			if err != nil {
				return err
			}
			if len(open) > 0 {
				r = &open[0]
			}
		}
		failed, a, err := request.FailByEror(r, p, e, s.cfg.ClockSkew)
		if err != nil {
			return err
		}
		if failed != nil {
			if err := saveReq(ctx, tx, *failed); err != nil {
				return err
			}
		}
		answer = a
		if recorded, err = insertAnswer(ctx, tx, a); err == nil && !recorded {
			// A concurrent delivery recorded it first; what this one
			// decided must not stand beside it.
			return errAnswerRace
		}
		return err
	})
	if errors.Is(err, errAnswerRace) && !recorded {
		return answer, nil
	}
	if err != nil {
		return request.Answer{}, fmt.Errorf("recording EROR message %d: %w", e.MsgID, err)
	}
	if !recorded {
		log.Debug("EROR already recorded", "outcome", answer.Outcome)
		return answer, nil
	}
	attrs := []any{"outcome", answer.Outcome, "paired_by", answer.PairedBy, "kind", string(answer.Kind), "seqn", answer.SEQN,
		"request_id", answer.RequestID, "code", answer.Code, "text", answer.Text, "detail", answer.Detail}
	switch answer.Outcome {
	case request.OutcomeFailed:
		log.Warn("request FAILED: the AODB answered EROR", attrs...)
	case request.OutcomeUnpaired:
		log.Warn("EROR pairs with no request", attrs...)
	default:
		log.Info("EROR for a closed request changes nothing", attrs...)
	}
	return answer, nil
}

// errAnswerRace rolls back an EROR's transaction whose outcome another
// delivery recorded first.
var errAnswerRace = errors.New("answer recorded concurrently")
