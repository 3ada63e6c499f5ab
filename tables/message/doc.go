// Package message is the vocabulary of a message's life in msgx: its states
// (PENDING → FAILED/ROUTED → SUCCEEDED/SKIPPED/DEAD), error classes, reason
// prefixes, and the facts a routing decision reads from the store
// ([Lookups], [FlightDay]). It holds no I/O; the router's decisions and the
// stores in sink share it. See docs/design.md#outcomes.
package message
