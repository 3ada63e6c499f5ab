// Package sample loads the real-format SIS sample messages kept in
// testdata/sis-samples as MySQL INSERT statements into the legacy inbox table
// CMINMSGS. It exists for tests and benchmarks only; it performs no I/O other
// than reading the sample files.
package sample
