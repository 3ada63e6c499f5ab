package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"msgx/cmd/msgx/metric"
	"msgx/ingest"
	"msgx/inspect/status"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/retry"
	"msgx/internal/web"
	"msgx/processors/flights"
	refdataproc "msgx/processors/refdata"
	"msgx/sink"
)

type role int

const (
	roleAll     role = iota // everything in one process
	roleIngest              // inbox → msgx.inbox, compatibility endpoint
	roleProcess             // the goka processors
)

func (r role) has(other role) bool { return r == roleAll || r == other }

// restartBackoff paces supervised restarts and start-up waits for
// dependencies that are not reachable yet.
var restartBackoff = retry.Backoff{Tiers: []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}}

// runGateway runs the roles of r until ctx ends.
func runGateway(ctx context.Context, cfg Config, log *slog.Logger, r role) error {
	source := "MSGX_KAFKA_INSTANCE_ID"
	if cfg.instanceIDDefault {
		source = "default (host name and a hash of MSGX_STATE_DIR)"
	}
	log.Info("msgx starting", "component", "main", "env", cfg.Env, "embedded_kafka", cfg.Kafka.Embedded(),
		"kafka_instance_id", cfg.Kafka.InstanceID, "kafka_instance_id_from", source)
	if cfg.Backfill.Shadow {
		log.Warn("shadow mode: msgx never writes to MySQL (no processed marks, no compat inserts, no outbound requests)", "component", "main")
	}
	// The HTTP server first: TLS files that do not load stop start-up at
	// once, not after the databases were waited for; and while start-up
	// waits for them, /readyz says so (startGate).
	mux := http.NewServeMux()
	gate := &startGate{}
	gate.register(mux)
	srv, err := web.New(cfg.Web, web.Deps{Addr: cfg.HTTPAddr, Handler: gate.wrap(mux), ShutdownTimeout: cfg.ShutdownTimeout, Clock: clock.Real{}, Log: log})
	if err != nil {
		return err
	}
	srvCtx, stopSrv := context.WithCancel(ctx)
	defer stopSrv()
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Run(srvCtx) }()
	d, err := connect(ctx, cfg, log, r, gate)
	if errors.Is(err, errBinding) {
		return refuseToStart(ctx, log, gate, srvDone, err)
	}
	if err != nil {
		stopSrv()
		<-srvDone
		if ctx.Err() != nil {
			return nil // stopped while starting: a normal stop
		}
		return err
	}
	defer d.close()

	m := metric.New()
	registerOps(mux, cfg, d, m, gate)
	hist, err := statusPage(cfg, d, m, mux)
	if err != nil {
		return err
	}
	src := metric.Sources{Health: d.health, ReportTTL: 5 * time.Second, HTTP: srv.Stats, Thresholds: &cfg.Status,
		Report: func(ctx context.Context) (status.Report, error) { return report(ctx, cfg, d, m.Sources().Publisher) }}
	g, gctx := errgroup.WithContext(ctx)
	supervise := func(name string, run func(context.Context) error) {
		g.Go(func() error { return retry.Supervise(gctx, d.clock, restartBackoff, log, d.health, name, run) })
	}

	if r.has(roleIngest) {
		bridge, err := ingest.New(cfg.Ingest, ingest.Deps{
			Inbox:   d.tables,
			Cursors: sink.NewCursors(d.pool, cfg.DB.Timeout),
			PG:      cfg.DB, Brokers: d.brokers, Kafka: cfg.Kafka, Clock: d.clock, Log: log,
		})
		if err != nil {
			return err
		}
		supervise("ingest", d.grants.gate(bridge.Run))
		src.Ingest = bridge.Stats
		send := &ingest.SendHandler{
			Inbox: d.tables,
			Cfg:   cfg.HTTP, MaxMessageBytes: cfg.Kafka.MaxMessageBytes, Clock: d.clock, Log: log,
		}
		if cfg.Backfill.Shadow {
			send.Disabled = "shadow mode: msgx does not write to the inbox"
		}
		mux.Handle("POST /cminmsgs/send", send)
	}
	// The processing components attach their figures when they start.
	m.SetSources(src)
	if r.has(roleProcess) {
		proc, err := newProcessing(cfg, d, log, m)
		if err != nil {
			return err
		}
		// The single roles (router, publisher, backfill, schd flusher,
		// maintenance, requests, history): one instance at a time; a
		// second one waits as a hot standby and takes over when the first
		// dies (its session, and so the lock, ends with it). msgx rebuild
		// takes the same lock.
		g.Go(func() error {
			return whileLocked(gctx, cfg, d, log, m, lockSpec{key: sink.LockProcess, role: "the single processing roles"}, proc.startSingles)
		})
		// The partitioned processors (flights, refdata): every instance
		// runs them, and their consumer groups share the transition
		// topics' partitions (MSGX_TRANSITION_PARTITIONS). The shared lock
		// keeps msgx rebuild out while any of them runs.
		g.Go(func() error {
			return whileLocked(gctx, cfg, d, log, m, lockSpec{key: sink.LockPartitioned, shared: true, role: "the flights and refdata processors"}, proc.startPartitioned)
		})
	}
	(&refdataproc.Handler{Pool: d.pool, Timeout: cfg.DB.Timeout, Clock: d.clock, Loc: cfg.Location(), Log: log}).Register(mux)
	(&flights.Handler{Pool: d.pool, Timeout: cfg.DB.Timeout, Log: log}).Register(mux)
	registerTrace(mux, cfg, d)
	g.Go(func() error { return hist.Run(gctx) })
	g.Go(func() error {
		// The server started before the components: it stops with them.
		select {
		case err := <-srvDone:
			return err
		case <-gctx.Done():
			stopSrv()
			return <-srvDone
		}
	})
	return awaitShutdown(ctx, cfg, d, g, log)
}

