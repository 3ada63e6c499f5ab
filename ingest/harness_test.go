package ingest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/kafka"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// harness wires a bridge to a fresh MariaDB inbox, a fresh PostgreSQL schema
// and an in-process Kafka broker.
type harness struct {
	t       *testing.T
	cfg     Config
	pg      sink.Config
	my      *sql.DB
	myDSN   string
	pool    *pgxpool.Pool
	brokers []string
	clock   *clock.Fake
	t0      time.Time
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, t0: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	h.clock = clock.NewFake(h.t0)
	h.pg = sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second}
	h.myDSN = testenv.NewMySQL(t)
	h.my = sinktest.OpenMySQL(t, h.myDSN)
	pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: h.pg.PGDSN, Timeout: 10 * time.Second, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h.pool = pool
	// Kafka is kfake, in-process: this package tests its own logic against a
	// broker, one per test in milliseconds; the Kafka claims run on Apache
	// Kafka (cmd/msgx, emitters/event; docs/design.md#kafka-divergences).
	h.brokers = testenv.NewBroker(t)
	h.cfg = Config{
		Topic: "msgx.inbox", PollInterval: time.Second, ClaimBatch: 100,
		MaxCommitDelay: 5 * time.Minute, HoleProbe: true, HoleGrace: time.Second, HoleProbeTimeout: 2 * time.Second,
		Cutover: "zero", LateWatch: 24 * time.Hour, LateCheckInterval: time.Second,
	}
	if mutate != nil {
		mutate(&h.cfg)
	}
	if err := h.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := kafka.EnsureTopics(h.brokers, testenv.KafkaConfig(h.brokers), []kafka.TopicSpec{h.cfg.TopicSpec()}, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	return h
}

// bridge returns a new bridge instance (a "process") on clock c.
func (h *harness) bridge(c clock.Clock) *Bridge {
	probe, err := sink.OpenMySQL(sink.Config{MySQLDSN: h.myDSN, Timeout: 10 * time.Second}, sinktest.ShanghaiInbox,
		map[string]string{"innodb_lock_wait_timeout": fmt.Sprint(int(h.cfg.HoleProbeTimeout / time.Second))})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { probe.Close() })
	b, err := New(h.cfg, Deps{
		Inbox:   sinktest.Tables(h.t, h.my, probe, "cminmsgs", 10*time.Second),
		Cursors: sink.NewCursors(h.pool, 10*time.Second),
		PG:      h.pg, Brokers: h.brokers, Kafka: testenv.KafkaConfig(h.brokers),
		Clock: c, Log: testenv.Logger(h.t),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(b.closeProducer)
	return b
}

// started returns a bridge whose cursor is loaded or seeded, ready for
// single poll() steps.
func (h *harness) started(c clock.Clock) (*Bridge, *sink.Cursor) {
	b := h.bridge(c)
	cur, err := b.start(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return b, &cur
}

func (h *harness) poll(b *Bridge, cur *sink.Cursor) time.Duration {
	h.t.Helper()
	wait, err := b.poll(context.Background(), cur)
	if err != nil {
		h.t.Fatalf("poll: %v", err)
	}
	return wait
}

// insert adds n messages and returns their IDs.
func (h *harness) insert(n int) []int64 {
	var ids []int64
	for i := 0; i < n; i++ {
		ids = append(ids, testenv.InsertInbox(h.t, h.my, msgXML(i)))
	}
	return ids
}

// insertID adds a message with an explicit ID (to make gaps on purpose).
func (h *harness) insertID(id int64) {
	h.t.Helper()
	if _, err := h.my.Exec("INSERT INTO cminmsgs (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES (?, ?, NULL)", id, msgXML(int(id))); err != nil {
		h.t.Fatal(err)
	}
}

func msgXML(i int) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20261130080000</DTTM><TYPE>FLOP</TYPE><STYP>ESTT</STYP></META><FLOP><FLID>%d</FLID><ESTT>30NOV260900</ESTT></FLOP></MSG>`, 1000+i, 15)
}

// topic reads n records (or what arrives within a few seconds) from
// msgx.inbox with an independent Kafka client.
func (h *harness) topic(n int) []Record {
	h.t.Helper()
	var out []Record
	for _, r := range testenv.ReadTopic(h.t, h.brokers, h.cfg.Topic, n, 10*time.Second) {
		var rec Record
		if err := json.Unmarshal(r.Value, &rec); err != nil {
			h.t.Fatalf("record at offset %d: %v", r.Offset, err)
		}
		if string(r.Key) != rec.Key() {
			h.t.Fatalf("record key %q does not match msgId %d", r.Key, rec.MsgID)
		}
		out = append(out, rec)
	}
	return out
}

func (h *harness) topicLen() int64 { return testenv.EndOffset(h.t, h.brokers, h.cfg.Topic) }

func ids(recs []Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.MsgID
	}
	return out
}

func (h *harness) cursor() sink.Cursor {
	h.t.Helper()
	c, ok, err := sink.NewCursors(h.pool, 10*time.Second).Load(context.Background())
	if err != nil || !ok {
		h.t.Fatalf("load cursor: %v %v", ok, err)
	}
	return c
}
