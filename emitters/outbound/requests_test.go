package outbound

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/refdata"
	"msgx/tables/request"
	"msgx/tables/sis"
)

// decode decodes an outbox row back with the SIS codec.
func decode(t *testing.T, xml string) *sis.Message {
	t.Helper()
	m, err := sis.Decode([]byte(xml), testenv.Shanghai)
	if err != nil {
		t.Fatalf("decoding the outbox row: %v\n%s", err, xml)
	}
	return m
}

func TestRequestRefdataWritesOutbox(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	hooked := false
	// SENT only after the insert committed: at the moment the row exists,
	// req_track still says PENDING with the attempt recorded.
	e.s.afterInsert = func(r request.ReqTrack, outboxID int64) error {
		hooked = true
		cur := e.get(r.ID)
		if cur.State != request.StatePending || cur.Attempts != 1 || cur.OutboxID != 0 {
			t.Errorf("after the insert, before SENT: %+v", cur)
		}
		if rows := e.outbox(); len(rows) != 1 || rows[0].ID != outboxID {
			t.Errorf("after the insert the outbox holds %+v, want COUTMSGS_ID %d", rows, outboxID)
		}
		return nil
	}
	r, err := e.s.RequestRefdata(c, " airl ")
	if err != nil {
		t.Fatal(err)
	}
	if !hooked {
		t.Fatal("the insert hook did not run")
	}
	e.s.afterInsert = nil
	wantSent := start.Truncate(time.Second)
	if r.State != request.StateSent || r.Kind != request.RQRD || r.STYP != "AIRL" || r.SNDR != "MSGX" ||
		r.OutboxID == 0 || !r.SentAt.Equal(wantSent) || r.Attempts != 1 || r.OutboxFloor != 0 || r.LastError != "" {
		t.Fatalf("request = %+v", r)
	}
	if stored := e.get(r.ID); !request.Equal(stored, r) {
		t.Errorf("stored %+v\nreturned %+v", stored, r)
	}

	rows := e.outbox()
	if len(rows) != 1 {
		t.Fatalf("outbox rows: %+v", rows)
	}
	row := rows[0]
	if row.ID != r.OutboxID || row.RoutingID != "AODB" || !row.Inserted.Equal(wantSent) || row.XML != r.Payload {
		t.Errorf("row = %+v, request = %+v", row, r)
	}
	m := decode(t, row.XML)
	if m.Kind != sis.KindRefDataRequest || m.Meta.TYPE != "RQRD" || m.Meta.STYP != "AIRL" || m.Meta.SNDR != "MSGX" ||
		m.Meta.SEQN != strconv.FormatInt(r.SEQN, 10) || !m.Meta.DTTM.Equal(wantSent) ||
		!slices.Equal(m.RefDataRequest.Types, []string{"AIRL"}) {
		t.Errorf("decoded %+v %+v", m.Meta, m.RefDataRequest)
	}

	// SEQNs are fresh: a second request gets another one.
	r2, err := e.s.RequestRefdata(c, "COUL")
	if err != nil {
		t.Fatal(err)
	}
	if r2.SEQN == r.SEQN || r2.OutboxFloor != r.OutboxID {
		t.Errorf("second request %+v", r2)
	}

	if _, err := e.s.RequestRefdata(c, "SCHD"); err == nil {
		t.Error("requested SCHD as reference data")
	}

	// One RQRD names several categories: STYP lists them, the body has
	// one RTYP each.
	r3, err := e.s.RequestRefdata(c, "AIRL", " coul ")
	if err != nil {
		t.Fatal(err)
	}
	if r3.STYP != "AIRL,COUL" || !slices.Equal(r3.RTypes, []string{"AIRL", "COUL"}) {
		t.Errorf("two-category request %+v", r3)
	}
	if m := decode(t, r3.Payload); m.Meta.STYP != "AIRL,COUL" || !slices.Equal(m.RefDataRequest.Types, []string{"AIRL", "COUL"}) {
		t.Errorf("decoded %+v %+v", m.Meta, m.RefDataRequest)
	}
	if _, err := e.s.RequestRefdata(c); !errors.Is(err, request.ErrInvalid) {
		t.Errorf("an RQRD of no category: %v", err)
	}
}

func TestRequestFlightsWritesOutbox(t *testing.T) {
	e := newEnv(t, nil)
	from := time.Date(2026, 3, 15, 6, 0, 0, 0, testenv.Shanghai)
	to := time.Date(2026, 3, 15, 12, 0, 45, 0, testenv.Shanghai)
	// The window may come in any zone; SIS gets airport time.
	r, err := e.s.RequestFlights(ctx(t), from.UTC(), to.UTC())
	if err != nil {
		t.Fatal(err)
	}
	wantTo := to.Truncate(time.Minute)
	if r.State != request.StateSent || r.Kind != request.RQFD || r.STYP != "NONE" ||
		!r.WindowFrom.Equal(from) || !r.WindowTo.Equal(wantTo) {
		t.Fatalf("request = %+v", r)
	}
	rows := e.outbox()
	if len(rows) != 1 {
		t.Fatalf("outbox rows: %+v", rows)
	}
	m := decode(t, rows[0].XML)
	if m.Kind != sis.KindFlightRequest || m.Meta.TYPE != "RQFD" || m.Meta.STYP != "NONE" || m.Meta.SNDR != "MSGX" ||
		m.Meta.SEQN != strconv.FormatInt(r.SEQN, 10) || !m.FlightRequest.From.Equal(from) ||
		!m.FlightRequest.To.Equal(wantTo) || m.FlightRequest.FromRaw != "15MAR260600" {
		t.Errorf("decoded %+v %+v", m.Meta, m.FlightRequest)
	}
	if stored := e.get(r.ID); !stored.WindowFrom.Equal(from) || !stored.WindowTo.Equal(wantTo) {
		t.Errorf("stored window %v..%v", stored.WindowFrom, stored.WindowTo)
	}

	if _, err := e.s.RequestFlights(ctx(t), to, from); !errors.Is(err, request.ErrInvalid) {
		t.Errorf("reversed window: %v", err)
	}
}

