// Package maintenance runs the background jobs on msgx's own PostgreSQL that
// keep it small without touching the message FIFO (docs/design.md#maintenance):
//
//   - [Runner], every MSGX_MAINTENANCE_PERIOD: the proc_state archive, the
//     schd_snap_log retention and the flight_change retention;
//   - [History], daily at MSGX_HISTORY_SWEEP_AT: the flight history sweep,
//     which hands the flights past their retention to the router to purge
//     (docs/design.md#history-sweep).
//
// The jobs share one base (job.go), the way river's maintenance services
// share theirs: a schedule (a period, or a daily time in the airport's
// zone) on the injected clock, one pass at a time, the counters of the
// passes ([Passes]) and the component's logger; each job brings its pass
// and the lines that say what it did. A job holds the policy — what is a
// candidate, how many per batch, when to stop —; the statements are
// sink's (sink/archive.go, sink.HistoryCandidates). Each runs on its own
// goroutine ([Runner.Run], [History.Run]) and never takes part in the
// message FIFO.
//
// # The proc_state archive
//
// A row is an archive candidate when it is terminal (SUCCEEDED, SKIPPED,
// DEAD), its processed mark is confirmed (no longer in backfill_owed), it is
// not on the abandoned list, and it has not changed for MSGX_ARCHIVE_AFTER
// (updated_at: the terminal decision moves it, and a reopened or abandoned
// mark; the confirmed mark follows within seconds and leaves it — the
// threshold counts from the end of the message's life, not from its
// enqueue, 004 "time-constant ordering" 4).
// Abandoned rows stay until an operator reopens them (the abandoned
// list is the inbox owner's evidence for purging and must stay queryable).
//
// Archiving a batch is one statement, hence one transaction:
//
//  1. cand: lock up to MSGX_ARCHIVE_BATCH candidates, FOR UPDATE SKIP LOCKED;
//  2. moved: turn them into ARCHIVED shadow rows, re-checking the candidate
//     condition, and return the columns as they were before;
//  3. insert exactly those old rows into proc_state_hst;
//  4. delete their transition_applied rows.
//
// The history row is what the UPDATE returned, so the two writes cannot
// disagree: a row that no longer matches (a DEAD message replayed to PENDING
// meanwhile) is neither updated nor copied — it is skipped and stays as it
// is. In READ COMMITTED a row changed after the statement's snapshot is
// re-read and re-checked when it is locked, so "replayed meanwhile" cannot
// slip through either.
//
// Why no lock, not even the backfill lock (docs/design.md#archive): a
// pipeline lock is false protection here and that holding one across a bulk
// job would block the FIFO; mutual exclusion comes from the conditional
// write. SKIP LOCKED means the job never waits for a row the router or a
// replay holds; in turn, those wait at most for one small batch: the only
// rows the job locks are old, settled terminal rows, which the message path
// touches only when an old message is delivered again (Touch). Lookups read
// without locks and never wait.
//
// The shadow row keeps msg_id, identity_key and the NOT NULL enqueued_at;
// updated_at becomes the archive time; everything else is cleared. Keeping the
// row (instead of deleting it) is what keeps de-duplication: the UNIQUE
// identity_key stays in proc_state, so a later message with the same business
// identity is still SKIPPED duplicate-of:<archived msg> (I5,
// docs/design.md#archive), and a re-delivered message (an ingest duplicate, a
// rewind) finds its msg_id finished instead of being processed again. Shadow
// rows are kept for good, so de-duplication memory is unbounded (it outlives
// the inbox owner's retention, docs/design.md#time-constants).
//
// ARCHIVED rows are invisible to every other job because every predicate
// on proc_state lists the states it wants (open: PENDING, FAILED, ROUTED;
// backfill: SUCCEEDED, SKIPPED, DEAD) — the archive tests check every
// partial index of proc_state for that.
package maintenance
