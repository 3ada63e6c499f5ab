// Package clock is the single source of time for msgx. Every component takes a
// [Clock] so that tests of timing (hole aging, backoff, backfill, schedules) run
// on a [Fake] clock instead of sleeping; production uses [Real].
package clock
