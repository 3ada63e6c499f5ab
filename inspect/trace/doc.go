// Package trace answers "where is this message, and why" and "how did this
// flight get here" in one read each (docs/design.md#trace): `msgx trace`,
// GET /trace/{msgId} and GET /trace/flights/{flid}.
//
// A message's path is read from what each step records when it commits:
// the MySQL inbox row (received, processed mark), the bridge's cursor,
// holes and late rows, proc_state (the router's decision, and the
// msgx.inbox record it first read the message from), transition_applied
// (each transition's outcome and the version it made), flight_change (the
// versions, derived links included), msg_event (where the outbox publisher
// produced each version's msg event), flight_schd.schd_sent_version
// (whether schd carries the version), the backfill columns and the replay
// audit, and for an answer to msgx's requests (a RESP or an EROR) the
// outcome recorded with it (req_answer: the request it closed, or why
// none). [Diagnose] turns a trace into where the path stops and why; it is
// pure, and so is the renderer ([Message.Text], [Flight.Text]).
//
// No topic is scanned: every read is by primary key or index (flight_change
// by msg_id via flight_change_msg, migration 0026; by FLID via its primary
// key, newest first with a limit), in one PostgreSQL round trip plus one
// inbox row, so a trace costs the same on a long history. The outbox is read
// only for versions whose event has no recorded position, and holds only
// what is not produced yet. Measured (TestTraceOnALongHistory: 400,000
// versions of 20,000 flights, 200,000 messages, on a loaded 2-core
// machine): a message's trace 15–17 ms, a flight's 10–25 ms; without
// flight_change_msg the message's grows with the history (160 ms there, a
// sequential scan of flight_change).
package trace
