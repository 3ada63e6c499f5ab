package replay

import (
	"cmp"
	"slices"

	"msgx/tables/message"
)

// The refusal rules: why a named message is not replayed — not
// replayable, unknown — and why Run leaves one the router would decide DEAD
// again unless the selector forces it.

// Refusal is an explicitly named message that a replay will not move.
type Refusal struct {
	MsgID int64 `json:"msgId"`
	// State is the message's state; empty when msgx does not know it.
	State string `json:"state,omitempty"`
	// Why says why, e.g. "DEAD MALFORMED: never replayable".
	Why string `json:"why"`
	// Verdict is set when the message was refused for the router's
	// verdict on it now (DEAD: it would die again; see Selector.Force).
	Verdict string `json:"verdict,omitempty"`
}

// refusal explains why a row the IDs selector named is not replayable.
func refusal(r Row) Refusal {
	out := Refusal{MsgID: r.MsgID, State: r.State}
	switch r.State {
	case message.StatePending:
		out.Why = "PENDING: not decided yet; the router will decide it"
	case message.StateRouted:
		out.Why = "ROUTED: its transitions are being applied"
	case message.StateSucceeded:
		out.Why = "SUCCEEDED: finished"
	case message.StateArchived:
		out.Why = "ARCHIVED: moved to proc_state_hst"
	case message.StateSkipped:
		out.Why = "SKIPPED " + r.Reason + ": only unsupported:… skips are replayable"
	default:
		switch r.ErrorClass {
		case message.ClassMalformed, message.ClassProtocol:
			out.Why = r.State + " " + r.ErrorClass + ": never replayable"
		default:
			out.Why = r.State + " " + r.ErrorClass + ": not a replayable error class"
		}
	}
	return out
}

func unknownRefusal(id int64) Refusal {
	return Refusal{MsgID: id, Why: "unknown: msgx has no record of this message (the ingest bridge delivers inbox rows by itself)"}
}

// refuseDead takes out of present the messages whose verdict now is DEAD
// again — replaying them would only make them die once more — and refuses
// them in b, saying why.
func refuseDead(b *batchResult, cands []Row, present []int64, effects map[int64]Effect) []int64 {
	rows := make(map[int64]Row, len(cands))
	for _, c := range cands {
		rows[c.MsgID] = c
	}
	kept := present[:0]
	for _, id := range present {
		// A PENDING message was reset by an earlier replay that could not
		// re-inject it: it must go out now, whatever its verdict.
		e := effects[id]
		if e.Verdict != message.StateDead || rows[id].State == message.StatePending {
			kept = append(kept, id)
			continue
		}
		why := "the router would decide it DEAD again now"
		if e.ErrorClass != "" {
			why += " (" + e.ErrorClass + ": " + orNone(e.Reason) + ")"
		}
		b.refused = append(b.refused, Refusal{MsgID: id, State: rows[id].State, Verdict: e.Verdict,
			Why: why + ": fix the cause first, or force the replay (msgx replay --force)"})
	}
	slices.SortFunc(b.refused, func(x, y Refusal) int { return cmp.Compare(x.MsgID, y.MsgID) })
	return kept
}

func orNone(s string) string {
	if s == "" {
		return "no reason recorded"
	}
	return s
}
