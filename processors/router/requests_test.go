package router

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/emitters/outbound"
	"msgx/internal/clock"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
	"msgx/tables/message"
	"msgx/tables/request"
	"msgx/tables/route/routetest"
)

// answer is an AODB message dated dttm (airport time, SIS format).
func answer(typ, styp, seqn, dttm, body string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>%s</SEQN><DTTM>%s</DTTM><TYPE>%s</TYPE><STYP>%s</STYP></META>%s</MSG>`,
		seqn, dttm, typ, styp, body)
}

// EROR answers through the router with real request tracking, under the
// RESP guard on and off (it guards RESPs, not EROR answers, so both pair
// alike): an EROR naming the kind only fails the open request of that
// kind, one with the request's SEQN fails that request, one naming no
// request of ours is recorded UNPAIRED; every one is SKIPPED as ignored,
// and a redelivery of a finished EROR records what a crash lost.
func TestRouterERORPairing(t *testing.T) {
	for _, guard := range []bool{false, true} {
		t.Run(fmt.Sprintf("guard=%v", guard), func(t *testing.T) {
			t.Parallel()
			var reqs *outbound.Requests
			rg := newRigWith(t, func(c *Config) { c.RespGuard = guard }, func(pool *pgxpool.Pool, clk *clock.Fake) Requests {
				my, err := sink.OpenMySQL(sink.Config{MySQLDSN: testenv.NewMySQL(t), Timeout: 5 * time.Second}, sinktest.ShanghaiInbox, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { my.Close() })
				if reqs, err = outbound.New(outbound.DefaultConfig(), outbound.Deps{PG: pool, Outbox: sinktest.Tables(t, my, nil, "cminmsgs", 5*time.Second), Clock: clk,
					Log: testenv.Logger(t), Location: routetest.Shanghai, DBTimeout: 5 * time.Second}); err != nil {
					t.Fatal(err)
				}
				return reqs
			})
			ctx := context.Background()
			// t0 is 16:00 in Shanghai: answers are dated a minute later.
			const dttm = "20261130160100"
			from := time.Date(2026, 12, 1, 0, 0, 0, 0, routetest.Shanghai)
			answerOf := func(id int64) request.Answer {
				t.Helper()
				var a request.Answer
				var kind string
				if err := rg.pool.QueryRow(ctx, `SELECT outcome, COALESCE(paired_by, ''), COALESCE(request_id, 0), COALESCE(kind, ''), detail,
					COALESCE(code, ''), COALESCE(text, '') FROM req_answer WHERE msg_id = $1`, id).
					Scan(&a.Outcome, &a.PairedBy, &a.RequestID, &kind, &a.Detail, &a.Code, &a.Text); err != nil {
					t.Fatalf("answer of message %d: %v", id, err)
				}
				a.Kind = request.Kind(kind)
				return a
			}

			first, err := reqs.RequestFlights(ctx, from, from.Add(24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			// By kind: META STYP=RQFD, no SEQN in the body.
			rg.consume(1, answer("EROR", "RQFD", "501", dttm, "<EROR><ECOD>E7</ECOD><ETXT>no schedule for that day</ETXT></EROR>"))
			if m := rg.row(1); m.State != message.StateSkipped || str(m.Reason) != "ignored:EROR-*" {
				t.Fatalf("EROR decided %s %s", m.State, str(m.Reason))
			}
			if a := answerOf(1); a.Outcome != request.OutcomeFailed || a.PairedBy != request.PairedByType || a.RequestID != first.ID ||
				a.Code != "E7" || a.Text != "no schedule for that day" {
				t.Fatalf("EROR by kind: %+v", a)
			}
			if r, _ := reqs.Get(ctx, first.ID); r.State != request.StateFailed || r.ResponseMsgID != 1 {
				t.Fatalf("request after EROR by kind: %+v", r)
			}

			// By SEQN, under a META STYP that names nothing.
			second, err := reqs.RequestFlights(ctx, from, from.Add(24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			rg.consume(2, answer("EROR", "NONE", "502", dttm, "<EROR><SEQN>"+strconv.FormatInt(second.SEQN, 10)+"</SEQN><ECOD>E8</ECOD></EROR>"))
			if a := answerOf(2); a.Outcome != request.OutcomeFailed || a.PairedBy != request.PairedBySEQN || a.RequestID != second.ID {
				t.Fatalf("EROR by SEQN: %+v", a)
			}

			// Pairs with nothing: a SEQN that is none of ours, and a kind
			// with nothing open.
			rg.consume(3, answer("EROR", "RQFD", "503", dttm, "<EROR><SEQN>999</SEQN></EROR>"))
			rg.consume(4, answer("EROR", "RQRD", "504", dttm, "<EROR><TEXT>unknown category</TEXT></EROR>"))
			if a := answerOf(3); a.Outcome != request.OutcomeUnpaired || a.RequestID != 0 || !strings.Contains(a.Detail, "SEQN 999") {
				t.Fatalf("EROR with a foreign SEQN: %+v", a)
			}
			if a := answerOf(4); a.Outcome != request.OutcomeUnpaired || a.Kind != request.RQRD || !strings.Contains(a.Detail, "no RQRD is open") {
				t.Fatalf("EROR with nothing open: %+v", a)
			}

			// A SCHD RESP with nothing open: the guard SKIPs it (no-match);
			// without the guard it is applied, and with no flights to apply
			// its outcome is recorded at once.
			rg.consume(5, answer("SCHD", "RESP", "505", dttm, "<SCHD><RECS>0</RECS></SCHD>"))
			if guard {
				if m := rg.row(5); m.State != message.StateSkipped || str(m.Reason) != message.ReasonNoMatch {
					t.Fatalf("guarded RESP: %s %s", m.State, str(m.Reason))
				}
			} else if a := answerOf(5); a.Outcome != request.OutcomeUnpaired || !strings.Contains(a.Detail, "no RQFD is open") {
				t.Fatalf("unguarded RESP: %+v", a)
			}

			// A crash between the decision and the pairing: the finished
			// EROR delivered again is paired then; one already paired keeps
			// its outcome.
			if _, err := rg.pool.Exec(ctx, `DELETE FROM req_answer WHERE msg_id = 3`); err != nil {
				t.Fatal(err)
			}
			rg.clock.Advance(time.Hour)
			rg.consume(3, answer("EROR", "RQFD", "503", dttm, "<EROR><SEQN>999</SEQN></EROR>"))
			rg.consume(1, answer("EROR", "RQFD", "501", dttm, "<EROR><ECOD>E7</ECOD></EROR>"))
			if a := answerOf(3); a.Outcome != request.OutcomeUnpaired {
				t.Fatalf("EROR redelivered after a lost pairing: %+v", a)
			}
			if a := answerOf(1); a.Outcome != request.OutcomeFailed || a.Text != "no schedule for that day" {
				t.Fatalf("EROR redelivered: %+v", a)
			}
		})
	}
}
