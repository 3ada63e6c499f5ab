// Package schd publishes the schd topic (docs/design.md#schd-topic): the latest
// full state of every flight, keyed by FLID, aggregated over a flush period. A
// record's value is the flight JSON (docs/design.md#events) exactly as stored
// in flight_schd.doc (what GET /flights/{flid} serves); a DELETED flight is a
// tombstone, a record with a null value, so that compaction forgets it. Every
// record carries the headers stateVersion and state: consumers de-duplicate by
// (FLID, stateVersion), tombstones included.
//
// # Where the state is
//
// There is no outbox and nothing in memory: sink.WriteFlight keeps the
// newest state of each flight in flight_schd (never an older one after a
// newer one) in the same transaction as the message's completion, and the
// row is due for publication while schd_due_since is set: the write sets it
// (to the time of the first unsent version) when it stores a version above
// schd_sent_version, the flush clears it when it sent the newest version,
// so it is set exactly while state_version > schd_sent_version. Ten
// versions written within one period are one due row, published once with
// the newest version: that is the aggregation. (The mark, not the versions,
// is indexed: a write to a row already due changes no indexed column and
// is a HOT update, migration 0032.)
//
// # A flush
//
// Every FlushPeriod (the injected clock) the Flusher runs one PostgreSQL
// transaction:
//
//  1. take the transaction-scoped advisory lock sink.LockSchdFlush, or skip this
//     flush (another instance is flushing: two flushers could otherwise
//     interleave an older read with a newer send);
//  2. read up to FlushLimit due rows, longest due first;
//  3. produce them synchronously with the producer of
//     docs/design.md#kafka-settings (acks=all, idempotent, max.in.flight=1), in
//     that order;
//  4. mark each row schd_sent_version = GREATEST(schd_sent_version, the
//     version sent), and no longer due when that is its state_version,
//     skipping rows a writer holds locked at that moment;
//  5. commit.
//
// A full batch is followed at once by the next one, so a backlog drains at
// FlushLimit records per round trip rather than per period.
//
// # Why the topic never goes backwards
//
// A row's doc is always its newest state, and the flushes of all instances
// are serialised by sink.LockSchdFlush: each flush reads rows after the previous one
// committed, so per FLID it sends a version at least as new as anything sent
// before. The mark only advances (GREATEST); a state written while a flush
// is in flight has a higher state_version than the mark and is due again.
//
// # Crash windows, walked through
//
//   - before 3: nothing was sent, nothing marked; the next flush reads the
//     same rows (or newer states of them).
//   - during or after 3, before 5 commits (crash, Kafka or PostgreSQL
//     failure, shutdown): some or all records are on the topic, nothing is
//     marked. The next flush (after a restart) sends the same versions again,
//     or newer ones: at least once. Consumers de-duplicate by
//     (FLID, stateVersion).
//   - after 5: done; the rows are due again only when a newer state is
//     written.
//
// The transaction stays open while Kafka answers (step 3), holding the
// advisory lock and no row lock: writers are never blocked by it, and the
// mark (step 4) never waits for a writer (SKIP LOCKED), so the flusher and a
// processor transaction cannot deadlock. A row skipped that way is simply
// sent again next time.
//
// # Failures
//
// A Kafka or PostgreSQL failure fails the flush: nothing is marked, the error
// is logged (component=schd) and kept in Stats, and the next period tries
// again. The producer is recreated after a failed send.
package schd
