package outbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/need"
	"msgx/sink"
	"msgx/sink/aodb"
	"msgx/tables/refdata"
	"msgx/tables/request"
	"msgx/tables/sis"
)

// Sender is META/SNDR of every request msgx writes (docs/design.md#requests).
const Sender = "MSGX"

// ErrShadow is returned by the request methods in shadow mode.
var ErrShadow = errors.New("shadow mode (MSGX_SHADOW=true): msgx never writes to the MySQL outbox, request not registered")

// Deps are what Requests works with.
type Deps struct {
	// PG is msgx's PostgreSQL (req_track).
	PG *pgxpool.Pool
	// Outbox is the shared outbox, on a connection opened with
	// sink.OpenMySQL: its DATETIMEs (COUTMSGS_DATE_INSERTED) are read and
	// written in the inbox's zone (docs/design.md#inbox-zone). It may be nil
	// in shadow mode.
	Outbox *aodb.Tables
	// Clock is the only source of time.
	Clock clock.Clock
	// Log receives the component's logs (component=requests is added).
	Log *slog.Logger
	// Location is the airport time zone (SIS times, RefdataAt).
	Location *time.Location
	// DBTimeout bounds every single database call (MSGX_DB_TIMEOUT).
	DBTimeout time.Duration
}

// Requests sends RQRD/RQFD requests, recovers interrupted sends, expires
// unanswered requests and matches answers (Matcher). It is safe for
// concurrent use.
type Requests struct {
	cfg     Config
	pg      *pgxpool.Pool
	outbox  *aodb.Tables
	clk     clock.Clock
	log     *slog.Logger
	loc     *time.Location
	timeout time.Duration

	daily          bool
	dailyH, dailyM int

	// mu serialises this process's outbox writers; sink.LockRequests does the same
	// across processes.
	mu sync.Mutex

	// Test hooks simulating a crash: beforeInsert runs after the attempt
	// was recorded and before the COUTMSGS insert; afterInsert after the
	// insert committed and before SENT is recorded. An error stops the send
	// there, leaving the request exactly as a crash would.
	beforeInsert func(r request.ReqTrack) error
	afterInsert  func(r request.ReqTrack, outboxID int64) error
}

// Validate reports which collaborators every Requests needs are missing
// (New adds the outbox outside shadow mode).
func (d Deps) Validate() error {
	return need.Check("requests", need.Pool(d.PG), need.Timeout(d.DBTimeout), need.Clock(d.Clock), need.Log(d.Log),
		need.Has(d.Location != nil, "airport time zone"))
}

// New checks cfg and returns the service. It does not touch the databases.
func New(cfg Config, d Deps) (*Requests, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Shadow mode writes no request: it needs no outbox.
	if err := errors.Join(d.Validate(), need.Check("requests",
		need.Has(d.Outbox != nil || cfg.Shadow, "MySQL outbox database (required unless MSGX_SHADOW=true)"))); err != nil {
		return nil, err
	}
	h, m, daily, _ := parseDaily(cfg.RefdataAt)
	return &Requests{
		cfg: cfg, pg: d.PG, outbox: d.Outbox, clk: d.Clock, loc: d.Location, timeout: d.DBTimeout,
		log:   d.Log.With("component", "requests"),
		daily: daily, dailyH: h, dailyM: m,
	}, nil
}

// RequestRefdata asks the AODB for the whole categories rtypes (one RQRD
// with STYP = the categories joined with ","; the AODB answers each with its
// own RESP). It supersedes the open RQRD, whatever categories that one
// names, and returns the new request: SENT on success. On an error after
// registration the request is returned PENDING with the error; it is
// recovered and sent exactly once later (Reconcile), so the caller must not
// simply ask again to retry.
func (s *Requests) RequestRefdata(ctx context.Context, rtypes ...string) (request.ReqTrack, error) {
	if s.cfg.Shadow {
		return request.ReqTrack{}, ErrShadow
	}
	for _, t := range rtypes {
		if t := strings.ToUpper(strings.TrimSpace(t)); !refdata.Supported(t) {
			return request.ReqTrack{}, fmt.Errorf("requesting reference data: %q is not a reference type msgx stores", t)
		}
	}
	if _, err := request.NewRefdata(rtypes, 1, Sender, s.clk.Now()); err != nil {
		return request.ReqTrack{}, fmt.Errorf("requesting reference data: %w", err)
	}
	return s.submit(ctx, request.RQRD, func(seqn int64, now time.Time) (request.ReqTrack, error) {
		r, err := request.NewRefdata(rtypes, seqn, Sender, now)
		if err != nil {
			return r, err
		}
		r.Payload = string(sis.EncodeRQRD(s.meta(seqn, now), r.RTypes))
		return r, nil
	})
}

