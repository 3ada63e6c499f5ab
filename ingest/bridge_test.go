package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"msgx/internal/clock"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
)

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestContiguousAcrossBatches(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ClaimBatch = 10 })
	inserted := h.insert(25)
	b, cur := h.started(h.clock)
	// Two full batches ask to poll again at once, the third (short) one waits.
	waits := []time.Duration{h.poll(b, cur), h.poll(b, cur), h.poll(b, cur)}
	if !reflect.DeepEqual(waits, []time.Duration{0, 0, time.Second}) {
		t.Fatalf("waits = %v", waits)
	}
	if cur.Watermark != 25 || h.cursor().Watermark != 25 {
		t.Fatalf("watermark %d / stored %d, want 25", cur.Watermark, h.cursor().Watermark)
	}
	recs := h.topic(25)
	if !reflect.DeepEqual(ids(recs), inserted) {
		t.Fatalf("topic order %v, want %v", ids(recs), inserted)
	}
	if recs[3].Raw != msgXML(3) || recs[3].ReceivedAt == nil || !recs[3].EnqueuedAt.Equal(h.t0) {
		t.Fatalf("record content wrong: %+v", recs[3])
	}
}

func TestRunLoopProducesInOrder(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ClaimBatch = 7 })
	inserted := h.insert(30)
	b := h.bridge(clock.Real{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	recs := h.topic(30)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !reflect.DeepEqual(ids(recs), inserted) {
		t.Fatalf("topic order %v, want %v", ids(recs), inserted)
	}
}

// holdInsert starts a transaction that inserts one row and keeps it open.
func holdInsert(t *testing.T, h *harness) (finish func(commit bool), id int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := h.my.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tx.Exec("INSERT INTO cminmsgs (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED) VALUES (?, NOW())", msgXML(99))
	if err != nil {
		t.Fatal(err)
	}
	id, _ = res.LastInsertId()
	return func(commit bool) {
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}, id
}

// waitLockWait blocks until a transaction is waiting on a row lock (the probe).
func waitLockWait(t *testing.T, h *harness) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := h.my.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		// InnoDB refreshes INNODB_TRX only after 100ms without readers:
		// polling faster would read a stale snapshot forever.
		time.Sleep(150 * time.Millisecond)
	}
	t.Fatal("the hole probe never waited on the in-flight insert")
}

func TestProbeWaitsForInFlightInsertThenReadsInOrder(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.HoleProbeTimeout = 10 * time.Second })
	h.insert(2)
	finish, held := holdInsert(t, h)
	after := h.insert(2)
	b, cur := h.started(h.clock)

	polled := make(chan time.Duration, 1)
	go func() { polled <- h.poll(b, cur) }()
	waitLockWait(t, h)
	if got := h.topicLen(); got != 2 {
		t.Fatalf("%d records on the topic while the hole is open, want the 2 before it", got)
	}
	finish(true)
	if wait := <-polled; wait != 0 {
		t.Fatalf("after the insert committed the bridge should read again at once, waits %v", wait)
	}
	h.poll(b, cur)
	want := append(append(seq(1, 2), held), after...)
	if got := ids(h.topic(5)); !reflect.DeepEqual(got, want) {
		t.Fatalf("topic order %v, want %v", got, want)
	}
	if cur.HasHole() {
		t.Fatalf("hole timer still running: %+v", cur)
	}
}

func TestProbeReleasesRolledBackIDWithinGrace(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.HoleProbeTimeout = 10 * time.Second })
	h.insert(2)
	finish, held := holdInsert(t, h)
	after := h.insert(2)
	b, cur := h.started(h.clock)

	polled := make(chan time.Duration, 1)
	go func() { polled <- h.poll(b, cur) }()
	waitLockWait(t, h)
	finish(false)
	// The first probe found the ID absent: the bridge now waits the grace on
	// the fake clock before probing once more.
	if err := h.clock.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second)
	<-polled
	h.poll(b, cur)

	if got := ids(h.topic(4)); !reflect.DeepEqual(got, append(seq(1, 2), after...)) {
		t.Fatalf("topic %v", got)
	}
	var reason string
	var observed, released time.Time
	if err := h.pool.QueryRow(context.Background(), "SELECT reason, observed_at, released_at FROM inbox_hole WHERE first_id = $1", held).Scan(&reason, &observed, &released); err != nil {
		t.Fatal(err)
	}
	if reason != "probe" || released.Sub(observed) > time.Second || time.Second >= h.cfg.MaxCommitDelay {
		t.Fatalf("hole released by %q after %v; want the probe within the 1s grace", reason, released.Sub(observed))
	}
	if b.Stats().PermanentHoles != 1 {
		t.Fatalf("stats %+v", b.Stats())
	}
}

