// Command msgx is the airport message gateway: one binary, one subcommand per
// role (run, ingest, process, broker) and per operator action (status, table,
// trace, replay, rebuild, backfill, request, bind, reseed, migrate,
// version); `msgx help` lists them. It only wires the packages together and
// reads the configuration; the behaviour lives in ingest/, processors/,
// tables/, emitters/ and sink/. The design is docs/design.md, the
// operator's manual docs/operations.md.
//
// The subcommands are the registry in main.go (commands): a command is a
// name, a one-line summary and a function that defines its flags on its own
// flag.FlagSet and returns what runs it. The dispatcher parses the flags
// before reading the configuration, so --help (stdout, exit 0) and usage
// errors (one line and the usage on stderr, exit 2) need neither. The
// daemons log JSON; an operator command's error is one plain line (exit 1).
//
// docs/reference.md — the configuration variables, the commands' flags and
// the metrics — is generated from this code by go generate (the generator
// is reference_test.go: it reads the Config fields' doc comments from the
// sources); TestReferenceIsGenerated fails when the file is stale.
package main

//go:generate go test -count=1 -run TestReferenceIsGenerated . -args -update-reference
