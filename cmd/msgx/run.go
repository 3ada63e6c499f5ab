package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lovoo/goka"
	"github.com/syndtr/goleveldb/leveldb/filter"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"golang.org/x/sync/errgroup"

	"msgx/cmd/msgx/metric"
	"msgx/emitters/backfill"
	"msgx/emitters/event"
	"msgx/emitters/outbound"
	"msgx/emitters/schd"
	"msgx/ingest"
	"msgx/inspect/status"
	"msgx/internal/clock"
	"msgx/internal/health"
	"msgx/internal/kafka"
	"msgx/internal/retry"
	"msgx/internal/web"
	"msgx/maintenance"
	"msgx/processors/flights"
	refdataproc "msgx/processors/refdata"
	"msgx/processors/router"
	"msgx/sink"
	"msgx/sink/aodb"
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

// deps are the connections every role shares.
type deps struct {
	health  *health.Registry
	cfg     Config
	log     *slog.Logger
	clock   clock.Clock
	brokers []string
	pool    *pgxpool.Pool
	mysql   *sql.DB
	zone    *sink.InboxZone
	// tables are the AODB's shared tables, on mysql and the hole probe's
	// own pool.
	tables  *aodb.Tables
	grants  *mysqlGrants
	closers []func()
}

func (d *deps) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// connect opens the databases, starts the embedded broker when no cluster is
// configured (roleAll only), applies migrations and creates the topics. A
// dependency that is down at start-up is waited for, not fatal.
func connect(ctx context.Context, cfg Config, log *slog.Logger, r role, gate *startGate) (*deps, error) {
	d := &deps{cfg: cfg, log: log, clock: clock.Real{}}
	d.health = health.NewRegistry(d.clock.Now)
	ok := false
	defer func() {
		if !ok {
			d.close()
		}
	}()
	d.brokers = cfg.Kafka.Brokers
	if cfg.Kafka.Embedded() {
		if r != roleAll {
			return nil, errors.New("MSGX_KAFKA_BROKERS is empty: only `msgx run` starts the embedded Kafka; run `msgx broker` and point MSGX_KAFKA_BROKERS at it")
		}
		b, err := kafka.StartBroker(cfg.Kafka.EmbeddedAddr, filepath.Join(cfg.StateDir, "kafka"), log)
		if err != nil {
			return nil, err
		}
		d.closers = append(d.closers, b.Close)
		d.brokers = b.Addrs()
		log.Info("embedded kafka listening", "component", "kafka", "addr", d.brokers[0], "data_dir", filepath.Join(cfg.StateDir, "kafka"))
		if cfg.atLeastOnce {
			log.Info("msg events are published at least once: the embedded Kafka runs inside this process and keeps no transaction log "+
				"(MSGX_EXACTLY_ONCE=true asks for transactions anyway; run `msgx broker` as its own process or use a cluster for exactly once, docs/operations.md#one-process)",
				"component", "kafka")
		}
		if cfg.Publisher.ExactlyOnce {
			// kfake keeps no transaction log: restarted after a crash it
			// aborts the transactions that were open without writing their
			// markers, which read_committed consumers rely on.
			log.Warn("exactly-once msg events need a Kafka that outlives msgx: the embedded Kafka runs inside this process, and after a crash (kill -9) read_committed consumers may miss or repeat the events of transactions that were open; run `msgx broker` as its own process or use a cluster (docs/operations.md#one-process)",
				"component", "kafka")
		}
	}
	pool, err := sink.OpenPG(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, pool.Close)
	d.pool = pool
	// The inbox's DATETIMEs are in the MySQL server's zone, not the
	// airport's (docs/design.md#inbox-zone): learnt on the first
	// connection, logged once, shared by both connection pools.
	if d.zone, err = sink.NewInboxZone(cfg.DB, log); err != nil {
		return nil, err
	}
	my, err := sink.OpenMySQL(cfg.DB, d.zone, nil)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() { my.Close() })
	d.mysql = my
	probe, err := sink.OpenMySQL(cfg.DB, d.zone, map[string]string{
		"innodb_lock_wait_timeout": strconv.Itoa(int(cfg.Ingest.HoleProbeTimeout / time.Second)),
	})
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() { probe.Close() })
	if d.tables, err = aodb.New(cfg.Tables, aodb.Deps{DB: my, Probe: probe, Timeout: cfg.DB.Timeout}); err != nil {
		return nil, err
	}
	d.grants = &mysqlGrants{db: my, needs: mysqlAccess(cfg, r), timeout: cfg.DB.Timeout, clock: d.clock}
	if mc, err := mysql.ParseDSN(cfg.DB.MySQLDSN); err == nil {
		d.grants.database = mc.DBName
	}
	// A missing MySQL grant refuses the start before anything is created;
	// the grants and the zone are learnt now when MySQL answers (so that
	// the zone is in the start-up log), otherwise on the first connection
	// that succeeds: MySQL down at start pauses what needs it, not msgx.
	zctx, cancel := context.WithTimeout(ctx, cfg.DB.Timeout)
	if err := d.grants.check(zctx); err != nil && !retry.IsOutage(err) {
		cancel()
		return nil, err
	}
	if _, err := d.zone.Location(zctx); err != nil {
		log.Warn("MySQL not reachable at start: the inbox's time zone is asked, and msgx's grants checked, on the first connection", "component", "mysql", "err", err)
	}
	cancel()

	waitFor := func(what string, fn func(context.Context) error) error {
		return retry.UntilAvailable(ctx, d.clock, restartBackoff, func(err error, wait time.Duration) {
			log.Warn(what+": dependency unavailable, waiting", "component", "main", "err", err, "retry_in", wait.String())
			gate.wait(what, err)
		}, func(ctx context.Context) error {
			err := fn(ctx)
			// pgx counts a refused log-in among its connection errors,
			// which are outages: at start it is a provisioning mistake
			// that waiting does not mend.
			if denied := sink.PGDenied(err, cfg.DB.PGDSN); denied != nil {
				return denied
			}
			return err
		})
	}
	// An unreachable database or broker is waited for; anything else (a
	// dirty migration, a topic with the wrong partition count) stops
	// start-up with its reason.
	if err := waitFor("checking the upgrade", func(ctx context.Context) error { return upgradeCheck(ctx, cfg, d.brokers) }); err != nil {
		return nil, err
	}
	if err := waitFor("migrating postgres", func(context.Context) error { return sink.Migrate(cfg.DB) }); err != nil {
		return nil, err
	}
	// The database is bound to one Kafka cluster (docs/design.md#kafka-binding):
	// checked before anything is created on the cluster, recorded at the
	// first start once msgx.inbox exists.
	var bound bool
	if err := waitFor("checking the kafka binding", func(ctx context.Context) (err error) {
		bound, err = checkBinding(ctx, cfg, d.brokers, d.pool)
		return err
	}); err != nil {
		return nil, err
	}
	if err := waitFor("creating kafka topics", func(context.Context) error {
		return kafka.EnsureTopics(d.brokers, cfg.Kafka, topics(cfg), log)
	}); err != nil {
		return nil, err
	}
	// A missing ACL refuses the start with one line per permission, before
	// a component meets it somewhere inside goka (where it may only be
	// logged and retried for ever).
	if err := waitFor("checking msgx's kafka ACLs", func(ctx context.Context) error {
		return kafka.CheckAccess(ctx, cfg.Kafka, d.brokers, kafkaAccess(cfg, r))
	}); err != nil {
		return nil, err
	}
	if !bound {
		if err := waitFor("binding to kafka", func(ctx context.Context) error {
			return bindFirst(ctx, cfg, d.brokers, d.pool, d.clock, log)
		}); err != nil {
			return nil, err
		}
	}
	ok = true
	return d, nil
}