func TestGapFilledBeforeDelayKeepsOrder(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.HoleProbe = false })
	h.insertID(1)
	h.insertID(2)
	h.insertID(4)
	h.insertID(5)
	b, cur := h.started(h.clock)
	h.poll(b, cur)
	if cur.Watermark != 2 || !cur.HoleSince.Equal(h.t0) || cur.HoleEnd != 3 {
		t.Fatalf("cursor %+v, want W=2 with the hole timer started", cur)
	}
	if n := h.topicLen(); n != 2 {
		t.Fatalf("rows after the gap were enqueued: topic has %d records", n)
	}
	h.clock.Advance(4 * time.Minute)
	h.poll(b, cur)
	if n := h.topicLen(); n != 2 || cur.Watermark != 2 {
		t.Fatalf("hole passed before the delay: W=%d topic=%d", cur.Watermark, n)
	}
	h.insertID(3)
	h.poll(b, cur)
	if got := ids(h.topic(5)); !reflect.DeepEqual(got, seq(1, 5)) {
		t.Fatalf("topic order %v", got)
	}
	if cur.HasHole() {
		t.Fatalf("timer not cleared: %+v", cur)
	}
}

func TestGapReleasedAfterDelayAndLateRowCounted(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.HoleProbe = false })
	for _, id := range []int64{1, 2, 5, 6} {
		h.insertID(id)
	}
	b, cur := h.started(h.clock)
	h.poll(b, cur)
	h.clock.Advance(5*time.Minute - time.Second)
	h.poll(b, cur)
	if cur.Watermark != 2 {
		t.Fatalf("released early: %+v", cur)
	}
	h.clock.Advance(time.Second)
	if wait := h.poll(b, cur); wait != 0 || cur.Watermark != 4 || cur.HasHole() {
		t.Fatalf("after the delay: wait %v cursor %+v, want W=4 and no timer", wait, cur)
	}
	h.poll(b, cur)
	if got := ids(h.topic(4)); !reflect.DeepEqual(got, []int64{1, 2, 5, 6}) {
		t.Fatalf("topic %v", got)
	}

	// ID 3 commits after its hole was released: counted, never enqueued.
	h.insertID(3)
	h.clock.Advance(time.Minute)
	if err := b.maybeCheckLate(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.poll(b, cur)
	var late int
	if err := h.pool.QueryRow(context.Background(), "SELECT COUNT(*) FROM inbox_late_row WHERE msg_id = 3 AND hole_id = 3").Scan(&late); err != nil {
		t.Fatal(err)
	}
	if late != 1 || b.Stats().LateRows != 1 {
		t.Fatalf("late row not recorded: table %d stats %+v", late, b.Stats())
	}
	if n := h.topicLen(); n != 4 {
		t.Fatalf("late row was enqueued: topic has %d records", n)
	}
	// Seen again on the next check: still counted once.
	h.clock.Advance(time.Minute)
	if err := b.maybeCheckLate(context.Background()); err != nil || b.Stats().LateRows != 1 {
		t.Fatalf("late row counted twice: %v %+v", err, b.Stats())
	}
}

func TestHoleTimerSurvivesRestart(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.HoleProbe = false })
	h.insertID(1)
	h.insertID(3)
	b1, cur1 := h.started(h.clock)
	h.poll(b1, cur1)

	// A new process three minutes later reads the persisted timer.
	h.clock.Advance(3 * time.Minute)
	b2, cur2 := h.started(h.clock)
	if !cur2.HoleSince.Equal(h.t0) {
		t.Fatalf("restart lost the hole timer: %+v", cur2)
	}
	h.poll(b2, cur2)
	if cur2.Watermark != 1 || !h.cursor().HoleSince.Equal(h.t0) {
		t.Fatalf("restart reset the timer: %+v", h.cursor())
	}
	h.clock.Advance(2 * time.Minute)
	h.poll(b2, cur2)
	if cur2.Watermark != 2 {
		t.Fatalf("hole not released 5 minutes after it was first seen: %+v", cur2)
	}
}

