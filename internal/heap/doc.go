// Package heap paces Go's garbage collector for msgx's heap. Go collects
// when the heap has grown by GOGC percent of what the last collection found
// live (100: the heap may double). A backlog allocates a few hundred
// megabytes a second while its live heap is a few tens of megabytes, so
// with GOGC alone msgx collects several times a second, the marking a
// tenth of its CPU. The [Pacer] lets the heap grow by at least
// MSGX_GC_HEADROOM beyond its live size before the next collection (never
// less than GOGC's pace), which bounds the extra memory to that headroom.
//
// It is off when GOGC is set in the environment: the operator's setting
// wins.
package heap
