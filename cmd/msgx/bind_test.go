package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/testenv"
	"msgx/processors/flights"
	"msgx/sink/sinktest"
)

func bindDNLD(seqn int, fltrs ...string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20210122220000</DTTM>`+
		`<TYPE>SCHD</TYPE><STYP>DNLD</STYP></META><SCHD><RECS>%d</RECS>%s</SCHD></MSG>`, seqn, len(fltrs), strings.Join(fltrs, ""))
}

func bindFLTR(flid, flno, maid string) string {
	m := ""
	if maid != "" {
		m = "<MAID>" + maid + "</MAID>"
	}
	return fmt.Sprintf(`<FLTR><FLID>%s</FLID><FLNO>%s</FLNO><SODT>23JAN210535</SODT>%s</FLTR>`, flid, flno, m)
}

func bindFLOP(seqn int, flid, estt string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20210122220000</DTTM>`+
		`<TYPE>FLOP</TYPE><STYP>ESTT</STYP></META><FLOP><FLID>%s</FLID><ESTT>%s</ESTT></FLOP></MSG>`, seqn, flid, estt)
}

func bindAIRL(seqn int, styp string, recs ...string) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "<AIRL><ITOP>%s</ITOP><ONAM>%s AIRLINES</ONAM></AIRL>", r, r)
	}
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20210122220000</DTTM>`+
		`<TYPE>AIRL</TYPE><STYP>%s</STYP></META><RECS>%d</RECS>%s</MSG>`, seqn, styp, len(recs), b.String())
}

// otherInstance is cfg for a second `msgx run` on the same databases with
// its own embedded Kafka (its own state directory and address): the issue's
// deployment.
func otherInstance(t *testing.T, cfg Config) Config {
	c := cfg
	c.StateDir = t.TempDir()
	c.Kafka.EmbeddedAddr = freeAddr(t)
	c.HTTPAddr = freeAddr(t)
	return c
}

// runBriefly runs the gateway and returns its error, or nil when it was
// still running after d (then it is stopped). A gateway that refuses to start
// on the binding stays up saying so (refuseToStart): runBriefly stops it as
// soon as its /readyz and /metrics say it refuses, and returns the refusal.
func runBriefly(t *testing.T, cfg Config, d time.Duration) error {
	t.Helper()
	if strings.HasSuffix(cfg.HTTPAddr, ":0") {
		cfg.HTTPAddr = freeAddr(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runGateway(ctx, cfg, testenv.Logger(t), roleAll) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				return nil
			}
			return err
		case <-tick.C:
			code, body := get(t, "http://"+cfg.HTTPAddr+"/readyz")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, refusedReason) {
				continue
			}
			if _, m := get(t, "http://"+cfg.HTTPAddr+"/metrics"); metricValue(m, "msgx_kafka_binding_refused", "") != 1 {
				t.Errorf("a refusing instance's /metrics without msgx_kafka_binding_refused 1:\n%s", m)
			}
			cancel()
			return <-done
		}
	}
}

func msgState(t *testing.T, pool *pgxpool.Pool, id int64) string {
	var s string
	_ = pool.QueryRow(context.Background(), `SELECT state FROM proc_state WHERE msg_id = $1`, id).Scan(&s)
	return s
}

// noSilentSuccess is the acceptance check: every SUCCEEDED flight
// message changed its flights (a flight_change row carries its id).
func noSilentSuccess(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT p.msg_id FROM proc_state p
		WHERE p.state = 'SUCCEEDED' AND p.msg_type IN ('FLOP', 'SCHD')
		AND NOT EXISTS (SELECT 1 FROM flight_change c WHERE c.msg_id = p.msg_id)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		t.Errorf("message %d is SUCCEEDED but changed no flight", id)
	}
}

// The failover: two `msgx run` on one PostgreSQL and MySQL, each
// with its own embedded Kafka. The second refuses to start, standby or not,
// and after the first is gone no later message ends SUCCEEDED. An operator
// who re-binds to the empty cluster without re-seeding gets a processor
// that halts on the first known flight, named in /readyz and /status,
// instead of silent SUCCEEDED messages.
func TestSecondInstanceOnItsOwnKafkaNeverCompletesMessages(t *testing.T) {
	cfgA, myDSN := testConfig(t, map[string]string{"MSGX_SCHD_FLUSH_PERIOD": "200ms"})
	my := sinktest.OpenMySQL(t, myDSN)
	pool := openPool(t, cfgA)
	stopA := start(t, cfgA)
	m1 := testenv.InsertInbox(t, my, bindDNLD(1, bindFLTR("100", "CA100", "")))
	m2 := testenv.InsertInbox(t, my, bindFLOP(2, "100", "23JAN210501"))
	waitFor(t, "the first instance applies its messages", time.Minute, func() bool {
		return msgState(t, pool, m1) == "SUCCEEDED" && msgState(t, pool, m2) == "SUCCEEDED"
	})

	cfgB := otherInstance(t, cfgA)
	// Started while the first runs (it would have become its standby).
	err := runBriefly(t, cfgB, 30*time.Second)
	if !errors.Is(err, errBinding) || !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), "msgx bind --force") {
		t.Fatalf("second instance on its own Kafka: %v, want a refusal naming both identities and msgx bind --force", err)
	}
	t.Logf("refusal: %v", err)
	stopA() // the active one dies
	m3 := testenv.InsertInbox(t, my, bindFLOP(3, "100", "23JAN210502"))
	if err := runBriefly(t, cfgB, 30*time.Second); !errors.Is(err, errBinding) {
		t.Fatalf("after the first is gone: %v, want the refusal", err)
	}
	if st := msgState(t, pool, m3); st != "" {
		t.Fatalf("message %d is %s: the refusing instance processed it", m3, st)
	}

	// The operator forces the binding to the empty cluster (without the
	// re-seed the move procedure requires).
	var out strings.Builder
	if err := runCommand(context.Background(), cfgB, "bind", []string{"--force"}, &out, testenv.Logger(t)); err != nil {
		t.Fatalf("msgx bind --force: %v\n%s", err, out.String())
	}
	stopB := start(t, cfgB)
	waitFor(t, "message 3 routed", time.Minute, func() bool { return msgState(t, pool, m3) == "ROUTED" })
	base := "http://" + cfgB.HTTPAddr
	var ready string
	waitFor(t, "readiness names the diverged flight", time.Minute, func() bool {
		code, body := get(t, base+"/readyz")
		ready = body
		return code == http.StatusServiceUnavailable && strings.Contains(body, "component flights paused: divergence: flight 100")
	})
	t.Logf("readyz: %s", ready)
	_, body := get(t, base+"/status")
	var rep struct {
		Alerts []string `json:"alerts"`
	}
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(rep.Alerts, "\n"), "component flights is paused: divergence: flight 100") {
		t.Fatalf("status alerts do not name the divergence: %q", rep.Alerts)
	}
	time.Sleep(time.Second) // a halted processor stays halted
	if st := msgState(t, pool, m3); st != "ROUTED" {
		t.Fatalf("message %d is %s, want ROUTED", m3, st)
	}
	var v int64
	_ = pool.QueryRow(context.Background(), `SELECT state_version FROM flight_schd WHERE flid = '100'`).Scan(&v)
	if v != 2 {
		t.Fatalf("flight 100 at version %d, want 2 (unchanged)", v)
	}
	stopB()
	noSilentSuccess(t, pool)
}

// docs/operations.md "Moving to another Kafka cluster", end to end: state
// built on cluster A; msgx stopped; msgx reseed writes the flights and
// refdata tables of cluster B from PostgreSQL; msgx bind --force; msgx runs
// on B and processing continues as it would have on A: a FLOP of a known
// flight applies on top of its version, a master created on B lists the
// child that named it on A (a re-seeded placeholder), a reference DNLD
// deletes the record A stored, every flight is republished on B's schd
// topic, and A is refused from then on.
func TestMoveToAnotherKafkaCluster(t *testing.T) {
	cfgA, myDSN := testConfig(t, map[string]string{"MSGX_SCHD_FLUSH_PERIOD": "200ms"})
	my := sinktest.OpenMySQL(t, myDSN)
	pool := openPool(t, cfgA)
	ctx := context.Background()
	log := testenv.Logger(t)
	stopA := start(t, cfgA)
	ids := []int64{
		testenv.InsertInbox(t, my, bindDNLD(1, bindFLTR("100", "CA100", ""), bindFLTR("101", "MU101", "100"), bindFLTR("102", "MU102", "200"))),
		testenv.InsertInbox(t, my, bindFLOP(2, "100", "23JAN210501")),
		testenv.InsertInbox(t, my, bindAIRL(3, "UPD", "CA")),
	}
	waitFor(t, "cluster A applies every message", time.Minute, func() bool {
		return count(t, pool, `SELECT COUNT(*) FROM proc_state WHERE state = 'SUCCEEDED'`) == len(ids)
	})
	testenv.WaitCaughtUp(t, []string{cfgA.Kafka.EmbeddedAddr}, flights.BaseGroup, []string{"msgx.flight-transitions", flights.BaseGroup + "-loop"}, time.Minute)
	stopA()
	var onA int64
	if err := pool.QueryRow(ctx, `SELECT state_version FROM flight_schd WHERE flid = '100'`).Scan(&onA); err != nil {
		t.Fatal(err)
	}

	cfgB := otherInstance(t, cfgA)
	var out strings.Builder
	if err := runCommand(ctx, cfgB, "reseed", nil, &out, log); err != nil {
		t.Fatalf("reseed dry run: %v\n%s", err, out.String())
	}
	if err := runCommand(ctx, cfgB, "reseed", []string{"--yes"}, &out, log); err != nil {
		t.Fatalf("reseed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "3 flights (+1 placeholders)") || !strings.Contains(out.String(), "1 reference categories") {
		t.Fatalf("reseed output:\n%s", out.String())
	}
	// Once the tables hold records, a second reseed refuses.
	if err := runCommand(ctx, cfgB, "reseed", []string{"--yes"}, &out, log); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("second reseed: %v", err)
	}
	if err := runCommand(ctx, cfgB, "bind", []string{"--force"}, &out, log); err != nil {
		t.Fatalf("bind --force: %v\n%s", err, out.String())
	}
	t.Logf("operator output:\n%s", out.String())

	stopB := start(t, cfgB)
	defer stopB()
	brokersB := []string{cfgB.Kafka.EmbeddedAddr}
	m4 := testenv.InsertInbox(t, my, bindFLOP(4, "100", "23JAN210502"))
	m5 := testenv.InsertInbox(t, my, bindDNLD(5, bindFLTR("200", "CA200", "")))
	m6 := testenv.InsertInbox(t, my, bindAIRL(6, "DNLD", "MU"))
	for _, id := range []int64{m4, m5, m6} {
		waitFor(t, fmt.Sprintf("message %d SUCCEEDED on cluster B", id), time.Minute, func() bool { return msgState(t, pool, id) == "SUCCEEDED" })
	}
	var v100 int64
	var estt string
	_ = pool.QueryRow(ctx, `SELECT state_version, estt FROM flight_schd WHERE flid = '100'`).Scan(&v100, &estt)
	if v100 != onA+1 || estt != "23JAN210502" {
		t.Fatalf("flight 100: v%d ESTT %s, want v%d 23JAN210502 (applied on top of A's versions)", v100, estt, onA+1)
	}
	waitFor(t, "master 200 lists the child that named it on A", 30*time.Second, func() bool {
		return count(t, pool, `SELECT COUNT(*) FROM flight_schd WHERE flid = '200' AND doc->'mafl' @> '[{"FLID":"102"}]'`) == 1
	})
	if keys := count(t, pool, `SELECT COUNT(*) FROM ref_master WHERE rtype = 'AIRL'`); keys != 1 ||
		count(t, pool, `SELECT COUNT(*) FROM ref_master WHERE rtype = 'AIRL' AND rkey = 'MU'`) != 1 {
		t.Fatalf("AIRL after the DNLD on B: %d records, want only MU (A's CA deleted)", keys)
	}
	// B's msg topic has the new version; its schd topic every flight.
	found := false
	for _, r := range testenv.ReadTopic(t, brokersB, "msgx.msg", 1<<20, 3*time.Second) {
		var ev msgEvent
		if json.Unmarshal(r.Value, &ev) == nil && ev.FLID == "100" && ev.StateVersion == v100 && ev.MsgID == m4 {
			found = true
		}
	}
	if !found {
		t.Fatalf("cluster B's msgx.msg lacks flight 100 v%d", v100)
	}
	waitFor(t, "cluster B's schd topic has every flight", 30*time.Second, func() bool {
		keys := map[string]bool{}
		for _, r := range testenv.ReadTopic(t, brokersB, "msgx.schd", 1<<20, time.Second) {
			keys[string(r.Key)] = true
		}
		return keys["100"] && keys["101"] && keys["102"] && keys["200"]
	})
	noSilentSuccess(t, pool)

	// The old cluster is refused now.
	if err := runBriefly(t, cfgA, 30*time.Second); !errors.Is(err, errBinding) {
		t.Fatalf("cluster A after the move: %v, want the refusal", err)
	}
}

// With no daemon answering (it refused to start), msgx status collects the
// report itself and names the binding mismatch first.
func TestStatusNamesTheBindingMismatch(t *testing.T) {
	bound := testenv.NewBroker(t)
	cfg, _ := testConfig(t, nil)
	cfg.Kafka.Brokers = bound
	if err := runCommand(context.Background(), cfg, "migrate", nil, io.Discard, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runCommand(context.Background(), cfg, "bind", []string{"--force"}, &out, testenv.Logger(t)); err != nil {
		t.Fatalf("bind: %v\n%s", err, out.String())
	}
	cfg.Kafka.Brokers = testenv.NewBroker(t) // another cluster
	out.Reset()
	if err := runCommand(context.Background(), cfg, "status", nil, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kafka binding mismatch: refusing to start: another Kafka cluster") {
		t.Fatalf("msgx status does not name the mismatch:\n%s", out.String())
	}
}

// TestBindingOnApacheKafka: a database bound to one Apache Kafka refuses
// another cluster (the three-node one), and refuses its own cluster once
// msgx.inbox was deleted (a wiped cluster) or deleted and created again —
// each with one line naming both identities, never a start on empty tables.
func TestBindingOnApacheKafka(t *testing.T) {
	t.Parallel()
	k := testenv.RealKafka(t)
	cfg, _ := testConfig(t, onKafka(k))
	pool := openPool(t, cfg)
	if err := runBriefly(t, cfg, 20*time.Second); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if n := count(t, pool, "SELECT COUNT(*) FROM kafka_binding"); n != 1 {
		t.Fatalf("%d bindings after the first start", n)
	}
	refused := func(c Config, want string) {
		t.Helper()
		err := runBriefly(t, c, time.Minute)
		if !errors.Is(err, errBinding) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "msgx bind --force") {
			t.Fatalf("%v, want a refusal saying %q", err, want)
		}
		t.Logf("refused: %v", err)
	}
	foreign := cfg
	foreign.Kafka.Brokers = testenv.RealKafkaCluster(t).Addrs()
	refused(foreign, "another Kafka cluster")

	adm, done, err := k.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, cfg.Ingest.Topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the inbox topic deleted", 30*time.Second, func() bool {
		td, err := adm.ListTopics(ctx, cfg.Ingest.Topic)
		return err == nil && !td.Has(cfg.Ingest.Topic)
	})
	refused(cfg, "the inbox topic is missing")
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, cfg.Ingest.Topic); err != nil {
		t.Fatal(err)
	}
	refused(cfg, "the inbox topic was created again")
}