// upgradeCheck refuses to upgrade a database of a version before the router
// derived the codeshare transitions while its pipeline is not drained
// (sink.UpgradeCheck): unfinished messages, or derived transitions still on
// that version's loop topic, which nothing reads any more.
func upgradeCheck(ctx context.Context, cfg Config, brokers []string) error {
	if err := sink.UpgradeCheck(ctx, cfg.DB); err != nil {
		return err
	}
	v, _, err := sink.MigrationVersion(cfg.DB)
	if err != nil || v == 0 || v >= sink.LinksVersion {
		return err
	}
	lags, err := kafka.Lags(ctx, cfg.Kafka, brokers, []kafka.Group{{Group: string(cfg.Flights.Group()), Topics: []string{cfg.Flights.LoopTopic()}}})
	if err != nil {
		return err
	}
	for _, l := range lags {
		if l.Error == "" && l.Lag > 0 {
			return fmt.Errorf("upgrading the database from schema %d needs a drained pipeline, and %s holds %d records %s has not applied: "+
				"run the earlier msgx version until msgx status shows no lag there, then start this one", v, l.Topic, l.Lag, l.Group)
		}
	}
	return nil
}

// topics lists every topic msgx needs, created at start-up.
func topics(cfg Config) []kafka.TopicSpec {
	specs := append([]kafka.TopicSpec{cfg.Ingest.TopicSpec()}, cfg.Router.TopicSpecs()...)
	specs = append(specs, cfg.Flights.TopicSpecs(cfg.Router.Partitions)...)
	specs = append(specs, cfg.Schd.TopicSpec(cfg.Router.Partitions))
	if cfg.Publisher.ExactlyOnce {
		specs = append(specs, cfg.Publisher.TopicSpec())
	}
	return append(specs, tableTopics(cfg)...)
}

