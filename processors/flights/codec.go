package flights

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"sync"

	"msgx/tables/flight"
)

// stateCacheSize bounds the decoded table values the table codec keeps:
// between this many and twice as many (two generations), a few KB each.
const stateCacheSize = 2048

// tableCodec is the flights table's goka codec: the JSON of *flight.State,
// as kafka.JSON[flight.State] encodes it, with a bounded cache of the
// values it encoded or decoded last. goka decodes a flight's table value
// from its storage at every callback (~15 % of msgx's CPU on a backlog);
// the value is nearly always the one the previous callback of the flight
// set, so its decoding is taken from the cache, found by the bytes and
// compared with them whole: a hit is the value those very bytes decode to.
// Table values are never modified once made (flight.Apply is pure), so one
// may be handed out more than once.
type tableCodec struct {
	seed maphash.Seed

	mu       sync.Mutex
	cur, old map[uint64]cachedState
}

type cachedState struct {
	b []byte
	s *flight.State
}

// encodedState is a table value with its JSON, encoded by the caller (the
// row's table_state): the codec passes the bytes through.
type encodedState struct {
	s *flight.State
	b []byte
}

func newTableCodec() *tableCodec {
	return &tableCodec{seed: maphash.MakeSeed(), cur: map[uint64]cachedState{}}
}

// Encode implements goka.Codec for a *flight.State or an encodedState.
func (c *tableCodec) Encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case encodedState:
		c.keep(x.b, x.s)
		return x.b, nil
	case *flight.State:
		// As json.Marshal(x), without compacting the compact output again.
		b, err := x.MarshalJSON()
		if err != nil {
			return nil, err
		}
		c.keep(b, x)
		return b, nil
	}
	return nil, fmt.Errorf("flights table codec cannot encode %T", v)
}

// Decode implements goka.Codec: a *flight.State.
func (c *tableCodec) Decode(b []byte) (any, error) {
	h := maphash.Bytes(c.seed, b)
	c.mu.Lock()
	e, ok := c.cur[h]
	if !ok {
		e, ok = c.old[h]
	}
	c.mu.Unlock()
	if ok && bytes.Equal(e.b, b) {
		return e.s, nil
	}
	var s flight.State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", s, err)
	}
	// goka may reuse b: the cache keeps its own copy.
	c.keep(bytes.Clone(b), &s)
	return &s, nil
}

// keep caches s as the decoding of b, b owned by the cache from now on.
func (c *tableCodec) keep(b []byte, s *flight.State) {
	h := maphash.Bytes(c.seed, b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cur) >= stateCacheSize {
		c.old, c.cur = c.cur, make(map[uint64]cachedState, stateCacheSize)
	}
	c.cur[h] = cachedState{b: b, s: s}
}
