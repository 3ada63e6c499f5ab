// Package testenv gives tests real dependencies: a fresh PostgreSQL database
// migrated with msgx's schema, a fresh MariaDB database holding the legacy
// inbox tables, and an in-process Kafka broker. Each call creates its own
// database so test packages can run in parallel; everything is dropped when
// the test ends.
//
// The admin connections default to the machine's local services and can be
// overridden with MSGX_TEST_PG_ADMIN_DSN and MSGX_TEST_MYSQL_ADMIN_DSN.
package testenv
