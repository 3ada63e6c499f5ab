// Package router is the goka group msgx-router: it reads msgx.inbox strictly in
// MSG_ID order and gives every message a decision (docs/design.md#router):
// decode, ignore rules, business identity, whole-package validation, then one
// transition per flight on msgx.flight-transitions and one per reference type
// on msgx.refdata-transitions. The head of the queue is retried in place;
// nothing behind it moves until it is terminal.
//
// The decision itself is pure and lives with the domain (tables/route:
// route.Prepare decodes and classifies a message without I/O, route.Decide
// finishes it with what PostgreSQL knows); this package is the goka and
// transaction shell around it. The [Router] runs them in batches
// (docs/design.md#router-batches): its goka callback decodes a record and
// queues it with goka's deferred commit; a batch worker loads, decides and
// records many messages in one PostgreSQL transaction, each against the
// decisions before it in the batch, produces their transitions and the
// router-table entries, and then commits their offsets in order. Messages
// that need it (a FAILED head, a guarded SCHD RESP, a failing batch) are
// decided one at a time, retried in place as before.
package router
