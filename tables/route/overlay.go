package route

import (
	"sort"
	"time"

	"msgx/tables/flight"
	"msgx/tables/message"
)

// Overlay is the router's store held in memory: the identities bound, the
// flight index and the key-tag index, as the store knew them (NewOverlay)
// plus the decisions recorded since. Decide a message against it with
// Lookups, then record the verdict with Record: message N+1 of a batch is
// decided against it exactly as it would be against PostgreSQL after
// message N's decision was recorded. The router is the only writer of
// identities, the flight index and the key-tag index, so nothing else
// changes them meanwhile. A batch starts from what PostgreSQL knew; one
// started empty is the store of the serial reference the differential
// tests compare the pipeline with (internal/serial).
type Overlay struct {
	owners  map[string]int64
	index   map[string]message.FlightDay
	keyTags map[string]string
	// kids maps a master to its live children, as index holds them.
	kids map[string]map[string]bool
	// touched lists the FLIDs whose entries the batch writes, in order;
	// keys the last key-tag entry per type.
	touched []string
	keys    map[string]message.KeyIndex
	order   []string
}

// NewOverlay returns the store as known holds it (the zero BatchLookups: an
// empty store). The overlay takes known's maps over.
func NewOverlay(known message.BatchLookups) *Overlay {
	o := &Overlay{owners: known.Owners, index: known.Index, keyTags: known.KeyTags, keys: map[string]message.KeyIndex{},
		kids: map[string]map[string]bool{}}
	if o.owners == nil {
		o.owners = map[string]int64{}
	}
	if o.index == nil {
		o.index = map[string]message.FlightDay{}
	}
	if o.keyTags == nil {
		o.keyTags = map[string]string{}
	}
	for _, e := range o.index {
		o.link(e, true)
	}
	return o
}

// link adds (or, add false, removes) e to the children of its master.
func (o *Overlay) link(e message.FlightDay, add bool) {
	m := e.Link.MAID
	if m == "" || m == e.FLID || e.Link.State != flight.StateActive {
		return
	}
	if add {
		if o.kids[m] == nil {
			o.kids[m] = map[string]bool{}
		}
		o.kids[m][e.FLID] = true
	} else {
		delete(o.kids[m], e.FLID)
	}
}

// Lookups are what Decide would read for p now (sink.QueueLookups): the
// entries of its FLIDs, of the earlier flights of its days, and of the live
// descendants of those and of what it deletes.
func (o *Overlay) Lookups(p Plan) message.Lookups {
	l := message.Lookups{Days: map[string]message.FlightDay{}, Earlier: map[string][]string{}}
	if p.IdentityKey != "" {
		l.Owner = o.owners[p.IdentityKey]
	}
	if p.RefType != "" {
		l.KeyTag = o.keyTags[p.RefType]
	}
	for _, f := range p.FLIDs {
		if d, ok := o.index[f]; ok {
			l.Days[f] = d
		}
	}
	cascade := append([]string(nil), p.Deletes...)
	for _, day := range p.Days {
		k := day.Format(time.DateOnly)
		var flids []string
		for _, e := range o.index {
			if e.Day != nil && e.Day.Equal(day) && e.FirstMsgID < p.MsgID {
				flids = append(flids, e.FLID)
				l.Days[e.FLID] = e
			}
		}
		if len(flids) > 0 {
			sort.Strings(flids)
			l.Earlier[k] = flids
			cascade = append(cascade, flids...)
		}
	}
	seen := map[string]bool{}
	for len(cascade) > 0 {
		m := cascade[0]
		cascade = cascade[1:]
		if seen[m] {
			continue
		}
		seen[m] = true
		for c := range o.kids[m] {
			l.Days[c] = o.index[c]
			cascade = append(cascade, c)
		}
	}
	return l
}

// Record adds the writes of verdict v on message msgID (sink.QueueDecision):
// the identity it binds, the flight entries it writes, the key tag it sets.
func (o *Overlay) Record(msgID int64, v Verdict) {
	if v.IdentityKey != "" {
		if _, held := o.owners[v.IdentityKey]; !held {
			o.owners[v.IdentityKey] = msgID
		}
	}
	for _, e := range v.Index {
		if old, ok := o.index[e.FLID]; ok {
			o.link(old, false)
		}
		o.index[e.FLID] = e
		o.link(e, true)
		o.touched = append(o.touched, e.FLID)
	}
	if v.RefKey != nil {
		o.keyTags[v.RefKey.RType] = v.RefKey.KeyTag
		if _, ok := o.keys[v.RefKey.RType]; !ok {
			o.order = append(o.order, v.RefKey.RType)
		}
		o.keys[v.RefKey.RType] = message.KeyIndex{RefKey: *v.RefKey, MsgID: msgID}
	}
}

// Written are the index entries the recorded decisions leave, one per FLID
// and per reference type.
func (o *Overlay) Written() ([]message.FlightDay, []message.KeyIndex) {
	var index []message.FlightDay
	seen := map[string]bool{}
	for _, f := range o.touched {
		if !seen[f] {
			seen[f] = true
			index = append(index, o.index[f])
		}
	}
	keys := make([]message.KeyIndex, 0, len(o.order))
	for _, t := range o.order {
		keys = append(keys, o.keys[t])
	}
	return index, keys
}

// Index is the store's flight index entry of flid.
func (o *Overlay) Index(flid string) (message.FlightDay, bool) {
	e, ok := o.index[flid]
	return e, ok
}
