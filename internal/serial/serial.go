package serial

import (
	"fmt"
	"time"

	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/route"
)

// Reference is the state the messages given so far leave, applied one at a
// time.
type Reference struct {
	set  route.Settings
	opts flight.Options
	mem  *route.Overlay
	// Flights is the flights table: flights and placeholders, by FLID.
	Flights map[string]*flight.State
	// Versions are each flight's versions, in order: its change history,
	// and what its msg events announce.
	Versions map[string][]*flight.State
	// States is each message's decision (ROUTED ones are SUCCEEDED here:
	// all their transitions are applied at once).
	States map[int64]string
	// N is each message's number of transitions.
	N map[int64]int
}

// New returns the reference under the decisions' settings set (ignore
// rules, identity, schedule options, cut-over, the airport time zone: the
// router's Config.Settings).
func New(set route.Settings) *Reference {
	return &Reference{set: set, opts: set.Flight, mem: route.NewOverlay(message.BatchLookups{}), Flights: map[string]*flight.State{},
		Versions: map[string][]*flight.State{}, States: map[int64]string{}, N: map[int64]int{}}
}

// Message decides message msgID (its inbox text raw, first enqueued at)
// and applies everything it does before it returns.
func (r *Reference) Message(msgID int64, raw string, enqueuedAt time.Time) error {
	p := route.Prepare(msgID, raw, r.set)
	v := route.Decide(p, r.mem.Lookups(p), enqueuedAt)
	r.mem.Record(msgID, v)
	state := v.State
	for _, t := range v.Flights {
		res, err := flight.Apply(r.Flights[t.FLID], t, r.opts)
		if err != nil {
			return fmt.Errorf("message #%d: %w", msgID, err)
		}
		r.Versions[t.FLID] = append(r.Versions[t.FLID], res.Versions...)
		switch {
		case res.Purge, res.State == nil:
			delete(r.Flights, t.FLID)
		default:
			r.Flights[t.FLID] = res.State
		}
	}
	if state == message.StateRouted {
		state = message.StateSucceeded
	}
	r.States[msgID] = state
	r.N[msgID] = v.N()
	return nil
}

// Index is the reference router's flight index entry of flid.
func (r *Reference) Index(flid string) (message.FlightDay, bool) { return r.mem.Index(flid) }
