package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/serial"
	"msgx/internal/testenv"
	"msgx/internal/workload"
	"msgx/processors/flights"
	"msgx/tables/flight"
)

// TestSerialEquivalence runs codeshare-heavy inboxes (a third of the
// flights shared, children before masters, re-links, unlinks, renames,
// child and master deletions, masters sent again, packages mixing masters
// and children, reference data beside it) through msgx as a backlog on
// Apache Kafka — with one and four transition partitions on one node, and
// with two instances sharing the four on the three-node cluster
// (replication 3) — and compares what it leaves with the serial reference
// (internal/serial), which applies the messages one at a time, each with
// all its effects: every message's decision, every flight (and
// placeholder), every flight's version history, the msg events per FLID,
// and the router's flight index.
func TestSerialEquivalence(t *testing.T) {
	t.Parallel() // a long run of the binary: beside the others
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, c := range []struct {
		seed       uint64
		partitions int
		instances  int
		nodes      int
	}{{1, 1, 1, 1}, {2, 4, 1, 1}, {3, 4, 2, 3}} {
		t.Run(fmt.Sprintf("seed %d, %d partitions, %d instances, %d Kafka nodes", c.seed, c.partitions, c.instances, c.nodes), func(t *testing.T) {
			msgs := workload.Day(workload.Options{Seed: c.seed, Flights: 300, Ops: 2500, Codeshare: true})
			k := testenv.RealKafka(t)
			if c.nodes == 3 {
				k = testenv.RealKafkaCluster(t)
			}
			s := newRealScenario(t, bin, k)
			s.env = append(s.env, fmt.Sprintf("MSGX_TRANSITION_PARTITIONS=%d", c.partitions))
			loadInbox(t, s, msgs)
			if c.instances == 1 {
				s.gateway = s.start("run")
			} else {
				// As in TestTwoInstancesShareTheFlights: the defaults, so
				// that a rebalance does not drop a member.
				s.env = append(s.env, "MSGX_KAFKA_SESSION_TIMEOUT=10s", "MSGX_KAFKA_REBALANCE_TIMEOUT=20s")
				var cmds []*exec.Cmd
				for _, id := range []string{"a", "b"} {
					saved := s.env
					s.env = append(append([]string(nil), s.env...), "MSGX_KAFKA_INSTANCE_ID="+id, "MSGX_STATE_DIR="+t.TempDir())
					cmds = append(cmds, s.start("run"))
					s.env = saved
				}
				s.gateway = cmds[0]
				t.Cleanup(func() { stopChild(cmds[1]) })
			}
			s.waitTerminal(len(msgs), 3*time.Minute)
			assertSerial(t, s, msgs)
		})
	}
}

