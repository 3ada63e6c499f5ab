// Package serial is the serial reference of msgx's differential tests
// (docs/design.md#serial-equivalence): it applies inbox messages one at a
// time, in inbox order, each with every effect it has — on its own flights,
// on masters (MAFL), on children (cascades), on placeholders — before the
// next one starts, with msgx's own pure rules (route.Prepare and
// route.Decide against an in-memory store, flight.Apply on an in-memory
// flights table) and no Kafka, database, batching, partitions or
// concurrency. Whatever the pipeline does to a backlog, its state, every
// flight's version history and its msg events per FLID must equal this.
package serial
