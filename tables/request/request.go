package request

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Kind is the request type, META/TYPE of the outbound message.
type Kind string

const (
	// RQRD requests one category of reference data (body <RQRD><RTYP>…).
	RQRD Kind = "RQRD"
	// RQFD requests the flights scheduled in a window (body <RQFD><STDB/><STDE/>).
	RQFD Kind = "RQFD"
)

// STYPNone is the STYP of every RQFD.
const STYPNone = "NONE"

// State is where a request is in its life.
type State string

const (
	// StatePending means registered in PostgreSQL; its COUTMSGS row may or may not
	// exist yet (Attempts tells whether an insert was ever started).
	StatePending State = "PENDING"
	// StateSent means its COUTMSGS row is confirmed (OutboxID, SentAt); waiting for
	// the answer.
	StateSent State = "SENT"
	// StateDone means the matching responses were applied (ResponseMsgID is
	// the last).
	StateDone State = "DONE"
	// StateExpired means no (complete) answer within the timeout, or
	// superseded by a newer request of the same kind (CloseReason tells
	// which).
	StateExpired State = "EXPIRED"
	// StateFailed means the AODB answered with EROR.
	StateFailed State = "FAILED"
)

// Open reports whether s still occupies its kind's slot (PENDING or SENT).
func (s State) Open() bool { return s == StatePending || s == StateSent }

// Valid reports whether s is one of the five states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateSent, StateDone, StateExpired, StateFailed:
		return true
	}
	return false
}

// Close reasons stored with a closed request.
const (
	// ReasonResponse closes a request as DONE.
	ReasonResponse = "RESPONSE"
	// ReasonTimeout closes a SENT request that got no answer in time.
	ReasonTimeout = "TIMEOUT"
	// ReasonSuperseded prefixes the reason of a request closed by a newer
	// one of its kind: "SUPERSEDED by SEQN <n>".
	ReasonSuperseded = "SUPERSEDED"
	// ReasonEror closes a request as FAILED.
	ReasonEror = "EROR"
)

// Why a transition did not apply. The functions of this package do no I/O,
// so every error they return is one of these rule rejections (wrapped with
// detail): callers treat them as "no match / nothing to do", not as failures.
var (
	// ErrInvalid: the input itself is unusable (zero time, bad SEQN, …).
	ErrInvalid = errors.New("invalid request input")
	// ErrOtherSlot: the event belongs to another kind, another category or
	// another request.
	ErrOtherSlot = errors.New("event is for another request")
	// ErrClosed: the request is already DONE, EXPIRED or FAILED; late
	// answers never reopen or change it.
	ErrClosed = errors.New("request already closed")
	// ErrDuplicate: the very same event already closed this request, or
	// its category was already answered (a redelivered RESP or EROR): a
	// no-op.
	ErrDuplicate = errors.New("event already applied")
	// ErrNotSent: the request is PENDING, its outbox row is not confirmed.
	ErrNotSent = errors.New("request not confirmed sent")
	// ErrNoDTTM: the response has no META DTTM, so it cannot be shown to
	// be newer than the request.
	ErrNoDTTM = errors.New("response has no DTTM")
	// ErrStale: the response is dated before the request was sent (beyond
	// the clock skew tolerance).
	ErrStale = errors.New("response older than the request")
	// ErrConflict: the request would be tied to a second outbox row, i.e.
	// it was sent twice. Never expected; reported, never applied.
	ErrConflict = errors.New("request already tied to another outbox row")
)

// rtypePattern bounds what may be written into STYP and <RTYP>: SIS type
// codes are short upper-case alphanumerics (AIRL, COUL, RSTA, …).
var rtypePattern = regexp.MustCompile(`^[A-Z0-9]{1,16}$`)

// MaxRTypes bounds the categories of one RQRD (its STYP lists them all).
const MaxRTypes = 32

