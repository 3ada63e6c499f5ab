package route

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/refdata"
	"msgx/tables/sis"
)

// Settings are the parsed configuration the decisions depend on.
type Settings struct {
	Rules        []Rule
	DayBoundary  bool
	Loc          *time.Location
	Cutover      time.Duration
	AbsentDelete bool
	RespGuard    bool
	// Flight are the options of the flight rules the router applies to the
	// links of the flights a message touches (flight.Expand).
	Flight flight.Options
}

// Verdict is a message's decision.
type Verdict struct {
	// State is ROUTED (transitions follow) or a terminal state.
	State      string
	ErrorClass string
	Reason     string
	Detail     string
	// IdentityKey is bound with the verdict (empty: none).
	IdentityKey string
	// Flights are the message's flight transitions, one per flight it
	// touches, derived ones included (flight.Expand).
	Flights []flight.Transition
	Refdata []refdata.Transition
	// Index lists the flight_index entries the verdict writes, whole: the
	// flights it creates, those it gives an operation day, those whose link
	// it changes.
	Index []message.FlightDay
	// FlightPlan is what re-routing the message needs beyond its own
	// records (plan.go); nil without flight transitions.
	FlightPlan []byte
	// RefKey is the reference key-tag index entry the verdict sets (nil:
	// none).
	RefKey *message.RefKey
}

// N is the number of transitions the verdict emits.
func (v Verdict) N() int { return len(v.Flights) + len(v.Refdata) }

// Plan is the first, pure half of a decision: the decoded message and what
// PostgreSQL must tell before the decision can be made.
type Plan struct {
	MsgID int64
	// Msg is the decoded message: META only for an ignored message (but an
	// EROR) and for one whose payload does not decode; nil when META does
	// not decode.
	Msg *sis.Message
	// Early is a verdict reached before identity (malformed, undecodable,
	// ignored).
	Early *Verdict
	// IdentityKey is SNDR|TYPE|STYP|SEQN[|day].
	IdentityKey string
	// Invalid is the verdict of a message that fails dispatch or whole-package
	// validation; it applies once identity is bound.
	Invalid *Verdict
	// FLIDs the decision must look up in the flight index.
	FLIDs []string
	// Deletes are the FLIDs the message deletes (FDEL, FLOP-FDEL): their
	// live descendants are looked up too, for the cascade.
	Deletes []string
	// Days are the package's operation days (absent-flight lookup).
	Days []time.Time
	// RefType is the reference category whose indexed key tag the decision
	// checks (a category keyed by its records' first child).
	RefType string
	// NeedsRequest says a SCHD RESP must answer an open RQFD request
	// (MSGX_RESP_GUARD): the caller asks request tracking and passes the
	// answer in Lookups.RequestOpen.
	NeedsRequest bool
	// Replay is the replay generation the message is decided under (its
	// replay_audit id when msgx replay put it back, docs/design.md#replay;
	// 0 otherwise). Prepare leaves it 0: the caller sets it from the
	// record and the message's row (Router.decide) before Decide, which puts
	// it on every transition, so that the applying processors apply a
	// replayed message to the current state.
	Replay int64

	flights []plannedFlight
	refdata *refdata.Transition
	opts    flight.Options
}

type plannedFlight struct {
	kind flight.Kind
	flid string
	day  *time.Time // operation day derived from SODT (SCHEDULE, ADFT)
	rec  *sis.FlightRecord
	styp string
}

