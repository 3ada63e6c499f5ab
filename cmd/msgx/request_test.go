package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"msgx/emitters/outbound"
	"msgx/internal/clock"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/tables/request"
)

// msgx request list and show: every tracked request with its kind, what
// it asks for, SEQN, state, times, COUTMSGS row and answer, as text and
// JSON.
func TestRequestListAndShow(t *testing.T) {
	t.Parallel()
	cfg, _ := testConfig(t, nil)
	ctx := context.Background()
	run := func(args ...string) string {
		t.Helper()
		var out strings.Builder
		if err := runCommand(ctx, cfg, "request", args, &out, testenv.Logger(t)); err != nil {
			t.Fatalf("msgx request %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	if out := run("list"); out != "no requests\n" {
		t.Fatalf("empty list: %q", out)
	}
	run("refdata", "AIRL", "COUL")
	run("flights", "--from", "2026-12-01T00:00", "--to", "2026-12-02T00:00")

	pool, err := sink.OpenPG(ctx, cfg.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The AODB's EROR, as the router hands it over (shadow: no outbox needed).
	shadow := cfg.Requests
	shadow.Shadow = true
	reqs, err := outbound.New(shadow, outbound.Deps{PG: pool, Clock: clock.Real{}, Log: testenv.Logger(t),
		Location: cfg.Location(), DBTimeout: cfg.DB.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := reqs.Eror(ctx, request.ErorAnswer{MsgID: 812, MetaSTYP: "RQFD", DTTM: time.Now().Add(time.Minute),
		Code: "E12", Text: "window too wide", At: time.Now()}); err != nil || a.Outcome != request.OutcomeFailed {
		t.Fatalf("EROR: %+v %v", a, err)
	}

	out := run("list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID  KIND  ASKS FOR") {
		t.Fatalf("list:\n%s", out)
	}
	for _, frag := range []string{"RQFD  flights 2026-12-01T00:00+08:00..2026-12-02T00:00+08:00", "FAILED", "#812 EROR FAILED: E12 window too wide"} {
		if !strings.Contains(lines[1], frag) {
			t.Errorf("list line %q lacks %q", lines[1], frag)
		}
	}
	for _, frag := range []string{"RQRD  categories AIRL,COUL", "SENT", "  -"} {
		if !strings.Contains(lines[2], frag) {
			t.Errorf("list line %q lacks %q", lines[2], frag)
		}
	}

	var list []outbound.Tracked
	if err := json.Unmarshal([]byte(run("list", "--json", "--limit", "1")), &list); err != nil || len(list) != 1 ||
		list[0].Kind != request.RQFD || list[0].OutboxID == 0 || len(list[0].Answers) != 1 || list[0].Answers[0].Code != "E12" {
		t.Fatalf("list --json: %+v %v", list, err)
	}
	id := strconv.FormatInt(list[0].ID, 10)
	show := run("show", id)
	for _, frag := range []string{"request   " + id + ", RQFD (STYP NONE)", "state     FAILED", "outbox    COUTMSGS_ID",
		"closed", ", EROR", "answer    #812 EROR FAILED at", "paired by TYPE: E12 window too wide", "payload\n<?xml"} {
		if !strings.Contains(show, frag) {
			t.Errorf("show lacks %q:\n%s", frag, show)
		}
	}
	var one outbound.Tracked
	if err := json.Unmarshal([]byte(run("show", "--json", id)), &one); err != nil || one.ID != list[0].ID || one.Payload == "" {
		t.Fatalf("show --json: %+v %v", one, err)
	}
	var out2 strings.Builder
	if err := runCommand(ctx, cfg, "request", []string{"show", "999"}, &out2, testenv.Logger(t)); err == nil ||
		!strings.Contains(err.Error(), "request 999: no such request") {
		t.Errorf("show of an unknown request: %v", err)
	}
}