func TestSeeding(t *testing.T) {
	for _, tc := range []struct {
		cutover string
		want    int64
	}{{"min", 4}, {"zero", 0}, {"max", 7}, {"42", 42}} {
		t.Run(tc.cutover, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Cutover = tc.cutover })
			for _, id := range []int64{5, 6, 7} {
				h.insertID(id)
			}
			_, cur := h.started(h.clock)
			if cur.Watermark != tc.want || h.cursor().Watermark != tc.want {
				t.Fatalf("seeded W=%d, want %d", cur.Watermark, tc.want)
			}
			// A second start with another mode keeps the cursor.
			h.cfg.Cutover = "max"
			h.insertID(8)
			if _, again := h.started(h.clock); again.Watermark != tc.want {
				t.Fatalf("re-seeded to %d", again.Watermark)
			}
			var mode string
			if err := h.pool.QueryRow(context.Background(), "SELECT seed_mode FROM inbox_cursor").Scan(&mode); err != nil || mode != tc.cutover {
				t.Fatalf("seed_mode %q %v", mode, err)
			}
		})
	}
}

func TestSeedingRefusedWithoutDecision(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Cutover = "" })
	_, err := h.bridge(h.clock).start(context.Background())
	if !errors.Is(err, ErrNotSeeded) {
		t.Fatalf("start without cursor or cut-over = %v, want ErrNotSeeded", err)
	}
}

func TestSeedMinWaitsForFirstRow(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Cutover = "min" })
	b := h.bridge(h.clock)
	got := make(chan sink.Cursor, 1)
	go func() {
		c, err := b.start(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	if err := h.clock.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	h.insertID(100)
	h.clock.Advance(time.Second)
	if c := <-got; c.Watermark != 99 {
		t.Fatalf("seeded %d, want 99", c.Watermark)
	}
}

func TestMySQLDownKeepsWatermarkThenCatchesUp(t *testing.T) {
	h := newHarness(t, nil)
	proxy := testenv.NewProxy(t, "127.0.0.1:3306")
	dsn := strings.Replace(h.myDSN, "127.0.0.1:3306", proxy.Addr(), 1)
	db, err := sink.OpenMySQL(sink.Config{MySQLDSN: dsn, Timeout: 2 * time.Second}, sinktest.ShanghaiInbox, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, cur := h.started(h.clock)
	b.d.Inbox = sinktest.Tables(t, db, nil, "cminmsgs", 2*time.Second)
	h.insert(3)
	h.poll(b, cur)

	proxy.Down()
	h.insert(3)
	if _, err := b.poll(context.Background(), cur); err == nil {
		t.Fatal("poll with MySQL down reported success")
	}
	if cur.Watermark != 3 || h.cursor().Watermark != 3 {
		t.Fatalf("watermark moved during the outage: %d", h.cursor().Watermark)
	}
	proxy.Up()
	h.poll(b, cur)
	if got := ids(h.topic(6)); !reflect.DeepEqual(got, seq(1, 6)) {
		t.Fatalf("after the outage topic = %v", got)
	}
}

func TestCrashBetweenProduceAndCursorSave(t *testing.T) {
	h := newHarness(t, nil)
	h.insert(5)
	b1, cur1 := h.started(h.clock)
	crash := errors.New("killed")
	b1.afterProduce = func() error { return crash }
	if _, err := b1.poll(context.Background(), cur1); !errors.Is(err, crash) {
		t.Fatalf("poll = %v", err)
	}
	if w := h.cursor().Watermark; w != 0 {
		t.Fatalf("cursor saved despite the crash: %d", w)
	}
	// The next process produces the same rows again: nothing lost, and the
	// duplicates carry the same MSG_ID.
	b2, cur2 := h.started(h.clock)
	h.poll(b2, cur2)
	got := ids(h.topic(10))
	if !reflect.DeepEqual(got, append(seq(1, 5), seq(1, 5)...)) {
		t.Fatalf("topic %v", got)
	}
	if h.cursor().Watermark != 5 {
		t.Fatalf("cursor %d", h.cursor().Watermark)
	}
}

func TestTwoInstancesOnlyOneReads(t *testing.T) {
	h := newHarness(t, nil)
	clockA, clockB := clock.NewFake(h.t0), clock.NewFake(h.t0)
	a, b := h.bridge(clockA), h.bridge(clockB)
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Run(ctxA) }()
	// A sleeps after its first poll once it holds the lock.
	if err := clockA.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	go func() { doneB <- b.Run(ctxB) }()
	// B finds the lock taken and waits as a standby.
	if err := clockB.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if !a.Stats().Active || b.Stats().Active {
		t.Fatalf("active: A %v B %v", a.Stats().Active, b.Stats().Active)
	}
	h.insert(3)
	clockA.Advance(time.Second)
	clockB.Advance(time.Second)
	if got := ids(h.topic(3)); !reflect.DeepEqual(got, seq(1, 3)) {
		t.Fatalf("topic %v", got)
	}
	if err := clockB.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if b.Stats().Active {
		t.Fatal("standby became active while A holds the lock")
	}

	// A dies; B takes over on its next attempt and carries on from A's cursor.
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("A: %v", err)
	}
	h.insert(2)
	for !b.Stats().Active {
		clockB.Advance(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	got := ids(h.topic(5))
	if !reflect.DeepEqual(got, seq(1, 5)) {
		t.Fatalf("after takeover topic %v", got)
	}
	if n := h.topicLen(); n != 5 {
		t.Fatalf("takeover re-produced rows: %d records", n)
	}
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("B: %v", err)
	}
}

func TestCursorCASStopsASecondWriter(t *testing.T) {
	h := newHarness(t, nil)
	h.insert(2)
	b1, cur1 := h.started(h.clock)
	b2, cur2 := h.started(h.clock)
	h.poll(b1, cur1)
	if _, err := b2.poll(context.Background(), cur2); !errors.Is(err, sink.ErrCursorMoved) {
		t.Fatalf("second writer: %v, want sink.ErrCursorMoved", err)
	}
}

func TestInboxRecordCodecRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 30, 16, 0, 0, 0, testenv.Shanghai)
	in := Record{MsgID: 7, ReceivedAt: &at, EnqueuedAt: at.UTC(), Raw: "<MSG>登机</MSG>"}
	b, err := Codec{}.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Codec{}.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*Record)
	if got.MsgID != 7 || !got.ReceivedAt.Equal(at) || got.Raw != in.Raw || !got.EnqueuedAt.Equal(at) {
		t.Fatalf("round trip %+v", got)
	}
	if _, err := (Codec{}).Decode([]byte("nope")); err == nil {
		t.Fatal("garbage decoded")
	}
	if fmt.Sprint(in.Key()) != "7" {
		t.Fatal("key")
	}
}

