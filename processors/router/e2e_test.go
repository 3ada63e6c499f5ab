package router

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lovoo/goka/storage"

	"msgx/ingest"
	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/sample"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/route/routetest"
)

// pipeline runs the real ingest bridge and the router over MariaDB, an
// in-process Kafka and PostgreSQL (reached through a proxy the test can take
// down). The router runs on a fake clock so backoffs are driven by the test.
type pipeline struct {
	t       *testing.T
	my      *sql.DB
	brokers []string
	pgProxy *testenv.Proxy
	msgs    *sink.Messages
	clock   *clock.Fake
	cfg     Config
	cancel  func()
	done    chan error
}

func startPipeline(t *testing.T, mut ...func(*Config)) *pipeline {
	t.Helper()
	p := &pipeline{t: t, cfg: testConfig(), clock: clock.NewFake(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))}
	for _, m := range mut {
		m(&p.cfg)
	}
	pgDSN := sinktest.NewPG(t)
	p.pgProxy = testenv.NewProxy(t, "127.0.0.1:5432")
	routerDSN := strings.Replace(pgDSN, "127.0.0.1:5432", p.pgProxy.Addr(), 1)
	myDSN := testenv.NewMySQL(t)
	p.my = sinktest.OpenMySQL(t, myDSN)
	// Kafka is kfake, in-process: this package tests its own logic against a
	// broker, one per test in milliseconds; the Kafka claims run on Apache
	// Kafka (cmd/msgx, emitters/event; docs/design.md#kafka-divergences).
	p.brokers = testenv.NewBroker(t)
	kc := testenv.KafkaConfig(p.brokers)
	log := testenv.Logger(t)

	icfg := ingest.Config{Topic: "msgx.inbox", PollInterval: 20 * time.Millisecond, ClaimBatch: 100,
		MaxCommitDelay: time.Minute, HoleProbeTimeout: time.Second, Cutover: "zero", LateWatch: time.Hour, LateCheckInterval: time.Minute}
	if err := kafka.EnsureTopics(p.brokers, kc, append(p.cfg.TopicSpecs(), icfg.TopicSpec(), p.cfg.TableSpec()), log); err != nil {
		t.Fatal(err)
	}
	ingestPool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second, PGMaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ingestPool.Close)
	routerPool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: routerDSN, Timeout: 2 * time.Second, PGMaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(routerPool.Close)
	p.msgs = sink.NewMessages(routerPool, 2*time.Second)

	bridge, err := ingest.New(icfg, ingest.Deps{
		Inbox: sinktest.Tables(t, p.my, nil, "cminmsgs", 10*time.Second), Cursors: sink.NewCursors(ingestPool, 10*time.Second),
		PG: sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second}, Brokers: p.brokers, Kafka: kc, Clock: clock.Real{}, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(p.cfg, Deps{Messages: p.msgs, Clock: p.clock, Log: log, Loc: routetest.Shanghai})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan error, 2)
	go func() { p.done <- bridge.Run(ctx) }()
	pb, err := kafka.ProducerBuilder(kc)
	if err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- r.Run(ctx, p.brokers, pb, kafka.GokaOptions(kc, storage.MemoryBuilder(), log)...) }()
	t.Cleanup(p.stop)
	return p
}

func (p *pipeline) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	for i := 0; i < 2; i++ {
		if err := <-p.done; err != nil {
			p.t.Errorf("component stopped with %v", err)
		}
	}
	p.cancel = nil
}

func (p *pipeline) insert(raw string) int64 { return testenv.InsertInbox(p.t, p.my, raw) }

