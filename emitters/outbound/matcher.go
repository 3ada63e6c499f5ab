package outbound

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	// FailByEror closes the open request whose SEQN is seqnRef (the EROR's
	// reference, sis.ErrorAnswer.RefSEQN) as FAILED. An EROR that names no
	// open request of ours is a no-op and returns nil.
	FailByEror(ctx context.Context, seqnRef string, now time.Time) error
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
	if already {
		log.Debug("response already completed its request")
		return request.ReqTrack{}, false, nil
	}
	// Locked until the caller's transaction ends: Run's expiry, an EROR or
	// a second RESP for the same request wait, then see it closed.
	open, err := openOfKind(ctx, tx, kind, true)
	if err != nil {
		return request.ReqTrack{}, false, fmt.Errorf("completing an %s: %w", kind, err)
	}
	if len(open) == 0 {
		log.Info("response answers no open request")
		return request.ReqTrack{}, false, nil
	}
	r := open[0]
	done, err := request.Complete(r, request.Response{Kind: kind, RType: rtype, MsgID: respMsgID, DTTM: respDTTM, At: now}, s.cfg.ClockSkew)
	if err != nil {
		log.Info("response does not answer the open request", "seqn", r.SEQN, "request_id", r.ID,
			"state", string(r.State), "reason", err.Error())
		return r, false, nil
	}
	if err := saveReq(ctx, tx, done); err != nil {
		return r, false, fmt.Errorf("completing request %d: %w", r.ID, err)
	}
	// Audit of the degraded match (docs/design.md#requests): the answer carries
	// no request id; this line records which message answered which request.
	if done.State == request.StateDone {
		log.Info("request completed", "seqn", done.SEQN, "request_id", done.ID, "resp_dttm", respDTTM, "sent_at", done.SentAt)
	} else {
		log.Info("request answered in part", "seqn", done.SEQN, "request_id", done.ID, "answered", done.Answered,
			"asked", done.RTypes, "resp_dttm", respDTTM, "sent_at", done.SentAt)
	}
	return done, true, nil
}

// FailByEror implements Matcher. The EROR is logged as a warning, the
// operator's alert (docs/design.md#requests).
func (s *Requests) FailByEror(ctx context.Context, seqnRef string, now time.Time) error {
	_, _, err := s.failByEror(ctx, seqnRef, now)
	return err
}

func (s *Requests) failByEror(ctx context.Context, seqnRef string, now time.Time) (request.ReqTrack, bool, error) {
	seqn, perr := strconv.ParseInt(strings.TrimSpace(seqnRef), 10, 64)
	if perr != nil || seqn <= 0 {
		s.log.Info("EROR names no SEQN of ours", "ref_seqn", seqnRef)
		return request.ReqTrack{}, false, nil
	}
	r, found, err := func() (request.ReqTrack, bool, error) {
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		r, err := scanReq(s.pg.QueryRow(ctx, `SELECT `+reqCols+` FROM req_track WHERE seqn = $1`, seqn))
		if errors.Is(err, pgx.ErrNoRows) {
			return r, false, nil
		}
		return r, err == nil, err
	}()
	if err != nil {
		return request.ReqTrack{}, false, fmt.Errorf("looking up the request of an EROR (SEQN %d): %w", seqn, err)
	}
	if !found {
		s.log.Info("EROR names no request of ours", "ref_seqn", seqn)
		return request.ReqTrack{}, false, nil
	}
	failed, err := s.mutate(ctx, r.ID, func(cur request.ReqTrack) (request.ReqTrack, error) {
		return request.Fail(cur, request.Eror{SEQN: seqn, At: now})
	})
	if isRule(err) {
		s.log.Info("EROR for a closed request changes nothing", "seqn", seqn, "request_id", r.ID, "reason", err.Error())
		return failed, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("failing request %d by EROR: %w", r.ID, err)
	}
	s.log.Warn("request FAILED: the AODB answered EROR", "kind", string(failed.Kind), "styp", failed.STYP, "seqn", seqn,
		"request_id", failed.ID)
	return failed, true, nil
}

// isRule reports whether err is a tables/request rule rejection rather than
// a database failure.
func isRule(err error) bool {
	for _, e := range []error{request.ErrInvalid, request.ErrOtherSlot, request.ErrClosed, request.ErrDuplicate,
		request.ErrNotSent, request.ErrNoDTTM, request.ErrStale, request.ErrConflict} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