// Prepare decodes and classifies a message: everything that can be decided
// without PostgreSQL. The ignore rules are matched on META alone, before
// the payload is decoded (004 US-04): an ignored message is SKIPPED
// whatever its payload holds.
func Prepare(msgID int64, raw string, s Settings) Plan {
	p := Plan{MsgID: msgID, opts: s.Flight}
	if strings.TrimSpace(raw) == "" {
		p.Early = &Verdict{State: message.StateDead, ErrorClass: message.ClassMalformed, Reason: message.ReasonRawMissing, Detail: "the inbox row has no message text"}
		return p
	}
	if msgID <= 0 {
		// Every transition and stored row is ordered and de-duplicated by a
		// positive MSG_ID; the applying processors reject anything else.
		p.Early = malformedPayload("the inbox row's ID %d is not positive", msgID)
		return p
	}
	h, err := sis.DecodeHead([]byte(raw), s.Loc)
	if err != nil {
		p.Early = undecodable(err)
		return p
	}
	if r, ok := match(s.Rules, h.Meta.TYPE, h.Meta.STYP); ok {
		p.Msg = &sis.Message{Meta: h.Meta}
		if h.Meta.TYPE == "EROR" {
			// An ignored EROR is still paired with the request it names
			// (afterDecision); one whose body does not decode is paired by
			// its META alone.
			if m, err := h.Decode(); err == nil {
				p.Msg = m
			}
		}
		p.Early = &Verdict{State: message.StateSkipped, Reason: message.ReasonIgnored + r.String()}
		return p
	}
	m, err := h.Decode()
	if err != nil {
		// Decided before identity, as a message that does not decode
		// binds none (docs/design.md#identity).
		p.Msg = &sis.Message{Meta: h.Meta}
		p.Early = undecodable(err)
		return p
	}
	p.Msg = m
	p.IdentityKey = identity(m.Meta, s)
	p.dispatch(s)
	return p
}

// undecodable is the verdict on a message the codec rejects: MALFORMED, or
// CODEC_ERROR. Both are DEAD at once: the same bytes through the same code
// cannot succeed, and retrying would stall the queue behind them; a
// CODEC_ERROR is replayable once the codec is fixed (docs/design.md#decisions).
func undecodable(err error) *Verdict {
	class, reason := message.ClassMalformed, err.Error()
	var de *sis.DecodeError
	if errors.As(err, &de) {
		reason = de.Reason
		if de.Class == sis.CodecError {
			class = message.ClassCodecError
		}
	}
	return &Verdict{State: message.StateDead, ErrorClass: class, Reason: message.Clip(reason, 200), Detail: err.Error()}
}

// Query is what the decision must look up in the store.
func (p Plan) Query() message.Query {
	return message.Query{IdentityKey: p.IdentityKey, FLIDs: p.FLIDs, Days: p.Days, Cascade: p.Deletes, RefType: p.RefType}
}

// identity is the business identity SNDR|TYPE|STYP|SEQN, optionally with the
// message's day.
func identity(m sis.Meta, s Settings) string {
	key := strings.Join([]string{m.SNDR, m.TYPE, m.STYP, m.SEQN}, "|")
	if s.DayBoundary {
		day := "-"
		if !m.DTTM.IsZero() {
			day = m.DTTM.In(s.Loc).Format(time.DateOnly)
		}
		key += "|" + day
	}
	return key
}

func unsupported(m *sis.Message) *Verdict {
	return &Verdict{State: message.StateSkipped, Reason: message.ReasonUnsupported + m.Meta.TYPE + "-" + m.Meta.STYP}
}

func protocol(format string, args ...any) *Verdict {
	d := fmt.Sprintf(format, args...)
	return &Verdict{State: message.StateDead, ErrorClass: message.ClassProtocol, Reason: message.Clip(d, 200), Detail: d}
}

func malformedPayload(format string, args ...any) *Verdict {
	d := fmt.Sprintf(format, args...)
	return &Verdict{State: message.StateDead, ErrorClass: message.ClassMalformed, Reason: message.Clip(d, 200), Detail: d}
}

func codecVerdict(p Plan, format string, args ...any) Verdict {
	v := *codecError(format, args...)
	v.IdentityKey = p.IdentityKey
	return v
}

func codecError(format string, args ...any) *Verdict {
	d := fmt.Sprintf(format, args...)
	return &Verdict{State: message.StateDead, ErrorClass: message.ClassCodecError, Reason: message.Clip(d, 200), Detail: d}
}

// dispatch routes by MsgKind and validates the whole package
// (docs/design.md#dispatch, docs/design.md#whole-package).
func (p *Plan) dispatch(s Settings) {
	m := p.Msg
	switch m.Kind {
	case sis.KindSchedule:
		p.schedule(s)
	case sis.KindFlightOp, sis.KindFlightDelete:
		p.flightOp()
	case sis.KindRefData:
		p.refData()
	case sis.KindSeason:
		p.season()
	default:
		p.Invalid = unsupported(m)
	}
}

