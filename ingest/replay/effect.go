package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/internal/need"
	"msgx/sink"
	"msgx/sink/aodb"
	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/refdata"
	"msgx/tables/route"
)

// Bounds of what one effect lists, so that a dry run of a large package
// stays readable and its audit row small.
const (
	// MaxExplained is the most messages a dry run works out the effect of;
	// Plan.Unexplained counts the rest.
	MaxExplained = Batch
	// maxFlights is the most flights one effect lists (a schedule package
	// may carry hundreds); Effect.MoreFlights counts the rest.
	maxFlights = 100
	// maxOverwrites is the most newer messages listed per flight or
	// category; the rest are counted.
	maxOverwrites = 20
	// maxKeys is the most record keys listed per category or overwrite.
	maxKeys = 50
)

// Effect is what replaying one message would do to the current state
// (docs/design.md#replay): the router's decision on it now and, when it
// would be routed, the flights and reference categories it touches with,
// for each, the newer messages that changed the same tags or records since
// — what the replay overwrites.
type Effect struct {
	MsgID int64 `json:"msgId"`
	// Verdict is what the router would decide now: ROUTED (its transitions
	// follow) or the state it would end in (e.g. DEAD again: the cause is
	// not fixed yet), with ErrorClass and Reason. The RESP guard is taken
	// as passed: whether a request is open is decided when the message is.
	Verdict    string `json:"verdict,omitempty"`
	ErrorClass string `json:"errorClass,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Flights are the flights its transitions change (at most maxFlights;
	// MoreFlights counts the rest).
	Flights     []FlightEffect `json:"flights,omitempty"`
	MoreFlights int            `json:"moreFlights,omitempty"`
	// Categories are the reference categories it changes.
	Categories []CategoryEffect `json:"categories,omitempty"`
	// Error says why the effect could not be worked out (the inbox row is
	// gone); nothing else is set then.
	Error string `json:"error,omitempty"`
}

// FlightEffect is what a replayed message does to one flight.
type FlightEffect struct {
	FLID string      `json:"flid"`
	Kind flight.Kind `json:"kind"`
	// Tags are the tags the transition sets or clears (flight.Touches).
	Tags []string `json:"tags"`
	// StateVersion and LastMsgID are the flight's now; 0 when PostgreSQL
	// has no such flight (the replay would create it, or skip it).
	StateVersion int64 `json:"stateVersion"`
	LastMsgID    int64 `json:"lastMsgId"`
	// Overwrites are the versions newer messages made that changed some of
	// Tags (from flight_change, docs/design.md#flight-change: what its
	// retention still holds), oldest first; MoreOverwrites counts those not
	// listed.
	Overwrites     []Overwrite `json:"overwrites"`
	MoreOverwrites int         `json:"moreOverwrites,omitempty"`
}

// CategoryEffect is what a replayed message does to one reference
// category.
type CategoryEffect struct {
	RType string `json:"rtype"`
	STYP  string `json:"styp"`
	// Keys are the records the message writes or deletes (at most maxKeys;
	// MoreKeys counts the rest); All says it replaces the whole category
	// (every stored record it does not carry is deleted).
	Keys     []string `json:"keys"`
	MoreKeys int      `json:"moreKeys,omitempty"`
	All      bool     `json:"all,omitempty"`
	// Overwrites are the newer messages that last wrote records the
	// message overwrites or deletes (ref_master.last_msg_id), oldest first;
	// MoreOverwrites counts those not listed. A record a newer message
	// deleted leaves no trace and is not listed.
	Overwrites     []Overwrite `json:"overwrites"`
	MoreOverwrites int         `json:"moreOverwrites,omitempty"`
}

// Overwrite is one newer message whose change a replay overwrites.
type Overwrite struct {
	MsgID int64 `json:"msgId"`
	// StateVersion, Source and Tags (the tags it shares with the replayed
	// message) describe the flight version it made.
	StateVersion int64    `json:"stateVersion,omitempty"`
	Source       string   `json:"source,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	// Keys are the records it last wrote that the replay overwrites (at
	// most maxKeys; MoreKeys counts the rest).
	Keys     []string `json:"keys,omitempty"`
	MoreKeys int      `json:"moreKeys,omitempty"`
	// At is when that change's message was first enqueued.
	At time.Time `json:"at"`
}

