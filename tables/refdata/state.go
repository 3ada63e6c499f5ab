package refdata

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"msgx/tables/message"
)

// Record is one reference record as the SIS codec builds it from the record
// element's children: a leaf child without attributes is a string ("" when
// present but empty); a child with attributes and/or element children is a
// map[string]any with attributes under "@NAME", non-blank text under "#text"
// and children recursively; a tag repeated in the same parent is a []any in
// document order. Only these JSON types occur, so a Record survives a JSON
// round trip unchanged.
type Record map[string]any

// Entry is one stored record of a category.
type Entry struct {
	// Attrs is the record as last received, key tag included. An empty tag
	// is kept as "" (the value is unavailable), never dropped.
	Attrs Record `json:"attrs"`
	// UpdatedAt is the At of the transition that last changed this record.
	UpdatedAt time.Time `json:"updatedAt"`
	// LastMsgID is the message that last changed this record (a replayed
	// message too, docs/design.md#replay).
	LastMsgID int64 `json:"lastMsgId"`
	// Version is the category's Version when this record was last written:
	// the order of the writes to one record, which the PostgreSQL sink's
	// never-backwards guard compares (a replayed message writes a record a
	// newer message wrote before it, so the message id cannot order them).
	// 0 for records written before msgx kept it.
	Version int64 `json:"version,omitempty"`
}

// State is the value of the msgx-refdata table for one RTYPE.
type State struct {
	// RType is the category, equal to the table key.
	RType string `json:"rtype"`
	// KeyTag is the tag the records are keyed by: the fixed tag of the 13
	// categories, "RTYP|RSID" for RSTA, or the first child tag seen for a
	// FirstChildTypes category (Apply refuses an increment keyed otherwise).
	KeyTag string `json:"keyTag,omitempty"`
	// Version counts the transitions that changed something.
	Version int64 `json:"version"`
	// LastMsgID is the highest message applied, changed or not: the
	// redelivery guard of normal transitions. A replayed older message
	// never moves it back.
	LastMsgID int64 `json:"lastMsgId"`
	// Replayed is the last replayed transition applied (docs/design.md#replay):
	// the redelivery guard of replayed transitions (message.Applied).
	Replayed *message.ReplayMark `json:"replayed,omitempty"`
	// UpdatedAt is the At of the last transition that changed something.
	UpdatedAt time.Time `json:"updatedAt"`
	// Records maps RKEY to the stored record.
	Records map[string]Entry `json:"records"`
	// LastDeletes are the keys removed by the last transition applied:
	// message LastMsgID when LastDeletesReplay is 0, else the replayed
	// transition Replayed (of generation LastDeletesReplay). A deletion
	// leaves nothing behind in Records, so this is what lets a redelivery of
	// that transition (after a crash between the table write and the PG
	// write) repeat its PG deletes; see Apply.
	LastDeletes []string `json:"lastDeletes,omitempty"`
	// LastDeletesReplay is the replay generation of the transition
	// LastDeletes belong to (0: a normal one).
	LastDeletesReplay int64 `json:"lastDeletesReplay,omitempty"`
}

// NewState returns the empty state of category rtype.
func NewState(rtype string) *State {
	return &State{RType: rtype, Records: map[string]Entry{}}
}

// Subset returns a copy of s holding only the records of keys (those it
// has): what the sink writes of a Result (its Upserts). Apply changes a
// state in place; a write queued for later takes the subset, which the
// next transition of the category leaves as it is (Apply replaces an
// Entry, never changes one).
func (s *State) Subset(keys []string) *State {
	c := *s
	c.Records = make(map[string]Entry, len(keys))
	for _, k := range keys {
		if e, ok := s.Records[k]; ok {
			c.Records[k] = e
		}
	}
	c.LastDeletes = slices.Clone(s.LastDeletes)
	return &c
}

