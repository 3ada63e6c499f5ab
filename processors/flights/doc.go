// Package flights is the goka group msgx-flights: it applies flight
// transitions (input msgx.flight-transitions, key FLID) to the flight state
// in its table with the pure [flight.Apply] and writes the result through to
// PostgreSQL — the flight, the message's completion and the change's msg
// event (into the outbox the publisher produces) in one transaction — all
// before the offset is committed.
//
// Every transition comes from the router, in inbox order per flight: a
// message's own change of a flight, its children's LINKs and its master's
// cascade included (docs/design.md#codeshare).
//
// The package also serves the read-only HTTP endpoints GET /flights/{flid}
// and GET /flights?day=… ([Handler]). The history sweep's PURGE
// transitions (maintenance.History, through the router) are applied here
// like any other.
package flights
