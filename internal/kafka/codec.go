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

// Encode implements goka.Codec. A type with its own MarshalJSON is encoded
// by it directly: json.Marshal would scan its output once more to
// validate and compact it (flight.State and flight.Transition write
// compact JSON by hand, at every transition).
func (JSON[T]) Encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case T:
		return marshal(&x)
	case *T:
		return marshal(x)
	}
	var zero T
	return nil, fmt.Errorf("codec of %T cannot encode %T", zero, v)
}

func marshal[T any](x *T) ([]byte, error) {
	if m, ok := any(x).(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	return json.Marshal(x)
}

// Decode implements goka.Codec. A type with its own UnmarshalJSON is
// decoded by it directly, which must then refuse what is not JSON (both
// msgx's do: flight's hand-written decoders read strictly and leave the
// rest to encoding/json, refdata.State's is encoding/json's).
func (JSON[T]) Decode(b []byte) (any, error) {
	var x T
	var err error
	if u, ok := any(&x).(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(b)
	} else {
		err = json.Unmarshal(b, &x)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding %T: %w", x, err)
	}
	return &x, nil
}
