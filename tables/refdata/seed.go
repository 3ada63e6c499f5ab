package refdata

// SeedState builds the table value of category rtype from its stored
// records (ref_master, by RKEY): what msgx reseed writes into the refdata
// table of a new Kafka cluster. indexedKeyTag is the router's key-tag index
// entry, used for a FirstChildTypes category (the 13 and RSTA have fixed key
// tags). Version, LastMsgID and UpdatedAt are the newest of the records'.
// The redelivery bookkeeping (LastDeletes, Replayed) starts empty: none of
// the old cluster's transitions reaches the new one. Pure.
func SeedState(rtype, indexedKeyTag string, records map[string]Entry) *State {
	s := NewState(rtype)
	switch {
	case rtype == RSTA:
		s.KeyTag = StatusKey(TagRTYP, TagRSID)
	case KeyTag(rtype) != "":
		s.KeyTag = KeyTag(rtype)
	default:
		s.KeyTag = indexedKeyTag
	}
	for k, e := range records {
		s.Records[k] = e
		s.Version = max(s.Version, e.Version)
		s.LastMsgID = max(s.LastMsgID, e.LastMsgID)
		if e.UpdatedAt.After(s.UpdatedAt) {
			s.UpdatedAt = e.UpdatedAt
		}
	}
	return s
}
