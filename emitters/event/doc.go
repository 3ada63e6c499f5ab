// Package event publishes the event outbox: the msg topic's change events
// (and the schd tombstones of purged flights) that the flights processor
// writes into PostgreSQL's event_outbox in the same transaction as the state
// they announce (docs/design.md#outbox). The [Publisher] produces them in
// commit order with the producer settings of docs/design.md#kafka-settings
// and deletes what Kafka acknowledged.
//
// Sequence and crash windows: read the oldest rows → produce them → delete
// them. A crash after the produce and before the delete produces those rows
// again after restart: events are at least once, and consumers de-duplicate
// (by FLID and stateVersion for msg). One instance publishes (the processing
// role holds the process lock), so the order of the rows is the order on the
// topics.
package event