func (p *Plan) schedule(s Settings) {
	m := p.Msg
	sc := m.Schedule
	var kind flight.Kind
	switch m.Meta.STYP {
	case "DNLD", "RESP":
		kind = flight.KindSchedule
		if !sc.DeclaredPresent {
			p.Invalid = protocol("SCHD-%s without RECS", m.Meta.STYP)
			return
		}
		if sc.Declared != len(sc.Flights) {
			p.Invalid = protocol("SCHD-%s declares RECS=%d but carries %d FLTR", m.Meta.STYP, sc.Declared, len(sc.Flights))
			return
		}
	case "ADFT":
		kind = flight.KindADFT
	default:
		p.Invalid = unsupported(m)
		return
	}
	seen := map[string]int{}
	days := map[time.Time]bool{}
	for i := range sc.Flights {
		rec := &sc.Flights[i]
		if rec.FLID == "" {
			p.Invalid = protocol("FLTR %d has no FLID", i+1)
			return
		}
		if j, dup := seen[rec.FLID]; dup {
			p.Invalid = protocol("FLID %s appears in FLTR %d and %d", rec.FLID, j+1, i+1)
			return
		}
		seen[rec.FLID] = i
		sodt, has := rec.Fields["SODT"]
		var day *time.Time
		switch {
		case has && sodt != "":
			t, err := sis.ParseTime(sodt, s.Loc)
			if errors.Is(err, sis.ErrTimeRange) {
				// A SIS time naming no instant (31NOV, 25:61): the
				// operation day cannot be derived, so neither can the
				// package's (docs/design.md#operation-day).
				p.Invalid = protocol("FLTR %d (FLID %s) SODT %v: the operation day cannot be derived", i+1, rec.FLID, err)
				return
			}
			if err != nil {
				p.Invalid = codecError("FLTR %d (FLID %s) SODT %v", i+1, rec.FLID, err)
				return
			}
			d := OperationDay(t, s.Loc, s.Cutover)
			day = &d
			days[d] = true
		case kind == flight.KindSchedule:
			p.Invalid = protocol("FLTR %d (FLID %s) has no SODT", i+1, rec.FLID)
			return
		}
		if err := rec.CheckTimes(); err != nil {
			p.Invalid = codecError("FLTR %d (FLID %s) %v", i+1, rec.FLID, err)
			return
		}
		p.flights = append(p.flights, plannedFlight{kind: kind, flid: rec.FLID, day: day, rec: rec})
		p.FLIDs = append(p.FLIDs, rec.FLID)
	}
	if m.Meta.STYP == "RESP" && s.RespGuard {
		p.NeedsRequest = true
	}
	if kind == flight.KindSchedule && s.AbsentDelete {
		for d := range days {
			p.Days = append(p.Days, d)
		}
		sort.Slice(p.Days, func(i, j int) bool { return p.Days[i].Before(p.Days[j]) })
	}
}

func (p *Plan) flightOp() {
	m := p.Msg
	op := m.Flight
	styp := m.Meta.STYP
	if m.Kind == sis.KindFlightDelete {
		styp = flight.STYPDelete
	}
	if !flight.SupportedFLOP(styp) {
		p.Invalid = unsupported(m)
		return
	}
	if op == nil || op.FLID == "" {
		p.Invalid = malformedPayload("%s-%s without FLID", m.Meta.TYPE, m.Meta.STYP)
		return
	}
	kind := flight.KindFLOP
	if styp == flight.STYPDelete {
		kind = flight.KindDelete
	} else if !carries(&op.FlightRecord, styp) && !flight.OptionalPayload[styp] {
		p.Invalid = malformedPayload("FLOP-%s carries no %s payload", styp, styp)
		return
	} else if err := op.CheckTimes(); err != nil {
		// A delete applies nothing it carries; a FLOP applies every tag.
		p.Invalid = codecError("FLOP-%s (FLID %s) %v", styp, op.FLID, err)
		return
	}
	p.flights = []plannedFlight{{kind: kind, flid: op.FLID, rec: &op.FlightRecord, styp: styp}}
	p.FLIDs = []string{op.FLID}
	if kind == flight.KindDelete {
		p.Deletes = []string{op.FLID}
	}
}

