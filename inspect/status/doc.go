// Package status is the msgx status report: one report that answers,
// without any other tool, "is it keeping up, is anything stuck, and what must
// a human look at". It is read by msgx status, GET /status (and the status
// page) and the metrics; [Collector.Lag] is the cheap subset the status
// page samples every few seconds.
//
// [Collect] reads three independent sources — PostgreSQL (cursor, holes,
// late rows, proc_state), the MySQL inbox (MAX(CMINMSGS_ID)) and Kafka
// (consumer group offsets) — concurrently, each call under its own timeout.
// A source that fails degrades its own section (an error field, counts of -1,
// nil maps) and adds an alert saying the report is incomplete; it never fails
// the whole report, because an operator needs status most during an outage.
//
// Cost of every query on proc_state, measured on PostgreSQL 15 with 3 million
// rows (468 MB heap, 19 MB proc_state_state index; 70% SUCCEEDED, 25%
// SKIPPED, 4.5% DEAD, 100 unfinished), warm cache:
//
//	backlog by state      proc_state_open or proc_state_state O(unfinished) <1 ms
//	oldest unfinished     proc_state_open, LIMIT 1           O(1)           <1 ms
//	pending backfills     backfill_owed, the whole queue     O(pending)     <1 ms
//	DEAD by class         proc_state_state, index-only scan  O(DEAD)        22 ms for 135k DEAD
//	recent / latest DEAD  proc_state_state, bitmap heap scan O(DEAD)        heap pages of the DEAD rows
//	latest 3 of a class   proc_state_dead (0025), LIMIT 3    O(classes)     1 ms for 135k DEAD
//	terminal states       proc_state_state, index-only scan  O(rows)        0.5 s (exact, no estimate)
//	SKIPPED by reason     proc_state_state, bitmap heap scan O(SKIPPED)     0.7 s for 750k SKIPPED
//	abandoned backfills   proc_state_abandoned (0009)        O(abandoned)   <1 ms
//
// The unfinished and pending sets are small by construction, so the figures
// that say whether msgx keeps up stay cheap however large proc_state grows.
// The two linear queries (terminal counts, SKIPPED reasons) are exact counts
// — no pg_class estimates, which lag behind and would hide a change — and
// are bounded by the per-call timeout: on a table too large for it, only
// those figures degrade.
// The requests section reads req_track whole (a few requests a day) and the
// EROR answers that paired with nothing through req_answer_unpaired_eror.
// The inbox tables (inbox_hole, inbox_late_row) hold one row per released
// gap or late row and are read whole. The MySQL queries use the primary key
// only (MAX, and the first ID after W). Kafka costs one metadata, two list
// offsets, one describe-groups and one offset-fetch round trip.
package status
