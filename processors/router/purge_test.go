package router

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"msgx/tables/flight"
	"msgx/tables/route/routetest"
)

// The history sweep's purges go through the router's worker: the PURGE of
// each flight, the LINK a purged live child sends its master, in order with
// the decisions, and the index forgets the flights. A purge a crash left
// pending (recorded, not finished) is handed over again before anything
// else when the worker starts.
func TestPurgeThroughTheRouter(t *testing.T) {
	br := newBatchRig(t, nil)
	br.run([]string{routetest.Dnld(2, routetest.Fltr("10", "23JAN210535", "<FLNO>CA10</FLNO>"), routetest.Fltr("20", "23JAN210535", "<FLNO>MU20</FLNO><MAID>10</MAID>"))}, 1)
	br.state()
	ctx := context.Background()
	before := time.Date(2021, 2, 1, 0, 0, 0, 0, time.UTC)
	if err := br.w.purge(ctx, purgeReq{flids: []string{"20"}, before: before}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(br.state(), "\n")
	for _, want := range []string{
		`msgx.flight-transitions 20 {"msgId":0,"source":"HISTORY-SWEEP","kind":"PURGE","flid":"20"`,
		`"expect":{},"purgeBefore":"2021-02-01"`,
		`msgx.flight-transitions 10 {"msgId":0,"source":"HISTORY-SWEEP","kind":"LINK","flid":"10"`,
		`"link":{"flid":"20","flno":"MU20","live":false}`,
		"index 20 2021-01-23 by 1: - maid - flno -",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	var pending int
	if err := br.msgs.Pool().QueryRow(ctx, `SELECT count(*) FROM purge_pending`).Scan(&pending); err != nil || pending != 0 {
		t.Fatalf("%d purges pending after the hand-over (%v)", pending, err)
	}

	// A crash after the purge of 10 was recorded, before it was produced.
	if _, err := br.msgs.Pool().Exec(ctx, `INSERT INTO purge_pending (flid, purge_before, created_at) VALUES ('10', $1, now())`, before); err != nil {
		t.Fatal(err)
	}
	if err := br.w.resumePurges(ctx); err != nil {
		t.Fatal(err)
	}
	var purged *flight.Transition
	for {
		k, v, ok := br.out[testConfig().FlightTopic].Next()
		if !ok {
			break
		}
		if tr := v.(*flight.Transition); k == "10" && tr.Kind == flight.KindPurge {
			purged = tr
		}
	}
	if purged == nil {
		t.Fatal("the pending purge of 10 was not handed over at the start")
	}
	b, _ := json.Marshal(purged)
	if purged.Expect == nil || purged.Expect.IsFlight() {
		t.Fatalf("purge %s", b)
	}
	if err := br.msgs.Pool().QueryRow(ctx, `SELECT count(*) FROM purge_pending`).Scan(&pending); err != nil || pending != 0 {
		t.Fatalf("%d purges pending after the start (%v)", pending, err)
	}
}
