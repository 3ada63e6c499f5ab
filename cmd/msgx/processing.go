package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"msgx/cmd/msgx/metric"
	"msgx/emitters/backfill"
	"msgx/emitters/event"
	"msgx/emitters/outbound"
	"msgx/emitters/schd"
	"msgx/internal/kafka"
	"msgx/maintenance"
	"msgx/processors/flights"
	refdataproc "msgx/processors/refdata"
	"msgx/processors/router"
	"msgx/sink"
)

// The processing role's wiring: its components, built on the shared
// connections, and which of them run under which lock.

// newRequests builds outbound request tracking on the shared connections.
func newRequests(cfg Config, d *deps) (*outbound.Requests, error) {
	return outbound.New(cfg.Requests, outbound.Deps{PG: d.pool, Outbox: d.tables, Clock: d.clock, Log: d.log,
		Location: cfg.Location(), DBTimeout: cfg.DB.Timeout})
}

// processing holds the processing role's collaborators shared by its two
// halves: the flights processor wakes the publisher, and both partitioned
// processors complete requests inside their transactions, while the
// publisher and request tracking themselves run only under the process lock.
type processing struct {
	cfg  Config
	d    *deps
	log  *slog.Logger
	reqs *outbound.Requests
	pub  *event.Publisher
	bf   *backfill.Sweeper
	// alive checks the session of the process lock, set each time this
	// instance takes it (func(context.Context) error).
	alive atomic.Value
}

