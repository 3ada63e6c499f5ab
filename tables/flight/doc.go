// Package flight holds the flight state of the msgx-flights group table
// ([State]), the transitions the router and the flights processor exchange
// ([Transition]) and the pure function that applies them ([Apply]), with the
// flight vocabulary: [Scalars], [Collections] and the FLOP groups.
//
// Nothing in this package performs I/O: the processor in processors/flights
// reads the current state from its goka table, calls Apply, and writes the
// result to PostgreSQL (the read model and the event outbox) and the table.
// The rules are docs/design.md#flight-state.
package flight
