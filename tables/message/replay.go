package message

// ReplayMark identifies one application of a replayed message: the replay
// generation that re-injected it (its replay_audit id) and the message.
// Flight and category state keep the mark of the last replayed transition
// they applied, beside lastMsgId, to tell a replay from a redelivery
// (docs/design.md#replay).
type ReplayMark struct {
	// Gen is the replay generation (replay_audit.id, positive).
	Gen int64 `json:"gen"`
	// MsgID is the replayed message.
	MsgID int64 `json:"msgId"`
}

// Applied reports whether a transition of message msgID with replay
// generation gen (0: not a replay) was applied already to a state whose
// highest own message is lastMsgID and whose last applied replayed
// transition is last (nil: none), the rule of docs/design.md#i4-exactly-once-effect:
//
//   - a normal transition (gen 0) was applied when msgID <= lastMsgID: the
//     messages of one key are applied in MSG_ID order;
//   - a replayed transition was applied when (gen, msgID) <= last, compared
//     in that order. Replays are serialised, so generations grow along the
//     topic, and a generation's messages are re-injected in MSG_ID order
//     (one replay batch may carry several messages for one key): the pairs
//     of the replayed transitions of one key grow in the order they arrive,
//     and a redelivery is one that is not greater than the last one applied.
//     Its message ID says nothing: a replayed message is older than what the
//     state has applied since, and is applied all the same.
func Applied(lastMsgID int64, last *ReplayMark, gen, msgID int64) bool {
	if gen == 0 {
		return msgID <= lastMsgID
	}
	if last == nil {
		return false
	}
	return gen < last.Gen || gen == last.Gen && msgID <= last.MsgID
}
