// Package retry holds the one backoff helper of msgx and the one place where
// errors are classified: an outage of a dependency (PostgreSQL, MySQL, Kafka)
// pauses work without counting against a message
// (docs/design.md#i7-outage-is-not-poison); a permanent error never succeeds on
// retry; everything else is a failure of the message itself.
package retry
