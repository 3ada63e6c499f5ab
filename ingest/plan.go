package ingest

import "time"

// Cursor is the bridge's durable position: every inbox ID up to Watermark has
// been produced. HoleSince is when the gap right after the watermark was
// first seen (zero when there is none) and HoleEnd the last ID of that gap as
// first observed: a gap that starts at or before HoleEnd is the same hole
// partly filled and keeps its timer; any other gap is new and starts a fresh
// timer.
type Cursor struct {
	Watermark int64
	HoleSince time.Time
	HoleEnd   int64
}

// HasHole reports whether a hole timer is running.
func (c Cursor) HasHole() bool { return !c.HoleSince.IsZero() }

// Gap is a run of missing IDs with at least one existing row after it.
type Gap struct {
	// From and To are the first and last missing IDs.
	From, To int64
}

// Step is what one poll must do.
type Step struct {
	// Run is how many of the polled IDs, from the first, are contiguous with
	// the watermark: they are enqueued now, in order.
	Run int
	// Next is the cursor after those rows were produced, with the hole timer
	// started, kept or cleared.
	Next Cursor
	// Gap is the hole right after the run, nil when there is none (rows after
	// it are not enqueued until it is resolved, to keep FIFO).
	Gap *Gap
	// Release says the gap has been open for at least the maximum commit
	// delay: it is permanent and may be skipped.
	Release bool
}

// Plan decides one poll from the cursor and the IDs read after its watermark
// (ascending, as returned by `ID > W ORDER BY ID`). It is pure: the hole probe
// and all I/O happen in the bridge around it.
func Plan(c Cursor, ids []int64, now time.Time, maxCommitDelay time.Duration) Step {
	w := c.Watermark
	run := 0
	for _, id := range ids {
		if id != w+1 {
			break
		}
		w = id
		run++
	}
	next := Cursor{Watermark: w}
	if run == len(ids) {
		// No row after a missing ID: nothing is known to be missing.
		return Step{Run: run, Next: next}
	}
	gap := &Gap{From: w + 1, To: ids[run] - 1}
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

// Released is the cursor after gap g was released as permanent: the
// watermark jumps to the ID before the first existing row and the timer
// stops. Only the hole itself is skipped, never an existing row.
func (c Cursor) Released(g Gap) Cursor {
	return Cursor{Watermark: g.To}
}
