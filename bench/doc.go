// Package bench holds msgx's throughput benchmarks (`make bench`). They run
// against the real MariaDB and PostgreSQL and an in-process Kafka, load a
// realistic backlog of SIS messages and print rows or messages per second.
package bench
