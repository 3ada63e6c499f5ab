package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/ingest/replay"
	"msgx/internal/clock"
	"msgx/sink"
	"msgx/sink/aodb"
	"msgx/tables/message"
)

// replayCommand is `msgx replay`: re-inject replayable messages so the
// router processes them again (docs/design.md#replay). --dry-run lists what
// would move and records an audit row; a real run resets the messages
// (keeping their identity), records the audit row and produces them to
// msgx.inbox again. Both say, per message, what it would overwrite
// (replay.Explain).
func replayCommand(fs *flag.FlagSet) runFunc {
	class := fs.String("class", "", "EXHAUSTED, CODEC_ERROR, INFRA or UNSUPPORTED")
	prefix := fs.String("reason-prefix", "", `reason prefix, e.g. "unsupported:"`)
	ids := fs.String("ids", "", "comma-separated MSG_IDs")
	pending := fs.Bool("pending", false, "re-produce messages a previous replay reset but could not produce")
	dry := fs.Bool("dry-run", false, "list what would move; change nothing")
	force := fs.Bool("force", false, "replay also the messages the router would decide DEAD again now (the dry run's verdict)")
	who := fs.String("who", os.Getenv("USER"), "who asks (recorded in the audit row)")
	return func(ctx context.Context, x *invocation, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		n := 0
		for _, set := range []bool{*class != "", *prefix != "", *ids != "", *pending} {
			if set {
				n++
			}
		}
		if n != 1 {
			return usagef("give exactly one of --class, --reason-prefix, --ids or --pending")
		}
		cfg, out, log := x.cfg, x.stdout, x.log
		sel := replay.Selector{Class: strings.ToUpper(*class), ReasonPrefix: *prefix, PendingReplayed: *pending, Force: *force}
		if *ids != "" {
			for _, s := range strings.Split(*ids, ",") {
				id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
				if err != nil {
					return usagef("--ids: %q is not a MSG_ID", s)
				}
				sel.IDs = append(sel.IDs, id)
			}
		}
		if err := sel.Check(); err != nil {
			return usagef("%v", err)
		}
		if *who == "" {
			*who = "unknown"
		}
		pool, err := sink.OpenPG(ctx, cfg.DB)
		if err != nil {
			return err
		}
		defer pool.Close()
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		now := clock.Real{}.Now()
		tables, _, closeInbox, err := openInbox(cfg)
		if err != nil {
			return err
		}
		defer closeInbox()
		brokers := cfg.Kafka.Brokers
		if cfg.Kafka.Embedded() {
			brokers = []string{cfg.Kafka.EmbeddedAddr}
		}
		deps := replayDeps(cfg, pool, tables, brokers, log)
		if *dry {
			plan, err := replay.DryRun(ctx, pool, sel, 0)
			if err != nil {
				return err
			}
			if err := replay.Explain(ctx, deps, &plan); err != nil {
				return err
			}
			if _, err := replay.AuditDryRun(ctx, pool, plan, *who, now); err != nil {
				return err
			}
			return enc.Encode(plan)
		}
		// A replay re-injects into msgx.inbox: into another cluster's, its
		// messages would be reset here and never decided.
		if _, err := checkBinding(ctx, cfg, brokers, pool); err != nil {
			return err
		}
		res, err := replay.Run(ctx, deps, sel, *who, now)
		_ = enc.Encode(res)
		if err != nil && len(res.Unproduced) > 0 {
			err = errors.Join(err, fmt.Errorf("%d messages were reset but not produced: run `msgx replay --pending` (or the same --ids) again", len(res.Unproduced)))
		}
		if err == nil {
			// Messages that would die again were left as they are: the
			// operator asked for them, so the command says it did not.
			var dead []int64
			for _, f := range res.Refused {
				if f.Verdict == message.StateDead {
					dead = append(dead, f.MsgID)
				}
			}
			if len(dead) > 0 {
				err = fmt.Errorf("%d messages not replayed (%s): the router would decide them DEAD again now (see \"refused\"); "+
					"fix the cause first, or replay them with --force", len(dead), sink.IDList(dead))
			}
		}
		return err
	}
}

// replayDeps are what a replay and its dry run work with: the databases,
// the cluster, and the router's settings to work out each message's effect.
func replayDeps(cfg Config, pool *pgxpool.Pool, tables *aodb.Tables, brokers []string, log *slog.Logger) replay.Deps {
	route := cfg.Router.Settings(cfg.Location())
	return replay.Deps{PG: pool, Inbox: tables, Brokers: brokers, Kafka: cfg.Kafka,
		Topic: cfg.Ingest.Topic, Timeout: cfg.DB.Timeout, Log: log, MaxBytes: cfg.Ingest.ClaimMaxBytes,
		Route: &route}
}
