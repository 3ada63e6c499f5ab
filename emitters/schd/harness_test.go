package schd

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
)

var t0 = time.Date(2026, 1, 23, 5, 0, 0, 0, time.UTC)

// harness wires flushers to a fresh PostgreSQL schema and an in-process
// Kafka, optionally behind proxies so that either can be taken down.
type harness struct {
	t       *testing.T
	cfg     Config
	pool    *pgxpool.Pool
	brokers []string
	clock   *clock.Fake
	logs    *lockedBuffer
	pgProxy *testenv.Proxy
	kProxy  *testenv.Proxy
}

type harnessOpts struct {
	// proxyPG puts PostgreSQL behind h.pgProxy.
	proxyPG bool
	// proxyKafka runs the broker behind h.kProxy.
	proxyKafka bool
	limit      int
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, cfg: DefaultConfig(), clock: clock.NewFake(t0), logs: &lockedBuffer{}}
	if o.limit > 0 {
		h.cfg.FlushLimit = o.limit
	}
	dsn := sinktest.NewPG(t)
	if o.proxyPG {
		h.pgProxy = testenv.NewProxy(t, "127.0.0.1:5432")
		dsn = strings.Replace(dsn, "127.0.0.1:5432", h.pgProxy.Addr(), 1)
	}
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: dsn, Timeout: 5 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h.pool = pool
	if o.proxyKafka {
		h.brokers, h.kProxy = proxiedBroker(t)
	} else {
		// Kafka is kfake, in-process: this package tests its own logic against a
		// broker, one per test in milliseconds; the Kafka claims run on Apache
		// Kafka (cmd/msgx, emitters/event; docs/design.md#kafka-divergences).
		h.brokers = testenv.NewBroker(t)
	}
	if err := kafka.EnsureTopics(h.brokers, testenv.KafkaConfig(h.brokers), []kafka.TopicSpec{h.cfg.TopicSpec(1)}, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("flusher logs:\n%s", h.logs.String())
		}
	})
	return h
}

// proxiedBroker starts an in-memory kfake broker that advertises a proxy's
// address, so that every client connection (bootstrap and after metadata)
// goes through the proxy and Down really cuts Kafka off.
func proxiedBroker(t *testing.T) ([]string, *testenv.Proxy) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, ln.Addr().String())
	adv, err := net.ResolveTCPAddr("tcp", proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(1),
		kfake.ListenFn(func(string, string) (net.Listener, error) { return advertised{ln, adv}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return []string{proxy.Addr()}, proxy
}

// advertised is a listener that reports another address: kfake advertises
// its listener's address in metadata.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// flusher returns a new Flusher (a "process") logging into h.logs.
func (h *harness) flusher() *Flusher {
	h.t.Helper()
	f, err := New(h.cfg, Deps{
		Pool: h.pool, DBTimeout: 5 * time.Second, Brokers: h.brokers, Kafka: testenv.KafkaConfig(h.brokers),
		Clock: h.clock, Log: slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(f.Close)
	return f
}

// run starts f.Run and returns a function that stops it and waits.
func (h *harness) run(f *Flusher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Run: %v", err)
		}
	}
	h.t.Cleanup(stop)
	return stop
}

// period lets one flush period pass on the fake clock and returns once Run
// has finished that round (flushes included) and sleeps again.
func (h *harness) period() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		h.t.Fatal("flusher never slept")
	}
	h.clock.Advance(h.cfg.FlushPeriod)
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		h.t.Fatal("flusher did not finish its flush")
	}
}

