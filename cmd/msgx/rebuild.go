package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/lovoo/goka"
	"golang.org/x/sync/errgroup"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/processors/flights"
	refdataproc "msgx/processors/refdata"
	"msgx/processors/router"
	"msgx/sink"
)

// rebuildCommand is `msgx rebuild`: it rebuilds every goka table and every
// derived PostgreSQL table by rewinding msgx.inbox, the source of truth
// (docs/design.md#rebuild). Processing is deterministic given the inbox records
// and the configuration, so the result equals the state before (a test proves
// it).
//
// Sequence: refuse while another instance processes (the process lock and
// the goka groups' members) → delete the processors' consumer groups →
// recreate their internal topics empty (transitions, loop, table
// changelogs) → forget goka's local storage → empty the derived PostgreSQL
// tables → run the processors from the first inbox record until every group
// has caught up, printing progress. Processed marks already written to the
// inbox stay (they are monotonic; the sweeper finds them already marked);
// outbound request history and the ingest cursor are kept.
//
// Every message is decided again from scratch: proc_state is emptied, so no
// recorded backoff (next_attempt_at) or attempt count survives, and bad
// values (CODEC_ERROR, PROTOCOL) are DEAD at once as in the first run. The
// rebuild waits only for INFRA failures it meets itself.
func rebuildCommand(fs *flag.FlagSet) runFunc {
	yes := fs.Bool("yes", false, "really rebuild (without it, say what would happen)")
	return func(ctx context.Context, x *invocation, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		return runRebuild(ctx, x.cfg, *yes, x.stdout, x.log)
	}
}

