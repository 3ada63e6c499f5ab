package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"msgx/internal/clock"
	"msgx/sink"
	"msgx/sink/backfill"
)

// runBackfill serves `msgx backfill abandoned` and `msgx backfill reopen`.
func runBackfill(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: msgx backfill abandoned | msgx backfill reopen <MSG_ID>...")
	}
	pool, err := sink.OpenPG(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch args[0] {
	case "abandoned":
		rows, err := backfill.Abandoned(ctx, pool, 0)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "reopen":
		if len(args) < 2 {
			return fmt.Errorf("usage: msgx backfill reopen <MSG_ID>...")
		}
		ids := make([]int64, 0, len(args)-1)
		for _, a := range args[1:] {
			id, err := strconv.ParseInt(a, 10, 64)
			if err != nil {
				return fmt.Errorf("backfill reopen: %q is not a MSG_ID", a)
			}
			ids = append(ids, id)
		}
		n, err := backfill.Reopen(ctx, pool, ids, clock.Real{}.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "reopened %d of %d\n", n, len(ids))
		return nil
	}
	return fmt.Errorf("backfill: unknown action %q (want abandoned or reopen)", args[0])
}