func (h *harness) write(states ...*flight.State) {
	h.t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		for _, s := range states {
			if err := sink.WriteFlight(ctx, tx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// record is one schd record as an independent client reads it.
type record struct {
	flid    string
	version int64
	state   string
	value   []byte // nil: tombstone
}

// records reads the whole topic with franz-go (not the producer under test).
func (h *harness) records() []record {
	h.t.Helper()
	n := testenv.EndOffset(h.t, h.brokers, h.cfg.Topic)
	var out []record
	if n == 0 {
		return nil
	}
	for _, r := range testenv.ReadTopic(h.t, h.brokers, h.cfg.Topic, int(n), 10*time.Second) {
		out = append(out, toRecord(h.t, r))
	}
	if int64(len(out)) != n {
		h.t.Fatalf("read %d of %d records", len(out), n)
	}
	return out
}

func toRecord(t *testing.T, r *kgo.Record) record {
	t.Helper()
	rec := record{flid: string(r.Key), value: r.Value}
	for _, hd := range r.Headers {
		switch hd.Key {
		case HeaderStateVersion:
			v, err := strconv.ParseInt(string(hd.Value), 10, 64)
			if err != nil {
				t.Fatalf("header %s=%q", hd.Key, hd.Value)
			}
			rec.version = v
		case HeaderState:
			rec.state = string(hd.Value)
		}
	}
	if rec.value != nil {
		// The value is the flight JSON; its version must be the header's.
		var doc struct {
			FLID         string `json:"flid"`
			StateVersion int64  `json:"stateVersion"`
			State        string `json:"state"`
		}
		if err := json.Unmarshal(rec.value, &doc); err != nil {
			t.Fatalf("record %s: value is not JSON: %v", rec.flid, err)
		}
		if doc.FLID != rec.flid || doc.StateVersion != rec.version || doc.State != rec.state {
			t.Fatalf("record %s v%d %s carries flight %s v%d %s", rec.flid, rec.version, rec.state, doc.FLID, doc.StateVersion, doc.State)
		}
	}
	return rec
}

// versions lists (FLID:version) of records in topic order.
func versions(recs []record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.flid+":"+strconv.FormatInt(r.version, 10))
	}
	return out
}

// sent returns the stored state_version and schd_sent_version of flid.
func (h *harness) sent(flid string) (stateVersion, sentVersion int64) {
	h.t.Helper()
	err := h.pool.QueryRow(context.Background(), "SELECT state_version, schd_sent_version FROM flight_schd WHERE flid = $1", flid).
		Scan(&stateVersion, &sentVersion)
	if err != nil {
		h.t.Fatalf("versions of %s: %v", flid, err)
	}
	return stateVersion, sentVersion
}

// sameJSON compares a record value with a flight's view by value.
func sameJSON(t *testing.T, got []byte, want *flight.State) {
	t.Helper()
	wb, _ := json.Marshal(want.View())
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %s", got)
	}
	_ = json.Unmarshal(wb, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("value\n got %s\nwant %s", got, wb)
	}
}

// The states under test come from the real transition function.

func apply(t *testing.T, s *flight.State, tr flight.Transition) *flight.State {
	t.Helper()
	r, err := flight.Apply(s, tr, flight.Options{})
	if err != nil || r.State == nil {
		t.Fatalf("Apply(%s %s msg %d): %v %s", tr.Kind, tr.FLID, tr.MsgID, err, r.Outcome)
	}
	return r.State
}

func schedule(msg int64, flid string) flight.Transition {
	return flight.Transition{MsgID: msg, Source: "SCHD-DNLD", Kind: flight.KindSchedule, FLID: flid, OperationDay: "2026-01-23",
		At:          t0.Add(time.Duration(msg) * time.Second),
		Fields:      map[string]string{"ALCD": "YG", "FLNO": "YG" + flid, "SODT": "23JAN260800"},
		Collections: map[string][]flight.Element{"GTDT": {{"GTNO": "1", "GATE": "G" + flid}}}}
}

func estt(msg int64, flid string) flight.Transition {
	return flight.Transition{MsgID: msg, Source: "FLOP-ESTT", Kind: flight.KindFLOP, STYP: "ESTT", FLID: flid,
		At: t0.Add(time.Duration(msg) * time.Second), Fields: map[string]string{"ESTT": strconv.FormatInt(msg, 10)}}
}

func fdel(msg int64, flid string) flight.Transition {
	return flight.Transition{MsgID: msg, Source: "FDEL", Kind: flight.KindDelete, FLID: flid, At: t0.Add(time.Duration(msg) * time.Second)}
}

// chain returns a flight's first n versions: a SCHEDULE, then ESTT changes.
func chain(t *testing.T, flid string, msg int64, n int) []*flight.State {
	t.Helper()
	s := apply(t, nil, schedule(msg, flid))
	out := []*flight.State{s}
	for len(out) < n {
		msg++
		s = apply(t, s, estt(msg, flid))
		out = append(out, s)
	}
	return out
}
