package refdata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"msgx/internal/kafka"
	"msgx/tables/refdata"
)

// tableCodec is the refdata table's goka codec: the JSON of
// *refdata.State, as kafka.JSON[refdata.State] encodes it, and a value the
// callback encoded already (encodedState, the JSON the category's
// ref_table_state row gets) passed through, so that a version is encoded
// once for the table and PostgreSQL.
//
// With states set, Decode hands over the state the callback encoded a
// value from when the value is the one it wrote (see ownedStates); the
// zero value decodes always.
type tableCodec struct{ states *ownedStates }

// encodedState is the JSON of a table value (json.Marshal of its
// *refdata.State).
type encodedState []byte

// Encode implements goka.Codec for a *refdata.State or an encodedState.
func (tableCodec) Encode(v any) ([]byte, error) {
	if x, ok := v.(encodedState); ok {
		return x, nil
	}
	return kafka.JSON[refdata.State]{}.Encode(v)
}

// Decode implements goka.Codec: a *refdata.State of the caller's own.
func (c tableCodec) Decode(b []byte) (any, error) {
	if s := c.states.take(b); s != nil {
		return s, nil
	}
	return kafka.JSON[refdata.State]{}.Decode(b)
}

// maxOwnedStates bounds ownedStates: one entry per category (RTYPE), of
// which the protocol has a dozen.
const maxOwnedStates = 64

// ownedStates keeps, per category, the state the callback last wrote to
// the table with the value it encoded it to. A category's value holds all
// its records: decoding it at every reference message, and encoding it a
// second time for the table, were a twentieth of msgx's CPU on a backlog
// with a few reference messages in a hundred. A value decodes to the kept
// state only when its bytes are the kept value's (compared in full), so
// nothing is returned that the table does not hold: after a rebalance, a
// recovery or a write that bypassed it the bytes differ, or are the same
// state's.
//
// refdata.Apply changes a state in place, so take hands a state over: it
// leaves the cache, and the callback gives it back with its next value
// (keep) once it is done with it. Nothing else holds it meanwhile: the
// write a transition queues takes its own copy (refdata.State.Subset, and
// the RefState's encoded JSON). In a test binary take checks that the
// state still encodes to its value.
type ownedStates struct {
	verify bool

	mu      sync.Mutex
	entries []ownedState
}

type ownedState struct {
	value []byte
	state *refdata.State
}

func newOwnedStates() *ownedStates { return &ownedStates{verify: testing.Testing()} }

// take returns, and forgets, the state value was encoded from; nil when
// it is not kept.
func (o *ownedStates) take(value []byte) *refdata.State {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	var s *refdata.State
	for i, e := range o.entries {
		// Values of other categories differ in length or within their
		// first bytes ({"rtype":"…"); bytes.Equal returns at once for the
		// slice the memory table storage was given.
		if bytes.Equal(e.value, value) {
			s = e.state
			o.entries = slices.Delete(o.entries, i, i+1)
			break
		}
	}
	o.mu.Unlock()
	if s != nil && o.verify {
		if b, err := json.Marshal(s); err != nil || !bytes.Equal(b, value) {
			panic(fmt.Sprintf("refdata: the kept state of category %s was modified after it was encoded", s.RType))
		}
	}
	return s
}

// keep gives s back with value, the table value it was encoded to: the
// caller no longer uses either.
func (o *ownedStates) keep(s *refdata.State, value []byte) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.entries = slices.DeleteFunc(o.entries, func(e ownedState) bool { return e.state.RType == s.RType })
	if len(o.entries) >= maxOwnedStates {
		o.entries = o.entries[1:]
	}
	o.entries = append(o.entries, ownedState{value: value, state: s})
}