// carries reports whether a FLOP body holds the payload its STYP names.
func carries(rec *sis.FlightRecord, styp string) bool {
	tags := flight.FLOPGroups[styp]
	if tags == nil {
		tags = []string{styp}
	}
	for _, t := range tags {
		if _, ok := rec.Fields[t]; ok {
			return true
		}
		if _, ok := rec.Collections[t]; ok {
			return true
		}
	}
	return false
}

func (p *Plan) refData() {
	m := p.Msg
	rd := m.RefData
	if !refdata.Supported(rd.Type) || !refdata.SupportedSTYP(m.Meta.STYP) {
		p.Invalid = unsupported(m)
		return
	}
	// A full replace that lost records would delete what it does not carry:
	// the declared count must match (whole package, I3).
	if (m.Meta.STYP == refdata.STYPDNLD || m.Meta.STYP == refdata.STYPRESP) && rd.DeclaredPresent && rd.Declared != len(rd.Records) {
		p.Invalid = protocol("%s-%s declares RECS=%d but carries %d records", rd.Type, m.Meta.STYP, rd.Declared, len(rd.Records))
		return
	}
	t := &refdata.Transition{MsgID: p.MsgID, RType: rd.Type, STYP: m.Meta.STYP, FirstChild: rd.FirstChild}
	for _, r := range rd.Records {
		t.Records = append(t.Records, refdata.Record(r))
	}
	// Whatever refdata.Apply would reject is rejected here, for the whole
	// package (keys; RSTA's STAT and window); the key tag is checked in
	// Decide, against the index.
	if err := refdata.Check(*t); err != nil {
		p.Invalid = protocol("%s-%s %s", rd.Type, m.Meta.STYP, recordProblem(err))
		return
	}
	if slices.Contains(refdata.FirstChildTypes, rd.Type) {
		p.RefType = rd.Type
	}
	p.refdata = t
}

// season validates a seasonal schedule (SCHS DNLD/RESP) as a whole and
// makes it one reference transition: the season, keyed by SNAM, replaces
// the stored season of that name (refdata.Season). It creates no flights.
func (p *Plan) season() {
	m := p.Msg
	se := m.Season
	if m.Meta.STYP != refdata.STYPDNLD && m.Meta.STYP != refdata.STYPRESP {
		p.Invalid = unsupported(m)
		return
	}
	// A season replaces the stored one as a whole, so like any full replace
	// it must carry every record it declares (I3).
	switch {
	case se.Name() == "":
		p.Invalid = protocol("SCHS-%s without SNAM", m.Meta.STYP)
	case !se.DeclaredPresent:
		p.Invalid = protocol("SCHS-%s without RECS", m.Meta.STYP)
	case se.Declared != len(se.Records):
		p.Invalid = protocol("SCHS-%s declares RECS=%d but carries %d FLTR", m.Meta.STYP, se.Declared, len(se.Records))
	}
	if p.Invalid != nil {
		return
	}
	if err := se.CheckTimes(); err != nil {
		p.Invalid = codecError("SCHS-%s %v", m.Meta.STYP, err)
		return
	}
	p.refdata = &refdata.Transition{MsgID: p.MsgID, RType: refdata.Season, STYP: m.Meta.STYP, FirstChild: sis.SeasonKey,
		Records: []refdata.Record{refdata.Record(se.Record())}}
}