// One open RQRD and one open RQFD (001 §1.2, US-09 AC1): a new RQRD
// supersedes the open one whatever categories either names.
func TestNewRequestSupersedesOpenOne(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	airl, err := e.s.RequestRefdata(c, "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	coul, err := e.s.RequestRefdata(c, "COUL", "ARPT")
	if err != nil {
		t.Fatal(err)
	}
	old := e.get(airl.ID)
	if old.State != request.StateExpired || old.CloseReason != "SUPERSEDED by SEQN "+strconv.FormatInt(coul.SEQN, 10) ||
		!old.ClosedAt.Equal(e.clk.Now()) || old.OutboxID != airl.OutboxID {
		t.Errorf("AIRL request after a COUL,ARPT one: %+v", old)
	}
	if coul.State != request.StateSent {
		t.Errorf("COUL,ARPT: %+v", coul)
	}
	e.clk.Advance(time.Minute)
	airl2, err := e.s.RequestRefdata(c, "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.get(coul.ID); got.State != request.StateExpired {
		t.Errorf("COUL,ARPT after a new AIRL request: %s", got.State)
	}
	open, ok, err := e.s.OpenFor(c, request.RQRD, "airl")
	if err != nil || !ok || open.ID != airl2.ID {
		t.Errorf("OpenFor AIRL = %+v, %v, %v", open, ok, err)
	}
	if _, ok, err := e.s.OpenFor(c, request.RQRD, "COUL"); ok || err != nil {
		t.Errorf("OpenFor COUL found the AIRL request: %v", err)
	}

	// Every RQFD shares one slot, whatever the window; it is apart from
	// the RQRD's.
	f1, err := e.s.RequestFlights(c, start, start.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	f2, err := e.s.RequestFlights(c, start.Add(24*time.Hour), start.Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.get(f1.ID); got.State != request.StateExpired || !strings.HasPrefix(got.CloseReason, request.ReasonSuperseded) {
		t.Errorf("first RQFD: %+v", got)
	}
	if open, ok, _ := e.s.OpenFor(c, request.RQFD, ""); !ok || open.ID != f2.ID {
		t.Errorf("OpenFor RQFD = %+v, %v", open, ok)
	}
	if got := e.get(airl2.ID); got.State != request.StateSent {
		t.Errorf("an RQFD closed the RQRD: %s", got.State)
	}
	if n := len(e.outbox()); n != 5 {
		t.Errorf("%d outbox rows, want 5 (superseding never writes)", n)
	}

	// The schema enforces one open request per kind on its own, too.
	_, err = e.pg.Exec(c, `INSERT INTO req_track (kind, styp, rtypes, seqn, sndr, state, payload, created_at)
		VALUES ('RQRD', 'COUL', ARRAY['COUL'], 1, 'MSGX', 'PENDING', '<x/>', now())`)
	if err == nil || !strings.Contains(err.Error(), "req_track_open_kind") {
		t.Errorf("a second open RQRD was accepted: %v", err)
	}
}

// An RQRD of several categories is answered category by category: DONE once
// every one of them was applied.
func TestRQRDOfSeveralCategoriesIsDoneWithTheLastAnswer(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	r, err := e.s.RequestRefdata(c, "AIRL", "COUL")
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	part, ok := e.complete(e.s, request.RQRD, "COUL", 500, e.clk.Now(), false)
	if !ok || part.State != request.StateSent || !slices.Equal(part.Answered, []string{"COUL"}) {
		t.Fatalf("after COUL: %+v, %v", part, ok)
	}
	if got := e.get(r.ID); !request.Equal(got, part) {
		t.Errorf("stored %+v", got)
	}
	// A redelivered COUL answer and an answer of a category not asked for
	// change nothing.
	if _, ok := e.complete(e.s, request.RQRD, "COUL", 500, e.clk.Now(), false); ok {
		t.Error("a redelivered COUL answer was recorded again")
	}
	if _, ok := e.complete(e.s, request.RQRD, "ARPT", 501, e.clk.Now(), false); ok {
		t.Error("an ARPT answer was recorded")
	}
	done, ok := e.complete(e.s, request.RQRD, "AIRL", 502, e.clk.Now(), false)
	if !ok || done.State != request.StateDone || done.ResponseMsgID != 502 || !slices.Equal(done.Answered, []string{"COUL", "AIRL"}) {
		t.Fatalf("after AIRL: %+v, %v", done, ok)
	}
	if got := e.get(r.ID); !request.Equal(got, done) {
		t.Errorf("stored %+v", got)
	}
}

func TestTimeoutExpires(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Timeout = 10 * time.Minute })
	r, err := e.s.RequestRefdata(ctx(t), "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	stop := e.runInBackground(e.s)
	defer stop()

	e.tick(9 * time.Minute)
	if got := e.get(r.ID); got.State != request.StateSent {
		t.Fatalf("after 9m: %s", got.State)
	}
	e.tick(time.Minute) // 10m after SentAt (SentAt is start truncated)
	got := e.get(r.ID)
	if got.State != request.StateExpired || got.CloseReason != request.ReasonTimeout || !got.ClosedAt.Equal(e.clk.Now()) {
		t.Fatalf("after 10m: %+v", got)
	}
	// Expired is final: a round later nothing changes, and the slot is free.
	e.tick(time.Minute)
	if again := e.get(r.ID); !request.Equal(again, got) {
		t.Errorf("changed after expiry: %+v", again)
	}
	if _, ok, _ := e.s.OpenFor(ctx(t), request.RQRD, "AIRL"); ok {
		t.Error("the slot is still open")
	}
}

// eror is an EROR message as the router hands it over: META STYP, body
// SEQN, META DTTM (zero: none).
func (e *env) eror(msgID int64, metaSTYP, seqn string, dttm time.Time) request.Answer {
	e.t.Helper()
	a, err := e.s.Eror(ctx(e.t), request.ErorAnswer{MsgID: msgID, MetaSTYP: metaSTYP, RefSEQN: seqn, DTTM: dttm,
		Code: "E12", Text: "window too wide", At: e.clk.Now()})
	if err != nil {
		e.t.Fatalf("Eror(%d): %v", msgID, err)
	}
	return a
}

// answer reads message msgID's recorded outcome.
func (e *env) answer(msgID int64) request.Answer {
	e.t.Helper()
	a, ok, err := getAnswer(context.Background(), e.pg, msgID)
	if err != nil || !ok {
		e.t.Fatalf("answer of %d: %v %v", msgID, ok, err)
	}
	return a
}

// An EROR naming the request's SEQN in its body fails it, whatever it names
// otherwise; the outcome is recorded with the EROR's code and text, and
// later answers change nothing.
func TestERORBySEQN(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	r, err := e.s.RequestRefdata(c, "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(30 * time.Second)
	a := e.eror(70, "EROR", " "+strconv.FormatInt(r.SEQN, 10)+" ", time.Time{})
	failed := e.get(r.ID)
	if a.Outcome != request.OutcomeFailed || a.PairedBy != request.PairedBySEQN || a.RequestID != r.ID || a.Code != "E12" ||
		failed.State != request.StateFailed || failed.CloseReason != request.ReasonEror || failed.ResponseMsgID != 70 ||
		!failed.ClosedAt.Equal(e.clk.Now()) {
		t.Fatalf("answer %+v, request %+v", a, failed)
	}
	if got := e.answer(70); got.Outcome != request.OutcomeFailed || got.Text != "window too wide" || got.SEQN != r.SEQN {
		t.Errorf("recorded %+v", got)
	}
	// The same EROR again keeps its outcome; another one naming it is LATE.
	e.clk.Advance(time.Minute)
	if again := e.eror(70, "EROR", "", time.Time{}); again.Outcome != request.OutcomeFailed || !again.At.Equal(a.At) {
		t.Errorf("redelivered EROR: %+v", again)
	}
	if late := e.eror(71, "RQRD", strconv.FormatInt(r.SEQN, 10), time.Time{}); late.Outcome != request.OutcomeLate || late.RequestID != r.ID {
		t.Errorf("second EROR: %+v", late)
	}
	// A RESP after the EROR reopens nothing.
	if _, ok := e.complete(e.s, request.RQRD, "AIRL", 77, e.clk.Now(), false); ok {
		t.Error("a RESP completed a FAILED request")
	}
	if got := e.get(r.ID); !request.Equal(got, failed) {
		t.Errorf("changed after FAILED: %+v", got)
	}
	if got := e.answer(77); got.Outcome != request.OutcomeUnpaired || got.Type != request.AnswerRESP {
		t.Errorf("late RESP recorded %+v", got)
	}
}

// An EROR naming only the kind it answers fails the one open request of
// that kind, if it is dated after the request was sent; otherwise, or
// when it names nothing of ours, it pairs with nothing and says why.
func TestERORByTypeAndUnpaired(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	ref, err := e.s.RequestRefdata(c, "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	fl, err := e.s.RequestFlights(c, start.Add(24*time.Hour), start.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	for _, tc := range []struct {
		msgID    int64
		styp     string
		seqn     string
		dttm     time.Time
		detail   string
		pairedBy string
	}{
		{80, "RQFD", "", time.Time{}, "no META DTTM", request.PairedByType},
		{81, "RQFD", "", start.Add(-time.Hour), "earlier", request.PairedByType},
		{82, "RQFD", "999", e.clk.Now(), "SEQN 999 is no request of msgx", request.PairedBySEQN},
		{83, "NONE", "", e.clk.Now(), "neither a request's SEQN nor a kind", ""},
		{84, "RQRD", strconv.FormatInt(fl.SEQN, 10), e.clk.Now(), "but the EROR names RQRD", request.PairedBySEQN},
	} {
		a := e.eror(tc.msgID, tc.styp, tc.seqn, tc.dttm)
		if a.Outcome != request.OutcomeUnpaired || a.RequestID != 0 || a.PairedBy != tc.pairedBy || !strings.Contains(a.Detail, tc.detail) {
			t.Errorf("EROR %d: %+v, want UNPAIRED %q", tc.msgID, a, tc.detail)
		}
	}
	if got := e.get(fl.ID); got.State != request.StateSent {
		t.Fatalf("an unpaired EROR changed the RQFD: %s", got.State)
	}
	a := e.eror(85, "RQFD", "", e.clk.Now())
	if got := e.get(fl.ID); a.Outcome != request.OutcomeFailed || a.PairedBy != request.PairedByType || a.RequestID != fl.ID ||
		got.State != request.StateFailed || got.ResponseMsgID != 85 {
		t.Fatalf("EROR by type: %+v, request %+v", a, got)
	}
	if got := e.get(ref.ID); got.State != request.StateSent {
		t.Errorf("the RQRD changed: %s", got.State)
	}
	// The RQFD is closed now: the same kind pairs with nothing.
	if a := e.eror(86, "RQFD", "", e.clk.Now()); a.Outcome != request.OutcomeUnpaired || !strings.Contains(a.Detail, "no RQFD is open") {
		t.Errorf("EROR with no RQFD open: %+v", a)
	}
	list, err := List(c, e.pg, 0)
	if err != nil || len(list) != 2 || list[0].ID != fl.ID || len(list[0].Answers) != 1 || list[0].Answers[0].MsgID != 85 ||
		len(list[1].Answers) != 0 {
		t.Fatalf("List: %+v %v", list, err)
	}
	shown, err := Show(c, e.pg, fl.ID)
	if err != nil || shown.State != request.StateFailed || len(shown.Answers) != 1 || shown.Answers[0].Code != "E12" {
		t.Fatalf("Show: %+v %v", shown, err)
	}
	if _, err := Show(c, e.pg, 12345); !errors.Is(err, ErrNoRequest) {
		t.Errorf("Show of an unknown request: %v", err)
	}
}

func TestRESPCompletesInTheDataTransaction(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ClockSkew = 2 * time.Minute })
	c := ctx(t)
	r, err := e.s.RequestRefdata(c, "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	dttm := e.clk.Now().Truncate(time.Second)

	open, ok, err := e.s.OpenFor(c, request.RQRD, "AIRL")
	if err != nil || !ok {
		t.Fatal(open, ok, err)
	}
	if err := e.s.Accepts(*open, "AIRL", 500, dttm, e.clk.Now()); err != nil {
		t.Errorf("guard rejects the answer: %v", err)
	}
	// The data transaction rolls back: the request is not completed.
	if _, ok := e.complete(e.s, request.RQRD, "AIRL", 500, dttm, true); !ok {
		t.Fatal("Complete did not match")
	}
	if got := e.get(r.ID); got.State != request.StateSent {
		t.Fatalf("completed although the transaction rolled back: %s", got.State)
	}
	// It commits: DONE, with the answering message.
	done, ok := e.complete(e.s, request.RQRD, "AIRL", 500, dttm, false)
	if !ok || done.State != request.StateDone || done.ResponseMsgID != 500 || done.CloseReason != request.ReasonResponse {
		t.Fatalf("complete = %+v, %v", done, ok)
	}
	if got := e.get(r.ID); !request.Equal(got, done) {
		t.Errorf("stored %+v", got)
	}
	// The same RESP again (redelivery), another RESP: no-ops.
	e.clk.Advance(time.Minute)
	if _, ok := e.complete(e.s, request.RQRD, "AIRL", 500, dttm, false); ok {
		t.Error("duplicate RESP completed again")
	}
	if _, ok := e.complete(e.s, request.RQRD, "AIRL", 501, e.clk.Now(), false); ok {
		t.Error("a second RESP matched a DONE request")
	}
	if got := e.get(r.ID); !request.Equal(got, done) {
		t.Errorf("changed after DONE: %+v", got)
	}
	// A redelivered RESP does not complete a newer request of the slot
	// either, even within the skew.
	r2, err := e.s.RequestRefdata(c, "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.Complete(c, mustBegin(t, e), request.RQRD, "AIRL", 500, dttm, e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if got := e.get(r2.ID); got.State != request.StateSent {
		t.Errorf("a redelivered RESP completed the newer request: %+v", got)
	}

	// Stale, undated and unmatched answers change nothing.
	coul, err := e.s.RequestRefdata(c, "COUL")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.complete(e.s, request.RQRD, "COUL", 600, coul.SentAt.Add(-2*time.Minute-time.Second), false); ok {
		t.Error("a stale RESP completed COUL")
	}
	if _, ok := e.complete(e.s, request.RQRD, "COUL", 601, time.Time{}, false); ok {
		t.Error("a RESP without DTTM completed COUL")
	}
	if _, ok := e.complete(e.s, request.RQRD, "ARPT", 602, e.clk.Now(), false); ok {
		t.Error("an ARPT RESP matched something")
	}
	if got := e.get(coul.ID); got.State != request.StateSent {
		t.Errorf("COUL: %s", got.State)
	}
	// Within the skew it does complete.
	if _, ok := e.complete(e.s, request.RQRD, "COUL", 603, coul.SentAt.Add(-2*time.Minute), false); !ok {
		t.Error("a RESP within the clock skew did not complete COUL")
	}

	// SCHD RESP answers the RQFD slot.
	f, err := e.s.RequestFlights(c, start, start.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.complete(e.s, request.RQFD, request.STYPNone, 700, e.clk.Now(), false); !ok {
		t.Error("SCHD RESP did not complete the RQFD")
	}
	if got := e.get(f.ID); got.State != request.StateDone || got.ResponseMsgID != 700 {
		t.Errorf("RQFD: %+v", got)
	}
}

// mustBegin opens a transaction committed at the end of the test.
func mustBegin(t *testing.T, e *env) pgx.Tx {
	t.Helper()
	tx, err := e.pg.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Commit(context.Background()) })
	return tx
}

func TestLateRESPAfterExpiryDoesNotReopen(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Timeout = 10 * time.Minute })
	c := ctx(t)
	r, err := e.s.RequestRefdata(c, "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	answered := r.SentAt.Add(5 * time.Minute) // the AODB's answer, dated in time…
	e.clk.Advance(10 * time.Minute)
	if n, err := e.s.ExpireDue(c); err != nil || n != 1 {
		t.Fatalf("ExpireDue = %d, %v", n, err)
	}
	expired := e.get(r.ID)
	// …is processed after the expiry: it does not reopen the request.
	if _, ok := e.complete(e.s, request.RQRD, "AIRL", 900, answered, false); ok {
		t.Error("a late RESP completed an EXPIRED request")
	}
	if got := e.get(r.ID); !request.Equal(got, expired) {
		t.Errorf("EXPIRED request changed: %+v", got)
	}
	// Nor does it complete the next request of the slot: it is older than it.
	e.clk.Advance(5 * time.Minute)
	r2, err := e.s.RequestRefdata(c, "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.complete(e.s, request.RQRD, "AIRL", 900, answered, false); ok {
		t.Error("a late RESP completed the next request")
	}
	if got := e.get(r2.ID); got.State != request.StateSent {
		t.Errorf("next request: %s", got.State)
	}
	if got := e.get(r.ID); !request.Equal(got, expired) {
		t.Errorf("EXPIRED request changed: %+v", got)
	}
}

