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
	"strings"
	"sync"

	"github.com/lovoo/goka"

	"msgx/internal/kafka"
	"msgx/sink"
	"msgx/tables/flight"
	"msgx/tables/refdata"
)

// runReseed serves `msgx reseed [--yes]`: it writes the goka flights and
// refdata tables of a new, empty Kafka cluster from PostgreSQL's read model,
// one step of docs/operations.md "Moving to another Kafka cluster" (the
// other way is copying the topics). Sequence, with msgx stopped:
//
//  1. refuse while an instance processes (the process lock), while a
//     message is unfinished (its inbox record or transitions are on the old
//     cluster: drain first), while a flight's table value is missing from
//     PostgreSQL (rows last written before migration 0020), and when the
//     cluster's table topics already hold records (only a new cluster, or
//     tables lost, is seeded);
//  2. create the topics on the cluster MSGX_KAFKA_BROKERS reaches (not in
//     the dry run, which creates nothing);
//  3. forget goka's local tables (they are the old cluster's, with its
//     offsets);
//  4. write every flight's table value (flight_schd.table_state) and the
//     placeholders its children imply into the flights table topic, and
//     every reference category rebuilt from ref_master into the refdata
//     table topic, keyed and partitioned as the processors do;
//  5. make every flight due on the schd topic again, so that the new
//     cluster's schd topic holds the latest state of every flight.
//
// The router's table (per message) is not seeded: no message of the old
// cluster reaches the new one, and every decision reads PostgreSQL. A crash
// part-way leaves table topics with records: step 1 then refuses, and the
// topics are deleted and the command run again (docs/operations.md).
// The database is not re-bound here: `msgx bind --force` is the operator's
// explicit last step.
func reseedCommand(fs *flag.FlagSet) runFunc {
	yes := fs.Bool("yes", false, "really write the tables (without it, check and say what would happen)")
	return func(ctx context.Context, x *invocation, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		return runReseed(ctx, x.cfg, *yes, x.stdout, x.log)
	}
}

func runReseed(ctx context.Context, cfg Config, yes bool, out io.Writer, log *slog.Logger) error {
	brokers, pool, done, err := openStopped(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer done()
	release, err := lockOutProcessing(ctx, cfg, "re-seeding")
	if err != nil {
		return err
	}
	defer release()
	n, lowest, err := sink.Unfinished(ctx, pool)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d messages are unfinished (lowest #%d): their records are on the old Kafka cluster; "+
			"let msgx finish them there first (msgx status: no unfinished message, no consumer lag), then stop it and re-seed", n, lowest)
	}
	states, legacy, err := sink.TableStates(ctx, pool)
	if err != nil {
		return err
	}
	if len(legacy) > 0 {
		return fmt.Errorf("%d flights (first %s) were last written before migration 0020: PostgreSQL lacks their table state; "+
			"run msgx rebuild on the old cluster first (it writes every flight again), or copy the topics instead", len(legacy), legacy[0])
	}
	cats, err := sink.RefdataStates(ctx, pool)
	if err != nil {
		return err
	}
	placeholders, err := sink.PlaceholderStates(ctx, pool)
	if err != nil {
		return err
	}
	seen, err := kafka.ReadIdentity(ctx, cfg.Kafka, brokers, cfg.Ingest.Topic)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "reseed: Kafka answers with %s\n", seen)
	fmt.Fprintf(out, "reseed: %d flights (+%d placeholders) into %s, %d reference categories into %s\n",
		len(states), len(placeholders), cfg.Flights.Table(), len(cats), cfg.Refdata.Table())
	if !yes {
		// The dry run creates nothing: a cluster without msgx.inbox is
		// taken for a new one, whose tables --yes checks once created.
		if seen.InboxTopicID != "" {
			if err := tablesEmpty(ctx, cfg, brokers); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "reseed: checks passed; stop every msgx instance, then run: msgx reseed --yes")
		return nil
	}
	if err := kafka.EnsureTopics(brokers, cfg.Kafka, topics(cfg), log); err != nil {
		return err
	}
	if err := tablesEmpty(ctx, cfg, brokers); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(cfg.StateDir, "goka")); err != nil {
		return fmt.Errorf("forgetting goka's local tables: %w", err)
	}
	if err := emitAll(cfg, brokers, log, string(cfg.Flights.Table()), kafka.JSON[flight.State]{}, append(states, placeholders...),
		func(s *flight.State) string { return s.FLID }); err != nil {
		return err
	}
	if err := emitAll(cfg, brokers, log, string(cfg.Refdata.Table()), kafka.JSON[refdata.State]{}, cats,
		func(s *refdata.State) string { return s.RType }); err != nil {
		return err
	}
	due, err := sink.ResetSchdSent(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "reseed: done; %d flights due on the schd topic again\n", due)
	fmt.Fprintln(out, "reseed: next: msgx bind --force, then start msgx")
	return nil
}

// tablesEmpty refuses table topics that hold records: reseed writes a new
// cluster's tables, it never merges into existing ones.
func tablesEmpty(ctx context.Context, cfg Config, brokers []string) error {
	probe := []kafka.Group{{Group: "msgx-reseed-probe", Topics: []string{string(cfg.Flights.Table()), string(cfg.Refdata.Table())}}}
	lags, err := kafka.Lags(ctx, cfg.Kafka, brokers, probe)
	if err != nil {
		return err
	}
	var full []string
	for _, l := range lags {
		if l.Error != "" {
			return fmt.Errorf("reading the end of %s: %s", l.Topic, l.Error)
		}
		if l.Lag > 0 {
			full = append(full, fmt.Sprintf("%s (%d records)", l.Topic, l.Lag))
		}
	}
	if len(full) > 0 {
		return fmt.Errorf("the table topics are not empty: %s; reseed only writes a new cluster's (or lost) tables — "+
			"if an earlier reseed stopped part-way, delete these topics and run it again", strings.Join(full, ", "))
	}
	return nil
}

// emitAll writes every value under its key into a goka table topic and
// waits until Kafka acknowledged each.
func emitAll[T any](cfg Config, brokers []string, log *slog.Logger, topic string, codec goka.Codec, values []*T, key func(*T) string) error {
	em, err := goka.NewEmitter(brokers, goka.Stream(topic), codec, kafka.GokaEmitterOptions(cfg.Kafka, log)...)
	if err != nil {
		return fmt.Errorf("writing %s: %w", topic, err)
	}
	// Asynchronous, acknowledged at Finish: one round trip per record
	// would take minutes for a season's flights.
	var mu sync.Mutex
	var errs []error
	failed := func(k string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 3 {
			errs = append(errs, fmt.Errorf("writing %s into %s: %w", k, topic, err))
		}
	}
	for _, v := range values {
		k := key(v)
		p, err := em.Emit(k, v)
		if err != nil {
			failed(k, err)
			break
		}
		p.Then(func(err error) {
			if err != nil {
				failed(k, err)
			}
		})
	}
	if err := em.Finish(); err != nil {
		failed("the last records", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(errs...)
}
