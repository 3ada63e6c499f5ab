package request

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	shanghai = time.FixedZone("Asia/Shanghai", 8*3600)
	t0       = time.Date(2026, 3, 14, 10, 0, 0, 0, shanghai)
)

func at(d time.Duration) time.Time { return t0.Add(d) }

// sent returns a SENT RQRD for rtypes (comma-separated), sent at t0.
func sent(id int64, rtypes string, seqn int64) ReqTrack {
	r, err := NewRefdata(strings.Split(rtypes, ","), seqn, "MSGX", t0.Add(-time.Second))
	if err != nil {
		panic(err)
	}
	r.ID = id
	r, _ = Attempted(r, 10)
	r, err = Sent(r, 100+id, t0)
	if err != nil {
		panic(err)
	}
	return r
}

func pending(id int64, rtypes string, seqn int64) ReqTrack {
	r, err := NewRefdata(strings.Split(rtypes, ","), seqn, "MSGX", t0)
	if err != nil {
		panic(err)
	}
	r.ID = id
	return r
}

func TestAnswering(t *testing.T) {
	cases := []struct {
		kind    Kind
		rtype   string
		want    string
		wantErr bool
	}{
		{RQRD, "airl", "AIRL", false},
		{RQRD, " COUL\n", "COUL", false},
		{RQRD, "", "", true},
		{RQRD, "NONE", "", true},
		{RQRD, "AIRL,COUL", "", true},
		{RQFD, "", STYPNone, false},
		{RQFD, "none", STYPNone, false},
		{RQFD, "RESP", "", true},
		{"SCHD", "RESP", "", true},
	}
	for _, c := range cases {
		got, err := Answering(c.kind, c.rtype)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("Answering(%s, %q) = %q, %v; want %q, err %v", c.kind, c.rtype, got, err, c.want, c.wantErr)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Answering(%s, %q): error %v is not ErrInvalid", c.kind, c.rtype, err)
		}
	}
}