func runRebuild(ctx context.Context, cfg Config, yes bool, out io.Writer, log *slog.Logger) error {
	if !yes {
		fmt.Fprintf(out, "msgx rebuild empties %v and the goka tables, rewinds %s and reprocesses it.\n"+
			"Stop every msgx process/run instance first, then run: msgx rebuild --yes\n", sink.DerivedTables(), cfg.Ingest.Topic)
		return nil
	}
	clk := clock.Real{}
	// The daemon is stopped, so an embedded broker is started on its data.
	brokers, closeBroker, err := operatorBrokers(cfg, log)
	if err != nil {
		return err
	}
	defer closeBroker()
	release, err := lockOutProcessing(ctx, cfg, "rebuilding")
	if err != nil {
		return err
	}
	defer release()
	groups := processorGroups(cfg)
	// A stopped instance stays a (static) member until its session times
	// out: wait that long before deciding another one still runs.
	deadline := clk.Now().Add(2*cfg.Kafka.SessionTimeout + 5*time.Second)
	for {
		lags, err := kafka.Lags(ctx, cfg.Kafka, brokers, groups)
		active := ""
		for _, l := range lags {
			if l.Members > 0 {
				active = l.Group
			}
		}
		if err != nil || active == "" {
			break
		}
		if clk.Now().After(deadline) {
			return fmt.Errorf("consumer group %s has active members: stop every msgx instance before rebuilding", active)
		}
		if err := clock.Sleep(ctx, clk, time.Second); err != nil {
			return err
		}
	}
	pool, err := sink.OpenPG(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := sink.Migrate(cfg.DB); err != nil {
		return err
	}
	// Rebuilding from another cluster's msgx.inbox would replace the state
	// with a foreign history (docs/design.md#kafka-binding).
	if _, err := checkBinding(ctx, cfg, brokers, pool); err != nil {
		return err
	}

	fmt.Fprintln(out, "rebuild: resetting consumer groups, internal topics and derived tables")
	if err := kafka.ResetGroups(brokers, cfg.Kafka, []string{string(cfg.Router.Group()), string(cfg.Flights.Group()), string(cfg.Refdata.Group())}); err != nil {
		return err
	}
	internal := append(cfg.Router.TopicSpecs(), tableTopics(cfg)...)
	if err := kafka.RecreateTopics(ctx, clk, brokers, cfg.Kafka, internal, log); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(cfg.StateDir, "goka")); err != nil {
		return fmt.Errorf("forgetting goka's local tables: %w", err)
	}
	if err := sink.TruncateDerived(ctx, pool); err != nil {
		return err
	}
	total, err := inboxEnd(ctx, brokers, cfg)
	if err != nil {
		return err
	}

	// The processors, as the daemon runs them, without outbound side
	// effects (request tracking keeps its own history).
	opts := func() []goka.ProcessorOption {
		return kafka.GokaOptions(cfg.Kafka, kafka.MemoryStorage(), log)
	}
	rt, err := router.New(cfg.Router, router.Deps{Messages: sink.NewMessages(pool, cfg.DB.Timeout), Clock: clk, Log: log, Loc: cfg.Location()})
	if err != nil {
		return err
	}
	fp, err := flights.New(cfg.Flights, flights.Deps{Pool: pool, Timeout: cfg.DB.Timeout, Clock: clk, Log: log})
	if err != nil {
		return err
	}
	rp, err := refdataproc.New(cfg.Refdata, refdataproc.Deps{Pool: pool, Timeout: cfg.DB.Timeout, Clock: clk, Log: log})
	if err != nil {
		return err
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(pctx)
	pb, err := kafka.ProducerBuilder(cfg.Kafka)
	if err != nil {
		return err
	}
	g.Go(func() error { return rt.Run(gctx, brokers, pb, opts()...) })
	g.Go(func() error { return fp.Run(gctx, brokers, opts()...) })
	g.Go(func() error { return rp.Run(gctx, brokers, opts()...) })

	began := clk.Now()
	caughtUp := 0
	for caughtUp < 2 {
		if err := clock.Sleep(gctx, clk, time.Second); err != nil {
			return fmt.Errorf("rebuild interrupted: %w", errors.Join(err, g.Wait()))
		}
		remaining := int64(-1)
		done := total
		if lags, err := kafka.Lags(ctx, cfg.Kafka, brokers, groups); err == nil {
			remaining = 0
			for _, l := range lags {
				if l.Error != "" {
					remaining = -1
					break
				}
				remaining += l.Lag
				if l.Group == string(cfg.Router.Group()) && l.Topic == cfg.Ingest.Topic {
					done = total - l.Lag
				}
			}
		}
		elapsed := clk.Now().Sub(began)
		rate := float64(done) / max(elapsed.Seconds(), 0.001)
		eta := "?"
		if rate > 0 {
			eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
		}
		fmt.Fprintf(out, "rebuild: %s %d/%d messages (%.0f msg/s, ETA %s)\n", bar(done, total), done, total, rate, eta)
		if remaining == 0 {
			caughtUp++
		} else {
			caughtUp = 0
		}
	}
	stop()
	if err := g.Wait(); err != nil {
		return err
	}
	fmt.Fprintf(out, "rebuild: done, %d messages in %v; start msgx again\n", total, clk.Now().Sub(began).Round(time.Millisecond))
	return nil
}

// inboxEnd is the number of records in the inbox topic: the lag of a group
// that never committed.
func inboxEnd(ctx context.Context, brokers []string, cfg Config) (int64, error) {
	lags, err := kafka.Lags(ctx, cfg.Kafka, brokers, []kafka.Group{{Group: cfg.Kafka.Prefix + "msgx-rebuild-probe", Topics: []string{cfg.Ingest.Topic}}})
	if err != nil {
		return 0, err
	}
	if lags[0].Error != "" {
		return 0, fmt.Errorf("reading the end of %s: %s", cfg.Ingest.Topic, lags[0].Error)
	}
	return lags[0].Lag, nil
}

func bar(done, total int64) string {
	const width = 30
	n := width
	if total > 0 {
		n = int(done * width / total)
	}
	b := make([]byte, width)
	for i := range b {
		b[i] = '.'
		if i < n {
			b[i] = '#'
		}
	}
	return "[" + string(b) + "]"
}

// lockOutProcessing takes, for an operator command that must run alone
// (doing says what it does), the process lock and the partitioned
// processors' lock exclusively: no instance runs any processing component
// until release.
func lockOutProcessing(ctx context.Context, cfg Config, doing string) (release func(), err error) {
	lock, ok, err := sink.TryLock(ctx, cfg.DB, sink.LockProcess)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("another msgx instance is processing (it holds the process lock): stop every instance before %s", doing)
	}
	// Every instance running the partitioned processors holds this one
	// shared.
	plock, ok, err := sink.TryLock(ctx, cfg.DB, sink.LockPartitioned)
	if err != nil {
		lock.Release()
		return nil, err
	}
	if !ok {
		lock.Release()
		return nil, fmt.Errorf("another msgx instance runs the flights or refdata processors (it holds their shared lock): stop every instance before %s", doing)
	}
	return func() { plock.Release(); lock.Release() }, nil
}
