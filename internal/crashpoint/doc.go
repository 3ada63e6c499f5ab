// Package crashpoint lets the crash tests kill msgx at a named point of a
// crash window, as kill -9 would, instead of hoping a random kill lands in a
// window a few microseconds wide.
//
// [Hit] does nothing in a normal build. Built with `-tags crashpoints` (the
// tests of cmd/msgx build the binary so), it reads MSGX_CRASHPOINT once:
// "<name>@<n>" makes the n-th call of Hit(name) send SIGKILL to the
// process itself — no deferred function, no buffered write, no goodbye,
// exactly what kill -9 does; "<name>" is "<name>@1". Names are those the
// components pass to Hit (the event publisher's: publish.in-batch,
// publish.after-commit, publish.reconcile; emitters/event). A production
// binary has no way to crash on purpose: the variable is ignored.
package crashpoint
