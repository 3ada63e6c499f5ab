// Package sink is msgx's access to its databases, and nothing else: no
// loop, no policy, no rendering. It holds
//
//   - the connections: the PostgreSQL pool and the connections to the
//     shared MySQL database, with the inbox's time zone ([OpenPG],
//     [OpenMySQL], [InboxZone]), and the grants msgx needs there;
//   - the migrations of msgx's own schema ([Migrate]) and the registry of
//     advisory locks ([LockKey], docs/design.md#locks);
//   - the stores the processors write inside their own transactions:
//     message states and completion ([Messages], [MarkApplied]), the
//     router's batches ([LoadBatch], [RecordBatch]), the flight read model
//     ([WriteFlight]), reference data ([WriteRefData]), the event outbox
//     ([QueueEvents]) and the schedule trace ([AppendSnapLogTx],
//     [AppendSnapLog]);
//   - the other components' tables: the ingest bridge's cursor, holes and
//     late rows ([Cursors]), the backfill sweeper's queue
//     ([ClaimBackfills], [RecordBackfills]), the maintenance jobs'
//     statements ([ArchiveBatch], [ExpireSnapLog], [ExpireFlightChanges]).
//
// The AODB's shared tables, CMINMSGS and COUTMSGS, have their one owner in
// sink/aodb; sink/sinktest gives tests databases as msgx opens them.
// Components above sink (ingest, processors, emitters, maintenance, the
// read models in inspect) own their decisions; sink owns how the rows are
// read and written.
//
// # The flight read model
//
// flight_schd (migrations/0003_flights.up.sql) holds one row per FLID with
// every scalar in its own column and the full flight JSON in doc; each
// collection has a detail table keyed (flid, ordinal). [WriteFlight],
// [WriteFlights] and [QueueFlightGroup] are the only writers. They run
// inside the flights processor's transaction, next to [MarkApplied], so the
// read model and the message's completion commit together
// (docs/design.md#i4-exactly-once-effect, docs/design.md#i6-mark-after-effect).
package sink
