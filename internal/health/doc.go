// Package health keeps the running state of msgx's components for the
// readiness endpoint, `msgx status` and the metrics: which components run,
// which are restarting after an error, which are paused by an outage, and
// the last error of each ([Registry]), and the /healthz and /readyz
// handlers ([Live], [Ready]).
package health
