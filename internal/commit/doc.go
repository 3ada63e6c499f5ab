// Package commit groups the PostgreSQL writes of goka callbacks into shared
// transactions (docs/design.md#group-commits): a callback applies its input
// to the table's state, hands the write to a Group with goka's deferred
// commit, and returns; the Group's worker writes whatever is queued in one
// transaction and only then calls the deferred commits, in order, so that
// an input's offset is never committed before the transaction holding its
// effect.
//
// The flights and refdata processors use it. The router has its own worker
// (processors/router): its decisions read what they decide against inside
// the transaction.
package commit
