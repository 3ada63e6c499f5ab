package schd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/jackc/pgx/v5"

	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/tables/flight"
)

func TestConfig(t *testing.T) {
	// The defaults the environment parser applies with no variable set
	// (the real environment is ignored).
	var c Config
	if err := env.ParseWithOptions(&c, env.Options{Environment: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	if c != DefaultConfig() {
		t.Fatalf("environment defaults %+v, DefaultConfig %+v", c, DefaultConfig())
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Config{Topic: " ", FlushPeriod: 0, FlushLimit: 0}
	err := bad.Validate()
	for _, v := range []string{"MSGX_TOPIC_SCHD", "MSGX_SCHD_FLUSH_PERIOD", "MSGX_SCHD_FLUSH_LIMIT"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("Validate(%+v) = %v, want it to name %s", bad, err, v)
		}
	}
	if err := (Config{Topic: "x", FlushPeriod: time.Second, FlushLimit: MaxFlushLimit + 1}).Validate(); err == nil {
		t.Error("a flush limit above MaxFlushLimit was accepted")
	}
	spec := c.TopicSpec(0)
	if spec.Name != "msgx.schd" || !spec.Compact || spec.Partitions != 1 {
		t.Errorf("TopicSpec(0) = %+v", spec)
	}
	if c.TopicSpec(6).Partitions != 6 {
		t.Error("TopicSpec ignores its partitions")
	}
}

func TestNewFlusherRefusesNonD3Producer(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	kc := testenv.KafkaConfig(h.brokers)
	kc.Idempotent = false
	_, err := New(h.cfg, Deps{Pool: h.pool, DBTimeout: time.Second, Brokers: h.brokers, Kafka: kc, Clock: h.clock, Log: testenv.Logger(t)})
	if err == nil || !strings.Contains(err.Error(), "D3") {
		t.Fatalf("non-idempotent producer: %v", err)
	}
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Fatal("invalid configuration accepted")
	}
}

// Ten versions of a flight within one period are one record, the newest.
func TestAggregatesVersionsWithinAPeriod(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	f := h.flusher()
	h.run(f)
	states := chain(t, "100", 10, 10)
	for _, s := range states {
		h.write(s) // one transaction per version, as the processor does
	}
	h.write(chain(t, "200", 50, 3)...)
	h.period()

	recs := h.records()
	if got := versions(recs); !slices.Equal(got, []string{"100:10", "200:3"}) {
		t.Fatalf("records %v", got)
	}
	sameJSON(t, recs[0].value, states[9])
	// The value is the stored document itself: what GET /flights serves.
	doc, _, _ := sink.GetFlight(context.Background(), h.pool, "100")
	if string(recs[0].value) != string(doc) {
		t.Fatalf("record value %s differs from the stored doc %s", recs[0].value, doc)
	}
	if v, s := h.sent("100"); v != 10 || s != 10 {
		t.Fatalf("flight 100: state_version %d, schd_sent_version %d", v, s)
	}

	// A quiet period sends nothing; a new version is sent once.
	h.period()
	if n := len(h.records()); n != 2 {
		t.Fatalf("a quiet period produced records: %d", n)
	}
	next := apply(t, states[9], estt(99, "100"))
	h.write(next)
	h.period()
	if got := versions(h.records()); !slices.Equal(got, []string{"100:10", "200:3", "100:11"}) {
		t.Fatalf("records %v", got)
	}
	st := f.Stats()
	if st.Flushed != 3 || st.Flushes < 3 || st.LastFlushAt.IsZero() || st.LastError != "" {
		t.Fatalf("stats %+v", st)
	}
}

// A deleted flight is a tombstone (null value); a revived one is a document
// again.
func TestTombstoneForDeletedFlight(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	f := h.flusher()
	s1 := apply(t, nil, schedule(10, "7"))
	h.write(s1)
	if _, err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := apply(t, s1, fdel(11, "7"))
	h.write(s2)
	if _, err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s3 := apply(t, s2, schedule(12, "7"))
	h.write(s3)
	if _, err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := h.records()
	if len(recs) != 3 {
		t.Fatalf("records %v", versions(recs))
	}
	if r := recs[1]; r.value != nil || r.state != flight.StateDeleted || r.version != 2 {
		t.Fatalf("delete record: %+v (value %q)", r, r.value)
	}
	if r := recs[2]; r.value == nil || r.state != flight.StateActive || r.version != 3 {
		t.Fatalf("revival record: %+v", r)
	}
	sameJSON(t, recs[2].value, s3)
}

// The topic never carries an older version of a flight after a newer one:
// replays of older states are ignored by the writer, states written during a
// flush stay due, and the flush never waits for a writer.
func TestNeverGoesBackwards(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	f := h.flusher()
	ctx := context.Background()
	flush := func() {
		t.Helper()
		if _, err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	states := chain(t, "5", 10, 8) // v1..v8
	h.write(states[:3]...)
	flush() // v3

	// v4 is written, then a replay of v2: the row keeps v4.
	h.write(states[3])
	h.write(states[1])
	flush() // v4

	// v6 is committed between the flush's read (v5 is sent) and its mark:
	// the mark stays at 5 and v6 goes out with the next flush.
	h.write(states[4])
	f.afterProduce = func(context.Context) error { h.write(states[5]); return nil }
	flush() // v5
	f.afterProduce = nil
	if v, s := h.sent("5"); v != 6 || s != 5 {
		t.Fatalf("after a write during the flush: state_version %d, sent %d", v, s)
	}

	// v7 is written by a transaction still open while the flush marks: the
	// flush does not wait for it (SKIP LOCKED) and leaves the row due.
	var open pgx.Tx
	f.afterProduce = func(ctx context.Context) error {
		tx, err := h.pool.Begin(ctx)
		if err != nil {
			return err
		}
		open = tx
		return sink.WriteFlight(ctx, tx, states[6])
	}
	done := make(chan error, 1)
	go func() { _, err := f.Flush(ctx); done <- err }() // v6
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the flush waited for an open writer transaction")
	}
	f.afterProduce = nil
	if err := open.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if v, s := h.sent("5"); v != 7 || s != 5 {
		t.Fatalf("after a locked row: state_version %d, sent %d", v, s)
	}
	flush() // v7
	h.write(states[7])
	flush() // v8

	var got []int64
	for _, r := range h.records() {
		got = append(got, r.version)
	}
	if !slices.Equal(got, []int64{3, 4, 5, 6, 7, 8}) {
		t.Fatalf("flight 5 versions on the topic %v", got)
	}
	if v, s := h.sent("5"); v != 8 || s != 8 {
		t.Fatalf("final: state_version %d, sent %d", v, s)
	}
}

var errCrash = errors.New("simulated crash between produce and mark")

// A crash between produce and mark sends the same version again after the
// restart: at least once, never lost.
func TestAtLeastOnceAcrossRestart(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	states := chain(t, "9", 10, 3)
	h.write(states...)

	crashed := h.flusher()
	crashed.afterProduce = func(context.Context) error { return errCrash }
	if _, err := crashed.Flush(context.Background()); !errors.Is(err, errCrash) {
		t.Fatalf("flush with a crash: %v", err)
	}
	crashed.Close()
	if _, s := h.sent("9"); s != 0 {
		t.Fatalf("marked %d although the flush never committed", s)
	}
	if st := crashed.Stats(); st.Failures != 1 || !strings.Contains(st.LastError, errCrash.Error()) || st.Flushed != 0 {
		t.Fatalf("stats after the crash %+v", st)
	}

	// The restarted process sends v3 again, in its first period.
	restarted := h.flusher()
	h.run(restarted)
	h.period()
	recs := h.records()
	if got := versions(recs); !slices.Equal(got, []string{"9:3", "9:3"}) {
		t.Fatalf("records %v", got)
	}
	if string(recs[0].value) != string(recs[1].value) {
		t.Fatal("the resent record differs")
	}
	if _, s := h.sent("9"); s != 3 {
		t.Fatalf("sent %d after the restart", s)
	}
}

// A backlog drains in one period, FlushLimit records per flush, oldest
// change first.
func TestBacklogDrainsInBatchesOfFlushLimit(t *testing.T) {
	h := newHarness(t, harnessOpts{limit: 3})
	f := h.flusher()
	h.run(f)
	var want []string
	for i := 0; i < 7; i++ {
		flid := fmt.Sprint(300 - i) // FLID order is not change order
		h.write(chain(t, flid, int64(10+i), 1)...)
		want = append(want, flid+":1")
	}
	h.period()
	if got := versions(h.records()); !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if st := f.Stats(); st.Flushes != 3 || st.Flushed != 7 {
		t.Fatalf("stats %+v: want 3 flushes (3+3+1) in one period", st)
	}
}

// Kafka down: the flush fails, nothing is marked, the error is logged with
// component=schd; the next period after Kafka is back sends and marks.
func TestKafkaOutage(t *testing.T) {
	h := newHarness(t, harnessOpts{proxyKafka: true})
	f := h.flusher()
	h.run(f)
	h.write(chain(t, "11", 10, 1)...)
	h.period()
	if got := versions(h.records()); !slices.Equal(got, []string{"11:1"}) {
		t.Fatalf("records %v", got)
	}

	h.write(chain(t, "12", 20, 2)...)
	h.kProxy.Down()
	h.period()
	if _, s := h.sent("12"); s != 0 {
		t.Fatalf("marked v%d while Kafka was down", s)
	}
	st := f.Stats()
	if st.Failures == 0 || st.LastError == "" {
		t.Fatalf("stats during the outage %+v", st)
	}
	if logs := h.logs.String(); !strings.Contains(logs, `"component":"schd"`) || !strings.Contains(logs, "schd flush failed") {
		t.Fatalf("no schd failure logged:\n%s", logs)
	}

	h.kProxy.Up()
	h.period()
	if got := versions(h.records()); !slices.Equal(got, []string{"11:1", "12:2"}) {
		t.Fatalf("records after the outage %v", got)
	}
	if _, s := h.sent("12"); s != 2 {
		t.Fatalf("sent %d after the outage", s)
	}
}

// PostgreSQL down: the flush fails before anything is sent; it resumes when
// PostgreSQL is back.
func TestPostgresOutage(t *testing.T) {
	h := newHarness(t, harnessOpts{proxyPG: true})
	f := h.flusher()
	h.run(f)
	h.write(chain(t, "21", 10, 2)...)
	h.pgProxy.Down()
	h.period()
	if n := testenv.EndOffset(t, h.brokers, h.cfg.Topic); n != 0 {
		t.Fatalf("%d records sent while PostgreSQL was down", n)
	}
	if st := f.Stats(); st.Failures == 0 || st.LastError == "" {
		t.Fatalf("stats during the outage %+v", st)
	}
	if !strings.Contains(h.logs.String(), "schd flush failed") {
		t.Fatal("no failure logged")
	}
	h.pgProxy.Up()
	h.period()
	if got := versions(h.records()); !slices.Equal(got, []string{"21:2"}) {
		t.Fatalf("records after the outage %v", got)
	}
	if _, s := h.sent("21"); s != 2 {
		t.Fatalf("sent %d after the outage", s)
	}
}

// Two flushers (two instances) never flush at the same time.
func TestOneFlushAtATime(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.write(chain(t, "31", 10, 1)...)
	ctx := context.Background()
	other, err := h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(sink.LockSchdFlush)); err != nil {
		t.Fatal(err)
	}
	f := h.flusher()
	if n, err := f.Flush(ctx); err != nil || n != 0 {
		t.Fatalf("flush while another instance flushes: %d %v", n, err)
	}
	_ = other.Rollback(ctx)
	if n, err := f.Flush(ctx); err != nil || n != 1 {
		t.Fatalf("flush after: %d %v", n, err)
	}
}
