// Package testenv gives tests real dependencies: a fresh, empty PostgreSQL
// database, a fresh MariaDB database holding the legacy inbox tables, and
// an in-process Kafka broker. Each call creates its own database so test
// packages can run in parallel; everything is dropped when the test ends.
// It imports none of msgx's own packages but internal/kafka: a database
// migrated with msgx's schema, and connections opened as msgx opens them,
// come from sink/sinktest.
//
// The admin connections default to the machine's local services and can be
// overridden with MSGX_TEST_PG_ADMIN_DSN and MSGX_TEST_MYSQL_ADMIN_DSN.
package testenv