func TestOversizeRowDoesNotBlockIngest(t *testing.T) {
	h := newHarness(t, nil)
	h.insert(1)
	big := "<MSG>" + strings.Repeat("x", 1_200_000) + "</MSG>"
	testenv.InsertInbox(t, h.my, big)
	h.insert(1)
	b, cur := h.started(h.clock)
	h.poll(b, cur)
	recs := h.topic(3)
	if len(recs) != 3 || recs[1].MsgID != 2 || recs[1].Raw != "" || recs[1].Oversize != len(big) || recs[2].MsgID != 3 {
		t.Fatalf("records %+v", ids(recs))
	}
}

// New names what is missing: a nil collaborator is an error, not a panic.
func TestNewRefusesIncompleteDeps(t *testing.T) {
	cfg := Config{Topic: "msgx.inbox", PollInterval: time.Second, ClaimBatch: 100,
		MaxCommitDelay: 5 * time.Minute, HoleProbeTimeout: 2 * time.Second, LateWatch: time.Hour, LateCheckInterval: time.Second}
	_, err := New(cfg, Deps{})
	for _, want := range []string{"no inbox reader", "no cursor store", "no Kafka brokers", "no clock", "no logger"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with empty deps: %v, want it to name %q", err, want)
		}
	}
	cfg.Topic = ""
	if _, err := New(cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "MSGX_TOPIC_INBOX") {
		t.Errorf("New without a topic: %v", err)
	}
}

