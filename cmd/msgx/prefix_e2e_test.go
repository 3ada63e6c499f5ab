package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/inspect/status"
	"msgx/internal/testenv"
	"msgx/sink/sinktest"
)

// TestTwoPrefixesShareABroker runs two deployments, each with its own
// PostgreSQL and inbox, on one Kafka cluster, with MSGX_KAFKA_PREFIX "a."
// and "b-": every group and topic on the cluster belongs to one of them,
// each processes its own inbox and nothing of the other's, and each one's
// status reports its own groups. Both inboxes hold the demo day, B's two
// more messages: a deployment that read the other's records would decide
// more messages than its inbox has, or see its own as duplicates.
func TestTwoPrefixesShareABroker(t *testing.T) {
	brokers := testenv.NewBroker(t)
	demo, err := os.ReadFile("../../testdata/demo.sql")
	if err != nil {
		t.Fatal(err)
	}
	type deployment struct {
		prefix string
		extra  int
		cfg    Config
	}
	deployments := []*deployment{{prefix: "a."}, {prefix: "b-", extra: 2}}
	for _, d := range deployments {
		var myDSN string
		d.cfg, myDSN = testConfig(t, map[string]string{"MSGX_KAFKA_PREFIX": d.prefix, "MSGX_KAFKA_BROKERS": strings.Join(brokers, ",")})
		multi, err := sql.Open("mysql", myDSN+"?multiStatements=true")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := multi.Exec(string(demo)); err != nil {
			t.Fatal(err)
		}
		multi.Close()
		my := sinktest.OpenMySQL(t, myDSN)
		for range d.extra {
			testenv.InsertInbox(t, my, "<MSG/>")
		}
	}
	for _, d := range deployments {
		if d.cfg.Ingest.Topic != d.prefix+"msgx.inbox" || d.cfg.Flights.MsgTopic != d.prefix+"msgx.msg" || string(d.cfg.Router.Group()) != d.prefix+"msgx-router" {
			t.Fatalf("prefix %q: inbox %s, msg %s, router group %s", d.prefix, d.cfg.Ingest.Topic, d.cfg.Flights.MsgTopic, d.cfg.Router.Group())
		}
		stop := start(t, d.cfg)
		defer stop()
	}

	const demoMessages = 13
	for _, d := range deployments {
		pool := openPool(t, d.cfg)
		n := demoMessages + d.extra
		waitFor(t, d.prefix+" every message terminal", time.Minute, func() bool {
			return count(t, pool, "SELECT COUNT(*) FROM proc_state WHERE state IN ('SUCCEEDED','SKIPPED','DEAD')") == n
		})
		if c := count(t, pool, "SELECT COUNT(*) FROM proc_state"); c != n {
			t.Errorf("%s: %d messages decided, its inbox has %d", d.prefix, c, n)
		}
		for q, want := range map[string]int{
			"SELECT COUNT(*) FROM proc_state WHERE msg_id IN (1, 2, 5, 12, 13) AND state = 'SUCCEEDED'": 5,
			"SELECT COUNT(*) FROM proc_state WHERE msg_id = 6 AND reason = 'duplicate-of:2'":            1,
			"SELECT COUNT(*) FROM proc_state WHERE msg_id > 13 AND state = 'DEAD'":                      d.extra,
			"SELECT COUNT(*) FROM flight_schd WHERE flid IN ('15', '16', '17')":                         3,
		} {
			if c := count(t, pool, q); c != want {
				t.Errorf("%s: %s = %d, want %d", d.prefix, q, c, want)
			}
		}
		if end := testenv.EndOffset(t, brokers, d.prefix+"msgx.inbox"); end != int64(n) {
			t.Errorf("%smsgx.inbox has %d records, want %d", d.prefix, end, n)
		}
		testenv.WaitCaughtUp(t, brokers, d.prefix+"msgx-flights", []string{d.prefix + "msgx.flight-transitions"}, time.Minute)
		if evs := testenv.ReadTopic(t, brokers, d.prefix+"msgx.msg", 1<<20, 3*time.Second); len(evs) == 0 {
			t.Errorf("%smsgx.msg is empty", d.prefix)
		}

		// Its status report names its own groups and topics.
		var out strings.Builder
		if err := runCommand(context.Background(), d.cfg, "status", []string{"--json"}, &out, testenv.Logger(t)); err != nil {
			t.Fatal(err)
		}
		var rep status.Report
		if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Groups) != 3 || rep.GroupsError != "" {
			t.Errorf("%s status groups %+v (%s)", d.prefix, rep.Groups, rep.GroupsError)
		}
		for _, g := range rep.Groups {
			if !strings.HasPrefix(g.Group, d.prefix) || !strings.HasPrefix(g.Topic, d.prefix) || g.Lag != 0 {
				t.Errorf("%s status reports %+v", d.prefix, g)
			}
		}
	}

	// On the cluster: every group and topic is one deployment's.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range append(topics.Names(), groups.Groups()...) {
		names[n] = true
		if !strings.HasPrefix(n, "a.") && !strings.HasPrefix(n, "b-") {
			t.Errorf("%q on the cluster belongs to neither deployment", n)
		}
	}
	for _, p := range []string{"a.", "b-"} {
		for _, n := range []string{"msgx.inbox", "msgx.flight-transitions", "msgx.refdata-transitions", "msgx.msg", "msgx.schd",
			"msgx-router", "msgx-router-table", "msgx-flights", "msgx-flights-table", "msgx-refdata", "msgx-refdata-table",
			"msgx.publisher-position"} {
			if !names[p+n] {
				t.Errorf("%s%s is not on the cluster (%v)", p, n, names)
			}
		}
	}
}