// Answering normalises the TYPE of an answer to a request of kind: for an
// RQRD the category (trimmed, upper-cased; it must look like one), for an
// RQFD "" or STYPNone, which it returns as STYPNone.
func Answering(kind Kind, rtype string) (string, error) {
	rtype = strings.ToUpper(strings.TrimSpace(rtype))
	switch kind {
	case RQRD:
		if !rtypePattern.MatchString(rtype) || rtype == STYPNone {
			return "", fmt.Errorf("%w: %q is not a reference type", ErrInvalid, rtype)
		}
	case RQFD:
		if rtype != "" && rtype != STYPNone {
			return "", fmt.Errorf("%w: an RQFD is answered by SCHD RESP, not %q", ErrInvalid, rtype)
		}
		rtype = STYPNone
	default:
		return "", fmt.Errorf("%w: request kind %q (want RQRD or RQFD)", ErrInvalid, kind)
	}
	return rtype, nil
}

// ReqTrack is one outbound request, a row of req_track.
type ReqTrack struct {
	// ID is req_track.id, assigned by PostgreSQL (0 before registration).
	ID int64 `json:"id"`
	// Kind is RQRD or RQFD, the request's slot.
	Kind Kind `json:"kind"`
	// STYP is META/STYP of the request: the requested categories joined
	// with "," for RQRD, STYPNone for RQFD.
	STYP string `json:"styp"`
	// RTypes are the requested categories of an RQRD, in the order sent;
	// empty for RQFD.
	RTypes []string `json:"rtypes,omitempty"`
	// Answered are the categories of an RQRD whose RESP was applied, in
	// the order they were; the request is DONE when it holds every RType.
	Answered []string `json:"answered,omitempty"`
	// WindowFrom and WindowTo are the scheduled-time window of an RQFD
	// (STDB, STDE), whole minutes; zero for RQRD.
	WindowFrom time.Time `json:"windowFrom,omitzero"`
	WindowTo   time.Time `json:"windowTo,omitzero"`
	// SEQN is META/SEQN, unique among msgx's requests.
	SEQN int64 `json:"seqn"`
	// SNDR is META/SNDR ("MSGX").
	SNDR string `json:"sndr"`
	// State is where the request is.
	State State `json:"state"`
	// Payload is the exact XML written (and, on recovery, re-written) to
	// COUTMSGS_CLOB_MSG.
	Payload string `json:"payload,omitempty"`
	// Attempts counts the COUTMSGS inserts started. 0 proves that no outbox
	// row can exist, which lets recovery send without searching.
	Attempts int `json:"attempts"`
	// OutboxFloor is MAX(COUTMSGS_ID) read before the first insert attempt
	// (meaningful when Attempts > 0): auto-increment IDs only grow, so the
	// request's row, if any, has an ID above it.
	OutboxFloor int64 `json:"outboxFloor,omitempty"`
	// OutboxID is the request's COUTMSGS_ID once confirmed.
	OutboxID int64 `json:"outboxId,omitempty"`
	// CreatedAt is when the request was registered.
	CreatedAt time.Time `json:"createdAt"`
	// SentAt is the instant of the confirmed COUTMSGS insert
	// (COUTMSGS_DATE_INSERTED, whole seconds).
	SentAt time.Time `json:"sentAt,omitzero"`
	// ClosedAt is when the request left the open states.
	ClosedAt time.Time `json:"closedAt,omitzero"`
	// CloseReason is one of the Reason* values (superseded with the SEQN).
	CloseReason string `json:"closeReason,omitempty"`
	// ResponseMsgID is the inbox message (MSG_ID) that closed the request:
	// the RESP for DONE, the EROR for FAILED when known.
	ResponseMsgID int64 `json:"responseMsgId,omitempty"`
	// LastError is the last failure to send, cleared once SENT.
	LastError string `json:"lastError,omitempty"`
}

// Open reports whether the request still occupies its slot.
func (r ReqTrack) Open() bool { return r.State.Open() }

func checkNew(seqn int64, sndr string, now time.Time) error {
	switch {
	case seqn <= 0:
		return fmt.Errorf("%w: SEQN %d must be positive", ErrInvalid, seqn)
	case strings.TrimSpace(sndr) == "":
		return fmt.Errorf("%w: empty SNDR", ErrInvalid)
	case now.IsZero():
		return fmt.Errorf("%w: zero registration time", ErrInvalid)
	}
	return nil
}

