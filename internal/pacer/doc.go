// Package pacer sets the Go garbage collector's target (GOGC) from the live
// heap after every collection: the heap may grow by max(live, Headroom)
// between two collections instead of Go's default, live.
//
// A collection costs about the live heap's marking, and collections come
// every (growth allowed) of allocation. msgx allocates ~65 KB per message
// at a backlog's pace while its live heap is small (~60 MB on the
// 50,000-message backlog): with Go's default the collector ran every ~60 MB
// and took a fifth of msgx's CPU. A fixed headroom makes collections rarer
// while the heap is small and changes nothing once it is large — what
// grows with the work (goka's in-memory tables, the embedded Kafka's
// buffers) is never multiplied by more than Go's own factor of two, so peak
// memory is at most Headroom above Go's default pacing. See docs/operations.md#sizing.
//
// The pacer is armed once per process ([Start]) and runs on the runtime's
// finalizer goroutine after each collection: no timer, no goroutine of its
// own. GOGC or GOMEMLIMIT in the environment leave Go's pacing alone (cmd/msgx
// decides).
package pacer
