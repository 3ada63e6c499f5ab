package flight

import (
	"encoding/json"
	"fmt"
)

// TransitionCodec is the goka codec of msgx.flight-transitions: JSON of a
// Transition. It satisfies goka.Codec structurally.
type TransitionCodec struct{}

// Encode implements goka.Codec.
func (TransitionCodec) Encode(v any) ([]byte, error) {
	switch t := v.(type) {
	case Transition:
		return json.Marshal(t)
	case *Transition:
		return json.Marshal(t)
	}
	return nil, fmt.Errorf("flight: TransitionCodec cannot encode %T", v)
}

// Decode implements goka.Codec.
func (TransitionCodec) Decode(b []byte) (any, error) {
	var t Transition
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("decoding flight transition: %w", err)
	}
	return &t, nil
}

// StateCodec is the goka codec of the msgx-flights table: JSON of a State
// including its bookkeeping.
type StateCodec struct{}

// Encode implements goka.Codec.
func (StateCodec) Encode(v any) ([]byte, error) {
	switch s := v.(type) {
	case State:
		return json.Marshal(&s)
	case *State:
		return json.Marshal(s)
	}
	return nil, fmt.Errorf("flight: StateCodec cannot encode %T", v)
}

// Decode implements goka.Codec.
func (StateCodec) Decode(b []byte) (any, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding flight state: %w", err)
	}
	return &s, nil
}

// EventCodec is the codec of the msg topic: JSON of an Event.
type EventCodec struct{}

// Encode implements goka.Codec.
func (EventCodec) Encode(v any) ([]byte, error) {
	switch e := v.(type) {
	case Event:
		return json.Marshal(e)
	case *Event:
		return json.Marshal(e)
	}
	return nil, fmt.Errorf("flight: EventCodec cannot encode %T", v)
}

// Decode implements goka.Codec.
func (EventCodec) Decode(b []byte) (any, error) {
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("decoding flight event: %w", err)
	}
	return &e, nil
}
