package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"msgx/cmd/msgx/metric"
	"msgx/emitters/event"
	"msgx/inspect/status"
	"msgx/internal/clock"
	"msgx/internal/health"
	"msgx/internal/kafka"
	"msgx/sink"
	"msgx/sink/aodb"
)

// collect takes the status report of this deployment.
func collect(ctx context.Context, cfg Config, d *deps) (status.Report, error) {
	c, err := status.New(cfg.Status, statusDeps(cfg, d))
	if err != nil {
		return status.Report{}, err
	}
	return c.Collect(ctx, d.clock.Now()), nil
}

// statusDeps are the sources of the status report.
func statusDeps(cfg Config, d *deps) status.Deps {
	return status.Deps{
		PG: d.pool, Inbox: d.tables, Zone: d.zone, Brokers: d.brokers, Kafka: cfg.Kafka, Timeout: cfg.DB.Timeout,
		Groups: processorGroups(cfg),
	}
}

// processorGroups are the goka groups of the processors and their input
// topics: the status report's consumer lag and rebuild's progress.
func processorGroups(cfg Config) []kafka.Group {
	return []kafka.Group{
		{Group: string(cfg.Router.Group()), Topics: []string{cfg.Ingest.Topic}},
		{Group: string(cfg.Flights.Group()), Topics: []string{cfg.Router.FlightTopic}},
		{Group: string(cfg.Refdata.Group()), Topics: []string{cfg.Router.RefdataTopic}},
	}
}

// report collects the status report and adds the components' states and
// the publisher's figures (pub nil: this process does not run it).
func report(ctx context.Context, cfg Config, d *deps, pub func() event.Stats) (status.Report, error) {
	r, err := collect(ctx, cfg, d)
	if err != nil {
		return r, err
	}
	var comps []status.ComponentState
	for _, c := range d.health.Snapshot() {
		cs := status.ComponentState{Name: c.Name, State: c.Effective(), LastError: c.LastError}
		if cs.State == health.Paused {
			cs.LastError = c.Paused
			if c.Halted != "" {
				cs.LastError = c.Halted
			}
		}
		if !c.LastErrorAt.IsZero() {
			at := c.LastErrorAt
			cs.LastErrorAt = &at
		}
		comps = append(comps, cs)
	}
	r.Merge(comps)
	if pub != nil {
		r.Publisher = publisherStatus(pub())
	}
	return r, nil
}

// publisherStatus is the report's view of the publisher's figures.
func publisherStatus(st event.Stats) *status.PublisherStatus {
	ps := &status.PublisherStatus{ExactlyOnce: st.ExactlyOnce, TransactionalID: st.TransactionalID,
		Committed: st.Transactions["committed"], Aborted: st.Transactions["aborted"], Fenced: st.Fenced,
		Position: st.Position, Reconciled: st.Reconciled, Deduplicated: st.Deduplicated}
	if !st.FencedAt.IsZero() {
		at := st.FencedAt
		ps.FencedAt = &at
	}
	for _, n := range st.Published {
		ps.Published += n
	}
	return ps
}

