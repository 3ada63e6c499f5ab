package refdata

import (
	"sort"
	"time"
)

// View is one record of a category prepared for inspection (admin/CLI).
type View struct {
	// Key is the RKEY.
	Key string `json:"key"`
	// Attrs is a deep copy of the stored record as plain JSON-ready maps.
	Attrs map[string]any `json:"attrs"`
	// UpdatedAt is when the record last changed (UTC).
	UpdatedAt time.Time `json:"updatedAt"`
	// LastMsgID is the message that last changed the record.
	LastMsgID int64 `json:"lastMsgId"`
}

// List returns the records of s sorted by key. The copies are the caller's:
// changing them does not change s.
func (s *State) List() []View {
	if s == nil {
		return nil
	}
	out := make([]View, 0, len(s.Records))
	for k, e := range s.Records {
		out = append(out, View{Key: k, Attrs: cloneMap(e.Attrs), UpdatedAt: e.UpdatedAt, LastMsgID: e.LastMsgID})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
