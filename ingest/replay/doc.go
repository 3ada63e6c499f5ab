// Package replay puts failed, dead and unsupported messages back through the
// router (docs/design.md#replay). The operator first looks at what would move
// and what it would overwrite ([DryRun] and [Explain], the dry run), then
// replays ([Run]); every replay leaves an audit row (replay_audit) and a
// before-image of each message it reset (replay_audit_msg, migrations 0008
// and 0018).
//
// What is replayable: FAILED or DEAD with error class
// CODEC_ERROR, INFRA or EXHAUSTED, and SKIPPED with reason unsupported:…
// (class UNSUPPORTED). MALFORMED and PROTOCOL never are: the message itself
// is wrong, and deciding it again gives the same verdict.
//
// A replay resets each message to the shape the router gives a message it
// has never decided — PENDING, no attempts, no error, no transitions, no
// backfill — except for its identity_key, which it keeps: the router's
// duplicate check asks "who owns this identity?", and a message that owns
// its own identity is never a duplicate of itself (I5). Then it re-injects
// the message: the raw XML is read again from the inbox and produced to
// msgx.inbox as an ingest record with the same MSG_ID. The router finds the
// message PENDING and decides it as if it were new; it lands behind every
// message already on the topic, so a replay does not restore historical
// order.
//
// A replayed message is applied to the current state, even where newer
// messages changed the same flight or category since. What tells it from a
// crash redelivery, which must stay a no-op (I4), is its generation: the id
// of the replay's audit row. The reset stores it in proc_state.replay_gen,
// the re-injected record carries it (ingest.Record.Replay), the router
// decides the message under it and puts it on every transition, and the
// flight and category state remember the last replayed transition they
// applied as (generation, MSG_ID), beside lastMsgId. A replayed transition
// is applied when its pair is above the remembered one, and a redelivery
// is one that is not (message.Applied). For that, generations must grow
// in the order their records reach the topic: replays are serialised by
// the replay lock ([sink.LockReplay], taken for the whole of Run, before
// the audit row's id is drawn), and one replay re-injects its messages in
// MSG_ID order, so the pairs of one flight grow along its partition (one
// replay batch may carry several messages for the same flight).
//
// What it overwrites: [Explain] decides each message as the router would
// now (route.Prepare and route.Decide, with read-only lookups) and
// lists, per flight it touches, the versions newer messages made that
// changed the same tags (flight_change, docs/design.md#flight-change) and,
// per reference category, the newer messages that last wrote the records
// it writes (ref_master.last_msg_id). The dry run's audit row records the
// list (replay_audit.effects); Run, given the router settings, records it
// per message with the before-image (replay_audit_msg.effect).
//
// A message whose verdict now is DEAD (the codec still rejects it, the
// package is still invalid) would only die again: Run, given the router
// settings, refuses it with the reason, unless the selector says Force. A
// message an earlier replay reset but could not re-inject is never refused.
//
// The processed mark: a DEAD or SKIPPED message was terminal, so the inbox
// row may already carry CMINMSGS_DATE_PROCESSED. The mark is monotonic and
// stays; the replay clears the backfill columns, and once the message is
// terminal again the sweeper finds the row "already marked" and settles it
// without overwriting. The inbox owner may purge a marked row, which
// is why Run checks that every inbox row still exists, and holds its raw
// text, before it resets anything.
//
// One batch of Run (at most Batch messages; a replay runs as many
// batches as its selector needs, in MSG_ID order):
//
//  1. One PostgreSQL transaction holding the backfill lock ([sink.LockBackfill]):
//     select the candidates; read their raw XML and received time from the
//     MySQL inbox (a missing row is reported and its message left as it
//     is); reset each message with a conditional UPDATE that re-checks it is
//     still replayable (a row the router decided meanwhile is skipped and
//     reported as changed); delete its transition_applied marks; write its
//     before-image and append it to the audit row; commit.
//  2. Produce the records to msgx.inbox, in MSG_ID order, with the producer
//     settings of docs/design.md#kafka-settings.
//  3. Mark the before-images produced.
//
// Crash windows, walked through:
//   - Before the commit of 1: the transaction rolls back, nothing changed.
//     Run the replay again.
//   - After the commit of 1, before 2 succeeded (crash, or Kafka failing):
//     the messages are PENDING and nothing will ever decide them, because the
//     router only decides what it reads from the topic. Their newest
//     before-image says produced = false. Running the replay again with the
//     same IDs (a PENDING message that a replay reset counts as replayable
//     for an explicit ID) or with PendingReplayed (every message whose
//     newest replay was never confirmed) re-produces them. A class selector
//     does not find them any more: the reset cleared the class.
//   - After 2, before 3: the messages are on the topic but look unconfirmed;
//     a PendingReplayed run produces them a second time. That is harmless:
//     the router recognises a message by its MSG_ID, and a second delivery
//     finds it decided (left alone) or ROUTED (the same transitions are
//     emitted again, and the applying processors mark them applied once).
//   - Kafka unreachable from the start: the producer is built and the topic
//     checked before anything is reset, so the replay fails having changed
//     nothing.
//
// Operator flow (msgx replay): DryRun lists what would move and which
// named IDs are refused, Explain what each would overwrite; AuditDryRun
// records that look (--dry-run); Run moves. A Run error with Unproduced messages means the second crash
// window above happened: tell the operator to run the replay again with the same
// IDs or with PendingReplayed.
//
// Concurrency. With another replay: Run fails at once with ErrReplayBusy
// while one runs (the replay lock); nothing is changed. With the sweeper:
// every batch takes the backfill lock, so a
// reset never interleaves with a pass that is writing the marks of the same
// rows; a replay waits for a running pass (at most one; the wait is bounded,
// see lockWait) and a pass that starts meanwhile skips its turn. With the
// router: the conditional UPDATE re-checks replayability on the newest
// committed row, so a message the router decided while the batch ran is
// reset only if its decision left it replayable, and otherwise left alone
// (Result.Changed). A FAILED message the router is
// retrying in place is simply reset under it: its next failure counts from
// zero, and the re-injected record later finds it decided.
package replay