// kafkaAccess is what the roles of r need of msgx's topics and groups on
// the cluster (docs/operations.md#kafka-acls lists it as ACLs). Describe is not
// listed: Read and Write imply it.
func kafkaAccess(cfg Config, r role) []kafka.Access {
	topic := func(name, who string, ops ...kafka.ACLOp) kafka.Access {
		return kafka.Access{Resource: "Topic", Name: name, Ops: ops, For: who}
	}
	var out []kafka.Access
	if r.has(roleIngest) {
		out = append(out, topic(cfg.Ingest.Topic, "the ingest bridge writes it", kafka.OpWrite))
	}
	if !r.has(roleProcess) {
		return out
	}
	rw := []kafka.ACLOp{kafka.OpRead, kafka.OpWrite}
	out = append(out,
		topic(cfg.Ingest.Topic, "the router reads it", kafka.OpRead),
		topic(cfg.Router.FlightTopic, "the router writes it, the flights processor reads it", rw...),
		topic(cfg.Router.RefdataTopic, "the router writes it, the refdata processor reads it", rw...),
		topic(cfg.Flights.MsgTopic, "the event publisher writes it", kafka.OpWrite),
		topic(cfg.Schd.Topic, "the schd flusher writes it", kafka.OpWrite))
	if cfg.Publisher.ExactlyOnce {
		out = append(out, topic(cfg.Publisher.PositionTopic, "the event publisher writes and reads its position", rw...))
	}
	for _, t := range tableTopics(cfg) {
		// goka reads a table's configuration before it uses the topic.
		out = append(out, topic(t.Name, "a goka table", kafka.OpRead, kafka.OpWrite, kafka.OpDescribeConfigs))
	}
	for _, g := range processorGroups(cfg) {
		out = append(out, kafka.Access{Resource: "Group", Name: g.Group, Ops: []kafka.ACLOp{kafka.OpRead}, For: "its processor's consumer group"})
	}
	return out
}

