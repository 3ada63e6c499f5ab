// Package event publishes the event outbox: the msg topic's change events
// (and the schd tombstones of purged flights) that the flights processor
// writes into PostgreSQL's event_outbox in the same transaction as the state
// they announce (docs/design.md#outbox). The [Publisher] produces them in
// commit order with the producer settings of docs/design.md#kafka-settings
// and deletes them once Kafka has them.
//
// With MSGX_EXACTLY_ONCE (the default) every batch is one Kafka
// transaction under the deployment's transactional ID: the batch's events
// and the publisher's position — which outbox rows the batch was, where
// each landed, a digest of their content — on the compacted position
// topic, committed together. Sequence and crash windows:
//
//  1. Start (and a standby taking over): the transactional ID is
//     initialised, which fences any other producer of it and aborts the
//     transaction a killed one left open; then the position last committed
//     is read back with read_committed, and the rows of that batch that
//     PostgreSQL still holds (a kill between the Kafka commit and the
//     delete) are deleted, with msg_event, without being produced again.
//  2. Read the oldest rows; drop those whose (FLID, stateVersion) msg_event
//     or an earlier row of the batch already has (a redelivered transition
//     queues its version's event again). msg_event is asked only about the
//     rows the flights processor did not queue as new (sink.Event.New).
//  3. Begin, produce the events, produce the position, commit. A kill
//     before the commit leaves nothing visible to read_committed consumers;
//     the next session aborts the transaction and publishes the rows again.
//  4. Delete the rows and write msg_event in one PostgreSQL transaction.
//     If it fails the batch is kept and its delete retried before anything
//     else is produced; a kill here is step 1's reconciliation.
//
// A publisher whose transaction is refused as fenced (another producer
// initialised the ID: a second instance that believes it is active) stops
// publishing and says so in one ERROR line; a new producer session is only
// opened while this instance holds the process lock (Deps.Active), so an
// instance that lost its lock cannot fence the one that took it over.
//
// With MSGX_EXACTLY_ONCE=false the idempotent producer alone produces the
// batch; a kill between the produce and the delete produces those rows
// again: at least once, and consumers de-duplicate by (FLID, stateVersion).
// One instance publishes (the processing role holds the process lock), so
// the order of the rows is the order on the topics.
package event
