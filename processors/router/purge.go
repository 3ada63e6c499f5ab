package router

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/sink"
	"msgx/tables/flight"
	"msgx/tables/message"
)

// The history sweep's purges go through the router (docs/design.md#history-sweep):
// a purged child leaves its master's MAFL, which only the router can tell
// the master in order with everything else the master receives, and the
// router's flight index must forget the flight exactly when the flights
// table does. The worker hands a purge over between two batches:
//
//  1. in one transaction, record the purges as pending (purge_pending) and
//     read the flights' index entries;
//  2. make the transitions (flight.Expand: the PURGE of each flight, the
//     LINK a live child sends its master) and produce them on
//     msgx.flight-transitions with the worker's producer, after everything
//     decided before; wait for the acknowledgements;
//  3. in one transaction, write the index entries the purges leave (no
//     flight) and forget the pending purges.
//
// A crash before 1's commit leaves nothing: the next sweep finds the
// flights again. A crash after it leaves the purges pending, the index
// untouched: the worker does 2 and 3 again when it starts, before it
// decides any message, so no decision reads an index the flights table has
// left. Transitions produced twice are harmless: the processor checks the
// sweep's transitions against PostgreSQL (they carry no message).

// purgeReq is one Purge call waiting for the worker.
type purgeReq struct {
	flids  []string
	before time.Time
	done   chan error
}

// errNotRunning is Purge's answer while no worker runs.
var errNotRunning = errors.New("the router is not running: purge later")

// Purge hands the flights flids to the flights processor to be purged
// (their operation day is before the day before), through the router's
// worker, and returns once their transitions are produced.
func (r *Router) Purge(ctx context.Context, flids []string, before time.Time) error {
	if len(flids) == 0 {
		return nil
	}
	r.mu.Lock()
	w := r.worker
	r.mu.Unlock()
	if w == nil {
		return errNotRunning
	}
	req := purgeReq{flids: flids, before: before, done: make(chan error, 1)}
	select {
	case w.purges <- req:
	case <-w.stopped:
		return errNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resumePurges hands over the purges a crash left pending (step 1 done).
func (w *worker) resumePurges(ctx context.Context) error {
	var pending []sink.PendingPurge
	var entries map[string]message.FlightDay
	err := w.r.persist(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, w.r.d.Messages.Timeout())
		defer cancel()
		return pgx.BeginFunc(ctx, w.r.d.Messages.Pool(), func(tx pgx.Tx) error {
			var err error
			pending, entries, err = sink.PendingPurges(ctx, tx)
			return err
		})
	})
	if err != nil || len(pending) == 0 {
		return err
	}
	byDay := map[time.Time][]string{}
	var days []time.Time
	for _, p := range pending {
		if _, ok := byDay[p.Before]; !ok {
			days = append(days, p.Before)
		}
		byDay[p.Before] = append(byDay[p.Before], p.FLID)
	}
	w.r.log.Warn("handing over purges a crash left pending", "flights", len(pending))
	for _, d := range days {
		if err := w.handOver(ctx, byDay[d], d, entries); err != nil {
			return err
		}
	}
	return nil
}

// purge does a Purge call's steps 1 to 3.
func (w *worker) purge(ctx context.Context, req purgeReq) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	var entries map[string]message.FlightDay
	err := w.r.available(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, w.r.d.Messages.Timeout())
		defer cancel()
		return pgx.BeginFunc(ctx, w.r.d.Messages.Pool(), func(tx pgx.Tx) error {
			var err error
			entries, err = sink.StartPurges(ctx, tx, req.flids, req.before, w.r.d.Clock.Now())
			return err
		})
	})
	if err != nil {
		return err
	}
	return w.handOver(ctx, req.flids, req.before, entries)
}

// handOver does steps 2 and 3 for flids, whose index entries are entries.
func (w *worker) handOver(ctx context.Context, flids []string, before time.Time, entries map[string]message.FlightDay) error {
	now := w.r.d.Clock.Now()
	links := make(map[string]message.FlightLink, len(entries))
	for flid, e := range entries {
		if e.Link.IsFlight() {
			links[flid] = e.Link
		}
	}
	own := make([]flight.Transition, len(flids))
	for i, flid := range flids {
		own[i] = flight.Transition{Kind: flight.KindPurge, Source: flight.SourceHistory, FLID: flid,
			PurgeBefore: before.Format(time.DateOnly), At: now}
	}
	out, changed, err := flight.Expand(own, links, w.r.set.Flight)
	if err != nil {
		return fmt.Errorf("purging %d flights: %w", len(flids), err)
	}
	if err := w.emit(ctx, []outcome{{flights: out, noEntry: true}}); err != nil {
		return err
	}
	var index []message.FlightDay
	for flid, l := range changed {
		e := entries[flid]
		e.Link = l
		index = append(index, e)
	}
	err = w.r.persist(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, w.r.d.Messages.Timeout())
		defer cancel()
		return pgx.BeginFunc(ctx, w.r.d.Messages.Pool(), func(tx pgx.Tx) error {
			return sink.FinishPurges(ctx, tx, flids, index, now)
		})
	})
	if err != nil {
		return err
	}
	w.r.log.Info("flights handed to the flights processor to be purged", "flights", len(flids), "before", before.Format(time.DateOnly))
	return nil
}
