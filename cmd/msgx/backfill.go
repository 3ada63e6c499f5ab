package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"

	"msgx/internal/clock"
	"msgx/sink"
)

// backfillCommand is `msgx backfill abandoned` (the messages whose
// processed mark msgx stopped trying to write, JSON) and `msgx backfill
// reopen <MSG_ID>...` (put them back into the sweep).
func backfillCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, x *invocation, args []string) error {
		var ids []int64
		switch {
		case len(args) == 1 && args[0] == "abandoned":
		case len(args) > 1 && args[0] == "reopen":
			for _, a := range args[1:] {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil {
					return usagef("%q is not a MSG_ID", a)
				}
				ids = append(ids, id)
			}
		case len(args) == 0:
			return usagef("want abandoned or reopen")
		case args[0] == "reopen":
			return usagef("reopen needs at least one MSG_ID")
		default:
			return usagef("unknown action %q (want abandoned or reopen)", args[0])
		}
		pool, err := sink.OpenPG(ctx, x.cfg.DB)
		if err != nil {
			return err
		}
		defer pool.Close()
		if ids == nil {
			rows, err := sink.AbandonedBackfills(ctx, pool, 0)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(x.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(rows)
		}
		n, err := sink.ReopenBackfills(ctx, pool, ids, clock.Real{}.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(x.stdout, "reopened %d of %d\n", n, len(ids))
		return nil
	}
}
