// Package aodb is msgx's access to the AODB's shared MySQL tables
// (docs/design.md#inbox-schema): the inbox CMINMSGS, which the AODB writes
// and msgx reads in ID order and marks processed, and the outbox COUTMSGS,
// into which msgx writes its requests. [Tables] owns every statement
// against them — the bridge's reads and its hole probe
// (docs/design.md#holes), the compatibility endpoint's insert, replay's
// reads, the backfill sweeper's processed mark
// (docs/design.md#backfill-results), the status report's and msgx trace's
// reads, the requests' inserts and their recovery search
// (docs/design.md#requests) — so that what msgx does to a table it does not
// own is in one place, beside the grants it needs (cmd/msgx lists them).
//
// msgx never creates, alters or migrates these tables, and every statement
// uses the primary key: the tables are the AODB's, often large, and shared
// with its own processes.
package aodb