// awaitShutdown waits for the components. Once ctx ends (SIGTERM) they stop
// reading, finish or abandon the message at hand — a message abandoned
// mid-way is not committed and is processed again after restart — and the
// process exits within MSGX_SHUTDOWN_TIMEOUT.
func awaitShutdown(ctx context.Context, cfg Config, d *deps, g *errgroup.Group, log *slog.Logger) error {
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		log.Info("msgx stopped", "component", "main")
		return err
	case <-ctx.Done():
	}
	log.Info("stopping: finishing the messages in hand", "component", "main", "timeout", cfg.ShutdownTimeout.String())
	select {
	case err := <-done:
		log.Info("msgx stopped", "component", "main")
		return err
	case <-d.clock.After(cfg.ShutdownTimeout):
		return fmt.Errorf("shutdown took longer than MSGX_SHUTDOWN_TIMEOUT=%s", cfg.ShutdownTimeout)
	}
}

// gatewayCommand is `msgx run`, `msgx ingest` and `msgx process`: the
// roles of r until SIGINT/SIGTERM.
func gatewayCommand(r role) func(*flag.FlagSet) runFunc {
	return func(*flag.FlagSet) runFunc {
		return func(ctx context.Context, x *invocation, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runGateway(ctx, x.cfg, x.log, r)
		}
	}
}

func brokerCommand(*flag.FlagSet) runFunc {
	return func(ctx context.Context, x *invocation, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		return runBroker(ctx, x.cfg, x.log)
	}
}

// runBroker runs the embedded Kafka alone until ctx ends.
func runBroker(ctx context.Context, cfg Config, log *slog.Logger) error {
	b, err := kafka.StartBroker(cfg.Kafka.EmbeddedAddr, filepath.Join(cfg.StateDir, "kafka"), log)
	if err != nil {
		return err
	}
	log.Info("embedded kafka listening", "component", "kafka", "addr", b.Addrs()[0])
	return b.Run(ctx)
}

// migrateCommand is `msgx migrate [up | down [N] | version]`: apply,
// revert or report the PostgreSQL schema.
func migrateCommand(*flag.FlagSet) runFunc {
	return func(_ context.Context, x *invocation, args []string) error {
		action, steps := "up", 1
		if len(args) > 0 {
			action = args[0]
		}
		switch {
		case action == "down" && len(args) == 2:
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return usagef("%q is not a step count", args[1])
			}
			steps = n
		case len(args) > 1:
			return usagef("unexpected argument %q", args[1])
		}
		switch action {
		case "up":
			if err := sink.Migrate(x.cfg.DB); err != nil {
				return err
			}
		case "down":
			if err := sink.MigrateDown(x.cfg.DB, steps); err != nil {
				return err
			}
		case "version":
		default:
			return usagef("unknown action %q (want up, down [N] or version)", action)
		}
		v, dirty, err := sink.MigrationVersion(x.cfg.DB)
		if err != nil {
			return err
		}
		fmt.Fprintf(x.stdout, "schema version %d dirty=%v\n", v, dirty)
		return nil
	}
}