// Decide finishes a decision with what PostgreSQL knows: the identity's
// owner, the flight index and the reference key-tag index. at is the time
// the transitions carry (the message's first enqueue time, so a re-routed
// message emits identical transitions). Every verdict is final: what the
// message carries decides it, and only failures of the store are retried
// (by the caller).
//
// The flight transitions are every one the message causes, in the order it
// causes them (flight.Expand): its own records, the LINKs they send their
// masters and the cascades of the flights it deletes, one transition per
// flight, each counted in n: the message is SUCCEEDED only when all are
// applied. l.Days must hold the index entries of every flight the message
// may touch (Plan.Query asks for them).
func Decide(p Plan, l message.Lookups, at time.Time) Verdict {
	v := decideOwn(p, l, at)
	if v.State != message.StateRouted || len(v.Flights) == 0 {
		return v
	}
	links := make(map[string]message.FlightLink, len(l.Days))
	for flid, d := range l.Days {
		if d.Link.IsFlight() {
			links[flid] = d.Link
		}
	}
	out, changed, err := flight.Expand(v.Flights, links, p.opts)
	if err != nil {
		// The router validated every record Expand applies: this code
		// cannot handle the message, which is replayable once it can.
		return codecVerdict(p, "flight effects: %v", err)
	}
	v.Index = indexAfter(p.MsgID, v.Index, changed, l.Days, out)
	v.FlightPlan = planOf(out)
	v.Flights = out
	return v
}

// indexAfter is every index entry the message writes: the ones it creates
// or gives a day (created), with their link after it, and the existing ones
// whose link it changed, in the order the transitions first touch them.
func indexAfter(msgID int64, created []message.FlightDay, changed map[string]message.FlightLink, known map[string]message.FlightDay,
	out []flight.Transition) []message.FlightDay {
	entries := map[string]message.FlightDay{}
	for _, e := range created {
		if old, ok := known[e.FLID]; ok {
			old.Day = e.Day
			e = old
		} else {
			e.FirstMsgID = msgID
		}
		entries[e.FLID] = e
	}
	for flid, l := range changed {
		e, ok := entries[flid]
		if !ok {
			if e, ok = known[flid]; !ok {
				// A flight the message creates is in created.
				continue
			}
		}
		e.Link = l
		entries[flid] = e
	}
	index := make([]message.FlightDay, 0, len(entries))
	for _, t := range out {
		if e, ok := entries[t.FLID]; ok {
			index = append(index, e)
			delete(entries, t.FLID)
		}
	}
	return index
}

// Reroute decides a message found ROUTED again (a crash after its decision
// was recorded, or an ingest duplicate): its own records are decided again
// — the decision depends only on the record, the configuration and index
// entries older than the message, so they are the same — and what they
// cause comes from plan, the flight plan stored with the decision
// (plan.go). The error says the plan does not fit the records decided
// again; the verdict then holds the own records only.
func Reroute(p Plan, l message.Lookups, at time.Time, plan []byte) (Verdict, error) {
	v := decideOwn(p, l, at)
	flights, err := fromPlan(v.Flights, plan)
	if err != nil {
		return v, err
	}
	v.Flights = flights
	return v, nil
}

