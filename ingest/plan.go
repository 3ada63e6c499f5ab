package ingest

import (
	"time"

	"msgx/sink"
)

// Step is what one poll must do.
type Step struct {
	// Run is how many of the polled IDs, from the first, are contiguous with
	// the watermark: they are enqueued now, in order.
	Run int
	// Next is the cursor after those rows were produced, with the hole timer
	// started, kept or cleared.
	Next sink.Cursor
	// Gap is the hole right after the run, nil when there is none (rows after
	// it are not enqueued until it is resolved, to keep FIFO).
	Gap *sink.Gap
	// Release says the gap has been open for at least the maximum commit
	// delay: it is permanent and may be skipped.
	Release bool
}

// Plan decides one poll from the cursor and the IDs read after its watermark
// (ascending, as returned by `ID > W ORDER BY ID`). It is pure: the hole probe
// and all I/O happen in the bridge around it.
func Plan(c sink.Cursor, ids []int64, now time.Time, maxCommitDelay time.Duration) Step {
	w := c.Watermark
	run := 0
	for _, id := range ids {
		if id != w+1 {
			break
		}
		w = id
		run++
	}
	next := sink.Cursor{Watermark: w}
	if run == len(ids) {
		// No row after a missing ID: nothing is known to be missing.
		return Step{Run: run, Next: next}
	}
	gap := &sink.Gap{From: w + 1, To: ids[run] - 1}
	if c.HasHole() && gap.From > c.Watermark && gap.From <= c.HoleEnd {
		// The hole first seen at HoleSince, possibly partly filled since:
		// its IDs have been missing all along, so the timer carries on.
		next.HoleSince, next.HoleEnd = c.HoleSince, c.HoleEnd
	} else {
		next.HoleSince, next.HoleEnd = now, gap.To
	}
	return Step{
		Run:     run,
		Next:    next,
		Gap:     gap,
		Release: now.Sub(next.HoleSince) >= maxCommitDelay,
	}
}