// mysqlAccess is what the roles of r need of the shared MySQL tables
// (docs/operations.md, Provisioning, lists it as grants). In shadow mode
// msgx writes nothing there.
func mysqlAccess(cfg Config, r role) []sink.MySQLAccess {
	in, out := cfg.Tables.InboxTable, cfg.Tables.OutboxTable
	needs := []sink.MySQLAccess{{Privilege: "SELECT", Table: in,
		Columns: []string{"CMINMSGS_ID", "CMINMSGS_CLOB_MSG", "CMINMSGS_DATE_RECEIVED", "CMINMSGS_DATE_PROCESSED", "CMINMSGS_STATUS"},
		For:     "ingest, its hole probe, replay, the backfill sweeper, the status report and msgx trace read it"}}
	if cfg.Backfill.Shadow {
		return needs
	}
	if r.has(roleIngest) {
		needs = append(needs, sink.MySQLAccess{Privilege: "INSERT", Table: in,
			Columns: []string{"CMINMSGS_CLOB_MSG", "CMINMSGS_DATE_RECEIVED", "CMINMSGS_STATUS"},
			For:     "POST /cminmsgs/send inserts the AODB's messages"})
	}
	if r.has(roleProcess) {
		needs = append(needs,
			sink.MySQLAccess{Privilege: "UPDATE", Table: in, Columns: []string{"CMINMSGS_DATE_PROCESSED"},
				For: "the backfill sweeper writes the processed mark"},
			sink.MySQLAccess{Privilege: "SELECT", Table: out, Columns: []string{"COUTMSGS_ID", "COUTMSGS_CLOB_MSG", "COUTMSGS_DATE_INSERTED"},
				For: "request tracking finds its requests after a crash"},
			sink.MySQLAccess{Privilege: "INSERT", Table: out, Columns: []string{"COUTMSGS_CLOB_MSG", "COUTMSGS_DATE_INSERTED", "ROUTINGID"},
				For: "request tracking writes the requests to the AODB"})
	}
	return needs
}

// mysqlGrants checks msgx's MySQL grants (mysqlAccess) once MySQL
// answers: at start-up when it does, otherwise before the first component
// that uses MySQL runs.
type mysqlGrants struct {
	db       *sql.DB
	database string // MSGX_MYSQL_DSN's, for the refusal
	needs    []sink.MySQLAccess
	timeout  time.Duration
	clock    clock.Clock
	ok       atomic.Bool
}

func (g *mysqlGrants) check(ctx context.Context) error {
	if g.ok.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if err := sink.CheckMySQLGrants(ctx, g.db, g.database, g.needs); err != nil {
		return err
	}
	g.ok.Store(true)
	return nil
}

// gate runs run once the grants are known to be there: it waits while
// MySQL is unreachable, and a missing grant stops the component for good
// (retry.Permanent), which stops msgx with the refusal.
func (g *mysqlGrants) gate(run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := retry.UntilAvailable(ctx, g.clock, restartBackoff, nil, g.check); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return retry.Permanent(err)
		}
		return run(ctx)
	}
}

// tableTopics are the goka group tables (compacted changelogs), created here
// rather than by goka so that they allow table-sized records: the router's
// has the single partition of msgx.inbox, the others the transition topics'.
func tableTopics(cfg Config) []kafka.TopicSpec {
	return []kafka.TopicSpec{
		cfg.Router.TableSpec(),
		{Name: string(cfg.Flights.Table()), Partitions: cfg.Router.Partitions, Compact: true, MaxMessageBytes: kafka.TableRecordBytes},
		{Name: string(cfg.Refdata.Table()), Partitions: cfg.Router.Partitions, Compact: true, MaxMessageBytes: kafka.TableRecordBytes},
	}
}

// gokaOptions are the processors' Kafka clients and table storage
// (MSGX_TABLE_STORAGE: in memory, or on disk under $MSGX_STATE_DIR/goka;
// what is not there is recovered from the changelog).
func gokaOptions(cfg Config, log *slog.Logger) []goka.ProcessorOption {
	return kafka.GokaOptions(cfg.Kafka, cfg.Kafka.Tables(cfg.StateDir, tableStorage()), log)
}