var errCrash = errors.New("simulated crash")

func TestCrashBetweenOutboxInsertAndSent(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	e.s.afterInsert = func(request.ReqTrack, int64) error { return errCrash }
	r, err := e.s.RequestRefdata(c, "AIRL")
	if !errors.Is(err, errCrash) {
		t.Fatalf("err = %v", err)
	}
	if got := e.get(r.ID); got.State != request.StatePending || got.Attempts != 1 || got.OutboxID != 0 {
		t.Fatalf("after the crash: %+v", got)
	}
	rows := e.outbox()
	if len(rows) != 1 {
		t.Fatalf("outbox: %+v", rows)
	}

	// Restart: Run recovers at once, finds the row, records SENT, writes nothing.
	e.clk.Advance(time.Minute)
	s2 := e.restart()
	stop := e.runInBackground(s2)
	got := e.get(r.ID)
	if got.State != request.StateSent || got.OutboxID != rows[0].ID || !got.SentAt.Equal(rows[0].Inserted) {
		t.Errorf("after recovery: %+v (row %+v)", got, rows[0])
	}
	e.tick(time.Minute)
	stop()
	if n := len(e.outbox()); n != 1 {
		t.Errorf("%d outbox rows after recovery, want 1", n)
	}
	// The recovered request is answerable like any other.
	if _, ok := e.complete(s2, request.RQRD, "AIRL", 10, e.clk.Now(), false); !ok {
		t.Error("the recovered request did not complete")
	}
}

