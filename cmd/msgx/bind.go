package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"msgx/cmd/msgx/metric"
	"msgx/internal/clock"
	"msgx/internal/health"
	"msgx/internal/kafka"
	"msgx/sink"
)

// errBinding marks a start refused because Kafka is not the cluster the
// database is bound to.
var errBinding = errors.New("kafka binding mismatch")

// bindingError is the one line a refused start prints: both identities, and
// what to do.
func bindingError(b sink.Binding, seen kafka.Identity, why string) error {
	return fmt.Errorf("%w: refusing to start: %s: PostgreSQL is bound to %s (%s at %s) but Kafka answers with %s; "+
		"point MSGX_KAFKA_BROKERS (or MSGX_STATE_DIR for the embedded Kafka) at the bound cluster, or, to move on purpose, "+
		"follow docs/operations.md \"Moving to another Kafka cluster\" and run `msgx bind --force`",
		errBinding, why, b.Identity, b.BoundBy, b.BoundAt.UTC().Format(time.RFC3339), seen)
}

// refusedReason is what /readyz of a refusing process says: it is open to
// orchestrators, so it names the refusal but prints neither identity (the
// log and msgx status do).
const refusedReason = "kafka binding mismatch: this process refuses to start (the log and msgx status say why)"

// refuseToStart is a daemon whose start was refused by the binding check.
// Rather than exit — under a service manager that restarts it, a loop that
// only the log explains — it stays up and says so where monitoring looks:
// GET /healthz 200, GET /readyz 503 with refusedReason, GET /metrics with
// msgx_kafka_binding_refused 1 (behind MSGX_HTTP_READ_TOKEN as usual). It
// holds no lock, no database connection and no Kafka client, and processes
// nothing. When ctx ends (SIGTERM) it returns the refusal: the process
// exits 1. Fixing the cause takes a restart (docs/operations.md#msgxkafkabindingrefused).
func refuseToStart(ctx context.Context, log *slog.Logger, gate *startGate, srvDone <-chan error, refusal error) error {
	log.Error("refusing to start; serving only /healthz, /readyz and /metrics until stopped", "component", "main", "err", refusal)
	gate.open(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(health.Result{Checks: map[string]string{}, Reasons: []string{refusedReason}})
	}), promhttp.HandlerFor(metric.Refused(), promhttp.HandlerOpts{}))
	if err := <-srvDone; err != nil && !errors.Is(err, context.Canceled) {
		return errors.Join(refusal, err)
	}
	return refusal
}

// checkBinding runs before the topics are created: with a binding, Kafka
// must be the bound cluster with the bound msgx.inbox (nothing is created
// on a foreign cluster). It reports whether the database is bound.
func checkBinding(ctx context.Context, cfg Config, brokers []string, pool *pgxpool.Pool) (bound bool, err error) {
	// The binding first, the cluster second: two instances starting at once
	// on a fresh database race, and the first records its binding only
	// after it created msgx.inbox. Read the other way round, the second
	// could see the cluster before the topic existed and the binding just
	// after it was recorded, and refuse a cluster that matches.
	b, ok, err := sink.LoadBinding(ctx, pool)
	if err != nil || !ok {
		return false, err
	}
	seen, err := kafka.ReadIdentity(ctx, cfg.Kafka, brokers, cfg.Ingest.Topic)
	if err != nil {
		return false, err
	}
	if why := b.Mismatch(seen); why != "" {
		return true, bindingError(b, seen, why)
	}
	return true, nil
}

// bindFirst records the binding at the first start (the topics exist now)
// and checks it against a concurrent first start that won the race.
func bindFirst(ctx context.Context, cfg Config, brokers []string, pool *pgxpool.Pool, clk clock.Clock, log *slog.Logger) error {
	seen, err := kafka.ReadIdentity(ctx, cfg.Kafka, brokers, cfg.Ingest.Topic)
	if err != nil {
		return err
	}
	b, err := sink.BindFirst(ctx, pool, seen, clk.Now())
	if err != nil {
		return err
	}
	if why := b.Mismatch(seen); why != "" {
		return bindingError(b, seen, why)
	}
	log.Info("database bound to its Kafka cluster", "component", "main", "cluster_id", seen.ClusterID,
		"inbox_topic_id", seen.InboxTopicID, "bound_by", b.BoundBy)
	return nil
}