// kafkaReachable asks a broker for metadata: the Kafka readiness probe.
func kafkaReachable(cfg Config, brokers []string) health.Check {
	return func(ctx context.Context) error {
		sc := cfg.Kafka.Sarama("msgx-ready")
		sc.Net.DialTimeout, sc.Net.ReadTimeout, sc.Net.WriteTimeout = 3*time.Second, 3*time.Second, 3*time.Second
		sc.Metadata.Retry.Max = 0
		done := make(chan error, 1)
		go func() {
			cl, err := sarama.NewClient(brokers, sc)
			if err == nil {
				cl.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// registerOps opens the start gate's /readyz and /metrics to the started
// daemon's, and adds /status to mux.
func registerOps(mux *http.ServeMux, cfg Config, d *deps, m *metric.Metrics, gate *startGate) {
	ready := &health.Ready{Registry: d.health, Timeout: 5 * time.Second, Checks: map[string]health.Check{
		"postgres": func(ctx context.Context) error { return d.pool.Ping(ctx) },
		"mysql":    func(ctx context.Context) error { return d.mysql.PingContext(ctx) },
		"kafka":    kafkaReachable(cfg, d.brokers),
	}}
	gate.open(ready, promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		rep, err := report(r.Context(), cfg, d, m.Sources().Publisher)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	})
}

// statusCommand is `msgx status`: the status report, from the running
// daemon's /status when it answers (so component states are included),
// otherwise collected directly from PostgreSQL, MySQL and Kafka. With
// --exit-code it exits 1 when the report has alerts (a source it cannot
// reach is an alert too), for monitoring checks.
func statusCommand(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the report as JSON")
	exitCode := fs.Bool("exit-code", false, "exit with status 1 when the report has alerts (for monitoring checks)")
	return func(ctx context.Context, x *invocation, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		rep, err := statusFromDaemon(ctx, x.cfg)
		if err != nil {
			x.log.Debug("daemon /status not reachable; collecting directly", "err", err)
			daemonErr := err
			rep, err = statusDirect(ctx, x.cfg, x.log)
			if err != nil {
				return err
			}
			// Only a running daemon knows its components: say why there
			// are none instead of leaving the section out.
			rep.ComponentsError = fmt.Sprintf("no msgx daemon answered at http://%s/status (%s); this report was read from "+
				"PostgreSQL, MySQL and Kafka directly", x.cfg.HTTPAddr, oneLine(daemonErr))
		}
		if *asJSON {
			enc := json.NewEncoder(x.stdout)
			enc.SetIndent("", "  ")
			err = enc.Encode(rep)
		} else {
			err = rep.Text(x.stdout)
		}
		if err == nil && *exitCode && len(rep.Alerts) > 0 {
			return exitStatus(1)
		}
		return err
	}
}

func statusFromDaemon(ctx context.Context, cfg Config) (status.Report, error) {
	var rep status.Report
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	client, scheme := http.DefaultClient, "http://"
	if cfg.Web.TLS() {
		pinned, err := pinnedClient(cfg.Web.TLSCert)
		if err != nil {
			return rep, err
		}
		client, scheme = pinned, "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+cfg.HTTPAddr+"/status", nil)
	if err != nil {
		return rep, err
	}
	if cfg.Web.ReadToken != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Web.ReadToken)
	}
	resp, err := client.Do(req)
	if err != nil {
		return rep, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rep, errors.New(resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&rep)
	return rep, err
}

// pinnedClient reaches the daemon on this host over its TLS listener,
// trusting exactly the certificate of certFile (MSGX_HTTP_TLS_CERT, the one
// the daemon serves): MSGX_HTTP_ADDR may name an address the certificate
// does not (0.0.0.0), and its CA need not be in the system's roots. Right
// after a renewal the daemon may serve the previous one for a few seconds;
// the status is then collected directly.
func pinnedClient(certFile string) (*http.Client, error) {
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("MSGX_HTTP_TLS_CERT: %w", err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("MSGX_HTTP_TLS_CERT=%s: no PEM certificate", certFile)
	}
	want := block.Bytes
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The pin replaces the chain and name checks.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, want) {
				return errors.New("the daemon serves another certificate than MSGX_HTTP_TLS_CERT")
			}
			return nil
		},
	}}}, nil
}

func statusDirect(ctx context.Context, cfg Config, log *slog.Logger) (status.Report, error) {
	pool, err := sink.OpenPG(ctx, cfg.DB)
	if err != nil {
		return status.Report{}, err
	}
	defer pool.Close()
	tables, zone, closeInbox, err := openInbox(cfg)
	if err != nil {
		return status.Report{}, err
	}
	defer closeInbox()
	brokers := cfg.Kafka.Brokers
	if cfg.Kafka.Embedded() {
		brokers = []string{cfg.Kafka.EmbeddedAddr}
	}
	d := &deps{pool: pool, tables: tables, zone: zone, brokers: brokers, clock: clock.Real{}, log: log, health: health.NewRegistry(time.Now)}
	rep, err := collect(ctx, cfg, d)
	if err != nil {
		return rep, err
	}
	// No daemon answered: one that refused to start on another Kafka
	// cluster says so only in its log; the report says it too
	// (docs/operations.md#the-database-is-bound-to-its-kafka-cluster). An
	// unreachable Kafka is already an alert.
	if _, berr := checkBinding(ctx, cfg, brokers, pool); errors.Is(berr, errBinding) {
		rep.Alerts = append([]string{berr.Error()}, rep.Alerts...)
	}
	return rep, nil
}

// openInbox opens the shared tables for an operator command; the zone of
// their DATETIMEs is asked from the server on first use (or
// MSGX_INBOX_TZ). closeInbox closes the connection.
func openInbox(cfg Config) (tables *aodb.Tables, zone *sink.InboxZone, closeInbox func(), err error) {
	zone, err = sink.NewInboxZone(cfg.DB, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := sink.OpenMySQL(cfg.DB, zone, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if tables, err = aodb.New(cfg.Tables, aodb.Deps{DB: db, Timeout: cfg.DB.Timeout}); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return tables, zone, func() { db.Close() }, nil
}
