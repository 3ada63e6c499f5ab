package flights

import (
	"fmt"

	"msgx/tables/flight"
)

// tableCodec is the flights table's goka codec: the JSON of *flight.State,
// as kafka.JSON[flight.State] encodes it, and a value the callback
// encoded already (encodedState: spliced from the row's doc and table_state) passed through, so
// that a version is encoded once for the table and PostgreSQL.
type tableCodec struct{}

// encodedState is the JSON of a table value (json.Marshal of its
// *flight.State).
type encodedState []byte

// Encode implements goka.Codec for a *flight.State or an encodedState.
func (tableCodec) Encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case encodedState:
		return x, nil
	case *flight.State:
		// As json.Marshal(x), without compacting the compact output again.
		return x.MarshalJSON()
	}
	return nil, fmt.Errorf("flights table codec cannot encode %T", v)
}

// Decode implements goka.Codec: a *flight.State.
func (tableCodec) Decode(b []byte) (any, error) {
	// Directly: json.Unmarshal would scan the value once more to validate
	// it before calling the same method.
	var s flight.State
	if err := s.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", s, err)
	}
	return &s, nil
}