func TestNew(t *testing.T) {
	r, err := NewRefdata([]string{" airl "}, 7, "MSGX", t0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != RQRD || r.STYP != "AIRL" || len(r.RTypes) != 1 || r.RTypes[0] != "AIRL" ||
		r.State != StatePending || r.SEQN != 7 || !r.CreatedAt.Equal(t0) || r.Attempts != 0 {
		t.Errorf("NewRefdata = %+v", r)
	}
	// One RQRD names any categories: its STYP lists them.
	m, err := NewRefdata([]string{"coul", "AIRL", "COUL"}, 8, "MSGX", t0)
	if err != nil || m.STYP != "COUL,AIRL" || !slices.Equal(m.RTypes, []string{"COUL", "AIRL"}) {
		t.Errorf("NewRefdata of two categories = %+v, %v", m, err)
	}
	f, err := NewFlights(at(90*time.Second+5*time.Second), at(time.Hour+59*time.Second), 8, "MSGX", t0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Kind != RQFD || f.STYP != STYPNone || len(f.RTypes) != 0 ||
		!f.WindowFrom.Equal(at(time.Minute)) || !f.WindowTo.Equal(at(time.Hour)) {
		t.Errorf("NewFlights = %+v (window truncated to minutes)", f)
	}

	bad := []struct {
		name string
		err  error
	}{
		{"seqn", func() error { _, err := NewRefdata([]string{"AIRL"}, 0, "MSGX", t0); return err }()},
		{"sndr", func() error { _, err := NewRefdata([]string{"AIRL"}, 1, " ", t0); return err }()},
		{"time", func() error { _, err := NewRefdata([]string{"AIRL"}, 1, "MSGX", time.Time{}); return err }()},
		{"rtype", func() error { _, err := NewRefdata([]string{"AIRL", "A-B"}, 1, "MSGX", t0); return err }()},
		{"no category", func() error { _, err := NewRefdata(nil, 1, "MSGX", t0); return err }()},
		{"too many categories", func() error {
			many := make([]string, MaxRTypes+1)
			for i := range many {
				many[i] = fmt.Sprintf("T%d", i)
			}
			_, err := NewRefdata(many, 1, "MSGX", t0)
			return err
		}()},
		{"zero window", func() error { _, err := NewFlights(time.Time{}, t0, 1, "MSGX", t0); return err }()},
		{"reversed", func() error { _, err := NewFlights(at(time.Hour), t0, 1, "MSGX", t0); return err }()},
		{"empty after truncation", func() error { _, err := NewFlights(at(time.Second), at(50*time.Second), 1, "MSGX", t0); return err }()},
	}
	for _, b := range bad {
		if !errors.Is(b.err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", b.name, b.err)
		}
	}
}

func TestRegister(t *testing.T) {
	airlSent := sent(1, "AIRL", 11)
	coulPending := pending(2, "COUL", 12)
	rqfd, _ := NewFlights(t0, at(time.Hour), 13, "MSGX", t0)
	rqfd.ID = 3
	closedAirl := airlSent
	closedAirl.State, closedAirl.ClosedAt, closedAirl.CloseReason = StateExpired, t0, ReasonTimeout
	open := []ReqTrack{airlSent, rqfd}

	cases := []struct {
		name    string
		open    []ReqTrack
		next    func() ReqTrack
		closed  []int64 // ids closed as superseded
		wantErr bool
	}{
		{"a new RQRD of the same category supersedes the SENT one", open, func() ReqTrack { return pending(0, "AIRL", 20) }, []int64{1}, false},
		{"a new RQRD of other categories supersedes it too", open, func() ReqTrack { return pending(0, "ARPT,COUL", 20) }, []int64{1}, false},
		{"a new RQRD supersedes a PENDING one", []ReqTrack{coulPending, rqfd}, func() ReqTrack { return pending(0, "AIRL", 20) }, []int64{2}, false},
		{"several open RQRDs (one per category before 0017) all close", []ReqTrack{airlSent, coulPending, rqfd},
			func() ReqTrack { return pending(0, "ARPT", 20) }, []int64{1, 2}, false},
		{"every RQFD shares one slot", open, func() ReqTrack {
			r, _ := NewFlights(at(2*time.Hour), at(3*time.Hour), 20, "MSGX", t0)
			return r
		}, []int64{3}, false},
		{"closed requests are not touched", []ReqTrack{closedAirl}, func() ReqTrack { return pending(0, "AIRL", 20) }, nil, false},
		{"a SEQN is used once", open, func() ReqTrack { return pending(0, "ARPT", 13) }, nil, true},
		{"only a new PENDING registers", open, func() ReqTrack { return sent(9, "ARPT", 20) }, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := at(time.Minute)
			got, err := Register(c.open, c.next(), now)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if len(got) != len(c.closed) {
				t.Fatalf("closed %d requests, want %v: %+v", len(got), c.closed, got)
			}
			for i, r := range got {
				if r.ID != c.closed[i] || r.State != StateExpired || !r.ClosedAt.Equal(now) ||
					r.CloseReason != "SUPERSEDED by SEQN 20" {
					t.Errorf("closed[%d] = %+v", i, r)
				}
			}
		})
	}
}

func TestAttemptedAndSent(t *testing.T) {
	r := pending(1, "AIRL", 11)
	r, err := Attempted(r, 40)
	if err != nil || r.Attempts != 1 || r.OutboxFloor != 40 {
		t.Fatalf("first attempt: %+v, %v", r, err)
	}
	// A second attempt keeps the first floor: the search must cover both.
	r, err = Attempted(r, 55)
	if err != nil || r.Attempts != 2 || r.OutboxFloor != 40 {
		t.Fatalf("second attempt: %+v, %v", r, err)
	}
	r.LastError = "mysql down"
	s, err := Sent(r, 56, at(time.Second))
	if err != nil || s.State != StateSent || s.OutboxID != 56 || !s.SentAt.Equal(at(time.Second)) || s.LastError != "" {
		t.Fatalf("Sent: %+v, %v", s, err)
	}
	if _, err := Attempted(s, 60); !errors.Is(err, ErrClosed) {
		t.Errorf("attempting a SENT request: %v", err)
	}

	cases := []struct {
		name      string
		r         ReqTrack
		outboxID  int64
		wantState State
		wantErr   error
	}{
		{"same row again is a no-op", s, 56, StateSent, ErrDuplicate},
		{"a second row is a conflict", s, 57, StateSent, ErrConflict},
		{"bad id", r, 0, StatePending, ErrInvalid},
		{"a request failed in flight learns its row but stays FAILED", func() ReqTrack {
			f, _ := Fail(r, Eror{SEQN: 11, At: t0})
			return f
		}(), 56, StateFailed, nil},
	}
	for _, c := range cases {
		got, err := Sent(c.r, c.outboxID, at(time.Second))
		if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.wantErr)
		}
		if got.State != c.wantState {
			t.Errorf("%s: state %s, want %s", c.name, got.State, c.wantState)
		}
		if c.wantErr == nil && got.OutboxID != c.outboxID {
			t.Errorf("%s: outbox id %d", c.name, got.OutboxID)
		}
	}
}

