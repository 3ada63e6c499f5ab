package route

import (
	"encoding/json"
	"fmt"

	"msgx/tables/flight"
)

// A routed message's flight plan (proc_state.flight_plan, migration 0028).
//
// A message found ROUTED again (a crash after its decision was recorded,
// before its offset was committed) re-emits the transitions it was routed
// with. Its own records are decided again exactly (they depend only on the
// message, the configuration and index entries older than it,
// docs/design.md#determinism), but what they cause — the LINKs to masters,
// the cascades to children, each step's expected link — was computed from
// the flight index as it stood before the message, and the index has moved
// on with this message and those after it. So the decision stores that part
// with itself: the message's transitions with its own steps' records left
// out (their expected links stay). It is cleared when the message is
// SUCCEEDED.

// planOf is the plan of a message's transitions out (nil: none).
func planOf(out []flight.Transition) []byte {
	if len(out) == 0 {
		return nil
	}
	plan := make([]flight.Transition, len(out))
	for i, t := range out {
		steps := t.Steps()
		for j, st := range steps {
			if own(st) {
				steps[j] = flight.Transition{MsgID: st.MsgID, Kind: st.Kind, FLID: st.FLID, Expect: st.Expect}
			}
		}
		plan[i] = steps[0]
		plan[i].Then = steps[1:]
		if len(plan[i].Then) == 0 {
			plan[i].Then = nil
		}
	}
	b, err := json.Marshal(plan)
	if err != nil {
		// Transitions are plain data: this cannot fail.
		panic(fmt.Sprintf("router: encoding a flight plan: %v", err))
	}
	return b
}

// fromPlan rebuilds a routed message's transitions from its own ones,
// decided again, and its plan (nil, from a decision of an earlier version:
// the own ones are all).
func fromPlan(ownTs []flight.Transition, plan []byte) ([]flight.Transition, error) {
	if plan == nil {
		return ownTs, nil
	}
	var stored []flight.Transition
	if err := json.Unmarshal(plan, &stored); err != nil {
		return nil, fmt.Errorf("decoding the flight plan: %w", err)
	}
	byFLID := make(map[string]flight.Transition, len(ownTs))
	for _, t := range ownTs {
		byFLID[t.FLID] = t
	}
	used := 0
	out := make([]flight.Transition, len(stored))
	for i, t := range stored {
		steps := t.Steps()
		firstSeen := false
		for j, st := range steps {
			if !own(st) {
				continue
			}
			o, ok := byFLID[st.FLID]
			if !ok {
				return nil, fmt.Errorf("the flight plan names an own record for flight %s the message does not carry", st.FLID)
			}
			used++
			o.Expect = st.Expect
			firstSeen = firstSeen || o.FirstSeen
			steps[j] = o
		}
		out[i] = steps[0]
		out[i].Then = steps[1:]
		if len(out[i].Then) == 0 {
			out[i].Then = nil
		}
		out[i].FirstSeen = firstSeen
	}
	if used != len(ownTs) {
		return nil, fmt.Errorf("the flight plan holds %d own records, the message %d", used, len(ownTs))
	}
	return out, nil
}

// own reports whether step t is a message's own record (not a LINK or a
// cascade it causes).
func own(t flight.Transition) bool {
	return t.Kind != flight.KindLink && !t.Cascade && t.Kind != flight.KindPurge
}