// verifyBinding checks the binding again, right before an instance starts
// its processors: an operator may have re-bound the database to another
// cluster while this one waited as a standby.
func verifyBinding(ctx context.Context, cfg Config, d *deps) error {
	seen, err := kafka.ReadIdentity(ctx, cfg.Kafka, d.brokers, cfg.Ingest.Topic)
	if err != nil {
		return err
	}
	b, ok, err := sink.LoadBinding(ctx, d.pool)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: the database is not bound to a Kafka cluster any more (kafka_binding is empty); restart msgx", errBinding)
	}
	if why := b.Mismatch(seen); why != "" {
		return bindingError(b, seen, why)
	}
	return nil
}

// runBind serves `msgx bind [--force]`: it shows the binding and the
// identity Kafka answers with; --force binds the database to that cluster
// (the last step of docs/operations.md "Moving to another Kafka cluster").
// It refuses while an instance processes: that instance runs on the old
// binding.
func bindCommand(fs *flag.FlagSet) runFunc {
	force := fs.Bool("force", false, "bind the database to the cluster MSGX_KAFKA_BROKERS (or the embedded Kafka) reaches")
	return func(ctx context.Context, x *invocation, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		return runBind(ctx, x.cfg, *force, x.stdout, x.log)
	}
}

func runBind(ctx context.Context, cfg Config, force bool, out io.Writer, log *slog.Logger) error {
	brokers, pool, done, err := openStopped(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer done()
	seen, err := kafka.ReadIdentity(ctx, cfg.Kafka, brokers, cfg.Ingest.Topic)
	if err != nil {
		return err
	}
	b, ok, err := sink.LoadBinding(ctx, pool)
	if err != nil {
		return err
	}
	if ok {
		fmt.Fprintf(out, "bound to:     %s (%s at %s)\n", b.Identity, b.BoundBy, b.BoundAt.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintln(out, "bound to:     nothing yet (the first start binds)")
	}
	fmt.Fprintf(out, "Kafka answers: %s\n", seen)
	switch {
	case ok && b.Mismatch(seen) == "":
		fmt.Fprintln(out, "the binding matches")
		return nil
	case !force:
		if ok {
			fmt.Fprintf(out, "mismatch: %s; msgx refuses to start. To bind to the cluster above: msgx bind --force\n", b.Mismatch(seen))
		}
		return nil
	}
	lock, free, err := sink.TryLock(ctx, cfg.DB, sink.LockProcess)
	if err != nil {
		return err
	}
	if !free {
		return errors.New("another msgx instance is processing (it holds the process lock): stop every instance before re-binding")
	}
	defer lock.Release()
	if seen.InboxTopicID == "" {
		// A new, empty cluster: create the topics, so that the binding
		// names the msgx.inbox the next start will use.
		if err := kafka.EnsureTopics(brokers, cfg.Kafka, topics(cfg), log); err != nil {
			return err
		}
		if seen, err = kafka.ReadIdentity(ctx, cfg.Kafka, brokers, cfg.Ingest.Topic); err != nil {
			return err
		}
	}
	if err := sink.Rebind(ctx, pool, seen, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(out, "bound to %s\n", seen)
	return nil
}

// operatorBrokers are the brokers of an operator command run while msgx is
// stopped: MSGX_KAFKA_BROKERS, or the embedded Kafka started on its data
// directory (which fails while msgx runs and holds its port).
func operatorBrokers(cfg Config, log *slog.Logger) ([]string, func(), error) {
	if !cfg.Kafka.Embedded() {
		return cfg.Kafka.Brokers, func() {}, nil
	}
	b, err := kafka.StartBroker(cfg.Kafka.EmbeddedAddr, filepath.Join(cfg.StateDir, "kafka"), log)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the embedded Kafka (is msgx still running?): %w", err)
	}
	return b.Addrs(), b.Close, nil
}

// openStopped opens what an operator command that runs while msgx is
// stopped works on: the brokers (operatorBrokers) and PostgreSQL, migrated.
// done closes both.
func openStopped(ctx context.Context, cfg Config, log *slog.Logger) ([]string, *pgxpool.Pool, func(), error) {
	brokers, closeBroker, err := operatorBrokers(cfg, log)
	if err != nil {
		return nil, nil, nil, err
	}
	pool, err := sink.OpenPG(ctx, cfg.DB)
	if err != nil {
		closeBroker()
		return nil, nil, nil, err
	}
	done := func() { pool.Close(); closeBroker() }
	if err := sink.Migrate(cfg.DB); err != nil {
		done()
		return nil, nil, nil, err
	}
	return brokers, pool, done, nil
}
