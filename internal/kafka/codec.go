package kafka

import (
	"encoding/json"
	"fmt"
)

// JSON is the goka codec of a value type T carried as JSON: msgx's
// transition topics, its goka tables and its events. Encode accepts a T or
// a *T; Decode returns a *T. Types that need more than encoding/json give
// themselves Marshal/UnmarshalJSON methods (flight.State keeps its shape,
// refdata.State its Records map). The inbox records have their own codec
// (ingest.Codec: no HTML escaping, so that their size limit means what it
// says).
type JSON[T any] struct{}

// Encode implements goka.Codec.
func (JSON[T]) Encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case T:
		return json.Marshal(&x)
	case *T:
		return json.Marshal(x)
	}
	var zero T
	return nil, fmt.Errorf("codec of %T cannot encode %T", zero, v)
}

// Decode implements goka.Codec.
func (JSON[T]) Decode(b []byte) (any, error) {
	var x T
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", x, err)
	}
	return &x, nil
}
