// Package sink is msgx's access to its databases: opening and timing out the
// PostgreSQL pool and the connections to the shared MySQL inbox ([OpenPG],
// [OpenMySQL]), the migrations of msgx's own schema ([Migrate]), the registry
// of advisory locks ([LockKey], docs/design.md#locks), and the stores the
// processors write inside their own transactions: message states and
// completion ([Messages], [MarkApplied]), the flight read model
// ([WriteFlight]), reference data ([WriteRefData]), the event outbox
// ([QueueEvents]) and the schedule trace ([AppendSnapLogTx], [AppendSnapLog]). Components above
// it (ingest, processors, emitters, the jobs in sink/backfill and
// sink/maintenance, the read models in inspect/) own their decisions; sink
// owns how the rows are written.
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