// assertSerial compares what s left after the inbox msgs with the serial
// reference of the same inbox.
func assertSerial(t *testing.T, s *scenario, msgs []string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := loadConfig(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	ref := serial.New(cfg.Router.Settings(cfg.Location()))
	// The reference decides each message at the time msgx first enqueued
	// it: transitions carry it as the versions' updatedAt.
	rows, err := s.pool.Query(ctx, `SELECT msg_id, enqueued_at, state, COALESCE(reason, ''), COALESCE(n_transitions, 0) FROM proc_state ORDER BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	type decided struct {
		at            time.Time
		state, reason string
		n             int
	}
	var got []decided
	for rows.Next() {
		var id int64
		var d decided
		if err := rows.Scan(&id, &d.at, &d.state, &d.reason, &d.n); err != nil {
			t.Fatal(err)
		}
		if id != int64(len(got)+1) {
			t.Fatalf("message #%d after #%d", id, len(got))
		}
		got = append(got, d)
	}
	rows.Close()
	if len(got) != len(msgs) {
		t.Fatalf("%d messages decided, %d in the inbox", len(got), len(msgs))
	}
	for i, raw := range msgs {
		if err := ref.Message(int64(i+1), raw, got[i].at); err != nil {
			t.Fatal(err)
		}
		if want := ref.States[int64(i+1)]; got[i].state != want || got[i].n != ref.N[int64(i+1)] {
			t.Fatalf("message #%d is %s (%s) with %d transitions, %s with %d in the serial reference", i+1, got[i].state, got[i].reason,
				got[i].n, want, ref.N[int64(i+1)])
		}
	}

	// Every flight and placeholder.
	gotFlights := docs(t, s, `SELECT flid, doc FROM flight_schd`)
	gotPlaceholders := docs(t, s, `SELECT flid, table_state FROM flight_placeholder`)
	var nflights, nplace int
	for flid, st := range ref.Flights {
		if st.IsPlaceholder() {
			nplace++
			if w := canonical(t, st); gotPlaceholders[flid] != w {
				t.Errorf("placeholder %s:\n got %s\nwant %s", flid, gotPlaceholders[flid], w)
			}
			continue
		}
		nflights++
		if w := canonical(t, st.View()); gotFlights[flid] != w {
			t.Errorf("flight %s:\n got %s\nwant %s", flid, gotFlights[flid], w)
		}
	}
	for flid, p := range gotPlaceholders {
		if st := ref.Flights[flid]; !st.IsPlaceholder() {
			t.Errorf("placeholder %s in PostgreSQL, %v in the serial reference: %s", flid, st, p)
		}
	}
	if len(gotFlights) != nflights || len(gotPlaceholders) != nplace {
		t.Fatalf("%d flights and %d placeholders in PostgreSQL, %d and %d in the serial reference",
			len(gotFlights), len(gotPlaceholders), nflights, nplace)
	}

	// Every flight's version history.
	history := s.history()
	nversions := 0
	for flid, vs := range ref.Versions {
		for _, v := range vs {
			nversions++
			want := fmt.Sprintf("msg %d %s %s {%s}", v.Last.MsgID, v.Last.Source, v.State, strings.Join(v.Last.Changed, ","))
			if k := fmt.Sprintf("%s@%d", flid, v.StateVersion); history[k] != want {
				t.Errorf("history of %s: %q, want %q", k, history[k], want)
			}
		}
	}
	if len(history) != nversions {
		t.Errorf("%d history lines, %d versions in the serial reference", len(history), nversions)
	}

	// The msg events of each flight, in order.
	events := flightEvents(t, s)
	dups := 0
	for flid, vs := range ref.Versions {
		evs := events[flid]
		var distinct []*flight.Event
		for _, e := range evs {
			if n := len(distinct); n > 0 && e.StateVersion <= distinct[n-1].StateVersion {
				dups++
				continue
			}
			distinct = append(distinct, e)
		}
		if len(distinct) != len(vs) {
			t.Errorf("flight %s: %d events on msgx.msg, %d versions in the serial reference", flid, len(distinct), len(vs))
			continue
		}
		for i, v := range vs {
			e := distinct[i]
			want := flight.Event{EventType: flight.EventUpsert, FLID: flid, StateVersion: v.StateVersion, MsgID: v.Last.MsgID,
				Source: v.Last.Source, Changed: v.Last.Changed, Flight: v.View()}
			if v.State == flight.StateDeleted {
				want.EventType = flight.EventTombstone
			}
			if g, w := canonical(t, e), canonical(t, want); g != w {
				t.Errorf("event %d of flight %s:\n got %s\nwant %s", i+1, flid, g, w)
				break
			}
		}
	}
	for flid := range events {
		if _, ok := ref.Versions[flid]; !ok {
			t.Errorf("events of flight %s, which has no version in the serial reference", flid)
		}
	}
	if dups > 0 {
		t.Errorf("%d events read twice by a read_committed consumer", dups)
	}
	assertIndexFollowsTable(t, s.pool, s.brokers, s.prefix)
	// The router's index is the reference's.
	rows, err = s.pool.Query(ctx, `SELECT flid, COALESCE(state, ''), COALESCE(maid, ''), COALESCE(flno, '') FROM flight_index`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var flid, state, maid, flno string
		if err := rows.Scan(&flid, &state, &maid, &flno); err != nil {
			t.Fatal(err)
		}
		e, _ := ref.Index(flid)
		if e.Link.State != state || e.Link.MAID != maid || e.Link.FLNO != flno {
			t.Errorf("flight index of %s: %s/%s/%s, the serial reference's %+v", flid, state, maid, flno, e.Link)
		}
	}
	rows.Close()
	t.Logf("%d messages, %d flights, %d placeholders, %d versions equal to the serial reference; %d duplicate events",
		len(msgs), nflights, nplace, nversions, dups)
}

// docs reads flid → canonical flight JSON from query.
func docs(t *testing.T, s *scenario, query string) map[string]string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var flid string
		var raw []byte
		if err := rows.Scan(&flid, &raw); err != nil {
			t.Fatal(err)
		}
		var st flight.State
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		out[flid] = canonical(t, &st)
	}
	return out
}

// canonical is v's JSON with every time in UTC.
func canonical(t *testing.T, v any) string {
	t.Helper()
	switch x := v.(type) {
	case *flight.State:
		c := x.Clone()
		c.UpdatedAt = c.UpdatedAt.UTC()
		v = c
	case *flight.Event:
		c := *x
		c.Flight = c.Flight.Clone()
		c.Flight.UpdatedAt = c.Flight.UpdatedAt.UTC()
		if c.Changed == nil {
			c.Changed = []string{}
		}
		v = c
	case flight.Event:
		return canonical(t, &x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// flightEvents reads msgx.msg whole as a read_committed consumer does,
// once the outbox is published: each flight's events in the order they are
// on the topic.
func flightEvents(t *testing.T, s *scenario) map[string][]*flight.Event {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM event_outbox`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events still in the outbox", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := map[string][]*flight.Event{}
	// As a read_committed consumer reads it: exactly once
	// (MSGX_EXACTLY_ONCE, the default; docs/design.md#delivery).
	for _, r := range testenv.ReadToEnd(t, s.brokers, s.topic("msgx.msg"), true, time.Minute) {
		var e flight.Event
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		out[e.FLID] = append(out[e.FLID], &e)
	}
	return out
}

// assertIndexFollowsTable checks that the router's flight index holds, for
// every flight, the link the flights table gives it (docs/design.md#codeshare):
// state, MAID and FLNO of the read model's row, no flight where there is
// no row.
func assertIndexFollowsTable(t *testing.T, pool *pgxpool.Pool, brokers []string, prefix string) {
	t.Helper()
	testenv.WaitCaughtUp(t, brokers, prefix+flights.BaseGroup, []string{prefix + "msgx.flight-transitions"}, time.Minute)
	rows, err := pool.Query(context.Background(), `SELECT COALESCE(i.flid, f.flid), COALESCE(i.state, '-'), COALESCE(i.maid, '-'),
			COALESCE(i.flno, '-'), COALESCE(f.state, '-'), COALESCE(f.maid, '-'), COALESCE(f.flno, '-')
		FROM flight_index i FULL JOIN flight_schd f ON f.flid = i.flid
		WHERE (i.state, i.maid, i.flno) IS DISTINCT FROM (f.state, f.maid, f.flno)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var flid, is, im, in, fs, fm, fn string
		if err := rows.Scan(&flid, &is, &im, &in, &fs, &fm, &fn); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, fmt.Sprintf("%s: index %s/%s/%s, table %s/%s/%s", flid, is, im, in, fs, fm, fn))
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("the router's flight index and the flights table disagree on %d flights: %s", len(bad), strings.Join(bad[:min(10, len(bad))], "; "))
	}
}
