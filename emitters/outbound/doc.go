// Package outbound sends msgx's requests to the AODB and tracks their answers
// (docs/design.md#requests). It is the I/O around the pure state machine
// of tables/request: the request rows live in PostgreSQL (req_track, migration
// 0006), the requests themselves are rows of the shared MySQL outbox COUTMSGS,
// which the AODB reads (written and searched through sink/aodb, the one
// owner of the shared tables).
//
// The package is named outbound, not request, because its API takes and
// returns tables/request types: callers import both, and two packages named
// request would force an alias on every one of them.
//
// # Sending
//
// Requests.RequestRefdata and Requests.RequestFlights run, under one
// PostgreSQL advisory lock (sink.LockRequests) held for the whole sequence so that no
// two msgx processes write the outbox at the same time:
//
//  1. reconcile the PENDING requests left behind (see Recovery);
//  2. one PostgreSQL transaction: take a SEQN from req_seqn, encode the XML,
//     close the open request of its kind as EXPIRED (superseded), insert the
//     new request as PENDING with its payload;
//  3. read MAX(COUTMSGS_ID) (the floor) and record it with attempts+1;
//  4. insert the payload into COUTMSGS (autocommit: the insert is committed
//     when the call returns without error);
//  5. record SENT with the new COUTMSGS_ID and the insert instant.
//
// Crash windows, walked through:
//
//   - before 2 commits: nothing happened; the caller got an error.
//   - between 2 and 3: PENDING with attempts = 0. No insert was ever started
//     (3 commits before 4 begins), so recovery sends it without searching.
//   - between 3 and 4: attempts > 0 but no row: recovery searches, finds
//     nothing, inserts.
//   - during 4 (connection lost, timeout): the insert may or may not have
//     committed. The request stays PENDING with the error; recovery searches
//     with a locking read, which waits for an insert still in flight, and
//     either finds the row (→ SENT) or inserts.
//   - between 4 and 5: the row exists, req_track says PENDING. Recovery
//     finds the row and records SENT with its ID and COUTMSGS_DATE_INSERTED.
//     It is never inserted a second time.
//
// # Recovery
//
// A PENDING request with attempts > 0 is looked up in COUTMSGS before it is
// written again: COUTMSGS_ID > its floor (auto-increment IDs only grow, so the
// primary key bounds the search to rows written since the first attempt, and
// the search costs nothing on a large outbox) and COUTMSGS_CLOB_MSG LIKE
// '%<SEQN>n</SEQN>%', each candidate decoded to confirm SNDR, TYPE and SEQN.
// Recovery runs at start-up and on every tick of Run, and before every new
// send. Before a new send, a PENDING request of the same kind is only looked
// up, never sent: it is about to be superseded.
//
// What recovery assumes: the AODB's outbox reader does not delete rows it has
// read (the legacy table marks them in COUTMSGS_DATE_SENT), and the outbox's
// auto-increment counter is not reset below existing IDs. If either fails, a
// PENDING request may be written a second time; the AODB then answers twice and
// the second answer is a no-op (the request is already closed).
//
// # Answers
//
// Requests implements Matcher for the router and the applying processors. One
// RQRD (whatever categories it names) and one RQFD are open at a time
// (docs/design.md#request-slots). A RESP answers the open request of its kind
// under the rule of tables/request (for an RQRD a category it names, SENT,
// and META DTTM not before SentAt − MSGX_REQUEST_CLOCK_SKEW), and it does so
// inside the transaction that applies the RESP's data, so a request is DONE
// only if its data is: an RQFD with its answer, an RQRD once every category
// it names was answered. An EROR is paired with its request by the rule of
// tables/request (its body's SEQN, or else the kind it names: the open
// request of that kind, dated after it was sent) and closes it as FAILED.
// Every answer's outcome — DONE, ANSWERED, FAILED, LATE or UNPAIRED with
// the reason — is recorded in req_answer (migration 0034) in the
// transaction that decides it, so the status report, the metrics and msgx
// trace show what each answer did; a message's first outcome stands. Closed
// requests never change again: late and repeated answers are no-ops.
//
// # Schedule
//
// Run expires SENT requests that had no answer for MSGX_REQUEST_TIMEOUT and,
// when MSGX_REQUEST_REFDATA_AT is set, requests every reference category
// (refdata.Categories) once a day at that airport time, in one RQRD. The
// schedule is derived from req_track itself ("which categories did an RQRD
// created since the last HH:MM name?"), so a restart neither repeats nor skips
// a day's requests, and a manual request after HH:MM counts as that day's for
// its categories.
//
// # Shadow mode
//
// With MSGX_SHADOW=true nothing is ever written to MySQL: the request methods
// return ErrShadow without registering anything, and Run neither reconciles
// nor schedules (it still expires, which only touches PostgreSQL).
package outbound