func TestCrashBeforeOutboxInsert(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	// A row of somebody else, so the floor is not 0.
	if _, err := e.raw.Exec("INSERT INTO coutmsgs (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID) VALUES ('<MSG/>', NOW(), 'X')"); err != nil {
		t.Fatal(err)
	}
	e.s.beforeInsert = func(request.ReqTrack) error { return errCrash }
	r, err := e.s.RequestFlights(c, start, start.Add(time.Hour))
	if !errors.Is(err, errCrash) {
		t.Fatalf("err = %v", err)
	}
	if got := e.get(r.ID); got.State != request.StatePending || got.Attempts != 1 || got.OutboxFloor != 1 {
		t.Fatalf("after the crash: %+v", got)
	}
	s2 := e.restart()
	if err := s2.Reconcile(c); err != nil {
		t.Fatal(err)
	}
	if err := s2.Reconcile(c); err != nil {
		t.Fatal(err)
	}
	rows := e.outbox()
	if len(rows) != 2 {
		t.Fatalf("outbox: %+v", rows)
	}
	got := e.get(r.ID)
	if got.State != request.StateSent || got.OutboxID != rows[1].ID || got.Attempts != 2 || got.OutboxFloor != 1 {
		t.Errorf("after recovery: %+v", got)
	}
}

