// Package kafka configures msgx's Kafka clients: the producer settings
// (acks=all, idempotence, max.in.flight=1; docs/design.md#kafka-settings)
// enforced at start-up, consumers that start from the oldest offset, topic
// creation with explicit partitions, replication and cleanup policy, the goka
// options every processor shares, consumer-group lag ([Lags], for the status
// report and rebuild), the producer constructors ([NewSyncProducer]; and
// [NewTransactionalProducer] for the exactly-once event publisher, with
// [FenceCode] and the reads of what its transactions committed,
// [LastCommitted] and [CommittedKeys]) and the embedded broker (kfake) used
// when no cluster is configured.
//
// TLS and SASL (PLAIN, SCRAM-SHA-256/512) are set up in one place for both
// client libraries: [Config.Sarama] builds every sarama configuration (goka,
// producers, cluster admin) and [NewKgoClient] every franz-go client, both
// from the same files and credentials, checked by [Config.Validate]
// (docs/operations.md#kafka-tls-and-sasl).
package kafka