// RequestFlights asks the AODB for the flights scheduled from..to (an RQFD;
// SIS carries whole minutes in the airport time zone). It supersedes the
// open RQFD, whatever its window. Errors as for RequestRefdata.
func (s *Requests) RequestFlights(ctx context.Context, from, to time.Time) (request.ReqTrack, error) {
	if s.cfg.Shadow {
		return request.ReqTrack{}, ErrShadow
	}
	return s.submit(ctx, request.RQFD, func(seqn int64, now time.Time) (request.ReqTrack, error) {
		r, err := request.NewFlights(from, to, seqn, Sender, now)
		if err != nil {
			return r, err
		}
		r.Payload = string(sis.EncodeRQFD(s.meta(seqn, now), r.WindowFrom.In(s.loc), r.WindowTo.In(s.loc)))
		return r, nil
	})
}

// meta is the META of a request: our sender, its SEQN, DTTM = now in the
// airport time zone.
func (s *Requests) meta(seqn int64, now time.Time) sis.Meta {
	return sis.Meta{SNDR: Sender, SEQN: strconv.FormatInt(seqn, 10), DTTM: now.In(s.loc)}
}

// submit registers and sends one request of kind; see the package
// documentation for the steps and their crash windows.
func (s *Requests) submit(ctx context.Context, kind request.Kind, build func(seqn int64, now time.Time) (request.ReqTrack, error)) (request.ReqTrack, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	release, err := s.lockOutbox(ctx)
	if err != nil {
		return request.ReqTrack{}, err
	}
	defer release()

	// Settle earlier interrupted sends first. The open request of this
	// kind is only looked up (so that, if it did reach the outbox, it is
	// closed knowing its row), never sent: it is superseded right below.
	// A failure here (MySQL down) does not stop the new request: superseding
	// never writes to the outbox, so it cannot send anything twice.
	if err := s.reconcileLocked(ctx, kind); err != nil {
		s.log.Warn("recovering pending requests before a new one", "kind", string(kind), "err", err)
	}
	r, err := s.register(ctx, kind, build)
	if err != nil {
		return request.ReqTrack{}, err
	}
	return s.attemptLocked(ctx, r)
}

// register is step 2: in one transaction, take a SEQN, build the request,
// close the open request of its kind and insert the new one as PENDING.
func (s *Requests) register(ctx context.Context, kind request.Kind, build func(seqn int64, now time.Time) (request.ReqTrack, error)) (request.ReqTrack, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var next request.ReqTrack
	var closed []request.ReqTrack
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var seqn int64
		if err := tx.QueryRow(ctx, "SELECT nextval('req_seqn')").Scan(&seqn); err != nil {
			return fmt.Errorf("taking a SEQN: %w", err)
		}
		now := s.clk.Now()
		r, err := build(seqn, now)
		if err != nil {
			return err
		}
		if r.Kind != kind {
			return fmt.Errorf("request built as %s, registered as %s", r.Kind, kind)
		}
		open, err := openOfKind(ctx, tx, kind, true)
		if err != nil {
			return fmt.Errorf("reading the open %s: %w", kind, err)
		}
		closed, err = request.Register(open, r, now)
		if err != nil {
			return err
		}
		for _, c := range closed {
			if err := saveReq(ctx, tx, c); err != nil {
				return err
			}
		}
		if r.ID, err = insertReq(ctx, tx, r); err != nil {
			return fmt.Errorf("inserting the request: %w", err)
		}
		next = r
		return nil
	})
	if err != nil {
		return request.ReqTrack{}, fmt.Errorf("registering an %s: %w", kind, err)
	}
	for _, c := range closed {
		s.log.Info("request superseded by a newer one", "kind", string(kind), "styp", c.STYP, "seqn", c.SEQN,
			"request_id", c.ID, "was_sent", c.OutboxID != 0, "by_seqn", next.SEQN)
	}
	s.log.Info("request registered", "kind", string(kind), "styp", next.STYP, "seqn", next.SEQN, "request_id", next.ID)
	return next, nil
}

