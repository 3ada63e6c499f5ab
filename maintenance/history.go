package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/need"
	"msgx/sink"
)

// HistoryConfig configures the flight history sweep.
type HistoryConfig struct {
	// SweepAt is the daily time (HH:MM, airport time) of the sweep.
	SweepAt string `env:"MSGX_HISTORY_SWEEP_AT" envDefault:"03:30"`
	// Retention is how long after its operation day a flight stays in the
	// read model and the flights table before it moves to flight_hist
	// (whole days; 0 disables the sweep).
	Retention time.Duration `env:"MSGX_HISTORY_RETENTION" envDefault:"720h"`
	// Batch is how many flights one sweep hands to the processor at most (a
	// count).
	Batch int `env:"MSGX_HISTORY_BATCH" envDefault:"10000"`
}

// Validate checks the configuration.
func (c HistoryConfig) Validate() error {
	var errs []error
	if _, err := time.Parse("15:04", c.SweepAt); err != nil {
		errs = append(errs, fmt.Errorf("MSGX_HISTORY_SWEEP_AT=%q: want HH:MM", c.SweepAt))
	}
	if c.Retention < 0 || c.Retention%(24*time.Hour) != 0 {
		errs = append(errs, errors.New("MSGX_HISTORY_RETENTION: must be whole days (e.g. 720h), 0 to disable"))
	}
	if c.Batch < 1 {
		errs = append(errs, errors.New("MSGX_HISTORY_BATCH: must be positive"))
	}
	return errors.Join(errs...)
}

// History is the daily flight history sweep (docs/design.md#history-sweep):
// flights whose operation day is older than the retention are archived to
// flight_hist and removed. The sweep only decides *which* flights; it hands
// them to the router (router.Router.Purge), which sends each to the flights
// processor as a PURGE transition on msgx.flight-transitions, in order with
// everything else the flight and its master receive, so a purge is
// serialised with every other change of that FLID and never touches a
// flight the processor is updating. The processor emits the tombstone of a
// flight that was never deleted before removing it.
type History struct {
	job
	cfg     HistoryConfig
	pool    *pgxpool.Pool
	purge   func(ctx context.Context, flids []string, before time.Time) error
	loc     *time.Location
	timeout time.Duration
}

// HistoryDeps are the sweep's collaborators.
type HistoryDeps struct {
	// Pool is msgx's PostgreSQL, where the candidates are found (required).
	Pool *pgxpool.Pool
	// Timeout bounds the candidates' query (MSGX_DB_TIMEOUT, positive).
	Timeout time.Duration
	// Purge hands flights to be purged before a day to the router
	// (router.Router.Purge; required).
	Purge func(ctx context.Context, flids []string, before time.Time) error
	// Clock is the source of time (required).
	Clock clock.Clock
	// Location is the airport time zone of SweepAt and of the cut-off day
	// (required).
	Location *time.Location
	// Log receives the sweep's lines (required; component=history is
	// added).
	Log *slog.Logger
}

// Validate reports which required collaborators are missing.
func (d HistoryDeps) Validate() error {
	return need.Check("history", need.Pool(d.Pool), need.Timeout(d.Timeout), need.Has(d.Purge != nil, "router to hand the purges to"),
		need.Clock(d.Clock), need.Has(d.Location != nil, "airport time zone"), need.Log(d.Log))
}

// NewHistory checks cfg and d and returns the sweep.
func NewHistory(cfg HistoryConfig, d HistoryDeps) (*History, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	at, err := parseDaily(cfg.SweepAt, d.Location)
	if err != nil {
		return nil, err
	}
	return &History{job: newJob("history", d.Clock, d.Log, at), cfg: cfg, pool: d.Pool, purge: d.Purge, loc: d.Location,
		timeout: d.Timeout}, nil
}

// next returns the next sweep time strictly after now.
func (h *History) next(now time.Time) time.Time { return h.when.next(time.Time{}, now) }

// Run sweeps once a day at SweepAt until ctx ends.
func (h *History) Run(ctx context.Context) error {
	if h.cfg.Retention == 0 {
		h.log.Info("flight history sweep disabled (MSGX_HISTORY_RETENTION=0)")
		<-ctx.Done()
		return nil
	}
	var n int
	return h.run(ctx, func(ctx context.Context) (err error) {
		n, err = h.Sweep(ctx)
		return err
	}, func(err error) {
		if err != nil {
			h.log.Error("flight history sweep failed; next attempt tomorrow", "err", err, "handed_over", n)
		}
	})
}

// Sweep hands every flight past the retention to the processor and returns
// how many. The cut-off is the airport-local date of now minus the retention:
// flights of earlier operation days go.
func (h *History) Sweep(ctx context.Context) (int, error) {
	now := h.clk.Now().In(h.loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	cutoff := today.AddDate(0, 0, -int(h.cfg.Retention/(24*time.Hour)))
	qctx, cancel := context.WithTimeout(ctx, h.timeout)
	flids, err := sink.HistoryCandidates(qctx, h.pool, cutoff, h.cfg.Batch)
	cancel()
	if err != nil || len(flids) == 0 {
		return 0, err
	}
	if err := h.purge(ctx, flids, cutoff); err != nil {
		return 0, fmt.Errorf("handing %d flights to the router to be purged: %w", len(flids), err)
	}
	before := cutoff.Format(time.DateOnly)
	h.log.Info("flight history sweep handed flights to the processor", "flights", len(flids), "before", before)
	return len(flids), nil
}
