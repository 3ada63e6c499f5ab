package metric

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"msgx/emitters/backfill"
	"msgx/emitters/event"
	"msgx/emitters/schd"
	"msgx/ingest"
	"msgx/inspect/status"
	"msgx/internal/health"
	"msgx/internal/web"
	"msgx/processors/applier"
	"msgx/processors/router"
	"msgx/tables/message"
)

// Sources are the running figures the collector reads; any may be nil when
// the process does not run that component.
type Sources struct {
	Ingest    func() ingest.Stats
	Router    func() router.Stats
	Flights   func() applier.Stats
	Refdata   func() applier.Stats
	Backfill  func() backfill.Stats
	Schd      func() schd.Stats
	Publisher func() event.Stats
	HTTP      func() web.Stats
	Health    *health.Registry
	// Report collects the status report (database and Kafka figures). It is
	// cached for ReportTTL so scrapes stay cheap.
	Report    func(ctx context.Context) (status.Report, error)
	ReportTTL time.Duration
	// Thresholds are the status alerts' settings, exported so that
	// alerting rules compare with the very values msgx status uses
	// (deploy/prometheus/msgx-rules.yml); nil exports none.
	Thresholds *status.Config
}

// Observer also receives every latency the histograms observe (the status
// page's history keeps a short window of them, cmd/msgx/page).
type Observer interface {
	ObserveDecision(time.Duration)
	ObserveEndToEnd(time.Duration)
}

// Metrics owns the registry and the histograms.
type Metrics struct {
	coll     *collector
	also     Observer
	Registry *prometheus.Registry
	// Decision is the router's delivery-to-decision latency.
	Decision prometheus.Histogram
	// EndToEnd is the latency from a row's enqueue to its msg event.
	EndToEnd prometheus.Histogram
}

