package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"msgx/internal/testenv"
	"msgx/internal/workload"
	"msgx/sink/sinktest"
)

// The fault campaign: msgx on a three-node Apache Kafka cluster (KRaft,
// replication 3, min.insync.replicas 2, unclean leader election off)
// while the cluster fails the ways a real one does — a broker killed
// (kill -9) and restarted, frozen (SIGSTOP) past every session timeout,
// restarted one after another, two down at once, cut off from msgx alone —
// each also with msgx itself killed in the middle, and all of them mixed
// at random. Every case ends with what the serial reference says
// (assertSerial: every decision, flight, version history and msg event
// per FLID, the msg topic read read_committed exactly once in order), no
// message SUCCEEDED without its effect, and msgx having come back by
// itself; it reports the time from the fault to the first progress, the
// rate during the fault, the component restarts and what msgx logged.
//
// `make test` runs the short form (two cases, side by side); `make faults`
// runs every case, one after the other, and prints the table
// (MSGX_FAULTS=all, MSGX_FAULTS_OUT=file).

// fault is one disturbance of the cluster. inject runs while messages
// flow and returns once the cluster is whole again.
type fault struct {
	name   string
	inject func(f *faultRun)
}

// faultRun is one case: its cluster, its msgx and what was seen.
type faultRun struct {
	t       *testing.T
	ctx     context.Context
	k       *testenv.Kafka
	s       *scenario
	rng     *rand.Rand
	killing bool // kill -9 msgx in the middle of the fault

	mu       sync.Mutex
	alerts   map[string]bool // every status alert seen during the fault
	restarts map[string]int  // supervised restarts per component since the fault
	// lastRestarts is the last scrape of msgx_component_restarts_total.
	lastRestarts map[string]int
	notes        []string // what inject did, for the report
	faultAt      time.Time
	faultEnd     time.Time
}

func (f *faultRun) note(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, fmt.Sprintf(format, args...))
}

func (f *faultRun) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// begin marks the fault's start.
func (f *faultRun) begin() {
	f.mu.Lock()
	f.faultAt = time.Now()
	f.mu.Unlock()
}

// midKill, in a killing run, kill -9s msgx in the middle of the fault (a
// moment after it began) and starts it again, as its service manager
// would. It returns how long it took, for the fault's own timing.
func (f *faultRun) midKill() time.Duration {
	if !f.killing {
		return 0
	}
	start := time.Now()
	time.Sleep(time.Duration(1000+f.rng.IntN(3000)) * time.Millisecond)
	f.s.kill()
	f.note("msgx killed -9 %.1fs into the fault", time.Since(f.faultAt).Seconds())
	f.s.gateway = f.s.start("run")
	return time.Since(start)
}

// restart starts node id again and waits until it is back in every ISR.
func (f *faultRun) restart(id int32) {
	f.t.Helper()
	n := f.k.Node(id)
	f.must(n.Start())
	f.must(f.k.WaitReady(f.ctx))
	f.waitISR()
	f.note("node %d back in the ISR", id)
}