// TestCrashThenNewRequestOfTheSameSlot: the request interrupted after its
// insert is looked up (it did go out) and superseded, never sent again.
func TestCrashThenNewRequestOfTheSameSlot(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	e.s.afterInsert = func(request.ReqTrack, int64) error { return errCrash }
	r1, _ := e.s.RequestRefdata(c, "AIRL")
	s2 := e.restart()
	e.clk.Advance(time.Minute)
	r2, err := s2.RequestRefdata(c, "AIRL")
	if err != nil {
		t.Fatal(err)
	}
	rows := e.outbox()
	if len(rows) != 2 {
		t.Fatalf("outbox: %d rows, want 2", len(rows))
	}
	old := e.get(r1.ID)
	if old.State != request.StateExpired || old.OutboxID != rows[0].ID || !strings.HasPrefix(old.CloseReason, request.ReasonSuperseded) {
		t.Errorf("interrupted request: %+v", old)
	}
	if r2.State != request.StateSent || r2.OutboxID != rows[1].ID {
		t.Errorf("new request: %+v", r2)
	}

	// And one that never reached the outbox is superseded without being sent.
	s2.beforeInsert = func(request.ReqTrack) error { return errCrash }
	r3, _ := s2.RequestRefdata(c, "COUL")
	s3 := e.restart()
	if _, err := s3.RequestRefdata(c, "COUL"); err != nil {
		t.Fatal(err)
	}
	if got := e.get(r3.ID); got.State != request.StateExpired || got.OutboxID != 0 {
		t.Errorf("unsent superseded request: %+v", got)
	}
	if n := len(e.outbox()); n != 3 {
		t.Errorf("%d outbox rows, want 3", n)
	}
}

