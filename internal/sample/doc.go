// Package sample loads the real-format SIS sample messages kept in
// testdata/sis-samples as MySQL INSERT statements into the legacy inbox table
// CMINMSGS, and the order and SEQNs that make them a run in which each one
// applies (Ordered, Renumbered: what `msgx samples` sends). It exists for
// tests, benchmarks and development inboxes; it performs no I/O other than
// reading the sample files.
package sample
