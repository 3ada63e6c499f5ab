// Package refdata is the goka group msgx-refdata: it applies reference-data
// transitions (input msgx.refdata-transitions, key RTYPE) to the category
// state in its table with the pure [refdata.Apply] and writes the result
// through to PostgreSQL ref_master together with the message's completion,
// before the offset is committed. Reference data has no Kafka events.
//
// The read-only HTTP endpoints GET /refdata/{rtype} and
// GET /refdata/{rtype}/{rkey} ([Handler]) serve ref_master.
package refdata