func TestMySQLDownLeavesPendingThenSendsOnce(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	e.proxy.Down()
	r, err := e.s.RequestRefdata(c, "AIRL")
	if err == nil {
		t.Fatal("request succeeded with MySQL down")
	}
	got := e.get(r.ID)
	if got.State != request.StatePending || got.Attempts != 0 || got.LastError == "" {
		t.Fatalf("with MySQL down: %+v", got)
	}
	// Still down: recovery fails and changes nothing.
	if err := e.s.Reconcile(c); err == nil {
		t.Error("recovery succeeded with MySQL down")
	}
	if got := e.get(r.ID); got.State != request.StatePending || got.Attempts != 0 {
		t.Errorf("after failed recovery: %+v", got)
	}

	// MySQL is back when the next request comes: recovery before it sends
	// the pending AIRL request once. Then MySQL goes down between the RQFD's
	// attempt record and its insert: the insert fails, and recovery must look
	// for the row before writing it again.
	e.proxy.Up()
	e.s.beforeInsert = func(r request.ReqTrack) error {
		if r.Kind == request.RQFD {
			e.proxy.Down()
		}
		return nil
	}
	rf, err := e.s.RequestFlights(c, start, start.Add(time.Hour))
	if err == nil {
		t.Fatal("request succeeded with MySQL down")
	}
	if got := e.get(r.ID); got.State != request.StateSent || got.Attempts != 1 {
		t.Errorf("AIRL after MySQL came back: %+v", got)
	}
	if got := e.get(rf.ID); got.State != request.StatePending || got.Attempts != 1 {
		t.Fatalf("RQFD with MySQL down during the insert: %+v", got)
	}
	e.s.beforeInsert = nil

	e.proxy.Up()
	e.clk.Advance(time.Minute)
	if err := e.s.Reconcile(c); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Reconcile(c); err != nil {
		t.Fatal(err)
	}
	rows := e.outbox()
	if len(rows) != 2 {
		t.Fatalf("outbox: %d rows, want one per request", len(rows))
	}
	for i, id := range []int64{r.ID, rf.ID} {
		got := e.get(id)
		if got.State != request.StateSent || got.OutboxID != rows[i].ID || got.LastError != "" {
			t.Errorf("request %d after recovery: %+v", id, got)
		}
		if m := decode(t, rows[i].XML); m.Meta.SEQN != strconv.FormatInt(got.SEQN, 10) {
			t.Errorf("row %d carries SEQN %s, want %d", rows[i].ID, m.Meta.SEQN, got.SEQN)
		}
	}
}

func TestShadowModeNeverWrites(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Shadow = true; c.RefdataAt = "03:00" })
	c := ctx(t)
	if _, err := e.s.RequestRefdata(c, "AIRL"); !errors.Is(err, ErrShadow) {
		t.Errorf("RequestRefdata: %v", err)
	}
	if _, err := e.s.RequestFlights(c, start, start.Add(time.Hour)); !errors.Is(err, ErrShadow) {
		t.Errorf("RequestFlights: %v", err)
	}
	if err := e.s.Reconcile(c); !errors.Is(err, ErrShadow) {
		t.Errorf("Reconcile: %v", err)
	}
	stop := e.runInBackground(e.s)
	e.tick(24 * time.Hour)
	stop()
	if n := len(e.all()); n != 0 {
		t.Errorf("%d requests registered in shadow mode", n)
	}
	if n := len(e.outbox()); n != 0 {
		t.Errorf("%d outbox rows in shadow mode", n)
	}
	// Without MySQL at all.
	if _, err := New(e.cfg, Deps{PG: e.pg, Clock: e.clk, Log: testenv.Logger(t), Location: testenv.Shanghai, DBTimeout: time.Second}); err != nil {
		t.Errorf("shadow mode without MySQL: %v", err)
	}
}