// Explain works out the Effect of the first MaxExplained messages of plan
// (plan.Effects, in the same order; plan.Unexplained counts the rest). It
// reads the inbox rows again (MySQL), decides each message as the router
// would now (route.Decide under d.Route) and reads PostgreSQL; it changes nothing. Record
// the result with AuditDryRun.
func Explain(ctx context.Context, d Deps, plan *Plan) error {
	if err := d.validateExplain(); err != nil {
		return err
	}
	ids := make([]int64, 0, min(len(plan.Rows), MaxExplained))
	for _, r := range plan.Rows[:min(len(plan.Rows), MaxExplained)] {
		ids = append(ids, r.MsgID)
	}
	effects, err := explain(ctx, d, d.PG, ids)
	if err != nil {
		return err
	}
	plan.Effects = make([]Effect, len(ids))
	for i, id := range ids {
		plan.Effects[i] = effects[id]
	}
	plan.Unexplained = len(plan.Rows) - len(ids)
	return nil
}

func (d Deps) validateExplain() error {
	return need.Check("replay", append(d.inboxNeeds(),
		need.Has(d.Route != nil, "router settings (a message's effect is the router's decision on it)"))...)
}

// batcher is a pool or a transaction: where the effects are read. Run reads
// them in its batch's transaction, so that a replay needs no more
// connections than its lock's and its transaction's.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// explain returns the effect of every message of ids, reading their inbox
// rows in chunks of Batch.
func explain(ctx context.Context, d Deps, q batcher, ids []int64) (map[int64]Effect, error) {
	out := make(map[int64]Effect, len(ids))
	for lo := 0; lo < len(ids); lo += Batch {
		chunk := ids[lo:min(lo+Batch, len(ids))]
		rows, err := d.Inbox.ReadIDs(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("reading the inbox rows to explain: %w", err)
		}
		raw := make(map[int64]aodb.Row, len(rows))
		for _, r := range rows {
			raw[r.ID] = r
		}
		if err := effectsOf(ctx, d, q, chunk, raw, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// effectsOf puts the effect of every message of ids into out, given their
// inbox rows.
func effectsOf(ctx context.Context, d Deps, q batcher, ids []int64, raw map[int64]aodb.Row, out map[int64]Effect) error {
	for _, id := range ids {
		r, ok := raw[id]
		if !ok {
			out[id] = Effect{MsgID: id, Error: "the inbox row no longer exists: the message cannot be replayed"}
			continue
		}
		e, err := effectOf(ctx, d, q, r)
		if err != nil {
			return err
		}
		out[id] = e
	}
	return nil
}

// effectOf works out the effect of replaying inbox row r now: two round
// trips on q, the router's lookups and then what the transitions touch.
func effectOf(ctx context.Context, d Deps, q batcher, r aodb.Row) (Effect, error) {
	e := Effect{MsgID: r.ID}
	p := route.Prepare(r.ID, r.Raw, *d.Route)
	lb := &pgx.Batch{}
	lq := sink.QueueLookups(lb, r.ID, p.Query())
	if err := send(ctx, q, lb, d.Timeout); err != nil {
		return e, fmt.Errorf("routing lookups for message %d: %w", r.ID, err)
	}
	l := *lq
	// Whether a request is open for a SCHD RESP is decided when the
	// message is: the dry run takes the RESP guard as passed.
	l.RequestOpen = true
	v := route.Decide(p, l, time.Time{})
	e.Verdict, e.ErrorClass, e.Reason = v.State, v.ErrorClass, v.Reason
	if v.State != message.StateRouted {
		return e, nil
	}
	b := &pgx.Batch{}
	var finish []func()
	// The batch's callbacks fill the entries in place: no append may move
	// them.
	e.Flights = make([]FlightEffect, 0, min(len(v.Flights), maxFlights))
	e.Categories = make([]CategoryEffect, 0, len(v.Refdata))
	for i, t := range v.Flights {
		if i == maxFlights {
			e.MoreFlights = len(v.Flights) - maxFlights
			break
		}
		e.Flights = append(e.Flights, FlightEffect{FLID: t.FLID, Kind: t.Kind, Tags: flight.Touches(t, d.Route.Flight), Overwrites: []Overwrite{}})
		f := &e.Flights[len(e.Flights)-1]
		b.Queue(`SELECT state_version, last_msg_id FROM flight_schd WHERE flid = $1`, t.FLID).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&f.StateVersion, &f.LastMsgID)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
		changes := sink.QueueFlightChangesAfter(b, t.FLID, r.ID, f.Tags, maxOverwrites)
		finish = append(finish, func() {
			for _, c := range changes.Rows {
				f.Overwrites = append(f.Overwrites, Overwrite{MsgID: c.MsgID, StateVersion: c.StateVersion, Source: c.Source,
					Tags: shared(f.Tags, c.Changed), At: c.At})
			}
			f.MoreOverwrites = changes.Total - len(changes.Rows)
		})
	}
	for _, t := range v.Refdata {
		keys, all, err := refdata.Touches(t)
		if err != nil {
			// The router refuses such a package (DEAD PROTOCOL); Decide
			// ran the same check, so this is a bug, not data.
			return e, fmt.Errorf("message %d: %w", r.ID, err)
		}
		if keys == nil {
			keys = []string{}
		}
		c := CategoryEffect{RType: t.RType, STYP: t.STYP, Keys: keys, All: all, Overwrites: []Overwrite{}}
		if len(keys) > maxKeys {
			c.Keys, c.MoreKeys = keys[:maxKeys], len(keys)-maxKeys
		}
		e.Categories = append(e.Categories, c)
		cat := &e.Categories[len(e.Categories)-1]
		// The records the message overwrites: those it carries, or the
		// whole category for a full replace; grouped by the message that
		// last wrote them.
		var only []string
		if !all {
			only = keys
		}
		b.Queue(`SELECT last_msg_id, (array_agg(rkey ORDER BY rkey))[1:$4], count(*), max(updated_at), count(*) OVER ()
			FROM ref_master WHERE rtype = $1 AND last_msg_id > $2 AND ($3::text[] IS NULL OR rkey = ANY($3))
			GROUP BY last_msg_id ORDER BY last_msg_id LIMIT $5`, t.RType, r.ID, only, maxKeys, maxOverwrites).Query(func(rows pgx.Rows) error {
			var groups int
			for rows.Next() {
				var o Overwrite
				var n int
				if err := rows.Scan(&o.MsgID, &o.Keys, &n, &o.At, &groups); err != nil {
					return err
				}
				o.MoreKeys, o.At = n-len(o.Keys), o.At.UTC()
				cat.Overwrites = append(cat.Overwrites, o)
			}
			cat.MoreOverwrites = groups - len(cat.Overwrites)
			return rows.Err()
		})
	}
	if err := send(ctx, q, b, d.Timeout); err != nil {
		return e, fmt.Errorf("reading what replaying message %d overwrites: %w", r.ID, err)
	}
	for _, f := range finish {
		f()
	}
	return e, nil
}

// send runs batch b on q, bounded by timeout; an empty batch is no call.
func send(ctx context.Context, q batcher, b *pgx.Batch, timeout time.Duration) error {
	if b.Len() == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return q.SendBatch(ctx, b).Close()
}

// shared lists the tags of a (in its order) that b also lists.
func shared(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, t := range b {
		in[t] = true
	}
	var out []string
	for _, t := range a {
		if in[t] {
			out = append(out, t)
		}
	}
	return out
}
