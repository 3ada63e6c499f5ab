// Package flight holds the flight state of the msgx-flights group table
// ([State]), the transitions the router and the flights processor exchange
// ([Transition]), the pure function that applies them ([Apply]) and the one
// that tells what a message does to the flights it links — masters' MAFL,
// cascades to children — from the router's flight index ([Expand],
// [LinkAfter]; docs/design.md#codeshare), with the flight vocabulary:
// [Scalars], [Collections] and the FLOP groups.
//
// Nothing in this package performs I/O: the processor in processors/flights
// reads the current state from its goka table, calls Apply, and writes the
// result to PostgreSQL (the read model and the event outbox) and the table.
// The rules are docs/design.md#flight-state.
package flight