// tableStorage is LevelDB's configuration for one partition of a goka table
// kept on disk (MSGX_TABLE_STORAGE=disk).
// With goka's defaults (snappy, 2 MiB tables, no filter) a flights table of
// 100,000 flights cost a quarter of msgx's CPU during a million-message
// backlog: compactions (16 %, a third of it compressing) and block reads
// (8 %, decompressing). The values are JSON documents rewritten at every
// change; the disk holds them uncompressed (about twice the space), larger
// tables are merged less often, and a bloom filter answers the lookups of
// new flights without a block read. The write buffer and the block cache
// keep LevelDB's defaults (4 and 8 MiB): twice each raised the million's
// rate by another 3 % and the peak RSS of a 50,000-message backlog by
// 50 MB, to 239 MB of the 256 MB budget (docs/benchmarks.md).
func tableStorage() *opt.Options {
	return &opt.Options{
		CompactionTableSize: 4 * opt.MiB,
		CompactionTotalSize: 40 * opt.MiB,
		Compression:         opt.NoCompression,
		Filter:              filter.NewBloomFilter(10),
	}
}

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

// newRequests builds outbound request tracking on the shared connections.
func newRequests(cfg Config, d *deps) (*outbound.Requests, error) {
	return outbound.New(cfg.Requests, outbound.Deps{PG: d.pool, Outbox: d.tables, Clock: d.clock, Log: d.log,
		Location: cfg.Location(), DBTimeout: cfg.DB.Timeout})
}

// errLockLost stops the processors of an instance whose lock session
// ended.
var errLockLost = errors.New("lock lost")

// lockSpec names the advisory lock a group of processing components runs
// under.
type lockSpec struct {
	key    sink.LockKey
	shared bool
	role   string // for logs: what the lock lets this instance run
}

// startFunc starts a group of components under a held lock: supervise runs
// one, alive checks that the lock's session still exists.
type startFunc func(supervise func(string, func(context.Context) error), m *metric.Metrics, alive func(context.Context) error) error

// whileLocked runs start's components each time this instance holds the
// lock, until ctx ends. An instance whose lock session is lost (PostgreSQL
// restarted) stops those components and waits for the lock again.
func whileLocked(ctx context.Context, cfg Config, d *deps, log *slog.Logger, m *metric.Metrics, l lockSpec, start startFunc) error {
	for {
		err := runLocked(ctx, cfg, d, log, m, l, start)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, errLockLost) {
			return err
		}
		log.Warn(l.key.String()+" lost: "+l.role+" stopped, waiting for it again", "component", "main", "err", err)
	}
}

// runLocked waits for the lock, then runs start's components (each
// supervised) until ctx ends or the lock's session is lost.
func runLocked(ctx context.Context, cfg Config, d *deps, log *slog.Logger, m *metric.Metrics, l lockSpec, start startFunc) error {
	// The lock is retried every MSGX_LOCK_RETRY, through outages too: the
	// components start at most that long after PostgreSQL is back.
	outage := &retry.OutageLog{Log: log.With("component", "main"), Clock: d.clock}
	acquire := sink.AcquireLock
	if l.shared {
		acquire = sink.AcquireSharedLock
	}
	lock, err := acquire(ctx, cfg.DB, d.clock, l.key, cfg.DB.LockRetry, func() {
		log.Info("standby: waiting for "+l.key.String()+" to run "+l.role, "component", "main")
	}, func(err error) {
		outage.Failed(l.key.String()+": PostgreSQL unavailable, waiting", err, "retry_every", cfg.DB.LockRetry.String())
	})
	if err != nil {
		return err
	}
	defer lock.Release()
	outage.Recovered(l.key.String() + ": PostgreSQL reachable again")
	log.Info(l.key.String()+" acquired: this instance runs "+l.role, "component", "main")
	// Checked again under the lock: the database may have been re-bound to
	// another cluster while this instance waited as a standby.
	if err := retry.UntilAvailable(ctx, d.clock, restartBackoff, func(err error, wait time.Duration) {
		outage.Failed("checking the kafka binding: dependency unavailable, waiting", err, "retry_in", wait.String())
	}, func(ctx context.Context) error { return verifyBinding(ctx, cfg, d) }); err != nil {
		return err
	}
	pg, pctx := errgroup.WithContext(ctx)
	supervise := func(name string, run func(context.Context) error) {
		pg.Go(func() error { return retry.Supervise(pctx, d.clock, restartBackoff, log, d.health, name, run) })
	}
	if err := start(supervise, m, lock.Alive); err != nil {
		return err
	}
	pg.Go(func() error {
		for {
			if err := clock.Sleep(pctx, d.clock, 5*time.Second); err != nil {
				return nil
			}
			if err := lock.Alive(pctx); err != nil && pctx.Err() == nil {
				return fmt.Errorf("%w: %w", errLockLost, err)
			}
		}
	})
	return pg.Wait()
}