// A poll reads at most MSGX_CLAIM_MAX_BYTES of message text: it stops
// before the row that would exceed it, always takes at least one row (one
// larger than the bound is read alone), and asks to poll again at once
// while rows were left out.
func TestPollBoundedByBytes(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ClaimMaxBytes = 2500 })
	text := func(n int) string { return "<MSG>" + strings.Repeat("x", n-11) + "</MSG>" }
	for _, n := range []int{1000, 1000, 1000, 1000, 1000, 10000, 1000, 1000} {
		testenv.InsertInbox(t, h.my, text(n))
	}
	b, cur := h.started(h.clock)
	var marks []int64
	var waits []time.Duration
	for i := 0; i < 6; i++ {
		waits = append(waits, h.poll(b, cur))
		marks = append(marks, cur.Watermark)
	}
	if !reflect.DeepEqual(marks, []int64{2, 4, 5, 6, 8, 8}) {
		t.Fatalf("watermarks after each poll %v, want 2 4 5 6 8 8 (two 1000-byte rows per 2500 bytes, the 10000-byte row alone)", marks)
	}
	// Polls cut short poll again at once; so does the fifth, which filled
	// the narrowed window (two rows); the sixth finds nothing and waits.
	if !reflect.DeepEqual(waits, []time.Duration{0, 0, 0, 0, 0, time.Second}) {
		t.Fatalf("waits %v: a poll cut short by the byte bound must poll again at once", waits)
	}
	recs := h.topic(8)
	if !reflect.DeepEqual(ids(recs), seq(1, 8)) || len(recs[5].Raw) != 10000 {
		t.Fatalf("topic %v", ids(recs))
	}
}

// A MySQL outage fails every poll. The bridge logs the first failure, a
// summary at most every 30 s while it lasts and the recovery: a minute of
// 200 ms polls makes four lines, not three hundred.
func TestMySQLOutageLogsAreThrottled(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.PollInterval = 200 * time.Millisecond })
	proxy := testenv.NewProxy(t, "127.0.0.1:3306")
	db, err := sink.OpenMySQL(sink.Config{MySQLDSN: strings.Replace(h.myDSN, "127.0.0.1:3306", proxy.Addr(), 1), Timeout: 2 * time.Second}, sinktest.ShanghaiInbox, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var lines logLines
	b := h.bridge(h.clock)
	b.d.Inbox = sinktest.Tables(t, db, nil, "cminmsgs", 2*time.Second)
	b.log = slog.New(slog.NewJSONHandler(&lines, nil)).With("component", "ingest")
	h.insert(2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	step := func() {
		t.Helper()
		if err := h.clock.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(200 * time.Millisecond)
	}
	step() // the first poll read the two rows and waits
	proxy.Down()
	for i := 0; i <= 300; i++ { // 60 s of failing polls
		step()
	}
	proxy.Up()
	h.insert(1)
	step()
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range lines.all() {
		if m["level"] == "WARN" || strings.Contains(m["msg"].(string), "again") {
			got = append(got, m["level"].(string)+" "+m["msg"].(string))
		}
	}
	want := []string{
		"WARN ingest poll failed; watermark kept, retrying every poll",
		"WARN ingest poll failed; watermark kept, retrying every poll (still failing)",
		"WARN ingest poll failed; watermark kept, retrying every poll (still failing)",
		"INFO ingest poll succeeded again after failures",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("outage log lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := ids(h.topic(3)); !reflect.DeepEqual(got, seq(1, 3)) {
		t.Fatalf("after the outage topic = %v", got)
	}
}

// logLines collects JSON log lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) all() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// A bridge whose ingest lock session is gone stops once it next checks it,
// at most lockCheck after the last check, even while it polls more often.
func TestLostLockSessionStopsTheBridge(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.PollInterval = 100 * time.Millisecond })
	b := h.bridge(h.clock)
	done := make(chan error, 1)
	go func() { done <- b.Run(context.Background()) }()
	if err := h.clock.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var killed bool
	if err := h.pool.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminating the lock's session: %v %v", killed, err)
	}
	// Polls within lockCheck of the last check go on; the cursor's
	// compare-and-set is what guards them.
	h.insert(2)
	h.clock.Advance(100 * time.Millisecond)
	if got := ids(h.topic(2)); !reflect.DeepEqual(got, seq(1, 2)) {
		t.Fatalf("topic %v", got)
	}
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the bridge stopped before its next check: %v", err)
	default:
	}
	h.clock.Advance(lockCheck - 100*time.Millisecond)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "advisory lock session lost") {
			t.Fatalf("Run returned %v, want the lost session", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the bridge polls on without its lock session")
	}
}
