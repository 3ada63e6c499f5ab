// Package migrations embeds the numbered golang-migrate SQL pairs of msgx's
// own PostgreSQL schema. The daemon (`msgx run`, `msgx migrate up`) and the
// tests apply the same files through [msgx/sink.Migrate]. The shared MySQL
// inbox is never migrated by msgx (docs/design.md#inbox-schema).
package migrations
