package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/health"
	"msgx/internal/kafka"
	"msgx/internal/retry"
	"msgx/sink"
	"msgx/sink/aodb"
)

// Connecting: the databases, the embedded broker when no cluster is
// configured, the upgrade check, migrations, the Kafka binding, the topics
// and the grants msgx needs of the shared MySQL tables — what every role
// shares before it starts a component.

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
