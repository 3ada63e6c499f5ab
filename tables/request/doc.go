// Package request is the state of msgx's outbound requests to the AODB
// (docs/design.md#requests): RQRD asks for one category of reference data,
// RQFD for the flights scheduled in a time window. A request lives in the
// PostgreSQL table req_track and moves through
//
//	PENDING ──▶ SENT ──▶ DONE      (a matching RESP was applied)
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
// Slots. At most one request is open (PENDING or SENT) per slot, the pair
// (kind, STYP): an RQRD for AIRL and an RQRD for COUL are different slots
// because the AODB answers each with its own TYPE=AIRL / TYPE=COUL STYP=RESP
// message (an answer is matched to its request by TYPE), while every RQFD
// shares the single slot (RQFD, NONE) because every answer is the same SCHD
// STYP=RESP. Registering a new request closes the open one of
// its slot as EXPIRED (superseded).
//
// Matching a response (Complete). The AODB's answers carry no request id
// (docs/design.md#requests), so a response is matched by slot and time only. A
// response completes the open request of its slot if and only if
//
//   - the request is SENT: its COUTMSGS row is confirmed (a PENDING request
//     may not even be in the outbox, so nothing can be answering it), and
//   - the response has a META DTTM, and DTTM >= SentAt − skew.
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
// The remaining risk, accepted and audited (docs/design.md#requests): an answer
// to an earlier request of the same slot whose DTTM falls within skew before
// the newer request's SentAt completes the newer request. Both answers carry
// the AODB's current data of the same kind, so the applied data is right; the
// completing message is recorded in ResponseMsgID.
package request