// processing holds the processing role's collaborators shared by its two
// halves: the flights processor wakes the publisher, and both partitioned
// processors complete requests inside their transactions, while the
// publisher and request tracking themselves run only under the process lock.
type processing struct {
	cfg  Config
	d    *deps
	log  *slog.Logger
	reqs *outbound.Requests
	pub  *event.Publisher
	bf   *backfill.Sweeper
	// alive checks the session of the process lock, set each time this
	// instance takes it (func(context.Context) error).
	alive atomic.Value
}

func newProcessing(cfg Config, d *deps, log *slog.Logger, m *metric.Metrics) (*processing, error) {
	reqs, err := newRequests(cfg, d)
	if err != nil {
		return nil, err
	}
	p := &processing{cfg: cfg, d: d, log: log, reqs: reqs}
	// The publisher initialises its transactional ID — fencing whoever
	// holds it — only while this instance holds the process lock: one that
	// lost its session without noticing yet must not fence the standby
	// that took over (docs/design.md#outbox).
	p.pub, err = event.New(cfg.Publisher, event.Deps{Pool: d.pool, DBTimeout: cfg.DB.Timeout, Brokers: d.brokers, Kafka: cfg.Kafka,
		Clock: d.clock, Log: log, Observe: m.ObserveEndToEnd, Active: p.holdsProcessLock})
	if err != nil {
		return nil, err
	}
	p.bf, err = backfill.New(cfg.Backfill, backfill.Deps{PG: d.pool, Inbox: d.tables,
		Zone: d.zone, Timeout: cfg.DB.Timeout, Clock: d.clock, Log: log})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// holdsProcessLock is nil while this instance holds the process lock and
// its session is alive.
func (p *processing) holdsProcessLock(ctx context.Context) error {
	alive, _ := p.alive.Load().(func(context.Context) error)
	if alive == nil {
		return errors.New("this instance has not taken the process lock")
	}
	return alive(ctx)
}

// committed runs after a group commit of the flights or refdata processor:
// the events it queued are published and the marks of the messages it
// completed written without waiting for the next poll (when the publisher
// and the sweeper run in another instance, they find them at their next
// poll).
func (p *processing) committed() {
	p.pub.Notify()
	p.bf.Notify()
}

// startPartitioned starts the flights and refdata processors under
// supervision.
func (p *processing) startPartitioned(supervise func(string, func(context.Context) error), m *metric.Metrics, _ func(context.Context) error) error {
	cfg, d, log := p.cfg, p.d, p.log
	fp, err := flights.New(cfg.Flights, flights.Deps{Pool: d.pool, Timeout: cfg.DB.Timeout, Clock: d.clock, Log: log,
		Notify: p.committed, OnMessageDone: p.reqs.CompleteFlightResponse})
	if err != nil {
		return err
	}
	rp, err := refdataproc.New(cfg.Refdata, refdataproc.Deps{Pool: d.pool, Timeout: cfg.DB.Timeout, Clock: d.clock, Log: log,
		Notify: p.committed, OnApplied: p.reqs.CompleteRefdataResponse})
	if err != nil {
		return err
	}
	supervise("flights", func(ctx context.Context) error { return fp.Run(ctx, d.brokers, gokaOptions(cfg, log)...) })
	d.health.WatchPause("flights", func() (bool, string) { return fp.Stats().Paused, "PostgreSQL unavailable" })
	d.health.WatchHalt("flights", func() string { return fp.Stats().Halted })
	supervise("refdata", func(ctx context.Context) error { return rp.Run(ctx, d.brokers, gokaOptions(cfg, log)...) })
	d.health.WatchPause("refdata", func() (bool, string) { return rp.Stats().Paused, "PostgreSQL unavailable" })
	d.health.WatchHalt("refdata", func() string { return rp.Stats().Halted })
	m.UpdateSources(func(s *metric.Sources) { s.Flights, s.Refdata = fp.Stats, rp.Stats })
	return nil
}

// startSingles starts the components of which one instance runs at a
// time, under supervision: request tracking, the router, the event
// publisher, the backfill sweeper, the schd flusher, the maintenance jobs
// and the flight history sweep.
func (p *processing) startSingles(supervise func(string, func(context.Context) error), m *metric.Metrics, alive func(context.Context) error) error {
	cfg, d, log := p.cfg, p.d, p.log
	p.alive.Store(alive)
	supervise("requests", d.grants.gate(p.reqs.Run))
	msgs := sink.NewMessages(d.pool, cfg.DB.Timeout)
	rt, err := router.New(cfg.Router, router.Deps{Messages: msgs, Clock: d.clock, Log: log, Loc: cfg.Location(),
		Requests: p.reqs, ObserveDecision: m.ObserveDecision})
	if err != nil {
		return err
	}
	d.health.WatchPause("router", func() (bool, string) { s := rt.Stats(); return s.Paused, s.PausedFor })
	pb, err := kafka.ProducerBuilder(cfg.Kafka)
	if err != nil {
		return err
	}
	supervise("router", func(ctx context.Context) error { return rt.Run(ctx, d.brokers, pb, gokaOptions(cfg, log)...) })
	pub := p.pub
	supervise("publisher", pub.Run)
	d.health.WatchPause("publisher", func() (bool, string) {
		st := pub.Stats()
		return st.LastError != "", st.LastError
	})
	// Fenced: stopped for good until this instance takes the lock again.
	// Denied: waiting for an operator to grant an ACL, not for an outage.
	d.health.WatchHalt("publisher", func() string {
		st := pub.Stats()
		if st.Fenced != "" {
			return st.Fenced
		}
		return st.Denied
	})
	supervise("backfill", d.grants.gate(p.bf.Run))
	fl, err := schd.New(cfg.Schd, schd.Deps{Pool: d.pool, DBTimeout: cfg.DB.Timeout, Brokers: d.brokers,
		Kafka: cfg.Kafka, Clock: d.clock, Log: log})
	if err != nil {
		return err
	}
	supervise("schd", func(ctx context.Context) error {
		err := fl.Run(ctx)
		if ctx.Err() != nil {
			fl.Close() // stopping for good: release the producer
		}
		return err
	})
	jobs, err := maintenance.New(cfg.Jobs, maintenance.Deps{PG: d.pool, Timeout: cfg.DB.Timeout, Clock: d.clock,
		Log: log, Location: cfg.Location()})
	if err != nil {
		return err
	}
	supervise("maintenance", jobs.Run)
	hist, err := maintenance.NewHistory(cfg.History, maintenance.HistoryDeps{Pool: d.pool, Timeout: cfg.DB.Timeout, Purge: rt.Purge,
		Clock: d.clock, Location: cfg.Location(), Log: log})
	if err != nil {
		return err
	}
	supervise("history", hist.Run)
	m.UpdateSources(func(s *metric.Sources) {
		s.Router, s.Publisher, s.Backfill, s.Schd = rt.Stats, pub.Stats, p.bf.Stats, fl.Stats
	})
	return nil
}