// attemptLocked runs steps 3–5 for a PENDING request: record the attempt
// with the outbox floor, insert, record SENT. The caller holds the outbox
// lock. On failure the request is returned PENDING with the error, which is
// also stored in last_error for the operators.
func (s *Requests) attemptLocked(ctx context.Context, r request.ReqTrack) (request.ReqTrack, error) {
	floor, err := s.outbox.OutboxFloor(ctx)
	if err != nil {
		// Nothing was attempted: recovery can send without searching.
		return s.sendFailed(ctx, r, err)
	}
	// The attempt and its floor are committed before the insert starts,
	// so that whenever a row may exist, recovery knows to search for it
	// (attempts > 0) and where (COUTMSGS_ID > floor).
	r, err = s.mutate(ctx, r.ID, func(cur request.ReqTrack) (request.ReqTrack, error) {
		return request.Attempted(cur, floor)
	})
	if err != nil {
		return r, fmt.Errorf("recording the send attempt of request SEQN %d: %w", r.SEQN, err)
	}
	if s.beforeInsert != nil {
		if err := s.beforeInsert(r); err != nil {
			return r, err
		}
	}
	// Crash window: from here until SENT is committed below, the outbox may
	// hold the request while req_track says PENDING. Recovery finds the row
	// and records SENT; it never inserts blindly.
	insertedAt := s.clk.Now().Truncate(time.Second) // COUTMSGS_DATE_INSERTED has whole seconds
	outboxID, err := s.outbox.InsertRequest(ctx, r.Payload, insertedAt, s.cfg.RoutingID)
	if err != nil {
		return s.sendFailed(ctx, r, fmt.Errorf("%w (it may or may not have reached the outbox; it is looked up before it is written again)", err))
	}
	if s.afterInsert != nil {
		if err := s.afterInsert(r, outboxID); err != nil {
			return r, err
		}
	}
	sent, err := s.mutate(ctx, r.ID, func(cur request.ReqTrack) (request.ReqTrack, error) {
		return request.Sent(cur, outboxID, insertedAt)
	})
	if err != nil {
		return r, fmt.Errorf("request SEQN %d is in the outbox as COUTMSGS_ID %d but is not yet recorded SENT (recovery will): %w",
			r.SEQN, outboxID, err)
	}
	s.log.Info("request sent", "kind", string(sent.Kind), "styp", sent.STYP, "seqn", sent.SEQN, "request_id", sent.ID,
		"outbox_id", outboxID, "state", string(sent.State))
	return sent, nil
}

// maxErrorText bounds last_error.
const maxErrorText = 2000

// sendFailed stores cause as the request's last_error (best effort: PostgreSQL
// may be down as well) and returns the PENDING request with the error.
func (s *Requests) sendFailed(ctx context.Context, r request.ReqTrack, cause error) (request.ReqTrack, error) {
	err := fmt.Errorf("sending request SEQN %d (left PENDING, retried by recovery): %w", r.SEQN, cause)
	text := err.Error()
	if len(text) > maxErrorText {
		text = text[:maxErrorText]
	}
	noted, nerr := s.mutate(ctx, r.ID, func(cur request.ReqTrack) (request.ReqTrack, error) {
		if cur.State == request.StatePending {
			cur.LastError = text
		}
		return cur, nil
	})
	if nerr == nil {
		r = noted
	}
	s.log.Warn("request not sent", "kind", string(r.Kind), "styp", r.STYP, "seqn", r.SEQN, "request_id", r.ID, "err", cause)
	return r, err
}