// Transition is one reference message for one RTYPE as the router emits it
// on msgx.refdata-transitions (key RTYPE).
type Transition struct {
	// MsgID is the inbox message id (CMINMSGS_ID, positive); it orders and
	// deduplicates transitions.
	MsgID int64 `json:"msgId"`
	// RType is META.TYPE.
	RType string `json:"rtype"`
	// STYP is META.STYP: DNLD, RESP, ADD, UPD or DEL.
	STYP string `json:"styp"`
	// At is the instant the router attributes to the message. It is stored
	// (in UTC) as UpdatedAt; the processor never reads its own clock.
	At time.Time `json:"at"`
	// FirstChild is the tag of the first child element of the first record,
	// in document order. Only FirstChildTypes use it, and every record of the
	// message must carry that tag: one message keys all its records alike.
	FirstChild string `json:"firstChild,omitempty"`
	// Records are the message's records in document order.
	Records []Record `json:"records"`
	// MsgDTTM is the message's META DTTM: request tracking matches a RESP
	// to its RQRD by it. Apply ignores it.
	MsgDTTM time.Time `json:"msgDttm,omitzero"`
	// Replay is the replay generation of a message msgx replay put back
	// (its replay_audit id; docs/design.md#replay), 0 for every other
	// message. A replayed transition is applied to the current state even
	// though its MsgID is not above the category's LastMsgID.
	Replay int64 `json:"replay,omitempty"`
}

// Result says what Apply did and what the PG sink must write.
type Result struct {
	// Upserts are the keys whose Entry the sink must write, sorted.
	Upserts []string `json:"upserts,omitempty"`
	// Deletes are the keys the sink must delete, sorted.
	Deletes []string `json:"deletes,omitempty"`
	// Changed reports whether the state changed (Upserts or Deletes non-empty
	// on a first application).
	Changed bool `json:"changed"`
	// Replay reports that the transition was already applied (a
	// redelivery, see Apply): the state is untouched, and Upserts/Deletes list the writes
	// of that message that are still the current truth, so that the sink can
	// repeat them idempotently.
	Replay bool `json:"replay,omitempty"`
}

// Reason classifies a *RecordError so that the router can map it to an
// error class (docs/design.md#outcomes).
type Reason string

// Reasons of a *RecordError.
const (
	// ReasonMissingKey: the key tag is absent or blank.
	ReasonMissingKey Reason = "missing-key"
	// ReasonBadValue: a value violates the protocol (repeated key tag, RSTA
	// RTYP or STAT out of range, window ending before it starts).
	ReasonBadValue Reason = "bad-value"
	// ReasonBadTime: an RSTA window time is not in SISTimeLayout.
	ReasonBadTime Reason = "bad-time"
	// ReasonKeyTag: an incremental message of a FirstChildTypes category is
	// keyed by another tag than the stored records.
	ReasonKeyTag Reason = "key-tag-mismatch"
	// ReasonUnsupported: the TYPE is not reference data (wraps ErrUnsupported).
	ReasonUnsupported Reason = "unsupported"
)

// RecordError reports a record that cannot be applied. Apply returns it
// before changing anything: a message is applied whole or not at all.
type RecordError struct {
	// RType is the category.
	RType string
	// Index is the 0-based position of the record in Transition.Records.
	Index int
	// Tag is the offending tag, if any.
	Tag string
	// Reason classifies the error.
	Reason Reason
	// Detail is a human-readable explanation, if any.
	Detail string
}

// Error formats e, e.g. "refdata AIRL record 1: missing key tag ITOP".
func (e *RecordError) Error() string {
	return fmt.Sprintf("refdata %s record %d: %s", e.RType, e.Index, e.Problem())
}

// Problem is the error without its position, e.g. "missing key tag ITOP".
func (e *RecordError) Problem() string {
	switch {
	case e.Reason == ReasonMissingKey && e.Detail == "":
		return "missing key tag " + e.Tag
	case e.Detail != "":
		return e.Detail
	}
	return string(e.Reason) + " " + e.Tag
}

// Unwrap makes errors.Is(err, ErrUnsupported) hold for ReasonUnsupported.
func (e *RecordError) Unwrap() error {
	if e.Reason == ReasonUnsupported {
		return ErrUnsupported
	}
	return nil
}