// MSGX_KAFKA_PREFIX goes before every group and every default topic name;
// a topic set explicitly is used as written, or with the prefix where it
// says ${MSGX_KAFKA_PREFIX}. Without a prefix the names are today's.
func TestKafkaPrefixNames(t *testing.T) {
	names := func(c Config) []string {
		out := []string{string(c.Router.Group()), string(c.Flights.Group()), string(c.Refdata.Group()), c.Flights.LoopTopic()}
		for _, g := range processorGroups(c) {
			out = append(out, g.Group)
			out = append(out, g.Topics...)
		}
		for _, tp := range topics(c) {
			out = append(out, tp.Name)
		}
		for _, tv := range tables(c) {
			out = append(out, string(tv.table))
		}
		return append(out, c.Ingest.Topic, c.Router.InboxTopic, c.Router.FlightTopic, c.Router.RefdataTopic,
			c.Flights.TransitionTopic, c.Flights.MsgTopic, c.Flights.SchdTopic,
			c.Refdata.TransitionTopic, c.Schd.Topic, c.Publisher.PositionTopic, c.Publisher.TransactionalID)
	}
	plain, err := loadConfig(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"msgx-router": true, "msgx-flights": true, "msgx-refdata": true, "msgx-flights-loop": true,
		"msgx.inbox": true, "msgx.flight-transitions": true, "msgx.refdata-transitions": true, "msgx.msg": true, "msgx.schd": true,
		"msgx-router-table": true, "msgx-flights-table": true, "msgx-refdata-table": true,
		"msgx.publisher-position": true, "msgx-publisher": true}
	got := map[string]bool{}
	for _, n := range names(plain) {
		got[n] = true
	}
	if !maps.Equal(got, want) {
		t.Errorf("names without a prefix: %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}

	pre, err := loadConfig(map[string]string{"MSGX_KAFKA_PREFIX": "t2."})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names(pre) {
		if !strings.HasPrefix(n, "t2.") || !want[strings.TrimPrefix(n, "t2.")] {
			t.Errorf("with MSGX_KAFKA_PREFIX=t2.: %q", n)
		}
	}

	set, err := loadConfig(map[string]string{"MSGX_KAFKA_PREFIX": "t2.", "MSGX_TOPIC_MSG": "aodb.flight-events",
		"MSGX_TOPIC_SCHD": "${MSGX_KAFKA_PREFIX}latest"})
	if err != nil {
		t.Fatal(err)
	}
	if set.Flights.MsgTopic != "aodb.flight-events" || set.Flights.SchdTopic != "t2.latest" || set.Schd.Topic != "t2.latest" || set.Ingest.Topic != "t2.msgx.inbox" {
		t.Errorf("explicit topics: msg %q, schd %q/%q, inbox %q", set.Flights.MsgTopic, set.Flights.SchdTopic, set.Schd.Topic, set.Ingest.Topic)
	}
}