// Reconcile recovers every PENDING request: one whose send may have reached
// the outbox is looked up there and recorded SENT if found; every other one
// is sent. Run calls it at start-up and on every round; `msgx request` may
// call it too. In shadow mode it returns ErrShadow and does nothing.
func (s *Requests) Reconcile(ctx context.Context) error {
	if s.cfg.Shadow {
		return ErrShadow
	}
	// The common case, nothing pending, costs one indexed read and no lock.
	// A request registered just after this read belongs to a sender that
	// is still sending it.
	var pending bool
	err := func() error {
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		return s.pg.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM req_track WHERE state = 'PENDING')`).Scan(&pending)
	}()
	if err != nil {
		return fmt.Errorf("looking for pending requests: %w", err)
	}
	if !pending {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	release, err := s.lockOutbox(ctx)
	if err != nil {
		return err
	}
	defer release()
	return s.reconcileLocked(ctx, "")
}

// reconcileLocked recovers the PENDING requests; those of kind lookupOnly
// (if not "") are looked up but never sent. The caller holds the outbox
// lock.
func (s *Requests) reconcileLocked(ctx context.Context, lookupOnly request.Kind) error {
	pending, err := func() ([]request.ReqTrack, error) {
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		return queryReqs(ctx, s.pg, `SELECT `+reqCols+` FROM req_track WHERE state = 'PENDING' ORDER BY id`)
	}()
	if err != nil {
		return fmt.Errorf("listing pending requests: %w", err)
	}
	var errs []error
	for _, r := range pending {
		if err := s.reconcileOne(ctx, r, r.Kind == lookupOnly); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Requests) reconcileOne(ctx context.Context, r request.ReqTrack, lookupOnly bool) error {
	if r.Attempts > 0 {
		// An insert may have happened: look before writing again.
		id, at, found, err := s.findInOutbox(ctx, r)
		if err != nil {
			_, err = s.sendFailed(ctx, r, err)
			return err
		}
		if found {
			sent, err := s.mutate(ctx, r.ID, func(cur request.ReqTrack) (request.ReqTrack, error) {
				return request.Sent(cur, id, at)
			})
			if err != nil {
				return fmt.Errorf("recording request SEQN %d SENT as COUTMSGS_ID %d: %w", r.SEQN, id, err)
			}
			s.log.Info("recovered: request found in the outbox, recorded SENT", "kind", string(r.Kind), "styp", r.STYP,
				"seqn", r.SEQN, "request_id", r.ID, "outbox_id", id, "state", string(sent.State))
			return nil
		}
	}
	if lookupOnly {
		return nil
	}
	s.log.Info("recovering: sending a pending request", "kind", string(r.Kind), "styp", r.STYP, "seqn", r.SEQN,
		"request_id", r.ID, "attempts", r.Attempts)
	_, err := s.attemptLocked(ctx, r)
	return err
}

// ExpireDue closes as EXPIRED every SENT request whose timeout has passed
// at the clock's now, and returns how many it closed.
func (s *Requests) ExpireDue(ctx context.Context) (int, error) {
	now := s.clk.Now()
	due, err := func() ([]request.ReqTrack, error) {
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		return queryReqs(ctx, s.pg, `SELECT `+reqCols+` FROM req_track WHERE state = 'SENT' AND sent_at <= $1 ORDER BY id`,
			now.Add(-s.cfg.Timeout))
	}()
	if err != nil {
		return 0, fmt.Errorf("listing overdue requests: %w", err)
	}
	n := 0
	for _, r := range due {
		expired := false
		got, err := s.mutate(ctx, r.ID, func(cur request.ReqTrack) (request.ReqTrack, error) {
			next, ok := request.Expire(cur, now, s.cfg.Timeout)
			expired = ok
			return next, nil
		})
		if err != nil {
			return n, fmt.Errorf("expiring request %d: %w", r.ID, err)
		}
		if expired {
			n++
			s.log.Warn("request expired without an answer", "kind", string(got.Kind), "styp", got.STYP, "answered", got.Answered, "seqn", got.SEQN,
				"request_id", got.ID, "sent_at", got.SentAt, "timeout", s.cfg.Timeout.String())
		}
	}
	return n, nil
}

// Run recovers pending requests at once, then every CheckInterval recovers
// again, expires overdue requests and, with RefdataAt set, sends the day's
// reference requests. Errors (outages) are logged and retried on the next
// round; Run returns nil when ctx ends.
func (s *Requests) Run(ctx context.Context) error {
	s.log.Info("requests running", "timeout", s.cfg.Timeout.String(), "refdata_at", s.cfg.RefdataAt,
		"shadow", s.cfg.Shadow, "check_interval", s.cfg.CheckInterval.String())
	for {
		s.round(ctx)
		if err := clock.Sleep(ctx, s.clk, s.cfg.CheckInterval); err != nil {
			return nil
		}
	}
}

// round is one pass of Run. Recovery comes first so that a request found in
// the outbox with an old insert time can expire in the same round.
func (s *Requests) round(ctx context.Context) {
	if !s.cfg.Shadow {
		if err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("recovering pending requests", "err", err)
		}
	}
	if _, err := s.ExpireDue(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("expiring requests", "err", err)
	}
	if s.daily && !s.cfg.Shadow {
		s.dailyRefdata(ctx)
	}
}

// dailyRefdata requests, in one RQRD (one open RQRD at a time), every
// category that no RQRD registered since the last RefdataAt named. A request
// left PENDING by an outage counts as registered: recovery sends it, the
// schedule does not pile up more.
func (s *Requests) dailyRefdata(ctx context.Context) {
	due := lastDaily(s.clk.Now(), s.loc, s.dailyH, s.dailyM)
	var requested []string
	err := func() error {
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		return s.pg.QueryRow(ctx, `SELECT COALESCE(array_agg(DISTINCT t), '{}') FROM req_track, unnest(rtypes) AS t
			WHERE kind = 'RQRD' AND created_at >= $1`, due).Scan(&requested)
	}()
	if err != nil {
		s.log.Warn("daily reference requests: reading req_track", "err", err)
		return
	}
	var missing []string
	for _, c := range refdata.Categories {
		if !slices.Contains(requested, c.RType) {
			missing = append(missing, c.RType)
		}
	}
	if len(missing) == 0 {
		return
	}
	if _, err := s.RequestRefdata(ctx, missing...); err != nil {
		s.log.Warn("daily reference request", "rtypes", missing, "err", err)
	}
}

// Get returns the request with the given id (for inspection).
func (s *Requests) Get(ctx context.Context, id int64) (request.ReqTrack, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return getReq(ctx, s.pg, id, false)
}

// mutate applies fn to request id in its own transaction: load it locked,
// apply, write it back if it changed. A rule rejection from fn is returned
// with the unchanged request.
func (s *Requests) mutate(ctx context.Context, id int64, fn func(request.ReqTrack) (request.ReqTrack, error)) (request.ReqTrack, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var out request.ReqTrack
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		cur, err := getReq(ctx, tx, id, true)
		if err != nil {
			return err
		}
		out = cur
		next, err := fn(cur)
		if err != nil {
			return err
		}
		out = next
		if request.Equal(cur, next) {
			return nil
		}
		return saveReq(ctx, tx, next)
	})
	return out, err
}

// lockOutbox takes sink.LockRequests on a pooled connection and returns its release.
// The wait is bounded: a holder never keeps it longer than a few database
// calls.
func (s *Requests) lockOutbox(ctx context.Context) (func(), error) {
	wait := 4 * s.timeout
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := s.pg.Acquire(actx)
	if err != nil {
		return nil, fmt.Errorf("taking the outbox lock: %w", err)
	}
	if _, err := conn.Exec(actx, "SELECT pg_advisory_lock($1)", int64(sink.LockRequests)); err != nil {
		// The lock may have been granted just as the call was cut off: this
		// connection must not go back to the pool holding it.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, fmt.Errorf("taking the outbox lock (held by another msgx process for over %s?): %w", wait, err)
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		var ok bool
		if err := conn.QueryRow(uctx, "SELECT pg_advisory_unlock($1)", int64(sink.LockRequests)).Scan(&ok); err != nil || !ok {
			// Closing the session is the sure way to drop the lock.
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
	}, nil
}