// Apply applies t to s in place and reports the writes the PG sink must do.
//
//   - DNLD and RESP replace the whole category: every record of the message is
//     upserted and every stored record absent from it is deleted (an empty
//     package therefore empties the category).
//   - ADD and UPD upsert each record: ADD of an existing key overwrites it, UPD
//     of a missing key creates it. The record as sent replaces the stored one
//     (SIS sends whole records; the COUL UPD sample shrinks a repeated REGC),
//     and an empty tag is stored as "" — unavailable, never a deletion.
//   - DEL removes each record by key; the record may carry only the key, and
//     DEL of a missing key is a no-op.
//   - RSTA never deletes by absence: DNLD, RESP, ADD and UPD upsert each
//     status (a new event replaces the previous one of that resource) and DEL
//     removes it, which restores the default E.
//   - Season (SCHS) never deletes by absence either: a DNLD or RESP carries
//     one season and replaces that season's record as a whole.
//
// A record equal to the stored one is not rewritten: it keeps its UpdatedAt
// and LastMsgID and is not in Upserts. When one message carries a key twice,
// the later record wins.
//
// Redelivery: if t was applied already — a normal transition with t.MsgID <=
// s.LastMsgID, a replayed one (t.Replay) not above s.Replayed
// (message.Applied) — nothing changes; Result.Replay is set and
// Upserts/Deletes repeat the writes of t.MsgID that are still current (entries
// whose LastMsgID is t.MsgID, and LastDeletes if t is the last transition
// applied), since a redelivered message may be one whose table write survived
// a crash but whose PG write did not.
//
// A replayed transition (docs/design.md#replay) is applied to the current
// state like a new one, although newer messages were applied since: the
// records it carries overwrite theirs (and a full replace deletes what it
// does not carry). s.LastMsgID stays the highest message applied.
//
// Errors leave s untouched: a *RecordError for a record that cannot be
// applied (missing key, bad RSTA value, bad window time, key-tag mismatch), an
// error wrapping ErrUnsupported for a TYPE or STYP not handled here, and a
// plain error for a nil state or a state of another RTYPE.
func Apply(s *State, t Transition) (Result, error) {
	if s == nil {
		return Result{}, errors.New("refdata: Apply on a nil state")
	}
	if !Supported(t.RType) {
		return Result{}, fmt.Errorf("%w: TYPE %q", ErrUnsupported, t.RType)
	}
	if !SupportedSTYP(t.STYP) {
		return Result{}, fmt.Errorf("%w: %s-%s", ErrUnsupported, t.RType, t.STYP)
	}
	if s.RType != "" && s.RType != t.RType {
		return Result{}, fmt.Errorf("refdata: %s transition applied to the %s state", t.RType, s.RType)
	}
	if message.Applied(s.LastMsgID, s.Replayed, t.Replay, t.MsgID) {
		return replay(s, t), nil
	}

	// Validate the whole message before touching s.
	if err := CheckKeyTag(t, s.KeyTag); err != nil {
		return Result{}, err
	}
	keys, rerr := checkRecords(t)
	if rerr != nil {
		return Result{}, rerr
	}
	keyTag := KeyTagOf(t)
	replace := replaces(t)

	// Apply.
	if s.Records == nil {
		s.Records = map[string]Entry{}
	}
	s.RType, s.KeyTag = t.RType, keyTag
	at := t.At.UTC()
	version := s.Version + 1 // the version of the records written, if anything changes
	upserts := map[string]struct{}{}
	var deletes []string
	if t.STYP == STYPDEL {
		for _, k := range keys {
			if _, ok := s.Records[k]; ok {
				delete(s.Records, k)
				deletes = append(deletes, k)
			}
		}
	} else {
		for i, rec := range t.Records {
			attrs := cloneRecord(rec)
			if e, ok := s.Records[keys[i]]; ok && reflect.DeepEqual(e.Attrs, attrs) {
				continue
			}
			s.Records[keys[i]] = Entry{Attrs: attrs, UpdatedAt: at, LastMsgID: t.MsgID, Version: version}
			upserts[keys[i]] = struct{}{}
		}
	}
	if replace {
		present := make(map[string]struct{}, len(keys))
		for _, k := range keys {
			present[k] = struct{}{}
		}
		for k := range s.Records {
			if _, ok := present[k]; !ok {
				delete(s.Records, k)
				deletes = append(deletes, k)
			}
		}
	}

	res := Result{Upserts: sortedKeys(upserts), Deletes: deletes}
	sort.Strings(res.Deletes)
	res.Changed = len(res.Upserts) > 0 || len(res.Deletes) > 0
	s.LastMsgID = max(s.LastMsgID, t.MsgID)
	if t.Replay != 0 {
		s.Replayed = &message.ReplayMark{Gen: t.Replay, MsgID: t.MsgID}
	}
	s.LastDeletes, s.LastDeletesReplay = res.Deletes, t.Replay
	if res.Changed {
		s.Version = version
		s.UpdatedAt = at
	}
	return res, nil
}

// Check validates t as Apply does before it changes anything, except for
// the one check that needs the stored state (CheckKeyTag): the TYPE and STYP
// are handled here, every record has its key and, for RSTA (but DEL), a
// STAT of E or D and a window that parses and does not end before it
// starts. The router runs it on the whole package before it emits t, so that
// Apply never rejects what was routed. The error wraps ErrUnsupported or is
// a *RecordError with the record's Index.
func Check(t Transition) error {
	if !Supported(t.RType) {
		return fmt.Errorf("%w: TYPE %q", ErrUnsupported, t.RType)
	}
	if !SupportedSTYP(t.STYP) {
		return fmt.Errorf("%w: %s-%s", ErrUnsupported, t.RType, t.STYP)
	}
	if _, rerr := checkRecords(t); rerr != nil {
		return rerr
	}
	return nil
}