// NewRefdata returns a PENDING RQRD for the categories rtypes (trimmed,
// upper-cased, repeats dropped, order kept; at most MaxRTypes): STYP lists
// them joined with "," and the body carries one <RTYP> each. The AODB
// answers each category with its own RESP.
func NewRefdata(rtypes []string, seqn int64, sndr string, now time.Time) (ReqTrack, error) {
	if err := checkNew(seqn, sndr, now); err != nil {
		return ReqTrack{}, err
	}
	var types []string
	for _, t := range rtypes {
		t, err := Answering(RQRD, t)
		if err != nil {
			return ReqTrack{}, fmt.Errorf("RQRD category: %w", err)
		}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	if len(types) == 0 || len(types) > MaxRTypes {
		return ReqTrack{}, fmt.Errorf("%w: an RQRD names 1..%d categories, not %d", ErrInvalid, MaxRTypes, len(types))
	}
	return ReqTrack{
		Kind: RQRD, STYP: strings.Join(types, ","), RTypes: types,
		SEQN: seqn, SNDR: sndr, State: StatePending, CreatedAt: now,
	}, nil
}

// NewFlights returns a PENDING RQFD for the flights scheduled in [from, to].
// SIS writes STDB/STDE to the minute, so both ends are truncated to whole
// minutes (what is stored is what is sent); the window must stay non-empty.
func NewFlights(from, to time.Time, seqn int64, sndr string, now time.Time) (ReqTrack, error) {
	if err := checkNew(seqn, sndr, now); err != nil {
		return ReqTrack{}, err
	}
	if from.IsZero() || to.IsZero() {
		return ReqTrack{}, fmt.Errorf("%w: RQFD window needs both ends", ErrInvalid)
	}
	from, to = from.Truncate(time.Minute), to.Truncate(time.Minute)
	if !from.Before(to) {
		return ReqTrack{}, fmt.Errorf("%w: RQFD window %s..%s is empty (whole minutes)", ErrInvalid,
			from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return ReqTrack{
		Kind: RQFD, STYP: STYPNone, WindowFrom: from, WindowTo: to,
		SEQN: seqn, SNDR: sndr, State: StatePending, CreatedAt: now,
	}, nil
}

// Register decides what registering next does to the requests currently
// open: every open request of next's kind, whatever categories it names, is
// closed as EXPIRED with reason "SUPERSEDED by SEQN <next.SEQN>" at now (one
// open request per kind; the newer request is the one whose answer we now
// wait for). It returns those closed requests; the open request of the other
// kind is left alone. next must be a fresh PENDING request.
func Register(open []ReqTrack, next ReqTrack, now time.Time) ([]ReqTrack, error) {
	if next.State != StatePending || next.ID != 0 {
		return nil, fmt.Errorf("%w: only a new PENDING request can be registered", ErrInvalid)
	}
	if now.IsZero() {
		return nil, fmt.Errorf("%w: zero time", ErrInvalid)
	}
	var closed []ReqTrack
	for _, o := range open {
		if o.SEQN == next.SEQN {
			return nil, fmt.Errorf("%w: SEQN %d is already used by request %d", ErrInvalid, next.SEQN, o.ID)
		}
		if !o.Open() || o.Kind != next.Kind {
			continue
		}
		o.State = StateExpired
		o.ClosedAt = now
		o.CloseReason = fmt.Sprintf("%s by SEQN %d", ReasonSuperseded, next.SEQN)
		closed = append(closed, o)
	}
	return closed, nil
}

// Attempted records that an insert into COUTMSGS is about to start. floor
// is MAX(COUTMSGS_ID) read just before; the first attempt's floor is kept
// for good (a lower bound stays a lower bound), so a search from it covers
// the rows of every attempt. Only a PENDING request is sent.
func Attempted(r ReqTrack, floor int64) (ReqTrack, error) {
	if r.State != StatePending {
		return r, fmt.Errorf("%w: request %d is %s, only PENDING is sent", ErrClosed, r.ID, r.State)
	}
	if floor < 0 {
		return r, fmt.Errorf("%w: negative outbox floor %d", ErrInvalid, floor)
	}
	if r.Attempts == 0 {
		r.OutboxFloor = floor
	}
	r.Attempts++
	return r, nil
}

// Sent records the confirmed COUTMSGS row of the request: outboxID and the
// instant at of its insert. PENDING becomes SENT and LastError is cleared.
// Recording the same row again is a no-op. A request that was closed while
// its insert was in flight (an EROR raced the confirmation) keeps its state
// but learns its row, so the audit shows where it went; a second, different
// row is ErrConflict.
func Sent(r ReqTrack, outboxID int64, at time.Time) (ReqTrack, error) {
	if outboxID <= 0 || at.IsZero() {
		return r, fmt.Errorf("%w: outbox id %d at %v", ErrInvalid, outboxID, at)
	}
	if r.OutboxID == outboxID {
		return r, fmt.Errorf("%w: already tied to COUTMSGS_ID %d", ErrDuplicate, outboxID)
	}
	if r.OutboxID != 0 {
		return r, fmt.Errorf("%w: request %d (SEQN %d) is COUTMSGS_ID %d, now also %d", ErrConflict, r.ID, r.SEQN, r.OutboxID, outboxID)
	}
	r.OutboxID = outboxID
	r.SentAt = at
	if r.State == StatePending {
		r.State = StateSent
		r.LastError = ""
	}
	return r, nil
}

// Expire closes a SENT request as EXPIRED (reason TIMEOUT) once now is at
// least timeout after SentAt. It reports whether it did. A PENDING request
// does not expire: the timeout measures how long the AODB has had the
// request, and a PENDING one may never have reached it (it is sent by
// recovery, or superseded by the next request of its kind). A non-positive
// timeout never expires anything.
func Expire(r ReqTrack, now time.Time, timeout time.Duration) (ReqTrack, bool) {
	if r.State != StateSent || timeout <= 0 || r.SentAt.IsZero() || now.Before(r.SentAt.Add(timeout)) {
		return r, false
	}
	r.State = StateExpired
	r.ClosedAt = now
	r.CloseReason = ReasonTimeout
	return r, true
}

// Response is an answer as the processor applying it sees it.
type Response struct {
	// Kind is the kind of request it answers: RQRD for a reference RESP,
	// RQFD for SCHD RESP.
	Kind Kind
	// RType is the answered category (the RESP's TYPE) for RQRD,
	// STYPNone for RQFD (see Answering).
	RType string
	// MsgID is the inbox message id (CMINMSGS_ID) of the answer.
	MsgID int64
	// DTTM is the answer's META DTTM in the airport time zone; zero when
	// absent.
	DTTM time.Time
	// At is the instant of the completion (the transaction applying it).
	At time.Time
}

// Complete records the response resp on r when resp answers it: same kind,
// for an RQRD a category r names and has not had answered, r SENT,
// resp.DTTM present and not before r.SentAt − skew (see the package
// documentation for why these rules). An RQFD is then DONE; an RQRD adds the
// category to Answered and is DONE once every category is answered. Otherwise
// r is returned unchanged with the reason: ErrOtherSlot, ErrDuplicate (this
// very message already completed r, or its category was answered),
// ErrClosed (late answer), ErrNotSent, ErrNoDTTM or ErrStale. A negative skew
// counts as zero.
func Complete(r ReqTrack, resp Response, skew time.Duration) (ReqTrack, error) {
	if resp.MsgID <= 0 || resp.At.IsZero() {
		return r, fmt.Errorf("%w: response message %d at %v", ErrInvalid, resp.MsgID, resp.At)
	}
	if resp.Kind != r.Kind {
		return r, fmt.Errorf("%w: response to an %s, request %d is an %s", ErrOtherSlot, resp.Kind, r.ID, r.Kind)
	}
	if r.Kind == RQRD && !slices.Contains(r.RTypes, resp.RType) {
		return r, fmt.Errorf("%w: response for %s, request %d asks for %s", ErrOtherSlot, resp.RType, r.ID, r.STYP)
	}
	if !r.Open() {
		if r.State == StateDone && r.ResponseMsgID == resp.MsgID {
			return r, fmt.Errorf("%w: message %d already completed request %d", ErrDuplicate, resp.MsgID, r.ID)
		}
		return r, fmt.Errorf("%w: request %d is %s", ErrClosed, r.ID, r.State)
	}
	if slices.Contains(r.Answered, resp.RType) {
		return r, fmt.Errorf("%w: %s of request %d is already answered", ErrDuplicate, resp.RType, r.ID)
	}
	if r.State != StateSent {
		return r, fmt.Errorf("%w: request %d", ErrNotSent, r.ID)
	}
	if resp.DTTM.IsZero() {
		return r, fmt.Errorf("%w: message %d", ErrNoDTTM, resp.MsgID)
	}
	skew = max(skew, 0)
	if resp.DTTM.Before(r.SentAt.Add(-skew)) {
		return r, fmt.Errorf("%w: message %d dated %s, request %d sent %s (skew %s)", ErrStale, resp.MsgID,
			resp.DTTM.Format(time.RFC3339), r.ID, r.SentAt.Format(time.RFC3339), skew)
	}
	if r.Kind == RQRD {
		r.Answered = append(slices.Clone(r.Answered), resp.RType)
		if len(r.Answered) < len(r.RTypes) {
			return r, nil
		}
	}
	r.State = StateDone
	r.ClosedAt = resp.At
	r.CloseReason = ReasonResponse
	r.ResponseMsgID = resp.MsgID
	return r, nil
}

// Eror is an EROR answer that names one of our requests by its SEQN.
type Eror struct {
	// SEQN is the SEQN the EROR refers to.
	SEQN int64
	// MsgID is the EROR's inbox message id, 0 when unknown.
	MsgID int64
	// At is the instant the EROR is recorded.
	At time.Time
}

// Fail closes an open request named by e as FAILED (reason EROR). A PENDING
// request may fail too: an EROR about its SEQN proves the AODB read it, even
// if our confirmation of the insert is still outstanding. A closed request is
// left alone (ErrClosed, or ErrDuplicate when it already FAILED by this
// EROR); another SEQN is ErrOtherSlot.
func Fail(r ReqTrack, e Eror) (ReqTrack, error) {
	if e.SEQN <= 0 || e.At.IsZero() {
		return r, fmt.Errorf("%w: EROR for SEQN %d at %v", ErrInvalid, e.SEQN, e.At)
	}
	if e.SEQN != r.SEQN {
		return r, fmt.Errorf("%w: EROR names SEQN %d, request %d is SEQN %d", ErrOtherSlot, e.SEQN, r.ID, r.SEQN)
	}
	if !r.Open() {
		if r.State == StateFailed && (e.MsgID == 0 || r.ResponseMsgID == e.MsgID) {
			return r, fmt.Errorf("%w: request %d already FAILED", ErrDuplicate, r.ID)
		}
		return r, fmt.Errorf("%w: request %d is %s", ErrClosed, r.ID, r.State)
	}
	r.State = StateFailed
	r.ClosedAt = e.At
	r.CloseReason = ReasonEror
	if e.MsgID > 0 {
		r.ResponseMsgID = e.MsgID
	}
	return r, nil
}

// Equal reports whether a and b are the same request in the same state
// (times compared as instants), for tests and change detection.
func Equal(a, b ReqTrack) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.STYP == b.STYP && slices.Equal(a.RTypes, b.RTypes) &&
		slices.Equal(a.Answered, b.Answered) &&
		a.WindowFrom.Equal(b.WindowFrom) && a.WindowTo.Equal(b.WindowTo) && a.SEQN == b.SEQN &&
		a.SNDR == b.SNDR && a.State == b.State && a.Payload == b.Payload && a.Attempts == b.Attempts &&
		a.OutboxFloor == b.OutboxFloor && a.OutboxID == b.OutboxID && a.CreatedAt.Equal(b.CreatedAt) &&
		a.SentAt.Equal(b.SentAt) && a.ClosedAt.Equal(b.ClosedAt) && a.CloseReason == b.CloseReason &&
		a.ResponseMsgID == b.ResponseMsgID && a.LastError == b.LastError
}
