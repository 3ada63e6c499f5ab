// Package backfill is the sweeper that writes the processed mark
// (CMINMSGS_DATE_PROCESSED) back into the shared MySQL inbox for every
// message that is terminal in proc_state: data leaving msgx, like the msg
// and schd topics and the outbound requests. The [Sweeper] is the only
// writer of the mark and runs on its own goroutine: it never reads or blocks
// the message FIFO. The rules are docs/design.md#backfill.
//
// The sweeper holds the policy — what is due, the backoff, the deadline R,
// when to count and vacuum its queue —; the statements are sink's (the
// queue backfill_owed and proc_state: sink.ClaimBackfills,
// sink.RecordBackfills) and sink/aodb's (the mark itself:
// aodb.Tables.MarkProcessed). The operator's view of the marks it gave up
// on is sink.AbandonedBackfills and sink.ReopenBackfills (msgx backfill).
//
// One pass ([Sweeper.Sweep]), all inside one PostgreSQL transaction that
// holds the backfill advisory lock ([sink.LockBackfill]):
//
//  1. scan up to Batch due rows of the queue backfill_owed
//     (docs/design.md#backfill-predicate: a terminal message enters it in
//     the statement that makes it terminal), in fair order (attempts,
//     msg_id), each re-checked against its proc_state row;
//  2. in one MySQL transaction: one UPDATE … WHERE ID IN (…) AND
//     DATE_PROCESSED IS NULL, then — only when it changed fewer rows than
//     asked — one SELECT that tells the 0-row IDs apart (already marked or
//     missing);
//  3. record the four results (docs/design.md#backfill-results) in one batch
//     and commit: a confirmed mark takes the row out of the queue (its
//     proc_state row is not written), a failure counts an attempt in both,
//     an abandonment takes it out and records why in proc_state. Every
//     settled MSGX_BACKFILL_VACUUM_ROWS rows the queue is vacuumed, after
//     the commit.
//
// Crash windows, walked through:
//   - Crash before the MySQL commit: nothing was marked; the rows are still
//     due and the next pass writes them.
//   - Crash (or PostgreSQL failure) after the MySQL commit, before the
//     PostgreSQL commit: the marks are in the inbox but the rows are still
//     in the queue. The next pass scans the same rows, its UPDATE changes
//     0 rows (the mark is not NULL any more), the SELECT finds the rows
//     present and marked: "already marked" → success, out of the queue,
//     and the first mark is kept (the UPDATE never overwrites a value).
//   - PostgreSQL restored from a backup: terminal rows whose confirmation
//     was lost are back in the queue, swept again and come out "already
//     marked" the same way.
//
// Because the mark only ever goes NULL → value (the IS NULL guard) and the
// sweeper only scans terminal rows, the mark is monotonic and never precedes
// a durable terminal state (I6).
package backfill