// state polls PostgreSQL until message id reaches a state accepted by ok.
func (p *pipeline) waitFor(id int64, what string, ok func(sink.Message) bool) sink.Message {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		m, found, err := p.msgs.Get(context.Background(), id)
		if err == nil && found && ok(m) {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("message %d never became %s", id, what)
	return sink.Message{}
}

func (p *pipeline) waitState(id int64, state string) sink.Message {
	return p.waitFor(id, state, func(m sink.Message) bool { return m.State == state })
}

func (p *pipeline) noRow(id int64) {
	p.t.Helper()
	if m, found, err := p.msgs.Get(context.Background(), id); err == nil && found {
		p.t.Fatalf("message %d was touched while the head blocks: %+v", id, m)
	}
}

func TestPipelineEndToEnd(t *testing.T) {
	p := startPipeline(t)
	ctx := context.Background()

	// A head that fails for a reason of its own (the index rejects FLID 666
	// through a trigger) blocks everything behind it until it recovers.
	pgDirect := p.msgs.Pool()
	if _, err := pgDirect.Exec(ctx, `CREATE FUNCTION reject_666() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.flid = '666' THEN RAISE EXCEPTION 'flight 666 rejected by test trigger'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER reject_666 BEFORE INSERT ON flight_index FOR EACH ROW EXECUTE FUNCTION reject_666()`); err != nil {
		t.Fatal(err)
	}
	head := p.insert(routetest.Dnld(1, routetest.Fltr("666", "23JAN210535", "<FLNO>CA666</FLNO>")))
	behind := p.insert(sample.XML(t, "INSERT_CMINMSGS_SCHD.sql", 0))
	if err := p.clock.BlockUntil(ctx, 1); err != nil { // the head sleeps its first backoff
		t.Fatal(err)
	}
	m := p.waitState(head, message.StateFailed)
	if m.Attempts != 1 || str(m.ErrorClass) != message.ClassInfra {
		t.Fatalf("head after one failure: %+v", m)
	}
	p.noRow(behind)
	if _, err := pgDirect.Exec(ctx, `DROP TRIGGER reject_666 ON flight_index`); err != nil {
		t.Fatal(err)
	}
	p.clock.Advance(time.Second)
	p.waitState(head, message.StateRouted)
	p.waitState(behind, message.StateRouted)

	// PostgreSQL goes away: the router pauses; the message keeps its attempts.
	p.pgProxy.Down()
	during := p.insert(flop("500", "15", "ESTT", "<ESTT>23JAN210600</ESTT>"))
	for i := 0; i < 3; i++ { // a few outage retries pass
		if err := p.clock.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		p.clock.Advance(10 * time.Second)
	}
	p.pgProxy.Up()
	for {
		if m, found, err := p.msgs.Get(ctx, during); err == nil && found && m.State == message.StateRouted {
			if m.Attempts != 0 {
				t.Fatalf("the outage burned attempts: %+v", m)
			}
			break
		}
		if p.clock.Waiters() > 0 {
			p.clock.Advance(10 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Duplicates, ignored and protocol-violating messages.
	dup := p.insert(flop("500", "15", "ESTT", "<ESTT>23JAN210700</ESTT>"))
	ign := p.insert(routetest.Msg("LDM", "ANY", "1", "<LDM/>"))
	bad := p.insert(strings.Replace(routetest.Dnld(2, routetest.Fltr("16", "25JAN210535", ""), routetest.Fltr("30", "25JAN210535", "")), "<SEQN>77<", "<SEQN>79<", 1))
	if m := p.waitState(dup, message.StateSkipped); str(m.Reason) != fmt.Sprintf("duplicate-of:%d", during) {
		t.Fatalf("duplicate reason %q", str(m.Reason))
	}
	if m := p.waitState(ign, message.StateSkipped); str(m.Reason) != "ignored:LDM-*" {
		t.Fatalf("ignored reason %q", str(m.Reason))
	}
	if m := p.waitState(bad, message.StateDead); str(m.ErrorClass) != message.ClassProtocol {
		t.Fatalf("protocol violation %+v", m)
	}
	last := p.insert(flop("501", "16", "ESTT", "<ESTT>23JAN210800</ESTT>"))
	p.waitState(last, message.StateRouted)

	// The transitions on the topic, read by an independent client, in order.
	var got []string
	for _, r := range testenv.ReadTopic(t, p.brokers, p.cfg.FlightTopic, 5, 20*time.Second) {
		var tr flight.Transition
		if err := json.Unmarshal(r.Value, &tr); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != tr.FLID {
			t.Fatalf("key %q for FLID %s", r.Key, tr.FLID)
		}
		got = append(got, fmt.Sprintf("%d:%s:%s", tr.MsgID, tr.FLID, tr.Kind))
	}
	want := []string{
		fmt.Sprintf("%d:666:SCHEDULE", head), fmt.Sprintf("%d:15:SCHEDULE", behind), fmt.Sprintf("%d:16:SCHEDULE", behind),
		fmt.Sprintf("%d:15:FLOP", during), fmt.Sprintf("%d:16:FLOP", last),
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("flight transitions\n got %v\nwant %v", got, want)
	}
	if n := testenv.EndOffset(t, p.brokers, p.cfg.FlightTopic); n != 5 {
		t.Fatalf("the protocol-violating DNLD emitted: %d transitions on the topic", n)
	}
}

// Through MariaDB, the bridge and Kafka: messages whose values are bad are
// decided at once, with the clock standing still, and nothing behind them
// waits (a CODEC_ERROR used to hold the queue for 15 s of backoff).
func TestPipelineBadValuesDoNotStallTheQueue(t *testing.T) {
	p := startPipeline(t, func(c *Config) { c.IgnoreRules = "LDM-*,EROR-*,FLOP-FINT" })
	codec := p.insert(strings.Replace(flop("600", "15", "ESTT", "<ESTT>23JAN210600</ESTT>"), "20261130080000", "2026-11-30", 1))
	sodt := p.insert(strings.Replace(routetest.Dnld(1, routetest.Fltr("40", "31NOV260800", "")), "<SEQN>77<", "<SEQN>601<", 1))
	stat := p.insert(routetest.Rsta("ADD", routetest.RstaRec("GATE", "21", "X", "", "")))
	ignored := p.insert(routetest.Msg("FLOP", "FINT", "602", "<FLOP><FINT/></FLOP>")) // ignored, and without the FLID a FLOP needs
	good := p.insert(strings.Replace(routetest.Dnld(1, routetest.Fltr("41", "23JAN210535", "")), "<SEQN>77<", "<SEQN>603<", 1))

	if m := p.waitState(codec, message.StateDead); str(m.ErrorClass) != message.ClassCodecError || m.Attempts != 0 {
		t.Fatalf("codec error %+v", m)
	}
	if m := p.waitState(sodt, message.StateDead); str(m.ErrorClass) != message.ClassProtocol {
		t.Fatalf("impossible SODT %+v", m)
	}
	if m := p.waitState(stat, message.StateDead); str(m.ErrorClass) != message.ClassProtocol {
		t.Fatalf("bad STAT %+v", m)
	}
	if m := p.waitState(ignored, message.StateSkipped); str(m.Reason) != "ignored:FLOP-FINT" {
		t.Fatalf("ignored FLOP %+v", m)
	}
	p.waitState(good, message.StateRouted)
	if p.clock.Now() != time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC) {
		t.Fatal("the clock moved")
	}
	if n := testenv.EndOffset(t, p.brokers, p.cfg.RefdataTopic); n != 0 {
		t.Fatalf("%d refdata transitions emitted", n)
	}
	// ROUTED is recorded before the transition is produced: wait for it.
	deadline := time.Now().Add(30 * time.Second)
	n := testenv.EndOffset(t, p.brokers, p.cfg.FlightTopic)
	for n < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n = testenv.EndOffset(t, p.brokers, p.cfg.FlightTopic)
	}
	if n != 1 {
		t.Fatalf("%d flight transitions emitted, want the good package's one", n)
	}
	if n := testenv.EndOffset(t, p.brokers, p.cfg.RefdataTopic); n != 0 {
		t.Fatalf("%d refdata transitions emitted", n)
	}
}
