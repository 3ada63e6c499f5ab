package event_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/emitters/event"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one publisher set-up: a fresh database, a broker and the topics.
type env struct {
	t       *testing.T
	ctx     context.Context
	pool    *pgxpool.Pool
	brokers []string
	kc      kafka.Config
	clk     *clock.Fake
	logs    *syncBuffer
	// ev and ev3 are the topics of one and three partitions, txnID the
	// publisher's transactional ID: with a prefix of the test's own on
	// the package's shared Apache Kafka.
	ev, ev3, txnID, position string
}

// newEnv is a set-up on brokers; nil: on the package's Apache Kafka
// (testenv.RealKafka), where the transactions are real ones — the
// transaction log, markers, fencing and read_committed are Kafka's own.
func newEnv(t *testing.T, brokers []string) *env {
	t.Helper()
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	prefix := ""
	if brokers == nil {
		brokers = testenv.RealKafka(t).Addrs()
		prefix = testenv.KafkaPrefix()
	}
	e := &env{t: t, ctx: ctx, pool: pool, brokers: brokers, kc: testenv.KafkaConfig(brokers), clk: clock.NewFake(t0.Add(time.Second)),
		logs: &syncBuffer{}, ev: prefix + "ev", ev3: prefix + "ev3", txnID: prefix + "test-publisher", position: prefix + "test.publisher-position"}
	specs := []kafka.TopicSpec{{Name: e.ev, Partitions: 1}, {Name: e.ev3, Partitions: 3}, e.config(true).TopicSpec()}
	if err := kafka.EnsureTopics(brokers, e.kc, specs, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) config(exactlyOnce bool) event.Config {
	return event.Config{Batch: 1000, Poll: time.Second, ExactlyOnce: exactlyOnce, TransactionalID: e.txnID,
		PositionTopic: e.position, TxnTimeout: 30 * time.Second}
}

// publisher is a new publisher (a process starting); its log goes to the
// test log and to e.logs.
func (e *env) publisher(cfg event.Config, active func(context.Context) error) *event.Publisher {
	e.t.Helper()
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := event.New(cfg, event.Deps{Pool: e.pool, DBTimeout: 10 * time.Second, Brokers: e.brokers, Kafka: e.kc,
		Clock: e.clk, Log: log, Active: active})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(p.Close)
	return p
}

func (e *env) queue(evs ...sink.Event) {
	e.t.Helper()
	if err := pgx.BeginFunc(e.ctx, e.pool, func(tx pgx.Tx) error { return sink.QueueEvents(e.ctx, tx, evs, t0) }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) outbox() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, "SELECT COUNT(*) FROM event_outbox").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// msgEvents lists msg_event as "flid vN partition@offset", by FLID and version.
func (e *env) msgEvents() string {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT flid || ' v' || state_version || ' ' || kafka_partition || '@' || kafka_offset
		FROM msg_event ORDER BY flid, state_version`)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Join(s, ", ")
}

// ev is a msg event of flight flid's version v.
func ev(topic, flid string, v int64) sink.Event {
	return sink.Event{Topic: topic, Key: flid, Value: fmt.Appendf(nil, `{"flid":%q,"stateVersion":%d}`, flid, v), MsgID: 100 + v, StateVersion: v, OriginAt: t0}
}

// records are "key=value" of what a consumer reads; "key=<nil>" for a tombstone.
func records(rs []*kgo.Record) string {
	var out []string
	for _, r := range rs {
		v := "<nil>"
		if r.Value != nil {
			var e struct {
				StateVersion int64 `json:"stateVersion"`
			}
			v = string(r.Value)
			if json.Unmarshal(r.Value, &e) == nil && e.StateVersion > 0 {
				v = fmt.Sprintf("v%d", e.StateVersion)
			}
		}
		out = append(out, string(r.Key)+"="+v)
	}
	return strings.Join(out, " ")
}

var errCrash = errors.New("crash")

// commitThenCrash queues evs and publishes them with a publisher that
// dies between the Kafka commit and the PostgreSQL delete.
func (e *env) commitThenCrash(evs ...sink.Event) {
	e.t.Helper()
	e.queue(evs...)
	p := e.publisher(e.config(true), nil)
	event.SetHook(p, crashAt(event.PointAfterCommit))
	if _, err := p.Publish(e.ctx); !errors.Is(err, errCrash) {
		e.t.Fatalf("no crash: %v", err)
	}
	p.Close()
}

// crashAt is a hook that crashes at point.
func crashAt(point string) func(string) error {
	return func(p string) error {
		if p == point {
			return errCrash
		}
		return nil
	}
}

// TestPublisherCrashWindows kills the publisher (a crash: the publisher is
// dropped as it is, a new one starts) inside a batch and between the Kafka
// commit and the PostgreSQL delete, with and without exactly-once: at
// least once produces the batch twice; exactly once shows every event to
// a read_committed consumer once, the reconciliation deletes what the
// commit published without producing it again, and msg_event records the
// committed copy.
func TestPublisherCrashWindows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		exactlyOnce bool
		point       string
		// committed is what a read_committed consumer reads, uncommitted
		// what a read_uncommitted one reads.
		committed, uncommitted string
		// where msg_event says the versions landed
		index string
	}{
		{false, event.PointAfterCommit, "a=v1 b=v3 a=<nil> a=v1 b=v3 a=<nil>", "a=v1 b=v3 a=<nil> a=v1 b=v3 a=<nil>", "a v1 0@3, b v3 0@4"},
		{true, event.PointInBatch, "a=v1 b=v3 a=<nil>", "a=v1 b=v3 a=<nil> a=v1 b=v3 a=<nil>", "a v1 0@4, b v3 0@5"},
		{true, event.PointAfterCommit, "a=v1 b=v3 a=<nil>", "a=v1 b=v3 a=<nil>", "a v1 0@0, b v3 0@1"},
	} {
		t.Run(fmt.Sprintf("exactly-once=%v/%s", tc.exactlyOnce, tc.point), func(t *testing.T) {
			e := newEnv(t, nil)
			e.queue(ev(e.ev, "a", 1), ev(e.ev, "b", 3))
			e.queue(sink.Event{Topic: e.ev, Key: "a"}) // a tombstone, no flight version

			p := e.publisher(e.config(tc.exactlyOnce), nil)
			event.SetHook(p, crashAt(tc.point))
			if _, err := p.Publish(e.ctx); !errors.Is(err, errCrash) {
				t.Fatalf("no crash: %v", err)
			}
			p.Close()

			p2 := e.publisher(e.config(tc.exactlyOnce), nil)
			n, err := p2.Publish(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			st := p2.Stats()
			if tc.exactlyOnce && tc.point == event.PointAfterCommit {
				// Reconciled at start-up; nothing left to publish.
				if n != 0 || st.Reconciled != 3 || st.Published[e.ev] != 0 {
					t.Fatalf("after the crash: published %d, stats %+v; want 3 reconciled", n, st)
				}
			} else if n != 3 || st.Published[e.ev] != 3 {
				t.Fatalf("after the crash: published %d, stats %+v", n, st)
			}
			if got := records(testenv.ReadToEnd(t, e.brokers, e.ev, true, 10*time.Second)); got != tc.committed {
				t.Errorf("read_committed %q, want %q", got, tc.committed)
			}
			if got := records(testenv.ReadToEnd(t, e.brokers, e.ev, false, 10*time.Second)); got != tc.uncommitted {
				t.Errorf("read_uncommitted %q, want %q", got, tc.uncommitted)
			}
			if got := e.msgEvents(); got != tc.index {
				t.Errorf("msg_event %q, want %q", got, tc.index)
			}
			if left := e.outbox(); left != 0 {
				t.Errorf("%d rows left in the outbox", left)
			}
			if n, err := p2.Publish(e.ctx); n != 0 || err != nil {
				t.Fatalf("empty outbox published %d %v", n, err)
			}
			if tc.exactlyOnce {
				wantTxn := map[string]int64{"committed": 1}
				if tc.point == event.PointAfterCommit {
					wantTxn = map[string]int64{}
				}
				if fmt.Sprint(st.Transactions) != fmt.Sprint(wantTxn) || !st.ExactlyOnce || st.TransactionalID != e.txnID || st.Position != 3 {
					t.Errorf("stats %+v, want transactions %v at position 3", st, wantTxn)
				}
			}
		})
	}
}

// TestPublisherReconcileCrash crashes during the start-up reconciliation
// itself, before it deleted the committed batch: the next start reconciles
// again, and nothing is published twice.
func TestPublisherReconcileCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.commitThenCrash(ev(e.ev, "a", 1), ev(e.ev, "a", 2))
	p := e.publisher(e.config(true), nil)
	event.SetHook(p, crashAt(event.PointReconcile))
	if _, err := p.Publish(e.ctx); !errors.Is(err, errCrash) {
		t.Fatalf("no crash in the reconciliation: %v", err)
	}
	p.Close()
	if e.outbox() != 2 {
		t.Fatalf("%d rows in the outbox, the crash came before the delete", e.outbox())
	}
	e.queue(ev(e.ev, "a", 3))
	p = e.publisher(e.config(true), nil)
	if n, err := p.Publish(e.ctx); n != 1 || err != nil {
		t.Fatalf("published %d %v, want v3 alone", n, err)
	}
	if got := records(testenv.ReadToEnd(t, e.brokers, e.ev, true, 10*time.Second)); got != "a=v1 a=v2 a=v3" {
		t.Fatalf("read_committed %q", got)
	}
	if st := p.Stats(); st.Reconciled != 2 || st.Position != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPublisherDedupe: a version queued twice (a transition redelivered
// after a crash re-queues its event), in one batch or after it was
// published, is published once; tombstones are never de-duplicated.
func TestPublisherDedupe(t *testing.T) {
	t.Parallel()
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) {
			e := newEnv(t, nil)
			p := e.publisher(e.config(exactlyOnce), nil)
			e.queue(ev(e.ev, "a", 1), ev(e.ev, "a", 2), ev(e.ev, "a", 2), ev(e.ev, "b", 1))
			e.queue(sink.Event{Topic: e.ev, Key: "c"}, sink.Event{Topic: e.ev, Key: "c"})
			if n, err := p.Publish(e.ctx); n != 6 || err != nil {
				t.Fatalf("publish: %d %v", n, err)
			}
			e.queue(ev(e.ev, "a", 2), ev(e.ev, "b", 1), ev(e.ev, "a", 3))
			if n, err := p.Publish(e.ctx); n != 3 || err != nil {
				t.Fatalf("publish: %d %v", n, err)
			}
			// A batch of duplicates only: deleted without a transaction.
			e.queue(ev(e.ev, "a", 3))
			if n, err := p.Publish(e.ctx); n != 1 || err != nil {
				t.Fatalf("publish: %d %v", n, err)
			}
			want := "a=v1 a=v2 b=v1 c=<nil> c=<nil> a=v3"
			if got := records(testenv.ReadToEnd(t, e.brokers, e.ev, true, 10*time.Second)); got != want {
				t.Fatalf("read_committed %q, want %q", got, want)
			}
			st := p.Stats()
			if st.Deduplicated != 4 || st.Published[e.ev] != 6 || e.outbox() != 0 {
				t.Fatalf("stats %+v, outbox %d", st, e.outbox())
			}
			if exactlyOnce && st.Transactions["committed"] != 2 {
				t.Fatalf("transactions %v, want 2 (the duplicates-only batch needs none)", st.Transactions)
			}
			if got := e.msgEvents(); got != "a v1 0@0, a v2 0@1, a v3 0@5, b v1 0@2" && !exactlyOnce {
				t.Fatalf("msg_event %q", got)
			}
			// A row queued as new (sink.Event.New: the flights processor
			// wrote its flight from the version before) is not looked up:
			// this one would be skipped otherwise.
			fresh := ev(e.ev, "b", 1)
			fresh.New = true
			e.queue(fresh)
			if n, err := p.Publish(e.ctx); n != 1 || err != nil {
				t.Fatalf("publish: %d %v", n, err)
			}
			if st := p.Stats(); st.Deduplicated != 4 || st.Published[e.ev] != 7 {
				t.Fatalf("a row queued as new: stats %+v", st)
			}
		})
	}
}

// TestPublisherReadAhead: a round's delete reads the next round's rows in
// its transaction (sink.DeleteOutbox). Those rows are de-duplicated
// against the msg_event rows the same transaction recorded, and rows
// queued after the read wait for the round after.
func TestPublisherReadAhead(t *testing.T) {
	t.Parallel()
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) {
			e := newEnv(t, nil)
			cfg := e.config(exactlyOnce)
			cfg.Batch = 2
			p := e.publisher(cfg, nil)
			// The third row announces again the version the first round
			// publishes: only the first round's msg_event can tell.
			e.queue(ev(e.ev, "a", 1), ev(e.ev, "a", 2), ev(e.ev, "a", 1), ev(e.ev, "b", 1), ev(e.ev, "c", 1))
			if n, err := p.Publish(e.ctx); n != 2 || err != nil {
				t.Fatalf("first round: %d %v", n, err)
			}
			e.queue(ev(e.ev, "d", 1))
			for i, want := range []int{2, 2, 0} {
				if n, err := p.Publish(e.ctx); n != want || err != nil {
					t.Fatalf("round %d: %d %v, want %d", i+2, n, err, want)
				}
			}
			if got, want := records(testenv.ReadToEnd(t, e.brokers, e.ev, true, 10*time.Second)), "a=v1 a=v2 b=v1 c=v1 d=v1"; got != want {
				t.Fatalf("read_committed %q, want %q", got, want)
			}
			if st := p.Stats(); st.Deduplicated != 1 || st.Published[e.ev] != 5 || e.outbox() != 0 {
				t.Fatalf("stats %+v, outbox %d", st, e.outbox())
			}
		})
	}
}

// TestPublisherVacuum: the publisher vacuums the outbox once it has
// deleted VacuumRows rows since the last vacuum (counting produced and
// de-duplicated rows alike), and never with VacuumRows 0.
func TestPublisherVacuum(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	vacuums := func() int64 {
		t.Helper()
		var n int64
		if err := e.pool.QueryRow(e.ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'event_outbox'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	publish := func(p *event.Publisher, evs ...sink.Event) {
		t.Helper()
		e.queue(evs...)
		if n, err := p.Publish(e.ctx); n != len(evs) || err != nil {
			t.Fatalf("publish: %d %v", n, err)
		}
	}
	cfg := e.config(true)
	cfg.VacuumRows = 0
	off := e.publisher(cfg, nil)
	publish(off, ev(e.ev, "a", 1), ev(e.ev, "a", 2), ev(e.ev, "a", 3))
	if n := vacuums(); n != 0 {
		t.Fatalf("%d vacuums with MSGX_PUBLISH_VACUUM_ROWS=0", n)
	}
	off.Close()
	cfg.VacuumRows = 4
	p := e.publisher(cfg, nil)
	publish(p, ev(e.ev, "b", 1), ev(e.ev, "b", 2), ev(e.ev, "b", 3))
	if n := vacuums(); n != 0 {
		t.Fatalf("%d vacuums after 3 of 4 rows", n)
	}
	// The fourth row, a duplicate, completes the count.
	publish(p, ev(e.ev, "b", 3), ev(e.ev, "c", 1))
	if n := vacuums(); n != 1 {
		t.Fatalf("%d vacuums after 5 rows, want 1", n)
	}
	publish(p, ev(e.ev, "c", 2), ev(e.ev, "c", 3))
	if n := vacuums(); n != 1 {
		t.Fatalf("%d vacuums after 2 more rows, want still 1", n)
	}
	if st := p.Stats(); st.Published[e.ev] != 6 || st.Deduplicated != 1 || e.outbox() != 0 {
		t.Fatalf("stats %+v, outbox %d", st, e.outbox())
	}
}

// TestPublisherFenced runs two publishers against one outbox: the first
// stops inside a batch (a process paused), the second starts (a standby
// taking over), which fences the first, aborts its open transaction and
// publishes everything; the first resumes, its commit is refused, it says
// so in one ERROR line and stops publishing. A read_committed consumer
// sees every event once.
func TestPublisherFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for v := int64(1); v <= 5; v++ {
		e.queue(ev(e.ev, "a", v))
	}
	old := e.publisher(e.config(true), nil)
	paused, resume := make(chan struct{}), make(chan struct{})
	event.SetHook(old, func(point string) error {
		if point == event.PointInBatch {
			close(paused)
			<-resume
		}
		return nil
	})
	var wg sync.WaitGroup
	var oldN int
	var oldErr error
	wg.Go(func() { oldN, oldErr = old.Publish(e.ctx) })
	<-paused

	standby := e.publisher(e.config(true), nil)
	if n, err := standby.Publish(e.ctx); n != 5 || err != nil {
		t.Fatalf("the standby published %d %v", n, err)
	}
	e.queue(ev(e.ev, "a", 6))
	close(resume)
	wg.Wait()
	if oldN != 0 || !errors.Is(oldErr, event.ErrFenced) {
		t.Fatalf("the old publisher after it resumed: %d %v, want fenced", oldN, oldErr)
	}
	st := old.Stats()
	if st.Fenced == "" || !st.FencedAt.Equal(e.clk.Now()) || st.Transactions["aborted"] != 1 {
		t.Fatalf("old publisher's stats %+v", st)
	}
	if n, err := old.Publish(e.ctx); n != 0 || !errors.Is(err, event.ErrFenced) {
		t.Fatalf("a fenced publisher published again: %d %v", n, err)
	}
	if n, err := standby.Publish(e.ctx); n != 1 || err != nil {
		t.Fatalf("the standby, after the old one resumed: %d %v", n, err)
	}
	if got := records(testenv.ReadToEnd(t, e.brokers, e.ev, true, 10*time.Second)); got != "a=v1 a=v2 a=v3 a=v4 a=v5 a=v6" {
		t.Fatalf("read_committed %q", got)
	}
	errorLines := 0
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) {
			errorLines++
			if !strings.Contains(l, "fenced") || !strings.Contains(l, e.txnID) {
				t.Errorf("ERROR line without the reason: %s", l)
			}
		}
	}
	if errorLines != 1 {
		t.Fatalf("%d ERROR lines, want one:\n%s", errorLines, e.logs.String())
	}

	// Run of the fenced publisher waits without publishing; a new Run (the
	// instance took the process lock again) starts a new session.
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := old.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if old.Stats().Fenced != "" {
		t.Fatal("a new Run kept the fenced state")
	}
}

// TestPublisherInactive: a publisher whose instance no longer holds the
// process lock never initialises the transactional ID, so it cannot fence
// the instance that took over.
func TestPublisherInactive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.queue(ev(e.ev, "a", 1))
	lost := errors.New("advisory lock session lost")
	p := e.publisher(e.config(true), func(context.Context) error { return lost })
	if _, err := p.Publish(e.ctx); !errors.Is(err, lost) {
		t.Fatalf("published without the lock: %v", err)
	}
	active := e.publisher(e.config(true), func(context.Context) error { return nil })
	if n, err := active.Publish(e.ctx); n != 1 || err != nil {
		t.Fatalf("the active publisher: %d %v", n, err)
	}
}

// TestPublisherRestoredOutbox: the rows with the ids of the last committed
// batch are not the rows it published (PostgreSQL restored from a backup
// whose sequence is behind what Kafka saw): they are published again, not
// deleted unpublished.
func TestPublisherRestoredOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.commitThenCrash(ev(e.ev, "a", 1), ev(e.ev, "a", 2))
	if _, err := e.pool.Exec(e.ctx, `UPDATE event_outbox SET value = '{"flid":"a","stateVersion":9}'::bytea, state_version = 9 WHERE state_version = 2`); err != nil {
		t.Fatal(err)
	}
	p := e.publisher(e.config(true), nil)
	if n, err := p.Publish(e.ctx); n != 2 || err != nil {
		t.Fatalf("published %d %v", n, err)
	}
	if got := records(testenv.ReadToEnd(t, e.brokers, e.ev, true, 10*time.Second)); got != "a=v1 a=v2 a=v1 a=v9" {
		t.Fatalf("read_committed %q", got)
	}
	if !strings.Contains(e.logs.String(), "not what it published") {
		t.Fatalf("no warning:\n%s", e.logs.String())
	}
}

// TestPublisherPositionWithoutEvents: the position was committed but its
// events are not readable (the embedded broker dying in the middle of a
// commit can leave that; here the records are deleted): the batch is
// published again instead of being deleted unpublished.
func TestPublisherPositionWithoutEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.commitThenCrash(ev(e.ev, "a", 1), ev(e.ev, "a", 2))
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: e.ev, Partition: 0, At: 3}) // both events and the marker
	if _, err := kadm.NewClient(cl).DeleteRecords(e.ctx, offsets); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	p := e.publisher(e.config(true), nil)
	if n, err := p.Publish(e.ctx); n != 2 || err != nil {
		t.Fatalf("published %d %v, want the batch again", n, err)
	}
	if got := records(testenv.ReadToEnd(t, e.brokers, e.ev, true, 10*time.Second)); got != "a=v1 a=v2" {
		t.Fatalf("read_committed %q", got)
	}
	if !strings.Contains(e.logs.String(), "not all visible") || p.Stats().Reconciled != 0 {
		t.Fatalf("stats %+v, log:\n%s", p.Stats(), e.logs.String())
	}
}

// TestPublisherDisturbedCluster publishes a backlog through a three-broker
// cluster whose partition leaders and transaction coordinators move every
// few hundred milliseconds: every version reaches a read_committed
// consumer exactly once and in order per FLID, over three partitions.
func TestPublisherDisturbedCluster(t *testing.T) {
	t.Parallel()
	c := testenv.NewCluster(t)
	e := newEnv(t, c.Addrs())
	const flights, versions = 30, 15
	go func() {
		for v := int64(1); v <= versions; v++ {
			var evs []sink.Event
			for f := range flights {
				evs = append(evs, ev(e.ev3, fmt.Sprintf("F%02d", f), v))
			}
			e.queue(evs...)
			time.Sleep(40 * time.Millisecond)
		}
	}()
	cfg := e.config(true)
	cfg.Batch = 30
	p := e.publisher(cfg, nil)
	d := c.Disturb(testenv.Disturbance{Every: 300 * time.Millisecond, Leaders: true, Coordinators: true})
	deadline := time.Now().Add(90 * time.Second)
	published := 0
	for published < flights*versions {
		n, err := p.Publish(e.ctx)
		if errors.Is(err, event.ErrFenced) {
			t.Fatalf("fenced by a disturbance: %v", err)
		}
		if err != nil {
			t.Logf("retrying: %v", err)
			time.Sleep(100 * time.Millisecond)
		}
		published += n
		if time.Now().After(deadline) {
			t.Fatalf("published %d of %d", published, flights*versions)
		}
	}
	got := d.Stop()
	assertExactlyOnce(t, testenv.ReadToEnd(t, c.Addrs(), e.ev3, true, 20*time.Second), flights, versions)
	t.Logf("%d events through %+v; transactions %v", flights*versions, got, p.Stats().Transactions)
}

// assertExactlyOnce checks that rs holds versions 1..versions of each of
// the flights once, in version order per FLID.
func assertExactlyOnce(t *testing.T, rs []*kgo.Record, flights int, versions int64) {
	t.Helper()
	last := map[string]int64{}
	for _, r := range rs {
		var e struct {
			FLID         string `json:"flid"`
			StateVersion int64  `json:"stateVersion"`
		}
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		if e.StateVersion != last[e.FLID]+1 {
			t.Fatalf("%s: version %d after %d", e.FLID, e.StateVersion, last[e.FLID])
		}
		last[e.FLID] = e.StateVersion
	}
	if len(last) != flights {
		t.Fatalf("%d flights, want %d", len(last), flights)
	}
	for f, v := range last {
		if v != versions {
			t.Fatalf("%s ends at version %d, want %d", f, v, versions)
		}
	}
}

// TestPublisherKafkaDown: without Kafka nothing leaves the outbox.
func TestPublisherKafkaDown(t *testing.T) {
	t.Parallel()
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) {
			ctx := context.Background()
			pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			kc := testenv.KafkaConfig([]string{"127.0.0.1:1"})
			kc.Timeout = time.Second
			cfg := event.Config{Batch: 1000, Poll: time.Second, ExactlyOnce: exactlyOnce, TransactionalID: "test-publisher",
				PositionTopic: "test.publisher-position", TxnTimeout: 30 * time.Second}
			p, err := event.New(cfg, event.Deps{Pool: pool, DBTimeout: 10 * time.Second,
				Brokers: []string{"127.0.0.1:1"}, Kafka: kc, Clock: clock.Real{}, Log: testenv.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				return sink.QueueEvents(ctx, tx, []sink.Event{{Topic: "ev", Key: "a", Value: []byte("1")}}, time.Now())
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Publish(ctx); err == nil {
				t.Fatal("published without Kafka")
			}
			var left int
			_ = pool.QueryRow(ctx, "SELECT COUNT(*) FROM event_outbox").Scan(&left)
			if left != 1 {
				t.Fatalf("the event left the outbox without being produced: %d", left)
			}
		})
	}
}

// syncBuffer collects log lines from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