func newProcessing(cfg Config, d *deps, log *slog.Logger, m *metric.Metrics) (*processing, error) {
	reqs, err := newRequests(cfg, d)
	if err != nil {
		return nil, err
	}
	p := &processing{cfg: cfg, d: d, log: log, reqs: reqs}
	// The publisher initialises its transactional ID — fencing whoever
	// holds it — only while this instance holds the process lock: one that
	// lost its session without noticing yet must not fence the standby
	// that took over (docs/design.md#outbox).
	p.pub, err = event.New(cfg.Publisher, event.Deps{Pool: d.pool, DBTimeout: cfg.DB.Timeout, Brokers: d.brokers, Kafka: cfg.Kafka,
		Clock: d.clock, Log: log, Observe: m.ObserveEndToEnd, Active: p.holdsProcessLock})
	if err != nil {
		return nil, err
	}
	p.bf, err = backfill.New(cfg.Backfill, backfill.Deps{PG: d.pool, Inbox: d.tables,
		Zone: d.zone, Timeout: cfg.DB.Timeout, Clock: d.clock, Log: log})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// holdsProcessLock is nil while this instance holds the process lock and
// its session is alive.
func (p *processing) holdsProcessLock(ctx context.Context) error {
	alive, _ := p.alive.Load().(func(context.Context) error)
	if alive == nil {
		return errors.New("this instance has not taken the process lock")
	}
	return alive(ctx)
}

// committed runs after a group commit of the flights or refdata processor:
// the events it queued are published and the marks of the messages it
// completed written without waiting for the next poll (when the publisher
// and the sweeper run in another instance, they find them at their next
// poll).
func (p *processing) committed() {
	p.pub.Notify()
	p.bf.Notify()
}

// startPartitioned starts the flights and refdata processors under
// supervision.
func (p *processing) startPartitioned(supervise func(string, func(context.Context) error), m *metric.Metrics, _ func(context.Context) error) error {
	cfg, d, log := p.cfg, p.d, p.log
	fp, err := flights.New(cfg.Flights, flights.Deps{Pool: d.pool, Timeout: cfg.DB.Timeout, Clock: d.clock, Log: log,
		Notify: p.committed, OnMessageDone: p.reqs.CompleteFlightResponse})
	if err != nil {
		return err
	}
	rp, err := refdataproc.New(cfg.Refdata, refdataproc.Deps{Pool: d.pool, Timeout: cfg.DB.Timeout, Clock: d.clock, Log: log,
		Notify: p.committed, OnApplied: p.reqs.CompleteRefdataResponse})
	if err != nil {
		return err
	}
	supervise("flights", func(ctx context.Context) error { return fp.Run(ctx, d.brokers, gokaOptions(cfg, log)...) })
	d.health.WatchPause("flights", func() (bool, string) { return fp.Stats().Paused, "PostgreSQL unavailable" })
	d.health.WatchHalt("flights", func() string { return fp.Stats().Halted })
	supervise("refdata", func(ctx context.Context) error { return rp.Run(ctx, d.brokers, gokaOptions(cfg, log)...) })
	d.health.WatchPause("refdata", func() (bool, string) { return rp.Stats().Paused, "PostgreSQL unavailable" })
	d.health.WatchHalt("refdata", func() string { return rp.Stats().Halted })
	m.UpdateSources(func(s *metric.Sources) { s.Flights, s.Refdata = fp.Stats, rp.Stats })
	return nil
}

// startSingles starts the components of which one instance runs at a
// time, under supervision: request tracking, the router, the event
// publisher, the backfill sweeper, the schd flusher, the maintenance jobs
// and the flight history sweep.
func (p *processing) startSingles(supervise func(string, func(context.Context) error), m *metric.Metrics, alive func(context.Context) error) error {
	cfg, d, log := p.cfg, p.d, p.log
	p.alive.Store(alive)
	supervise("requests", d.grants.gate(p.reqs.Run))
	msgs := sink.NewMessages(d.pool, cfg.DB.Timeout)
	rt, err := router.New(cfg.Router, router.Deps{Messages: msgs, Clock: d.clock, Log: log, Loc: cfg.Location(),
		Requests: p.reqs, ObserveDecision: m.ObserveDecision})
	if err != nil {
		return err
	}
	d.health.WatchPause("router", func() (bool, string) { s := rt.Stats(); return s.Paused, s.PausedFor })
	pb, err := kafka.ProducerBuilder(cfg.Kafka)
	if err != nil {
		return err
	}
	supervise("router", func(ctx context.Context) error { return rt.Run(ctx, d.brokers, pb, gokaOptions(cfg, log)...) })
	pub := p.pub
	supervise("publisher", pub.Run)
	d.health.WatchPause("publisher", func() (bool, string) {
		st := pub.Stats()
		return st.LastError != "", st.LastError
	})
	// Fenced: stopped for good until this instance takes the lock again.
	// Denied: waiting for an operator to grant an ACL, not for an outage.
	d.health.WatchHalt("publisher", func() string {
		st := pub.Stats()
		if st.Fenced != "" {
			return st.Fenced
		}
		return st.Denied
	})
	supervise("backfill", d.grants.gate(p.bf.Run))
	fl, err := schd.New(cfg.Schd, schd.Deps{Pool: d.pool, DBTimeout: cfg.DB.Timeout, Brokers: d.brokers,
		Kafka: cfg.Kafka, Clock: d.clock, Log: log})
	if err != nil {
		return err
	}
	supervise("schd", func(ctx context.Context) error {
		err := fl.Run(ctx)
		if ctx.Err() != nil {
			fl.Close() // stopping for good: release the producer
		}
		return err
	})
	jobs, err := maintenance.New(cfg.Jobs, maintenance.Deps{PG: d.pool, Timeout: cfg.DB.Timeout, Clock: d.clock,
		Log: log, Location: cfg.Location()})
	if err != nil {
		return err
	}
	supervise("maintenance", jobs.Run)
	hist, err := maintenance.NewHistory(cfg.History, maintenance.HistoryDeps{Pool: d.pool, Timeout: cfg.DB.Timeout, Purge: rt.Purge,
		Clock: d.clock, Location: cfg.Location(), Log: log})
	if err != nil {
		return err
	}
	supervise("history", hist.Run)
	m.UpdateSources(func(s *metric.Sources) {
		s.Router, s.Publisher, s.Backfill, s.Schd = rt.Stats, pub.Stats, p.bf.Stats, fl.Stats
	})
	return nil
}
