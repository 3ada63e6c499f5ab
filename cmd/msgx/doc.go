// Command msgx is the airport message gateway: one binary, one subcommand per
// role (run, ingest, process, broker) and per operator action (status, table,
// replay, rebuild, backfill, request, migrate); `msgx help` lists them. It only
// wires the packages together and reads the configuration; the behaviour
// lives in ingest/, processors/, tables/, emitters/ and sink/. The design is
// docs/design.md, the operator's manual docs/operations.md.
package main