// decideOwn is Decide without the derived transitions: the message's own
// records only.
func decideOwn(p Plan, l message.Lookups, at time.Time) Verdict {
	if p.Early != nil {
		return *p.Early
	}
	// Identity comes before dispatch: a message whose identity another
	// message holds is a duplicate, whatever it carries (I5).
	if l.Owner != 0 && l.Owner != p.MsgID {
		return Verdict{State: message.StateSkipped, Reason: message.ReasonDuplicateOf + strconv.FormatInt(l.Owner, 10)}
	}
	if p.Invalid != nil {
		v := *p.Invalid
		v.IdentityKey = p.IdentityKey
		return v
	}
	if p.NeedsRequest && !l.RequestOpen {
		return Verdict{State: message.StateSkipped, Reason: message.ReasonNoMatch, Detail: "SCHD RESP answers no open RQFD request",
			IdentityKey: p.IdentityKey}
	}
	v := Verdict{State: message.StateRouted, IdentityKey: p.IdentityKey}
	source := p.Msg.Meta.TYPE + "-" + p.Msg.Meta.STYP
	if p.refdata != nil {
		t := *p.refdata
		if err := refdata.CheckKeyTag(t, l.KeyTag); err != nil {
			return protocolVerdict(p, "%s-%s %s", t.RType, t.STYP, recordProblem(err))
		}
		if p.RefType != "" {
			v.RefKey = &message.RefKey{RType: t.RType, KeyTag: refdata.KeyTagOf(t)}
		}
		t.At, t.MsgDTTM, t.Replay = at, p.Msg.Meta.DTTM, p.Replay
		v.Refdata = append(v.Refdata, t)
	}
	inPackage := map[string]bool{}
	for _, f := range p.flights {
		inPackage[f.flid] = true
		known, isKnown := l.Days[f.flid]
		t := flight.Transition{MsgID: p.MsgID, Source: source, Kind: f.kind, FLID: f.flid, At: at, MsgDTTM: p.Msg.Meta.DTTM, Replay: p.Replay}
		switch f.kind {
		case flight.KindSchedule, flight.KindADFT:
			if isKnown && known.Day != nil && f.day != nil && !known.Day.Equal(*f.day) {
				// I3: one conflicting flight rejects the whole package.
				return protocolVerdict(p, "FLID %s: operation day %s conflicts with its indexed day %s",
					f.flid, f.day.Format(time.DateOnly), known.Day.Format(time.DateOnly))
			}
			if !isKnown || (known.Day == nil && f.day != nil) {
				v.Index = append(v.Index, message.FlightDay{FLID: f.flid, Day: f.day})
			}
			t.FirstSeen = !isKnown || known.FirstMsgID >= p.MsgID
			day := f.day
			if isKnown && known.Day != nil {
				day = known.Day
			}
			if day != nil {
				t.OperationDay = day.Format(time.DateOnly)
			}
			t.Fields, t.Collections = f.rec.Fields, elements(f.rec.Collections)
		case flight.KindFLOP, flight.KindDelete:
			if !isKnown {
				return Verdict{State: message.StateSkipped, Reason: message.ReasonNoMatch, Detail: "FLID " + f.flid + " is not a known flight",
					IdentityKey: p.IdentityKey}
			}
			if known.Day != nil {
				t.OperationDay = known.Day.Format(time.DateOnly)
			}
			if f.kind == flight.KindFLOP {
				t.STYP = f.styp
				t.Fields, t.Collections = f.rec.Fields, elements(f.rec.Collections)
			}
		}
		v.Flights = append(v.Flights, t)
	}
	// Flights of the package's days that it does not carry (delete mode).
	for _, d := range p.Days {
		for _, flid := range l.Earlier[d.Format(time.DateOnly)] {
			if inPackage[flid] {
				continue
			}
			inPackage[flid] = true
			v.Flights = append(v.Flights, flight.Transition{MsgID: p.MsgID, Source: source, Kind: flight.KindDelete,
				FLID: flid, At: at, OperationDay: d.Format(time.DateOnly), MsgDTTM: p.Msg.Meta.DTTM, Replay: p.Replay})
		}
	}
	if v.N() == 0 {
		v.State = message.StateSucceeded
	}
	return v
}

// recordProblem words a refdata rejection for a reason: "record 2: STAT
// "X" is not E or D" (records counted from 1).
func recordProblem(err error) string {
	var re *refdata.RecordError
	if !errors.As(err, &re) {
		return err.Error()
	}
	if re.Index < 0 || re.Reason == refdata.ReasonKeyTag {
		return re.Problem()
	}
	return fmt.Sprintf("record %d: %s", re.Index+1, re.Problem())
}

func protocolVerdict(p Plan, format string, args ...any) Verdict {
	v := *protocol(format, args...)
	v.IdentityKey = p.IdentityKey
	return v
}

func elements(in map[string][]map[string]string) map[string][]flight.Element {
	if in == nil {
		return nil
	}
	out := make(map[string][]flight.Element, len(in))
	for k, list := range in {
		els := make([]flight.Element, len(list))
		for i, e := range list {
			els[i] = flight.Element(e)
		}
		out[k] = els
	}
	return out
}

// OperationDay is the operation day of a flight scheduled at sodt: its local
// date in the airport's time zone, counted from the daily cut-over.
func OperationDay(sodt time.Time, loc *time.Location, cutover time.Duration) time.Time {
	local := sodt.In(loc).Add(-cutover)
	return time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
}