func TestDailyReferenceRequests(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.RefdataAt = "03:00"; c.Timeout = time.Hour })
	var every []string
	for _, c := range refdata.Categories {
		every = append(every, c.RType)
	}
	// 10:00 on the 14th: the 03:00 round of today has not happened yet. An
	// operator asked for AIRL since 03:00, which counts as today's; one
	// RQRD asks for every other category (one RQRD is open at a time).
	if _, err := e.s.RequestRefdata(ctx(t), "AIRL"); err != nil {
		t.Fatal(err)
	}
	stop := e.runInBackground(e.s)
	day1 := e.all()
	others := slices.DeleteFunc(slices.Clone(every), func(s string) bool { return s == "AIRL" })
	if len(day1) != 2 || day1[1].Kind != request.RQRD || !slices.Equal(day1[1].RTypes, others) ||
		day1[1].State != request.StateSent || day1[0].State != request.StateExpired {
		t.Fatalf("after the first round: %+v", day1)
	}
	e.tick(time.Minute)
	stop()
	if n := len(e.all()); n != 2 {
		t.Fatalf("%d requests after the second round", n)
	}

	// A restart the same day does not repeat it.
	s2 := e.restart()
	stop = e.runInBackground(s2)
	if n := len(e.all()); n != 2 {
		t.Errorf("%d requests after a restart", n)
	}
	// The next day an operator asks for AIRL before 03:00; at 03:00 the
	// schedule asks for every category again, AIRL too (asked before 03:00).
	e.tick(time.Date(2026, 3, 15, 2, 0, 0, 0, testenv.Shanghai).Sub(e.clk.Now()))
	if _, err := s2.RequestRefdata(ctx(t), "AIRL"); err != nil {
		t.Fatal(err)
	}
	e.tick(time.Date(2026, 3, 15, 2, 59, 0, 0, testenv.Shanghai).Sub(e.clk.Now()))
	if n := len(e.all()); n != 3 {
		t.Errorf("%d requests at 02:59", n)
	}
	e.tick(time.Minute)
	e.tick(time.Minute)
	stop()
	all := e.all()
	if len(all) != 4 || !slices.Equal(all[3].RTypes, every) || all[3].STYP != strings.Join(every, ",") ||
		all[3].State != request.StateSent || all[3].CreatedAt.Before(time.Date(2026, 3, 15, 3, 0, 0, 0, testenv.Shanghai)) {
		t.Fatalf("after 03:00: %+v", all)
	}
	if n := len(e.outbox()); n != 4 {
		t.Errorf("%d outbox rows", n)
	}
}

