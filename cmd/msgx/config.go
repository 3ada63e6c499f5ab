package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"msgx/cmd/msgx/page"
	"msgx/emitters/backfill"
	"msgx/emitters/event"
	"msgx/emitters/outbound"
	"msgx/emitters/schd"
	"msgx/ingest"
	"msgx/inspect/status"
	"msgx/internal/kafka"
	"msgx/internal/web"
	"msgx/maintenance"
	"msgx/processors/flights"
	refdataproc "msgx/processors/refdata"
	"msgx/processors/router"
	"msgx/sink"
	"msgx/sink/aodb"
)

// Config is the whole daemon's configuration: one struct per component plus
// the process-wide settings. Every field comes from a MSGX_* variable;
// docs/reference.md lists them, generated from the env tags and the
// fields' doc comments (go generate ./cmd/msgx), which therefore say each
// one's unit and what an empty or zero default means.
type Config struct {
	// Env names the deployment: "production" turns on the production safety
	// checks, which refuse what is only meant for development (the embedded
	// Kafka, the default DSNs, tokens in clear; docs/operations.md#configure).
	Env string `env:"MSGX_ENV" envDefault:"development"`
	// LogLevel is debug, info, warn or error. The daemons log JSON lines on
	// stderr at this level; operator commands show text warnings and errors
	// only, everything with debug.
	LogLevel string `env:"MSGX_LOG_LEVEL" envDefault:"info"`
	// StateDir holds the embedded Kafka's data (kafka/) and, with
	// MSGX_TABLE_STORAGE=disk, goka's local tables (goka/). make run sets it
	// to the source tree's .state.
	StateDir string `env:"MSGX_STATE_DIR" envDefault:".state"`
	// HTTPAddr is the host:port where health, metrics, inspection, the
	// status page and the compatibility endpoint listen.
	HTTPAddr string `env:"MSGX_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	// AirportTZ is the airport's time zone: SIS message times (DTTM, SODT,
	// ESTT, …) are local wall-clock times in it. The inbox's DATETIME
	// columns are in the MySQL server's zone instead (MSGX_INBOX_TZ).
	AirportTZ string `env:"MSGX_AIRPORT_TZ" envDefault:"Asia/Shanghai"`
	// ShutdownTimeout bounds a graceful stop (SIGTERM, SIGINT): a process
	// not stopped by then exits 1 saying so.
	ShutdownTimeout time.Duration `env:"MSGX_SHUTDOWN_TIMEOUT" envDefault:"30s"`

	DB        sink.Config
	Tables    aodb.Config
	Kafka     kafka.Config
	Ingest    ingest.Config
	HTTP      ingest.HTTPConfig
	Web       web.Config
	Router    router.Config
	Flights   flights.Config
	Refdata   refdataproc.Config
	Backfill  backfill.Config
	Requests  outbound.Config
	Schd      schd.Config
	Publisher event.Config
	Jobs      maintenance.Config
	History   maintenance.HistoryConfig
	Status    status.Config
	Page      page.Config

	// atLeastOnce says MSGX_EXACTLY_ONCE defaulted to false (loadConfig).
	atLeastOnce bool
	loc         *time.Location
	// instanceIDDefault: MSGX_KAFKA_INSTANCE_ID was not set, Kafka.InstanceID
	// is kafka.DefaultInstanceID's.
	instanceIDDefault bool
}

// Location returns the parsed airport time zone.
func (c Config) Location() *time.Location { return c.loc }

// Validate checks every component's configuration; each problem names its
// variable.
func (c *Config) Validate() error {
	var errs []error
	loc, err := time.LoadLocation(c.AirportTZ)
	if err != nil {
		errs = append(errs, fmt.Errorf("MSGX_AIRPORT_TZ=%q: %w", c.AirportTZ, err))
	}
	c.loc = loc
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(c.StateDir) == "" {
		errs = append(errs, errors.New("MSGX_STATE_DIR: empty"))
	} else if c.Kafka.InstanceID == "" {
		// Unique per instance, stable across its restarts: instances on one
		// host have their own state directories.
		c.Kafka.InstanceID = kafka.DefaultInstanceID(c.StateDir)
		c.instanceIDDefault = true
	}
	if !strings.Contains(c.HTTPAddr, ":") {
		errs = append(errs, fmt.Errorf("MSGX_HTTP_ADDR=%q: want host:port", c.HTTPAddr))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("MSGX_SHUTDOWN_TIMEOUT: must be positive"))
	}
	// Every name is checked once the prefix is valid (an invalid prefix
	// would spoil each of them; c.Kafka.Validate reports it).
	if kafka.CheckPrefix(c.Kafka.Prefix) == nil {
		for _, t := range topics(*c) {
			if err := kafka.CheckTopicName(t.Name); err != nil {
				errs = append(errs, fmt.Errorf("topic name: %w", err))
			}
		}
	}
	errs = append(errs, c.productionChecks()...)
	if err := c.HTTP.CheckRecordLimit(c.Kafka.MaxMessageBytes); err != nil {
		errs = append(errs, err)
	}
	// A transaction waits out produce requests of up to MSGX_KAFKA_TIMEOUT
	// each: a shorter transaction timeout aborts it under them.
	if c.Publisher.ExactlyOnce && c.Publisher.TxnTimeout < c.Kafka.Timeout {
		errs = append(errs, fmt.Errorf("MSGX_PUBLISH_TXN_TIMEOUT=%s is shorter than MSGX_KAFKA_TIMEOUT=%s: Kafka would abort transactions that wait for one produce (docs/operations.md#consuming-msgxmsg-and-msgxschd)",
			c.Publisher.TxnTimeout, c.Kafka.Timeout))
	}
	for _, v := range []interface{ Validate() error }{c.DB, c.Tables, c.Kafka, c.Ingest, c.HTTP, c.Web, c.Router, c.Flights, c.Refdata, c.Backfill, c.Requests, c.Schd, c.Publisher, c.Jobs, c.History, c.Status, c.Page} {
		if err := v.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// envDefault is the default of field of struct type T, from its envDefault
// tag: the one place a default is written.
func envDefault[T any](field string) string {
	f, ok := reflect.TypeFor[T]().FieldByName(field)
	if !ok {
		panic(fmt.Sprintf("%v has no field %s", reflect.TypeFor[T](), field))
	}
	return f.Tag.Get("envDefault")
}

// productionChecks refuses, with MSGX_ENV=production, what is only meant for
// development: the embedded Kafka, the built-in local DSNs, HTTP tokens in
// clear on the network or too short.
func (c *Config) productionChecks() []error {
	if !strings.EqualFold(c.Env, "production") {
		return nil
	}
	var errs []error
	if c.Kafka.Embedded() {
		errs = append(errs, errors.New("MSGX_ENV=production: MSGX_KAFKA_BROKERS is empty, but the embedded Kafka is for development; point it at the cluster"))
	}
	errs = append(errs, c.Kafka.ProductionErrors()...)
	errs = append(errs, c.Web.ProductionErrors(c.HTTPAddr, c.HTTP.Token)...)
	// The development defaults a production deployment must not run on.
	if c.DB.PGDSN == envDefault[sink.Config]("PGDSN") {
		errs = append(errs, errors.New("MSGX_ENV=production: MSGX_PG_DSN is the development default; set the production database"))
	}
	if c.DB.MySQLDSN == envDefault[sink.Config]("MySQLDSN") {
		errs = append(errs, errors.New("MSGX_ENV=production: MSGX_MYSQL_DSN is the development default; set the shared inbox's primary"))
	}
	return errs
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("MSGX_LOG_LEVEL=%q: want debug, info, warn or error", s)
	}
	return l, nil
}

// loadConfig reads the configuration from the environment and validates it.
// A value that does not parse is reported with the variable's name (the
// library only knows the Go field).
func loadConfig(environ map[string]string) (Config, error) {
	var c Config
	if err := env.ParseWithOptions(&c, env.Options{Environment: environ}); err != nil {
		return c, nameVariables(err, environ)
	}
	// The embedded Kafka inside `msgx run` keeps no transaction log: killed
	// and restarted, it aborts the transactions that were open without
	// their markers, and a read_committed consumer may then miss events
	// (docs/operations.md#one-process). Unless asked for, msg events are at least
	// once there: a duplicate rather than a loss.
	if _, set := environ["MSGX_EXACTLY_ONCE"]; !set && c.Kafka.Embedded() {
		c.Publisher.ExactlyOnce, c.atLeastOnce = false, true
	}
	return c, c.Validate()
}

func environment() map[string]string {
	out := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// nameVariables rewrites caarlos0/env parse errors as "MSGX_X=value: cause".
func nameVariables(err error, environ map[string]string) error {
	keys := map[string][]string{}
	collectKeys(reflect.TypeOf(Config{}), keys)
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	var out []error
	for _, e := range agg.Errors {
		var pe env.ParseError
		if !errors.As(e, &pe) {
			out = append(out, e)
			continue
		}
		named := false
		for _, k := range keys[pe.Name] {
			if v, ok := environ[k]; ok {
				out = append(out, fmt.Errorf("%s=%q: %v", k, v, pe.Err))
				named = true
			}
		}
		if !named {
			out = append(out, e)
		}
	}
	return errors.Join(out...)
}

func collectKeys(t reflect.Type, keys map[string][]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Time{}) {
			collectKeys(f.Type, keys)
			continue
		}
		if tag := f.Tag.Get("env"); tag != "" {
			name, _, _ := strings.Cut(tag, ",")
			keys[f.Name] = append(keys[f.Name], name)
		}
	}
}
