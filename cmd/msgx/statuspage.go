package main

import (
	"encoding/json"
	"net/http"

	"msgx/cmd/msgx/metric"
	"msgx/cmd/msgx/page"
	"msgx/ingest/replay"
	"msgx/inspect/status"
	"msgx/internal/retry"
)

// dryRunRows bounds the rows GET /replay/dry-run lists (the total is
// always given), dryRunExplained how many of them it works the effect out
// for: each costs two PostgreSQL round trips and the message's text read
// from the inbox (unexplained counts the rest; the CLI's dry run explains
// up to replay.MaxExplained).
const (
	dryRunRows      = 100
	dryRunExplained = 20
)

// statusPage builds the status page's history, which observes the
// latencies of m (so it must run before the components start), and
// registers the page, GET /status/history and GET /replay/dry-run on mux.
// The caller runs the history.
func statusPage(cfg Config, d *deps, m *metric.Metrics, mux *http.ServeMux) (*page.History, error) {
	c, err := status.New(cfg.Status, statusDeps(cfg, d))
	if err != nil {
		return nil, err
	}
	hist, err := page.New(cfg.Page, page.Deps{Lag: c.Lag, Counters: func() page.Counters { return counters(m.Sources()) },
		Clock: d.clock, Log: d.log})
	if err != nil {
		return nil, err
	}
	m.Also(hist)
	page.Handlers{Login: cfg.Web.ReadToken != "", History: hist}.Register(mux)
	mux.HandleFunc("GET /replay/dry-run", func(w http.ResponseWriter, r *http.Request) { dryRun(w, r, cfg, d) })
	return hist, nil
}

// counters are the running totals the history turns into rates: router
// decisions, and events produced (the outbox publisher's and the schd
// flusher's, as msgx_events_emitted_total counts them); -1 where this
// process does not run the component.
func counters(src metric.Sources) page.Counters {
	c := page.Counters{Decisions: -1, Events: -1}
	if src.Router != nil {
		c.Decisions = 0
		for _, n := range src.Router().Decided {
			c.Decisions += n
		}
	}
	if src.Publisher != nil || src.Schd != nil {
		c.Events = 0
	}
	if src.Publisher != nil {
		for _, n := range src.Publisher().Published {
			c.Events += n
		}
	}
	if src.Schd != nil {
		c.Events += src.Schd().Flushed
	}
	return c
}

// dryRun answers GET /replay/dry-run?class=C: what `msgx replay --class C`
// would move (at most dryRunRows listed, and the total) and, for the first
// dryRunExplained of them, what each would do now — the router's verdict
// and what it overwrites (replay.Explain, as the CLI's dry run shows it) —
// read-only. Unlike `msgx replay --dry-run` it records no audit row: it is
// a look from the status page, which any reader may take.
func dryRun(w http.ResponseWriter, r *http.Request, cfg Config, d *deps) {
	sel := replay.Selector{Class: r.URL.Query().Get("class")}
	if err := sel.Check(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	plan, err := replay.DryRun(r.Context(), d.pool, sel, dryRunRows)
	if err == nil {
		explained := plan
		explained.Rows = plan.Rows[:min(len(plan.Rows), dryRunExplained)]
		if err = replay.Explain(r.Context(), replayDeps(cfg, d.pool, d.tables, d.brokers, d.log), &explained); err == nil {
			plan.Effects, plan.Unexplained = explained.Effects, len(plan.Rows)-len(explained.Effects)
		}
	}
	if err != nil {
		code := http.StatusInternalServerError
		if retry.IsOutage(err) {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(plan)
}
