// Package router is the goka group msgx-router: it reads msgx.inbox strictly in
// MSG_ID order and gives every message a decision (docs/design.md#router):
// decode, ignore rules, business identity, whole-package validation, then one
// transition per flight on msgx.flight-transitions and one per reference type
// on msgx.refdata-transitions. The head of the queue is retried in place;
// nothing behind it moves until it is terminal.
//
// The decision itself is pure and table-tested: [Prepare] decodes and
// classifies a message without I/O, [Decide] finishes it with what
// PostgreSQL knows ([message.Lookups]). The [Router] is the goka callback
// around them: it loads the message and its lookups, records the verdict
// and emits the transitions.
package router