func (f *faultRun) waitISR() {
	f.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ok, err := f.k.FullISR(f.ctx)
		if ok && err == nil {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the cluster's ISRs not full 3 minutes after the fault (%v)", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (f *faultRun) leaderOf(topic string) int32 {
	f.t.Helper()
	ls, err := f.k.Leaders(f.ctx, f.s.topic(topic))
	f.must(err)
	return ls[0]
}

// killAndRestart is kill -9 of node id, pause, restart.
func (f *faultRun) killAndRestart(id int32, why string, pause time.Duration) {
	f.begin()
	f.must(f.k.Node(id).Kill())
	f.note("kill -9 node %d (%s), restarted after %v", id, why, pause)
	time.Sleep(max(0, pause-f.midKill()))
	f.restart(id)
}

var faults = []fault{
	{"kill -9 the leader of msgx.inbox", func(f *faultRun) {
		f.killAndRestart(f.leaderOf("msgx.inbox"), "leads msgx.inbox", 15*time.Second)
	}},
	{"kill -9 the leader of most flight-transitions partitions", func(f *faultRun) {
		id, err := f.k.MostLeader(f.ctx, f.s.topic("msgx.flight-transitions"))
		f.must(err)
		f.killAndRestart(id, "leads most msgx.flight-transitions partitions", 15*time.Second)
	}},
	{"kill -9 the active controller", func(f *faultRun) {
		id, err := f.k.ActiveController(f.ctx)
		f.must(err)
		f.killAndRestart(id, "the active KRaft controller", 15*time.Second)
	}},
	{"kill -9 the coordinator of msgx-flights", func(f *faultRun) {
		id, err := f.k.Coordinator(f.ctx, f.s.topic("msgx-flights"), false)
		f.must(err)
		f.killAndRestart(id, "the group coordinator of msgx-flights", 15*time.Second)
	}},
	{"kill -9 the publisher's transaction coordinator", func(f *faultRun) {
		id, err := f.k.Coordinator(f.ctx, f.s.topic("msgx-publisher"), true)
		f.must(err)
		f.killAndRestart(id, "the transaction coordinator of msgx-publisher", 15*time.Second)
	}},
	{"SIGSTOP a broker 25 s", func(f *faultRun) {
		// Longer than the broker session timeout (9 s: the controller
		// fences it) and msgx's consumer session timeout (10 s).
		id := f.leaderOf("msgx.inbox")
		f.begin()
		f.must(f.k.Node(id).Pause())
		f.note("SIGSTOP node %d (leads msgx.inbox) for 25 s", id)
		time.Sleep(25*time.Second - f.midKill())
		f.must(f.k.Node(id).Resume())
		f.waitISR()
		f.note("node %d back in the ISR", id)
	}},
	{"rolling restart", func(f *faultRun) {
		f.begin()
		for i, n := range f.k.Nodes {
			f.must(n.Stop())
			f.note("SIGTERM node %d", n.ID)
			if i == 1 {
				f.midKill()
			}
			f.restart(n.ID)
		}
	}},
	{"two brokers down", func(f *faultRun) {
		// min.insync.replicas=2 cannot be met: writes must wait, never
		// proceed with one replica. (The KRaft quorum is lost too: two of
		// its three voters are down.)
		leader := f.leaderOf("msgx.inbox")
		down := []int32{leader%3 + 1, leader}
		f.begin()
		for _, id := range down {
			f.must(f.k.Node(id).Kill())
		}
		f.note("kill -9 nodes %v for 20 s", down)
		time.Sleep(3 * time.Second) // what was in flight settles
		f.midKill()
		w0 := f.watermark()
		time.Sleep(17 * time.Second)
		if w := f.watermark(); w != w0 {
			f.t.Errorf("the inbox watermark moved from %d to %d with one broker of three: a write proceeded below min.insync.replicas", w0, w)
		} else {
			f.note("watermark held at %d with one broker", w0)
		}
		for _, id := range down {
			f.must(f.k.Node(id).Start())
		}
		f.must(f.k.WaitReady(f.ctx))
		f.waitISR()
		f.note("nodes %v back in the ISR", down)
	}},
	{"a broker cut off from msgx only", func(f *faultRun) {
		id := f.leaderOf("msgx.inbox")
		f.begin()
		f.k.Node(id).Cut()
		f.note("node %d (leads msgx.inbox) cut off from msgx for 20 s; it stays in the cluster", id)
		time.Sleep(20*time.Second - f.midKill())
		f.must(f.k.Node(id).Restore())
	}},
}

// mixed is four faults of the list in a random order, one after the
// other; with killing, msgx is killed once in the middle of them.
func mixed(seed uint64) fault {
	return fault{fmt.Sprintf("four mixed at random (seed %d)", seed), func(f *faultRun) {
		r := rand.New(rand.NewPCG(seed, 7))
		killing := f.killing
		f.killing = false
		start := time.Now()
		for i, j := range r.Perm(len(faults))[:4] {
			if killing && i == 1 {
				f.killing = true
			}
			f.note("[%s]", faults[j].name)
			faults[j].inject(f)
			f.killing = false
			time.Sleep(time.Duration(r.IntN(3000)) * time.Millisecond)
		}
		f.mu.Lock()
		f.faultAt = start
		f.mu.Unlock()
	}}
}

// countRestarts adds the growth of msgx_component_restarts_total since
// the last scrape to f.restarts (a restarted msgx starts from 0 again).
func (f *faultRun) countRestarts(metrics string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faultAt.IsZero() {
		return
	}
	for _, l := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(l, `msgx_component_restarts_total{component="`)
		if !ok {
			continue
		}
		name, num, _ := strings.Cut(rest, `"} `)
		var v int
		fmt.Sscan(num, &v)
		last := f.lastRestarts[name]
		if v >= last {
			f.restarts[name] += v - last
		} else {
			f.restarts[name] += v
		}
		f.lastRestarts[name] = v
	}
}

