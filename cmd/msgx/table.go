package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/lovoo/goka"

	"msgx/internal/kafka"
	"msgx/processors/flights"
	refdataproc "msgx/processors/refdata"
	"msgx/processors/router"
	"msgx/tables/flight"
	"msgx/tables/refdata"
)

// tables are the goka tables an operator can read, by CLI name.
var tables = map[string]struct {
	table goka.Table
	codec goka.Codec
	// view turns a table value into what the operator sees.
	view func(any) any
}{
	"messages": {router.Table, kafka.JSON[router.Entry]{}, nil},
	// The flight JSON of docs/design.md#events without the table's
	// bookkeeping (or, for a master not created yet, the children waiting
	// for it).
	"flights": {flights.Table, kafka.JSON[flight.State]{}, func(v any) any { return v.(*flight.State).Inspect() }},
	"refdata": {refdataproc.Table, kafka.JSON[refdata.State]{}, func(v any) any { return v.(*refdata.State).List() }},
}

// runTable prints a goka table entry as JSON: `msgx table get <table> <key>`
// (`list` is a synonym, as in `msgx table list refdata AIRL`). It reads the
// table's changelog from Kafka, so it works while the daemon runs and shows
// what the processors have committed.
func runTable(ctx context.Context, cfg Config, args []string, out io.Writer, log *slog.Logger) error {
	if len(args) != 3 || (args[0] != "get" && args[0] != "list") {
		return fmt.Errorf("usage: msgx table get|list <%s> <key>", tableNames())
	}
	t, ok := tables[args[1]]
	if !ok {
		return fmt.Errorf("unknown table %q (want %s)", args[1], tableNames())
	}
	brokers := cfg.Kafka.Brokers
	if cfg.Kafka.Embedded() {
		brokers = []string{cfg.Kafka.EmbeddedAddr}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return kafka.ReadTable(ctx, brokers, cfg.Kafka, t.table, t.codec, log, func(v *goka.View) error {
		val, err := v.Get(args[2])
		if err != nil {
			return err
		}
		if val == nil {
			return fmt.Errorf("%s %s: not found", args[1], args[2])
		}
		if t.view != nil {
			val = t.view(val)
		}
		b, err := json.MarshalIndent(val, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	})
}

func tableNames() string {
	names := ""
	for n := range tables {
		if names != "" {
			names += "|"
		}
		names += n
	}
	return names
}
