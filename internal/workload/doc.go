// Package workload generates realistic, deterministic streams of SIS
// messages for end-to-end tests, crash tests and benchmarks: a day's
// schedule followed by flight operations, shared flights, deletions,
// duplicates, ignored and malformed messages.
package workload
