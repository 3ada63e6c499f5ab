// Package applier is the skeleton the per-key appliers share — the goka
// groups msgx-flights and msgx-refdata, which apply the router's
// transitions of one key (a FLID, an RTYPE) to the state in their table
// with a pure function and write the result through to PostgreSQL before
// the offset is committed (docs/design.md#group-commits).
//
// [Shell] is what they do the same way: the group graph and the goka
// processor, run under a group commit (internal/commit); the callback's
// prologue (the input's type, the group commit's presence, the log's
// attributes); reading PostgreSQL through an outage, which pauses the
// processor instead of failing the transition (I7); counting a transition
// applied again after a crash left the table ahead of PostgreSQL; halting
// on a transition an operator must look at; and the running figures
// ([Stats]). The processor brings its [Spec]: how a transition is applied
// and what it writes.
package applier