func (f *faultRun) watermark() int64 {
	var w int64
	_ = f.s.pool.QueryRow(f.ctx, "SELECT watermark FROM inbox_cursor").Scan(&w)
	return w
}

// faultRow is a case's line of the campaign's table.
type faultRow struct {
	name                       string
	firstProgress              time.Duration
	duringRate                 float64
	restarts                   map[string]int
	logged                     []string
	alerts                     []string
	notes                      []string
	messages, kills, totalTime int
}

// TestFaultCampaign: see the top of this file.
func TestFaultCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node Apache Kafka per case")
	}
	t.Parallel()
	type kase struct {
		f       fault
		killing bool
	}
	var cases []kase
	if os.Getenv("MSGX_FAULTS") == "all" {
		for _, f := range faults {
			cases = append(cases, kase{f, false}, kase{f, true})
		}
		cases = append(cases, kase{mixed(1), false}, kase{mixed(2), true})
	} else {
		// The short form: a broker killed and a broker frozen, msgx
		// killed in the middle of the first.
		cases = []kase{{faults[0], true}, {faults[5], false}}
	}
	bin := buildBinary(t)
	var rows []faultRow
	var mu sync.Mutex
	t.Run("cases", func(t *testing.T) {
		for i, c := range cases {
			name := c.f.name
			if c.killing {
				name += ", msgx kill -9 in it"
			}
			t.Run(name, func(t *testing.T) {
				if os.Getenv("MSGX_FAULTS") != "all" {
					t.Parallel()
				}
				row := runFault(t, bin, c.f, c.killing, uint64(i+1))
				row.name = name
				mu.Lock()
				rows = append(rows, row)
				mu.Unlock()
			})
		}
	})
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	var b strings.Builder
	fmt.Fprintf(&b, "\n| case | to first progress | msg/s during the fault | restarts | msgx logged (WARN/ERROR, count) | alerts seen |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		var rs []string
		for c, n := range r.restarts {
			if n > 0 {
				rs = append(rs, fmt.Sprintf("%s %d", c, n))
			}
		}
		sort.Strings(rs)
		fmt.Fprintf(&b, "| %s | %.1f s | %.0f | %s | %s | %s |\n", r.name, r.firstProgress.Seconds(), r.duringRate,
			orNone(strings.Join(rs, ", ")), orNone(strings.Join(r.logged, "; ")), orNone(strings.Join(r.alerts, "; ")))
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "\n%s: %s", r.name, strings.Join(r.notes, "; "))
	}
	t.Log(b.String())
	if out := os.Getenv("MSGX_FAULTS_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// runFault runs one case on a cluster of its own and checks it.
func runFault(t *testing.T, bin string, ft fault, killing bool, seed uint64) faultRow {
	k, err := testenv.StartKafka(testenv.KafkaOptions{Nodes: 3, Proxies: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newRealScenario(t, bin, k)
	httpAddr := freeAddr(t)
	s.env = append(s.env, "MSGX_HTTP_ADDR="+httpAddr, "MSGX_TRANSITION_PARTITIONS=4",
		// The defaults: a broker's fault must not look like a dead msgx.
		"MSGX_KAFKA_SESSION_TIMEOUT=10s", "MSGX_KAFKA_REBALANCE_TIMEOUT=20s", "MSGX_LOG_LEVEL=info")
	ops := 1500 // the short form
	if os.Getenv("MSGX_FAULTS") == "all" {
		ops = 3000
	}
	msgs := workload.Day(workload.Options{Seed: seed, Flights: 300, Ops: ops, Codeshare: true})
	// A backlog, then a trickle while the faults happen (in inbox order:
	// the serial reference is the inbox).
	backlog := len(msgs) / 4
	loadInbox(t, s, msgs[:backlog])
	f := &faultRun{t: t, ctx: ctx, k: k, s: s, rng: rand.New(rand.NewPCG(seed, 3)), killing: killing, alerts: map[string]bool{},
		restarts: map[string]int{}, lastRestarts: map[string]int{}}
	began := time.Now()
	s.gateway = s.start("run")
	s.waitTerminal(backlog/2, 3*time.Minute)

	my := sinktest.OpenMySQL(t, s.mysqlDSN())
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		for _, m := range msgs[backlog:] {
			if ctx.Err() != nil {
				return
			}
			testenv.InsertInbox(t, my, m)
			time.Sleep(15 * time.Millisecond)
		}
	}()
	// What msgx says while it waits: its status alerts.
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for ctx.Err() == nil {
			_, body, err := testenv.TryCurl("http://" + httpAddr + "/status")
			var rep struct{ Alerts []string }
			if err == nil && json.Unmarshal([]byte(body), &rep) == nil {
				f.mu.Lock()
				if !f.faultAt.IsZero() && f.faultEnd.IsZero() {
					for _, a := range rep.Alerts {
						f.alerts[shortAlert(a)] = true
					}
				}
				f.mu.Unlock()
			}
			if _, m, err := testenv.TryCurl("http://" + httpAddr + "/metrics"); err == nil {
				f.countRestarts(m)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	// Progress, sampled: the first increase after the fault began.
	type sample struct {
		at time.Time
		n  int
	}
	var samples []sample
	var smu sync.Mutex
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		for ctx.Err() == nil {
			n := s.terminal()
			smu.Lock()
			samples = append(samples, sample{time.Now(), n})
			smu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()

	ft.inject(f)
	f.mu.Lock()
	f.faultEnd = time.Now()
	f.mu.Unlock()
	<-trickled
	s.waitTerminal(len(msgs), 5*time.Minute)
	s.waitOutboxEmpty(2 * time.Minute)
	// It came back by itself: the msgx the case started (or restarted
	// after its own kill) still runs.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.gateway.Process.Pid)); err != nil || strings.Contains(string(st), ") Z ") {
		t.Errorf("msgx exited during the fault (%v)", err)
	}
	cancel()
	<-watching
	<-sampling

	assertSerial(t, s, msgs)
	// No success without its effect: every SUCCEEDED message had each of
	// its transitions applied (assertSerial showed they are the reference's).
	if n := count(t, s.pool, "SELECT COUNT(*) FROM proc_state WHERE state = 'SUCCEEDED' AND n_applied <> COALESCE(n_transitions, 0)"); n != 0 {
		t.Errorf("%d messages SUCCEEDED without every transition applied", n)
	}

	row := faultRow{messages: len(msgs), totalTime: int(time.Since(began).Seconds()), notes: f.notes, restarts: map[string]int{}}
	smu.Lock()
	var atFault, atEnd *sample
	for i := range samples {
		sm := &samples[i]
		if atFault == nil && !sm.at.Before(f.faultAt) {
			atFault = sm
		}
		if atFault != nil && sm.n > atFault.n && row.firstProgress == 0 {
			row.firstProgress = sm.at.Sub(f.faultAt)
		}
		if !sm.at.After(f.faultEnd) {
			atEnd = sm
		}
	}
	if atFault != nil && atEnd != nil && atEnd.at.After(atFault.at) {
		row.duringRate = float64(atEnd.n-atFault.n) / atEnd.at.Sub(atFault.at).Seconds()
	}
	smu.Unlock()
	for a := range f.alerts {
		row.alerts = append(row.alerts, a)
	}
	sort.Strings(row.alerts)
	row.logged = loggedSince(t, s, f.faultAt)
	f.mu.Lock()
	row.restarts = f.restarts
	f.mu.Unlock()
	return row
}

// mysqlDSN is the scenario's inbox DSN.
func (s *scenario) mysqlDSN() string {
	for _, e := range s.env {
		if v, ok := strings.CutPrefix(e, "MSGX_MYSQL_DSN="); ok {
			return v
		}
	}
	return ""
}

// shortAlert is an alert without its figures, so that one cause is one
// entry however its numbers move.
func shortAlert(a string) string {
	if i := strings.IndexAny(a, ":("); i > 0 {
		a = a[:i]
	}
	var out []rune
	for _, r := range a {
		if r >= '0' && r <= '9' {
			if len(out) == 0 || out[len(out)-1] != 'N' {
				out = append(out, 'N')
			}
			continue
		}
		out = append(out, r)
	}
	return strings.TrimSpace(string(out))
}

// loggedSince counts msgx's WARN and ERROR lines since at by message and
// component ("one line per cause, not a flood").
func loggedSince(t *testing.T, s *scenario, at time.Time) []string {
	fh, err := os.Open(s.logs.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Time      time.Time `json:"time"`
			Level     string    `json:"level"`
			Msg       string    `json:"msg"`
			Component string    `json:"component"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Time.Before(at) || (l.Level != "WARN" && l.Level != "ERROR") {
			continue
		}
		if l.Msg == "message decided" {
			continue // a DEAD or SKIPPED message of the workload, not the fault
		}
		counts[fmt.Sprintf("%s %s: %s", l.Level, l.Component, l.Msg)]++
	}
	var out []string
	for k, n := range counts {
		out = append(out, fmt.Sprintf("%s ×%d", k, n))
	}
	slices.Sort(out)
	return out
}
