package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lovoo/goka"

	"msgx/internal/kafka"
	"msgx/processors/router"
	"msgx/tables/flight"
	"msgx/tables/refdata"
)

// tableView is a goka table an operator can read.
type tableView struct {
	table goka.Table
	codec goka.Codec
	// view turns a table value into what the operator sees.
	view func(any) any
}

// tables are the goka tables an operator can read, by CLI name (their
// topics carry the deployment's MSGX_KAFKA_PREFIX).
func tables(cfg Config) map[string]tableView {
	return map[string]tableView{
		"messages": {cfg.Router.Table(), kafka.JSON[router.Entry]{}, nil},
		// The flight JSON of docs/design.md#events without the table's
		// bookkeeping (or, for a master not created yet, the children
		// waiting for it).
		"flights": {cfg.Flights.Table(), kafka.JSON[flight.State]{}, func(v any) any { return v.(*flight.State).Inspect() }},
		"refdata": {cfg.Refdata.Table(), kafka.JSON[refdata.State]{}, func(v any) any { return v.(*refdata.State).List() }},
	}
}

// tableCommand is `msgx table get <table> <key>` (`list` is a synonym, as
// in `msgx table list refdata AIRL`): a goka table entry as JSON. It reads
// the table's changelog from Kafka, so it works while the daemon runs and
// shows what the processors have committed.
func tableCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, x *invocation, args []string) error {
		if len(args) != 3 || (args[0] != "get" && args[0] != "list") {
			return usagef("want get or list, a table (%s) and a key", tableNames())
		}
		t, ok := tables(x.cfg)[args[1]]
		if !ok {
			return usagef("unknown table %q (want %s)", args[1], tableNames())
		}
		return readTable(ctx, x, t, args[1], args[2])
	}
}

func readTable(ctx context.Context, x *invocation, t tableView, name, key string) error {
	cfg := x.cfg
	brokers := cfg.Kafka.Brokers
	if cfg.Kafka.Embedded() {
		brokers = []string{cfg.Kafka.EmbeddedAddr}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return kafka.ReadTable(ctx, brokers, cfg.Kafka, t.table, t.codec, x.log, func(v *goka.View) error {
		val, err := v.Get(key)
		if err != nil {
			return err
		}
		if val == nil {
			return fmt.Errorf("%s %s: not found", name, key)
		}
		if t.view != nil {
			val = t.view(val)
		}
		b, err := json.MarshalIndent(val, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(x.stdout, string(b))
		return err
	})
}

func tableNames() string {
	return strings.Join(slices.Sorted(maps.Keys(tables(Config{}))), "|")
}