// New registers the collector and the histograms. The histograms can be
// handed to the components at once; their running figures are attached
// with SetSources once they exist.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), coll: &collector{}}
	m.Decision = prometheus.NewHistogram(decisionOpts)
	m.EndToEnd = prometheus.NewHistogram(endToEndOpts)
	m.Registry.MustRegister(m.Decision, m.EndToEnd, m.coll,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetSources attaches the components' running figures.
func (m *Metrics) SetSources(src Sources) {
	m.coll.mu.Lock()
	defer m.coll.mu.Unlock()
	m.coll.src = src
}

// UpdateSources changes the attached sources in place: the processing
// roles that start independently (the single roles under the process lock,
// the partitioned processors under their shared lock) each attach theirs.
func (m *Metrics) UpdateSources(update func(*Sources)) {
	m.coll.mu.Lock()
	defer m.coll.mu.Unlock()
	update(&m.coll.src)
}

// Sources returns the running figures attached last.
func (m *Metrics) Sources() Sources {
	m.coll.mu.Lock()
	defer m.coll.mu.Unlock()
	return m.coll.src
}

// Also hands every later observation to o as well. Call it before the
// components that observe start (it is not synchronised with them).
func (m *Metrics) Also(o Observer) { m.also = o }

// ObserveDecision records one router decision latency.
func (m *Metrics) ObserveDecision(d time.Duration) {
	m.Decision.Observe(d.Seconds())
	if m.also != nil {
		m.also.ObserveDecision(d)
	}
}

// ObserveEndToEnd records one end-to-end latency.
func (m *Metrics) ObserveEndToEnd(d time.Duration) {
	m.EndToEnd.Observe(d.Seconds())
	if m.also != nil {
		m.also.ObserveEndToEnd(d)
	}
}

type collector struct {
	mu  sync.Mutex
	src Sources

	rmu      sync.Mutex // guards the cached report
	report   status.Report
	reportOK bool
	reportAt time.Time
}

// Info describes one metric msgx exports (docs/reference.md lists them).
type Info struct {
	Name string
	// Type is counter, gauge or histogram.
	Type   string
	Help   string
	Labels []string
}

// catalogue lists every metric of the registry New returns, except the Go
// runtime's and the process's; descs the collector's, which it describes.
var (
	catalogue []Info
	descs     []*prometheus.Desc
)

// Catalogue is every metric msgx itself exports, by name.
func Catalogue() []Info {
	out := slices.Clone(catalogue)
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func counterDesc(name, help string, labels ...string) *prometheus.Desc {
	return describe("counter", name, help, labels)
}

func gaugeDesc(name, help string, labels ...string) *prometheus.Desc {
	return describe("gauge", name, help, labels)
}

func describe(kind, name, help string, labels []string) *prometheus.Desc {
	catalogue = append(catalogue, Info{Name: name, Type: kind, Help: help, Labels: labels})
	d := prometheus.NewDesc(name, help, labels, nil)
	descs = append(descs, d)
	return d
}

// The histograms' options (New registers them).
var (
	decisionOpts = histogram(prometheus.HistogramOpts{
		Name: "msgx_router_decision_seconds", Help: "Time from a message's delivery to the router until its decision is recorded (retries included).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
	})
	endToEndOpts = histogram(prometheus.HistogramOpts{
		Name: "msgx_end_to_end_seconds", Help: "Time from an inbox row's enqueue to the msg event of the change it caused being acknowledged by Kafka.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 20),
	})
)

func histogram(o prometheus.HistogramOpts) prometheus.HistogramOpts {
	catalogue = append(catalogue, Info{Name: o.Name, Type: "histogram", Help: o.Help})
	return o
}

// The metrics, their names and meanings (listed in docs/operations.md#metrics).
var (
	ingestRows      = counterDesc("msgx_ingest_rows_total", "Inbox rows produced to msgx.inbox by this process.")
	ingestWatermark = gaugeDesc("msgx_ingest_watermark", "The inbox watermark W: every ID up to it was produced.")
	ingestHoleAge   = gaugeDesc("msgx_ingest_hole_open_seconds", "How long the hole after W has been open (0: none).")
	ingestHoles     = counterDesc("msgx_ingest_permanent_holes_total", "Holes released as permanent by this process.")
	ingestLate      = counterDesc("msgx_ingest_late_rows_total", "Late rows (IDs that appeared after their hole was released) seen by this process.")
	decisions       = counterDesc("msgx_messages_decided_total", "Router decisions by resulting state.", "state")
	reasons         = counterDesc("msgx_messages_skipped_or_dead_total", "SKIPPED and DEAD decisions by reason class (duplicate, ignored, unsupported, no-match, MALFORMED, PROTOCOL, CODEC_ERROR, EXHAUSTED).", "reason_class")
	ignored         = counterDesc("msgx_messages_ignored_total", "Messages SKIPPED by an ignore rule, by rule.", "rule")
	retries         = counterDesc("msgx_router_retries_total", "Failures of the head message that were retried in place.")
	routerBatches   = counterDesc("msgx_router_batches_total", "Transactions that recorded a batch of router decisions (docs/design.md#router-batches).")
	routerBatched   = counterDesc("msgx_router_batched_messages_total", "Messages decided in those batches; divided by msgx_router_batches_total, the average batch size.")
	applyBatches    = counterDesc("msgx_apply_batches_total", "Transactions that wrote a group of an applying processor's transitions (docs/design.md#group-commits).", "processor")
	applyBatched    = counterDesc("msgx_apply_batched_transitions_total", "Transitions written in those transactions; divided by msgx_apply_batches_total, the average group size.", "processor")
	recovered       = counterDesc("msgx_transitions_recovered_total", "Redelivered transitions applied again to PostgreSQL's state because the table was ahead of it after a crash.", "processor")
	paused          = gaugeDesc("msgx_component_paused", "1 while a running component waits for an unavailable dependency (outage), else 0.", "component")
	componentState  = gaugeDesc("msgx_component_state", "1 for the state a component is in (starting, running, paused, restarting, stopped), 0 for the others.", "component", "state")
	httpRefused     = counterDesc("msgx_http_refused_total", "HTTP requests refused by the server: slow (not sent within MSGX_HTTP_READ_TIMEOUT, cut off), busy (MSGX_HTTP_MAX_CONCURRENT reached, 503), unauthorized (read endpoint without MSGX_HTTP_READ_TOKEN, 401), throttled (too many wrong tokens from the client address, 429), no-client-cert (/cminmsgs/send without a certificate of MSGX_HTTP_TLS_CLIENT_CA, 403).", "reason")
	httpWrong       = counterDesc("msgx_http_wrong_credentials_total", "Wrong tokens presented: logins with a wrong read token, wrong bearer tokens on any endpoint (what the login throttle counts).")
	httpThrottled   = gaugeDesc("msgx_http_throttled_clients", "Client addresses whose credentials are refused with 429 now (MSGX_HTTP_THROTTLE_FAILURES wrong ones within MSGX_HTTP_THROTTLE_PERIOD).")
	httpCertExpiry  = gaugeDesc("msgx_http_tls_certificate_expiry_timestamp_seconds", "When the certificate the HTTP listener serves expires (Unix time; only with MSGX_HTTP_TLS_CERT).")
	applied         = counterDesc("msgx_transitions_applied_total", "Transitions applied by an applying processor.", "processor")
	replayed        = counterDesc("msgx_transitions_replayed_total", "Transitions recognised as already applied (replays).", "processor")
	rejected        = counterDesc("msgx_transitions_rejected_total", "Transitions the pure apply refused (a router bug; logged).", "processor")
	events          = counterDesc("msgx_events_emitted_total", "Events produced per output topic (schd-flush: latest-state records of the schd flusher).", "topic")
	pubTxns         = counterDesc("msgx_publisher_transactions_total", "Kafka transactions of the event publisher (MSGX_EXACTLY_ONCE) by result: committed, or aborted (a produce or the commit failed; the next producer session aborts it at the broker and publishes the batch again).", "result")
	pubFenced       = gaugeDesc("msgx_publisher_fenced", "1 while the event publisher has stopped because another producer took its transactional ID (PRODUCER_FENCED: a second instance publishing this deployment's outbox), else 0.")
	pubExactlyOnce  = gaugeDesc("msgx_publisher_exactly_once", "1 when the event publisher publishes in Kafka transactions (MSGX_EXACTLY_ONCE=true: once for read_committed consumers), 0 when at least once.")
	pubPosition     = gaugeDesc("msgx_publisher_position", "The last event_outbox id the event publisher committed in a Kafka transaction with its events (0 before the first since start).")
	pubReconciled   = counterDesc("msgx_publisher_reconciled_total", "Outbox rows the publisher found committed to Kafka but not deleted when it started (a crash in between), deleted without publishing them again.")
	pubDeduplicated = counterDesc("msgx_publisher_deduplicated_total", "Outbox rows not published because their (FLID, stateVersion) was published already (msg_event) or earlier in the same batch.")
	backfillMarked  = counterDesc("msgx_backfill_marked_total", "Processed marks written (or found already written).", "result")
	backfillFailed  = counterDesc("msgx_backfill_transient_failures_total", "Failed processed-mark attempts (retried with backoff).")
	componentUp     = gaugeDesc("msgx_component_up", "1 while a component runs, 0 while it restarts or is stopped.", "component")
	restarts        = counterDesc("msgx_component_restarts_total", "Supervised restarts after an error.", "component")
	inboxLag        = gaugeDesc("msgx_inbox_lag", "MAX(CMINMSGS_ID) minus the watermark W.")
	byState         = gaugeDesc("msgx_messages", "Messages in proc_state by state.", "state")
	oldestOpen      = gaugeDesc("msgx_oldest_unfinished_seconds", "Age of the oldest unfinished message (0: none).")
	deadByClass     = gaugeDesc("msgx_dead_messages", "DEAD messages by error class.", "class")
	backfillPending = gaugeDesc("msgx_backfill_pending", "Terminal messages still owing their processed mark.")
	backfillAband   = gaugeDesc("msgx_backfill_abandoned", "Processed marks abandoned, by reason.", "reason")
	groupLag        = gaugeDesc("msgx_consumer_lag", "Records of a topic a goka group has not committed yet.", "group", "topic")
	lateRows        = gaugeDesc("msgx_late_rows", "Late rows recorded (all time).")
	holes           = gaugeDesc("msgx_permanent_holes", "Permanent holes recorded (all time).")
	statusUp        = gaugeDesc("msgx_status_report_ok", "1 when the last status report could be collected.")
	halted          = gaugeDesc("msgx_component_halted", "1 while a running component has stopped making progress on purpose until an operator acts (divergence, rejected transition), else 0.", "component")
	threshold       = gaugeDesc("msgx_status_threshold", "The settings the status alerts compare with (durations in seconds, counts as counts), by variable name.", "setting")
	unreadAge       = gaugeDesc("msgx_inbox_oldest_unread_seconds", "How long the next inbox row above the watermark has waited for ingest (0: none waiting or no receive time).")
	inboxMaxID      = gaugeDesc("msgx_inbox_max_id", "MAX(CMINMSGS_ID) of the inbox.")
	backfillOverdue = gaugeDesc("msgx_backfill_overdue", "Pending processed marks older than MSGX_OVERDUE_BACKFILL.")
	groupMembers    = gaugeDesc("msgx_consumer_group_members", "Running members of a goka group (0: nothing consumes its input).", "group")
	sourceOK        = gaugeDesc("msgx_status_source_ok", "1 when the last status report could read the source (postgres, mysql, kafka), 0 when its section says it could not.", "source")
	requests        = gaugeDesc("msgx_requests", "Outbound requests to the AODB (req_track) by kind (RQRD, RQFD) and state (PENDING, SENT, DONE, EXPIRED, FAILED).", "kind", "state")
	requestOpenAge  = gaugeDesc("msgx_request_oldest_open_seconds", "Age of the oldest open (PENDING or SENT) request of each kind, since it was registered (0: none open).", "kind")
	requestLatest   = gaugeDesc("msgx_request_latest", "1 for the state of the newest request of each kind (a FAILED or EXPIRED one stays until a newer request of its kind), 0 for the others.", "kind", "state")
	requestUnpaired = gaugeDesc("msgx_request_unpaired_erors", "EROR answers that paired with no request since the newest request was registered.")
	bindingRefused  = gaugeDesc("msgx_kafka_binding_refused", "1 while this process refuses to start because Kafka is not the cluster the database is bound to, else 0.")
)

// The classes and reasons exported with 0 when none is counted, so that a
// dashboard or a rule finds the series before the first one happens.
var (
	deadClasses      = []string{message.ClassMalformed, message.ClassProtocol, message.ClassCodecError, message.ClassExhausted}
	abandonedReasons = []string{"MISSING_ROW", "TRANSIENT_DEADLINE"}
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v int64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	s := c.src
	c.mu.Unlock()
	if s.Ingest != nil {
		st := s.Ingest()
		counter(ch, ingestRows, st.Produced)
		gauge(ch, ingestWatermark, float64(st.Watermark))
		age := 0.0
		if !st.HoleSince.IsZero() {
			age = time.Since(st.HoleSince).Seconds()
		}
		gauge(ch, ingestHoleAge, age)
		counter(ch, ingestHoles, st.PermanentHoles)
		counter(ch, ingestLate, st.LateRows)
	}
	if s.Router != nil {
		st := s.Router()
		for state, n := range st.Decided {
			counter(ch, decisions, n, state)
		}
		for class, n := range st.Reasons {
			counter(ch, reasons, n, class)
		}
		for rule, n := range st.Ignored {
			counter(ch, ignored, n, rule)
		}
		counter(ch, retries, st.Retries)
		counter(ch, routerBatches, st.Batches)
		counter(ch, routerBatched, st.Batched)
	}
	for _, p := range []struct {
		name  string
		stats func() applier.Stats
	}{{"flights", s.Flights}, {"refdata", s.Refdata}} {
		if p.stats == nil {
			continue
		}
		st := p.stats()
		counter(ch, applied, st.Applied, p.name)
		counter(ch, replayed, st.Replays, p.name)
		counter(ch, rejected, st.Rejected, p.name)
		counter(ch, applyBatches, st.Batches, p.name)
		counter(ch, applyBatched, st.Batched, p.name)
		counter(ch, recovered, st.Recovered, p.name)
	}
	if s.Schd != nil {
		counter(ch, events, s.Schd().Flushed, "schd-flush")
	}
	if s.Publisher != nil {
		st := s.Publisher()
		for topic, n := range st.Published {
			counter(ch, events, n, topic)
		}
		if st.ExactlyOnce {
			// Both results always, so that rates and alerts on either
			// exist before the first abort.
			counter(ch, pubTxns, st.Transactions["committed"], "committed")
			counter(ch, pubTxns, st.Transactions["aborted"], "aborted")
			gauge(ch, pubPosition, float64(st.Position))
			counter(ch, pubReconciled, st.Reconciled)
		}
		gauge(ch, pubFenced, b2f(st.Fenced != ""))
		gauge(ch, pubExactlyOnce, b2f(st.ExactlyOnce))
		counter(ch, pubDeduplicated, st.Deduplicated)
	}
	if s.Backfill != nil {
		st := s.Backfill()
		counter(ch, backfillMarked, st.Marked, "written")
		counter(ch, backfillMarked, st.AlreadyMarked, "already-marked")
		counter(ch, backfillFailed, st.TransientFailures)
	}
	if s.HTTP != nil {
		st := s.HTTP()
		counter(ch, httpRefused, st.SlowClients, "slow")
		counter(ch, httpRefused, st.Busy, "busy")
		counter(ch, httpRefused, st.Unauthorized, "unauthorized")
		counter(ch, httpRefused, st.Throttled, "throttled")
		counter(ch, httpRefused, st.NoClientCert, "no-client-cert")
		counter(ch, httpWrong, st.WrongCredentials)
		gauge(ch, httpThrottled, float64(st.ThrottledClients))
		if !st.TLSNotAfter.IsZero() {
			gauge(ch, httpCertExpiry, float64(st.TLSNotAfter.Unix()))
		}
	}
	if s.Health != nil {
		// The registry's view is the exact one: a component paused by an
		// outage is only paused while it runs; once stopped (lost lock) or
		// restarting it is that, whatever its last pause flag says.
		for _, comp := range s.Health.Snapshot() {
			gauge(ch, componentUp, b2f(comp.State == health.Running), comp.Name)
			gauge(ch, paused, b2f(comp.Paused != ""), comp.Name)
			gauge(ch, halted, b2f(comp.Halted != ""), comp.Name)
			for _, state := range health.States {
				gauge(ch, componentState, b2f(comp.Effective() == state), comp.Name, state)
			}
			counter(ch, restarts, int64(comp.Restarts), comp.Name)
		}
	}
	if th := s.Thresholds; th != nil {
		for _, t := range []struct {
			name string
			v    float64
		}{
			{"MSGX_MAX_COMMIT_DELAY", th.MaxCommitDelay.Seconds()},
			{"MSGX_STATUS_UNFINISHED_AGE", th.OldestUnfinishedAge.Seconds()},
			{"MSGX_STATUS_INBOX_LAG", float64(th.InboxLag)},
			{"MSGX_STATUS_UNREAD_AGE", th.UnreadAge.Seconds()},
			{"MSGX_STATUS_GROUP_LAG", float64(th.GroupLag)},
			{"MSGX_OVERDUE_BACKFILL", th.BackfillOverdue.Seconds()},
			{"MSGX_REQUEST_TIMEOUT", th.RequestTimeout.Seconds()},
		} {
			gauge(ch, threshold, t.v, t.name)
		}
	}
	// A process that runs passed the binding check; one that refuses
	// exports RefusedMetrics instead.
	gauge(ch, bindingRefused, 0)
	c.collectReport(ch, s)
}

func (c *collector) collectReport(ch chan<- prometheus.Metric, s Sources) {
	if s.Report == nil {
		return
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if time.Since(c.reportAt) > s.ReportTTL || c.reportAt.IsZero() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		r, err := s.Report(ctx)
		cancel()
		c.report, c.reportOK, c.reportAt = r, err == nil, time.Now()
	}
	gauge(ch, statusUp, b2f(c.reportOK))
	if !c.reportOK {
		return
	}
	r := c.report
	// The sources the report could not read: its "status incomplete"
	// alerts (inspect/status.Alerts).
	pgErrs := len(r.Inbox.Errors) + len(r.Messages.Errors) + len(r.Backfill.Errors) + len(r.Requests.Errors)
	gauge(ch, sourceOK, b2f(pgErrs == 0), "postgres")
	gauge(ch, sourceOK, b2f(r.Inbox.MaxIDError == ""), "mysql")
	gauge(ch, sourceOK, b2f(r.GroupsError == ""), "kafka")
	if r.Inbox.Lag >= 0 {
		gauge(ch, inboxLag, float64(r.Inbox.Lag))
	}
	if r.Inbox.LateRows >= 0 {
		gauge(ch, lateRows, float64(r.Inbox.LateRows))
	}
	if r.Inbox.PermanentHoles >= 0 {
		gauge(ch, holes, float64(r.Inbox.PermanentHoles))
	}
	for state, n := range r.Messages.ByState {
		gauge(ch, byState, float64(n), state)
	}
	age := 0.0
	if r.Messages.OldestUnfinished != nil {
		age = float64(r.Messages.OldestUnfinished.AgeSeconds)
	}
	gauge(ch, oldestOpen, age)
	for class, n := range withZeros(r.Messages.DeadByClass, deadClasses) {
		gauge(ch, deadByClass, float64(n), class)
	}
	if r.Backfill.Pending >= 0 {
		gauge(ch, backfillPending, float64(r.Backfill.Pending))
	}
	if r.Backfill.Abandoned != nil {
		for reason, n := range withZeros(r.Backfill.Abandoned, abandonedReasons) {
			gauge(ch, backfillAband, float64(n), reason)
		}
	}
	if r.Backfill.Overdue >= 0 {
		gauge(ch, backfillOverdue, float64(r.Backfill.Overdue))
	}
	if r.Inbox.MaxID >= 0 {
		gauge(ch, inboxMaxID, float64(r.Inbox.MaxID))
	}
	unread := 0.0
	if u := r.Inbox.OldestUnread; u != nil && u.AgeSeconds > 0 {
		unread = float64(u.AgeSeconds)
	}
	gauge(ch, unreadAge, unread)
	members := map[string]int{}
	for _, g := range r.Groups {
		if g.Lag >= 0 {
			gauge(ch, groupLag, float64(g.Lag), g.Group, g.Topic)
		}
		// One row per input topic: a group's members are the most any
		// of its rows saw (a row that could not be read says 0).
		if g.Error == "" {
			members[g.Group] = max(members[g.Group], g.Members)
		}
	}
	for group, n := range members {
		gauge(ch, groupMembers, float64(n), group)
	}
	collectRequests(ch, r.Requests)
}

// requestKinds and requestStates are exported with 0 when none, so that
// the rules find every series before the first request.
var (
	requestKinds  = []string{"RQRD", "RQFD"}
	requestStates = []string{"PENDING", "SENT", "DONE", "EXPIRED", "FAILED"}
)

// collectRequests exports the report's requests section; a figure it could
// not read is left out.
func collectRequests(ch chan<- prometheus.Metric, q status.RequestStatus) {
	if q.ByKind != nil {
		for _, k := range requestKinds {
			for _, st := range requestStates {
				gauge(ch, requests, float64(q.ByKind[k][st]), k, st)
			}
		}
	}
	if q.Latest != nil {
		for _, k := range requestKinds {
			age := 0.0
			for _, o := range q.Open {
				if o.Kind == k {
					age = max(age, float64(o.AgeSeconds))
				}
			}
			gauge(ch, requestOpenAge, age, k)
			l, ok := q.Latest[k]
			for _, st := range requestStates {
				gauge(ch, requestLatest, b2f(ok && l.State == st), k, st)
			}
		}
	}
	if q.UnpairedErors >= 0 {
		gauge(ch, requestUnpaired, float64(q.UnpairedErors))
	}
}

// withZeros is counts with every key of known present (0 when missing);
// nil stays nil (the section could not be read).
func withZeros(counts map[string]int64, known []string) map[string]int64 {
	if counts == nil {
		return nil
	}
	out := make(map[string]int64, len(counts)+len(known))
	for _, k := range known {
		out[k] = 0
	}
	for k, n := range counts {
		out[k] = n
	}
	return out
}

// Refused is the registry of a process that refuses to start because Kafka
// is not the cluster the database is bound to (docs/design.md#kafka-binding):
// msgx_kafka_binding_refused 1 beside the Go runtime and process
// collectors, so that the refusal reaches the operator's alerting and not
// only the log.
func Refused() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_kafka_binding_refused",
		Help: "1 while this process refuses to start because Kafka is not the cluster the database is bound to, else 0."})
	g.Set(1)
	reg.MustRegister(g, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
