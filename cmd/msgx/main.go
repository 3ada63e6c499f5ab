package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

const usage = `msgx — airport message gateway (MySQL inbox → Kafka stream processor → PostgreSQL)

Usage:
  msgx run                  every role in one process (embedded Kafka when MSGX_KAFKA_BROKERS is empty)
  msgx ingest               the ingest role only: inbox → msgx.inbox, plus POST /cminmsgs/send
  msgx process              the processing role only: the goka processors (router, …)
  msgx table get messages <MSG_ID>    a message's record from the router table (JSON)
  msgx table get flights <FLID>       a flight from the flights table (JSON)
  msgx table list refdata <RTYPE>     a reference category from the refdata table (JSON)
  msgx status [--json]                 is it keeping up, is anything stuck, what must a human look at
  msgx replay (--class C | --reason-prefix P | --ids 1,2 | --pending) [--dry-run]
                                      re-inject replayable messages (CODEC_ERROR, INFRA, EXHAUSTED, unsupported:)
  msgx rebuild [--yes]                rebuild every goka table and derived PostgreSQL table from msgx.inbox (stop msgx first)
  msgx request refdata <RTYPE>        send an RQRD for one reference category (COUTMSGS)
  msgx request flights --from T --to T
                                      send an RQFD for a flight window
  msgx backfill abandoned             messages whose processed mark msgx stopped trying to write
  msgx backfill reopen <MSG_ID>...    put abandoned marks back into the sweep
  msgx broker               the embedded Kafka alone, on MSGX_EMBEDDED_KAFKA_ADDR
  msgx migrate [up|down [N]|version]
                            PostgreSQL schema migrations (msgx run applies them itself)

Configuration comes from MSGX_* environment variables; see the README.
`

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cfg, err := loadConfig(environment())
	if err != nil {
		fmt.Fprintln(stderr, "msgx: invalid configuration:")
		for _, line := range splitErrors(err) {
			fmt.Fprintln(stderr, "  "+line)
		}
		return 2
	}
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	switch args[0] {
	case "run":
		err = runGateway(ctx, cfg, log, roleAll)
	case "ingest":
		err = runGateway(ctx, cfg, log, roleIngest)
	case "process":
		err = runGateway(ctx, cfg, log, roleProcess)
	case "status":
		err = runStatus(ctx, cfg, args[1:], stdout, log)
	case "replay":
		err = runReplay(ctx, cfg, args[1:], stdout, log)
	case "rebuild":
		err = runRebuild(ctx, cfg, args[1:], stdout, log)
	case "request":
		err = runRequest(ctx, cfg, args[1:], stdout, log)
	case "backfill":
		err = runBackfill(ctx, cfg, args[1:], stdout)
	case "table":
		err = runTable(ctx, cfg, args[1:], stdout, log)
	case "trace":
		err = runTrace(ctx, cfg, args[1:], stdout, log)
	case "broker":
		err = runBroker(ctx, cfg, log)
	case "migrate":
		err = runMigrate(cfg, args[1:], stdout)
	default:
		fmt.Fprintf(stderr, "msgx: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("msgx stopped with an error", "component", "main", "err", err)
		return 1
	}
	return 0
}

func splitErrors(err error) []string {
	var out []string
	var join interface{ Unwrap() []error }
	if errors.As(err, &join) {
		for _, e := range join.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return []string{err.Error()}
}
