// Package ingest is the bridge from the legacy MySQL inbox (CMINMSGS) to the
// single-partition internal topic msgx.inbox (docs/design.md#ingest): it reads
// rows strictly in ID order behind a persisted watermark W, waits for or
// releases holes, seeds the watermark at cut-over, detects late rows, and
// serves the legacy compatibility endpoint POST /cminmsgs/send.
package ingest