func TestExpire(t *testing.T) {
	timeout := 10 * time.Minute
	cases := []struct {
		name string
		r    ReqTrack
		now  time.Time
		want bool
	}{
		{"SENT before the timeout", sent(1, "AIRL", 11), at(timeout - time.Nanosecond), false},
		{"SENT at the timeout", sent(1, "AIRL", 11), at(timeout), true},
		{"SENT long after", sent(1, "AIRL", 11), at(24 * time.Hour), true},
		{"PENDING never expires by time", pending(1, "AIRL", 11), at(24 * time.Hour), false},
		{"DONE stays DONE", func() ReqTrack {
			d, _ := Complete(sent(1, "AIRL", 11), Response{RQRD, "AIRL", 9, at(time.Second), at(time.Second)}, 0)
			return d
		}(), at(24 * time.Hour), false},
	}
	for _, c := range cases {
		got, ok := Expire(c.r, c.now, timeout)
		if ok != c.want {
			t.Errorf("%s: expired = %v, want %v", c.name, ok, c.want)
			continue
		}
		if ok && (got.State != StateExpired || got.CloseReason != ReasonTimeout || !got.ClosedAt.Equal(c.now)) {
			t.Errorf("%s: %+v", c.name, got)
		}
		if !ok && !Equal(got, c.r) {
			t.Errorf("%s: changed without expiring: %+v", c.name, got)
		}
	}
	if _, ok := Expire(sent(1, "AIRL", 11), at(time.Hour), 0); ok {
		t.Error("a zero timeout expired a request")
	}
}

