// Package bench holds msgx's benchmarks (`make bench`, `make
// bench-million`). They run against the real MariaDB and PostgreSQL, load
// realistic backlogs of SIS messages and print the figures of
// docs/benchmarks.md as one table with two columns: msgx on its embedded
// Kafka (kfake) and on Apache Kafka (one node the benchmarks start on this
// machine, or the brokers of MSGX_KAFKA_BROKERS), measured one after the
// other in the same run.
package bench