// TestConcurrentProcesses: two processes asking for the same slot at once
// end with one open request and one outbox row per request.
func TestConcurrentProcesses(t *testing.T) {
	e := newEnv(t, nil)
	c := ctx(t)
	procs := []*Requests{e.s, e.restart()}
	var wg sync.WaitGroup
	for _, p := range procs {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.RequestRefdata(c, "AIRL"); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	all := e.all()
	open := 0
	for _, r := range all {
		if r.Open() {
			open++
		}
		if r.OutboxID == 0 {
			t.Errorf("request without outbox row: %+v", r)
		}
	}
	if open != 1 || len(all) != 6 || len(e.outbox()) != 6 {
		t.Errorf("%d open of %d requests, %d outbox rows", open, len(all), len(e.outbox()))
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mut  func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"daily", func(c *Config) { c.RefdataAt = "03:30" }, ""},
		{"no skew", func(c *Config) { c.ClockSkew = 0 }, ""},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "MSGX_REQUEST_TIMEOUT"},
		{"daily format", func(c *Config) { c.RefdataAt = "3:30" }, "MSGX_REQUEST_REFDATA_AT"},
		{"daily range", func(c *Config) { c.RefdataAt = "24:00" }, "MSGX_REQUEST_REFDATA_AT"},
		{"skew", func(c *Config) { c.ClockSkew = 2 * time.Hour }, "MSGX_REQUEST_CLOCK_SKEW"},
		{"interval", func(c *Config) { c.CheckInterval = 0 }, "MSGX_REQUEST_CHECK_INTERVAL"},
		{"routing", func(c *Config) { c.RoutingID = strings.Repeat("A", 24) }, "MSGX_REQUEST_ROUTINGID"},
		{"routing empty", func(c *Config) { c.RoutingID = " " }, "MSGX_REQUEST_ROUTINGID"},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.mut(&cfg)
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestLastDaily(t *testing.T) {
	sh := testenv.Shanghai
	cases := []struct{ now, want time.Time }{
		{time.Date(2026, 3, 14, 10, 0, 0, 0, sh), time.Date(2026, 3, 14, 3, 0, 0, 0, sh)},
		{time.Date(2026, 3, 14, 3, 0, 0, 0, sh), time.Date(2026, 3, 14, 3, 0, 0, 0, sh)},
		{time.Date(2026, 3, 14, 2, 59, 59, 0, sh), time.Date(2026, 3, 13, 3, 0, 0, 0, sh)},
		{time.Date(2026, 3, 1, 1, 0, 0, 0, sh), time.Date(2026, 2, 28, 3, 0, 0, 0, sh)},
		// The clock's zone does not matter: 18:30 UTC is 02:30 in Shanghai.
		{time.Date(2026, 3, 13, 18, 30, 0, 0, time.UTC), time.Date(2026, 3, 13, 3, 0, 0, 0, sh)},
	}
	for _, c := range cases {
		if got := lastDaily(c.now, sh, 3, 0); !got.Equal(c.want) {
			t.Errorf("lastDaily(%v) = %v, want %v", c.now, got, c.want)
		}
	}
}

// TestRecoveryWaitsForAnInFlightInsert: an earlier attempt's insert is still
// running in MySQL (its connection was lost, the server has not finished).
// Recovery's locking search waits for it instead of reading past it: a
// commit is found and recorded SENT, a rollback is sent once.
func TestRecoveryWaitsForAnInFlightInsert(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "commit", false: "rollback"}[commit], func(t *testing.T) {
			e := newEnv(t, nil)
			c := ctx(t)
			e.s.beforeInsert = func(request.ReqTrack) error { return errCrash }
			r, _ := e.s.RequestRefdata(c, "AIRL")

			conn, err := e.raw.Conn(c)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(c, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(c, "INSERT INTO coutmsgs (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID) VALUES (?, ?, 'AODB')",
				r.Payload, start.Truncate(time.Second)); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			s2 := e.restart()
			go func() { done <- s2.Reconcile(c) }()
			waitLockWait(t, e)
			end := "ROLLBACK"
			if commit {
				end = "COMMIT"
			}
			if _, err := conn.ExecContext(c, end); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			rows := e.outbox()
			got := e.get(r.ID)
			if len(rows) != 1 || got.State != request.StateSent || got.OutboxID != rows[0].ID {
				t.Errorf("after recovery: %d rows, %+v", len(rows), got)
			}
			if wantAttempts := map[bool]int{true: 1, false: 2}[commit]; got.Attempts != wantAttempts {
				t.Errorf("attempts %d, want %d", got.Attempts, wantAttempts)
			}
		})
	}
}

// waitLockWait blocks until a MySQL transaction waits on a row lock.
func waitLockWait(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := e.raw.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		// InnoDB refreshes INNODB_TRX only after 100ms without readers:
		// polling faster would read a stale snapshot forever.
		time.Sleep(150 * time.Millisecond)
	}
	t.Fatal("recovery never waited on the in-flight insert")
}

// Migration 0017 turns the open RQRDs of 0006 (one per category) into one:
// the newest stays open, the others are closed as superseded by it; DONE
// RQRDs count their category as answered.
func TestMigrationMergesOpenRQRDs(t *testing.T) {
	c := ctx(t)
	cfg := sink.Config{PGDSN: sinktest.NewPG(t), Timeout: 10 * time.Second, PGMaxConns: 2}
	for {
		v, _, err := sink.MigrationVersion(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if v < 17 {
			break
		}
		if err := sink.MigrateDown(cfg, 1); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := sink.OpenPG(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(c, `INSERT INTO req_track (id, kind, styp, rtypes, seqn, sndr, state, payload, attempts, outbox_floor,
			outbox_id, created_at, sent_at, closed_at, close_reason, response_msg_id) VALUES
		(1, 'RQRD', 'AIRL', ARRAY['AIRL'], 11, 'MSGX', 'DONE', '<x/>', 1, 0, 1, $1, $1, $2, 'RESPONSE', 500),
		(2, 'RQRD', 'AIRL', ARRAY['AIRL'], 12, 'MSGX', 'SENT', '<x/>', 1, 1, 2, $2, $2, NULL, NULL, NULL),
		(3, 'RQRD', 'COUL', ARRAY['COUL'], 13, 'MSGX', 'PENDING', '<x/>', 0, NULL, NULL, $3, NULL, NULL, NULL, NULL)`,
		start, start.Add(time.Minute), start.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Migrate(cfg); err != nil {
		t.Fatal(err)
	}
	got := map[int64]request.ReqTrack{}
	rs, err := queryReqs(c, pool, `SELECT `+reqCols+` FROM req_track ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		got[r.ID] = r
	}
	if r := got[1]; r.State != request.StateDone || !slices.Equal(r.Answered, []string{"AIRL"}) {
		t.Errorf("DONE request %+v", r)
	}
	if r := got[2]; r.State != request.StateExpired || r.CloseReason != "SUPERSEDED by SEQN 13" || !r.ClosedAt.Equal(start.Add(2*time.Minute)) {
		t.Errorf("older open request %+v", r)
	}
	if r := got[3]; r.State != request.StatePending {
		t.Errorf("newest open request %+v", r)
	}
}
