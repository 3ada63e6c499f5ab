package status

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"msgx/sink"
)

// Lag is the part of the report that moves from second to second: how far
// ingest and the consumer groups are behind. The status page samples it
// every few seconds (cmd/msgx/page); a whole Collect would run the linear
// counts (terminal states, SKIPPED reasons) each time.
type Lag struct {
	// Watermark is W (0 when ingest is not seeded, -1 when unknown).
	Watermark int64
	// MaxID is MAX(CMINMSGS_ID) (-1 when unknown).
	MaxID int64
	// Inbox is MaxID − W, never negative; -1 when either is unknown.
	Inbox int64
	// Groups are the consumer groups' lags as in Report.Groups; nil when
	// Kafka could not be read.
	Groups []GroupLag
	// Errors say what could not be read.
	Errors []string
}

// Lag reads the watermark, MAX(CMINMSGS_ID) and the consumer groups'
// offsets: one primary-key read on each database and the Kafka round trips
// of the report, concurrently, each under its own timeout.
func (c *Collector) Lag(ctx context.Context) Lag {
	s := &collection{deps: c.deps, th: c.cfg}
	out := Lag{Watermark: -1, MaxID: -1, Inbox: -1}
	var wg sync.WaitGroup
	var pgErr, myErr error
	var groupsErr string
	wg.Add(3)
	go func() {
		defer wg.Done()
		pgErr = s.pg(ctx, false, func(ctx context.Context) (err error) {
			// Not seeded: W is 0, nothing produced.
			out.Watermark, _, err = sink.NewCursors(s.deps.PG, s.deps.Timeout).Watermark(ctx)
			return err
		})
	}()
	go func() {
		defer wg.Done()
		if s.deps.Inbox == nil {
			myErr = errors.New("reading MAX(CMINMSGS_ID): MySQL not configured")
			return
		}
		var maxID int64
		myErr = s.call(ctx, func(ctx context.Context) (err error) {
			maxID, err = s.deps.Inbox.MaxID(ctx)
			return err
		})
		if myErr == nil {
			out.MaxID = maxID
		}
	}()
	go func() {
		defer wg.Done()
		out.Groups, groupsErr = s.groups(ctx)
	}()
	wg.Wait()
	if pgErr != nil {
		out.Watermark = -1
		out.Errors = append(out.Errors, fmt.Sprintf("reading inbox_cursor: %v", pgErr))
	}
	if myErr != nil {
		out.Errors = append(out.Errors, myErr.Error())
	}
	if groupsErr != "" {
		out.Errors = append(out.Errors, "reading the consumer groups: "+groupsErr)
	}
	if out.Watermark >= 0 && out.MaxID >= 0 {
		out.Inbox = max(0, out.MaxID-out.Watermark)
	}
	return out
}