// checkRecords returns the key of every record of t, or the first record
// that cannot be applied.
func checkRecords(t Transition) ([]string, *RecordError) {
	keys := make([]string, len(t.Records))
	for i, rec := range t.Records {
		key, rerr := keyOf(t.RType, rec, t.FirstChild)
		if rerr == nil && t.RType == RSTA && t.STYP != STYPDEL {
			rerr = checkStatus(rec)
		}
		if rerr != nil {
			rerr.Index = i
			return nil, rerr
		}
		keys[i] = key
	}
	return keys, nil
}

// CheckKeyTag is Apply's check of t against stored, the tag the category's
// records are keyed by (State.KeyTag; "" when nothing was applied yet): an
// incremental message of a FirstChildTypes category must key its records by
// the same tag, while a full replace may change it. Only FirstChildTypes
// can fail it (every other category has a fixed key tag). After t is
// applied, the category is keyed by KeyTagOf(t).
func CheckKeyTag(t Transition, stored string) error {
	if stored != "" && stored != KeyTagOf(t) && !replaces(t) {
		return &RecordError{RType: t.RType, Tag: t.FirstChild, Reason: ReasonKeyTag,
			Detail: fmt.Sprintf("keyed by %s but the stored records are keyed by %s", t.FirstChild, stored)}
	}
	return nil
}

// replaces reports whether t replaces its whole category: a DNLD or RESP,
// except RSTA's (never) and a season's (it replaces only the season it
// names).
func replaces(t Transition) bool {
	return (t.STYP == STYPDNLD || t.STYP == STYPRESP) && t.RType != RSTA && t.RType != Season
}

// KeyTagOf is the State.KeyTag a transition of t.RType keys by.
func KeyTagOf(t Transition) string {
	switch {
	case t.RType == RSTA:
		return StatusKey(TagRTYP, TagRSID)
	case KeyTag(t.RType) != "":
		return KeyTag(t.RType)
	}
	return t.FirstChild
}

// replay builds the Result of a transition already applied (see Apply).
func replay(s *State, t Transition) Result {
	res := Result{Replay: true}
	for k, e := range s.Records {
		if e.LastMsgID == t.MsgID {
			res.Upserts = append(res.Upserts, k)
		}
	}
	sort.Strings(res.Upserts)
	last := t.Replay == s.LastDeletesReplay && (t.Replay == 0 && t.MsgID == s.LastMsgID ||
		t.Replay != 0 && s.Replayed != nil && *s.Replayed == message.ReplayMark{Gen: t.Replay, MsgID: t.MsgID})
	if last && len(s.LastDeletes) > 0 {
		res.Deletes = append([]string(nil), s.LastDeletes...)
	}
	return res
}

func sortedKeys(m map[string]struct{}) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cloneRecord deep-copies rec so that the state never aliases the caller's
// maps, normalising nested Records to map[string]any: the shape a JSON decode
// produces, so that equal records compare equal before and after a restart.
func cloneRecord(rec Record) Record {
	if rec == nil {
		return Record{}
	}
	return Record(cloneMap(rec))
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneMap(x)
	case Record:
		return cloneMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}

// UnmarshalJSON decodes a state (the msgx-refdata table's value) with a
// non-nil Records map, so that a restored state takes records like a new
// one.
func (s *State) UnmarshalJSON(b []byte) error {
	// plain drops the method set, so json.Unmarshal does not recurse here.
	type plain State
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	if s.Records == nil {
		s.Records = map[string]Entry{}
	}
	return nil
}

// Touches returns the keys of the records t writes or deletes, sorted and
// without repeats, and whether t replaces its whole category (then it also
// deletes every stored record it does not carry). The replay dry run
// compares them with the records newer messages wrote (docs/design.md#replay).
// The error is Check's.
func Touches(t Transition) (keys []string, all bool, err error) {
	if err := Check(t); err != nil {
		return nil, false, err
	}
	ks, _ := checkRecords(t)
	set := make(map[string]struct{}, len(ks))
	for _, k := range ks {
		set[k] = struct{}{}
	}
	return sortedKeys(set), replaces(t), nil
}
