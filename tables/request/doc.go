// Package request is the state of msgx's outbound requests to the AODB
// (docs/design.md#requests): RQRD asks for one or more categories of
// reference data, RQFD for the flights scheduled in a time window. A request
// lives in the PostgreSQL table req_track and moves through
//
//	PENDING ──▶ SENT ──▶ DONE      (the matching RESPs were applied)
//	   │          ├────▶ EXPIRED   (no answer within the timeout, or superseded)
//	   │          └────▶ FAILED    (the AODB answered EROR)
//	   └──▶ EXPIRED (superseded before it was confirmed sent) | FAILED (EROR)
//
// This package holds only the rules: pure functions that take the current
// request and the instant of the event and return the next request, never
// touching a database or a clock. The emitter (emitters/outbound) loads a row,
// applies one of these functions and writes the result back in one
// transaction, so that every path — live sends, crash recovery, replays of the
// inbox — goes through the same decisions.
//
// Slots (docs/design.md#request-slots). At most one request of each kind is
// open (PENDING or SENT): one RQRD, whatever categories its STYP list names,
// and one RQFD. Registering a new request closes the open one of its kind as
// EXPIRED, whatever categories either names.
//
// Matching a response (Complete). The AODB's answers carry no request id, so
// a response is matched by kind, type and time only: the AODB answers each
// category of an RQRD with its own TYPE=<category> STYP=RESP message, and an
// RQFD with SCHD STYP=RESP. A response answers the open request of its kind
// if and only if
//
//   - for an RQRD, its TYPE is one of the request's categories and that
//     category was not answered yet,
//   - the request is SENT: its COUTMSGS row is confirmed (a PENDING request
//     may not even be in the outbox, so nothing can be answering it), and
//   - the response has a META DTTM, and DTTM >= SentAt − skew.
//
// An RQFD is DONE with its answer; an RQRD once every category it names was
// answered (Answered), so DONE still means "all its data was applied".
//
// SentAt is our clock's instant of the COUTMSGS insert (the value written into
// COUTMSGS_DATE_INSERTED), DTTM is the AODB's clock read in the airport time
// zone; both are absolute instants, so the comparison is zone-free, and skew is
// the tolerated difference between the two clocks (the original design leaves
// the tolerance open; the emitter makes it a setting). DTTM, not the time the
// message reached msgx, is compared because it is a property of the message:
// the decision is the same when the message is processed late (an outage) or
// again (a rebuild replaying msgx.inbox), and an old RESP replayed while a
// newer request is SENT is rejected as stale instead of completing it. A
// response without DTTM cannot prove it is not older than the request and never
// matches. Once closed a request is never reopened or changed by an answer:
// DONE, EXPIRED and FAILED are final (late answers are no-ops).
//
// Pairing an EROR (PairEror, FailByEror). An EROR names its request by the
// request's SEQN where its body carries one, and otherwise by the kind it
// answers (RQRD or RQFD in META STYP, or in TYPE/STYP of its body): the one
// open request of that kind, under the same rule as a RESP (SENT, DTTM not
// before SentAt − skew). An EROR that pairs with nothing still gets an
// Answer (UNPAIRED, with the reason), as does every RESP (Respond): what an
// answer did is recorded, never only logged.
//
// The remaining risk, accepted and audited (docs/design.md#requests): an answer
// to an earlier request of the same kind whose DTTM falls within skew before
// the newer request's SentAt answers the newer request. Both answers carry
// the AODB's current data of the same kind, so the applied data is right; the
// completing message is recorded in ResponseMsgID.
package request