func TestComplete(t *testing.T) {
	skew := 2 * time.Minute
	done, _ := Complete(sent(1, "AIRL", 11), Response{RQRD, "AIRL", 50, at(time.Minute), at(time.Minute)}, skew)
	expired, _ := Expire(sent(1, "AIRL", 11), at(time.Hour), 10*time.Minute)
	failed, _ := Fail(sent(1, "AIRL", 11), Eror{SEQN: 11, At: at(time.Second)})
	rqfd, _ := NewFlights(t0, at(time.Hour), 12, "MSGX", t0)
	rqfd, _ = Attempted(rqfd, 0)
	rqfd, _ = Sent(rqfd, 7, t0)

	cases := []struct {
		name    string
		r       ReqTrack
		resp    Response
		wantErr error
	}{
		{"fresh answer completes", sent(1, "AIRL", 11), Response{RQRD, "AIRL", 50, at(30 * time.Second), at(time.Minute)}, nil},
		{"answer dated within the skew before SentAt completes", sent(1, "AIRL", 11), Response{RQRD, "AIRL", 50, at(-skew), at(time.Minute)}, nil},
		{"answer dated before SentAt−skew is stale", sent(1, "AIRL", 11), Response{RQRD, "AIRL", 50, at(-skew - time.Second), at(time.Minute)}, ErrStale},
		{"answer without DTTM never matches", sent(1, "AIRL", 11), Response{RQRD, "AIRL", 50, time.Time{}, at(time.Minute)}, ErrNoDTTM},
		{"PENDING cannot be answered", pending(1, "AIRL", 11), Response{RQRD, "AIRL", 50, at(time.Minute), at(time.Minute)}, ErrNotSent},
		{"a category not asked for answers nothing", sent(1, "AIRL", 11), Response{RQRD, "COUL", 50, at(time.Minute), at(time.Minute)}, ErrOtherSlot},
		{"an RQFD answer does not answer an RQRD", sent(1, "AIRL", 11), Response{RQFD, STYPNone, 50, at(time.Minute), at(time.Minute)}, ErrOtherSlot},
		{"same message again is a duplicate", done, Response{RQRD, "AIRL", 50, at(time.Minute), at(2 * time.Minute)}, ErrDuplicate},
		{"another answer after DONE is late", done, Response{RQRD, "AIRL", 51, at(time.Minute), at(2 * time.Minute)}, ErrClosed},
		{"late answer after EXPIRED does not reopen", expired, Response{RQRD, "AIRL", 51, at(time.Minute), at(2 * time.Hour)}, ErrClosed},
		{"answer after FAILED does not reopen", failed, Response{RQRD, "AIRL", 51, at(time.Minute), at(2 * time.Minute)}, ErrClosed},
		{"SCHD RESP completes the RQFD slot", rqfd, Response{RQFD, STYPNone, 60, at(time.Minute), at(time.Minute)}, nil},
		{"zero message id", sent(1, "AIRL", 11), Response{RQRD, "AIRL", 0, at(time.Minute), at(time.Minute)}, ErrInvalid},
	}
	for _, c := range cases {
		got, err := Complete(c.r, c.resp, skew)
		if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.wantErr)
			continue
		}
		if c.wantErr != nil {
			if !Equal(got, c.r) {
				t.Errorf("%s: rejected but changed: %+v", c.name, got)
			}
			continue
		}
		if got.State != StateDone || got.CloseReason != ReasonResponse || got.ResponseMsgID != c.resp.MsgID ||
			!got.ClosedAt.Equal(c.resp.At) {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
	// A negative skew is no skew.
	if _, err := Complete(sent(1, "AIRL", 11), Response{RQRD, "AIRL", 50, at(-time.Second), at(time.Minute)}, -time.Hour); !errors.Is(err, ErrStale) {
		t.Errorf("negative skew: %v", err)
	}
}

