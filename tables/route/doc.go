// Package route is the router's decision, pure (docs/design.md#router):
// [Prepare] decodes and classifies a message without I/O — ignore rules,
// business identity, dispatch and whole-package validation — and [Decide]
// finishes it with what the store knows ([message.Lookups]): one
// transition per flight the message touches, its masters' links and its
// deletes' cascades included (flight.Expand), and one per reference type.
// [Reroute] decides a message found ROUTED again from the flight plan
// stored with its decision (plan.go).
//
// [Overlay] is the store held in memory: what PostgreSQL knew before a
// batch plus the decisions recorded since, so that each message of a batch
// is decided as it would be one at a time; started empty, it is the store
// of the serial reference (internal/serial).
//
// Nothing here performs I/O or reads a clock. The goka group around it,
// which loads the lookups, records the decisions and emits the transitions
// in PostgreSQL transactions, is processors/router.
package route