func TestFail(t *testing.T) {
	failed, _ := Fail(sent(1, "AIRL", 11), Eror{SEQN: 11, MsgID: 70, At: at(time.Second)})
	done, _ := Complete(sent(1, "AIRL", 11), Response{RQRD, "AIRL", 50, at(time.Minute), at(time.Minute)}, 0)
	cases := []struct {
		name    string
		r       ReqTrack
		e       Eror
		wantErr error
	}{
		{"EROR fails a SENT request", sent(1, "AIRL", 11), Eror{SEQN: 11, MsgID: 70, At: at(time.Minute)}, nil},
		{"EROR fails a PENDING request", pending(1, "AIRL", 11), Eror{SEQN: 11, At: at(time.Minute)}, nil},
		{"other SEQN", sent(1, "AIRL", 11), Eror{SEQN: 12, At: at(time.Minute)}, ErrOtherSlot},
		{"same EROR again", failed, Eror{SEQN: 11, MsgID: 70, At: at(time.Minute)}, ErrDuplicate},
		{"EROR after DONE changes nothing", done, Eror{SEQN: 11, MsgID: 71, At: at(time.Minute)}, ErrClosed},
		{"bad SEQN", sent(1, "AIRL", 11), Eror{SEQN: 0, At: at(time.Minute)}, ErrInvalid},
	}
	for _, c := range cases {
		got, err := Fail(c.r, c.e)
		if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.wantErr)
			continue
		}
		if c.wantErr != nil {
			if !Equal(got, c.r) {
				t.Errorf("%s: rejected but changed: %+v", c.name, got)
			}
			continue
		}
		if got.State != StateFailed || got.CloseReason != ReasonEror || !got.ClosedAt.Equal(c.e.At) || got.ResponseMsgID != c.e.MsgID {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

// An RQRD of several categories is answered category by category and DONE
// with the last.
func TestCompleteSeveralCategories(t *testing.T) {
	r := sent(1, "AIRL,COUL", 11)
	r, err := Complete(r, Response{RQRD, "COUL", 50, at(time.Minute), at(time.Minute)}, 0)
	if err != nil || r.State != StateSent || !slices.Equal(r.Answered, []string{"COUL"}) || r.ResponseMsgID != 0 {
		t.Fatalf("after COUL: %+v, %v", r, err)
	}
	if again, err := Complete(r, Response{RQRD, "COUL", 51, at(time.Minute), at(2 * time.Minute)}, 0); !errors.Is(err, ErrDuplicate) || !Equal(again, r) {
		t.Fatalf("COUL again: %+v, %v", again, err)
	}
	if _, err := Complete(r, Response{RQRD, "ARPT", 52, at(time.Minute), at(2 * time.Minute)}, 0); !errors.Is(err, ErrOtherSlot) {
		t.Fatalf("ARPT: %v", err)
	}
	if exp, ok := Expire(r, at(time.Hour), 10*time.Minute); !ok || exp.State != StateExpired {
		t.Fatalf("a partly answered request does not expire: %+v", exp)
	}
	r, err = Complete(r, Response{RQRD, "AIRL", 53, at(2 * time.Minute), at(3 * time.Minute)}, 0)
	if err != nil || r.State != StateDone || r.ResponseMsgID != 53 || !slices.Equal(r.Answered, []string{"COUL", "AIRL"}) || !r.ClosedAt.Equal(at(3*time.Minute)) {
		t.Fatalf("after AIRL: %+v, %v", r, err)
	}
}

// TestLifecycle walks one slot through the sequences the emitter produces.
func TestLifecycle(t *testing.T) {
	skew := time.Minute
	a := pending(1, "AIRL", 11)
	a, _ = Attempted(a, 0)
	a, _ = Sent(a, 1, t0)

	// A second request supersedes the first while it waits.
	b := pending(0, "AIRL", 12)
	closed, err := Register([]ReqTrack{a}, b, at(5*time.Minute))
	if err != nil || len(closed) != 1 {
		t.Fatal(closed, err)
	}
	a = closed[0]
	b.ID = 2
	b, _ = Attempted(b, 1)
	b, _ = Sent(b, 2, at(5*time.Minute))

	// The first request's answer arrives late, dated before b was sent:
	// it reopens nothing and does not complete b.
	if _, err := Complete(a, Response{RQRD, "AIRL", 100, at(time.Minute), at(6 * time.Minute)}, skew); !errors.Is(err, ErrClosed) {
		t.Errorf("late answer vs a: %v", err)
	}
	if _, err := Complete(b, Response{RQRD, "AIRL", 100, at(time.Minute), at(6 * time.Minute)}, skew); !errors.Is(err, ErrStale) {
		t.Errorf("late answer vs b: %v", err)
	}
	// b's own answer completes it; a replay of it later is a no-op.
	b, err = Complete(b, Response{RQRD, "AIRL", 101, at(6 * time.Minute), at(6 * time.Minute)}, skew)
	if err != nil || b.State != StateDone {
		t.Fatal(b, err)
	}
	if _, ok := Expire(b, at(time.Hour), 10*time.Minute); ok {
		t.Error("DONE expired")
	}
	if _, err := Complete(b, Response{RQRD, "AIRL", 101, at(6 * time.Minute), at(2 * time.Hour)}, skew); !errors.Is(err, ErrDuplicate) {
		t.Errorf("replayed answer: %v", err)
	}
}
