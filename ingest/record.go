package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"msgx/internal/kafka"
	"msgx/sink/aodb"

	"github.com/IBM/sarama"
)

// Record is one inbox row as it travels on msgx.inbox (key = MSG_ID).
// Duplicates created by a crash between produce and cursor save carry the
// same MsgID and are recognised by it downstream.
type Record struct {
	// MsgID is CMINMSGS_ID.
	MsgID int64 `json:"msgId"`
	// ReceivedAt is CMINMSGS_DATE_RECEIVED (airport local time); nil when NULL.
	ReceivedAt *time.Time `json:"receivedAt"`
	// EnqueuedAt is when the bridge produced the row (injected clock).
	EnqueuedAt time.Time `json:"enqueuedAt"`
	// Raw is the XML message, as stored in the inbox.
	Raw string `json:"raw"`
	// Oversize, when set, is the size of a row too large for a Kafka record
	// (MSGX_KAFKA_MAX_MESSAGE_BYTES): Raw is then empty and the router
	// records the message DEAD(MALFORMED) rather than ingest blocking on it.
	Oversize int `json:"oversize,omitempty"`
	// Replay is the replay generation of a record msgx replay re-injected
	// (its replay_audit id, docs/design.md#replay); 0 for a record of the
	// ingest bridge. The router decides the message under it, so that its
	// transitions are applied to the current state.
	Replay int64 `json:"replay,omitempty"`
}

// RecordEnvelope is what a msgx.inbox record needs in bytes beyond its JSON
// value: key, headers and batch overhead.
const RecordEnvelope = 1024

// MaxRawBytes is the largest message text that fits a msgx.inbox record when
// Kafka records are limited to maxMessageBytes (MSGX_KAFKA_MAX_MESSAGE_BYTES).
// The JSON envelope of a record without escapes adds less than 200 bytes
// around the text; a text with characters JSON must escape needs more, and
// is caught by the exact check in Message.
func MaxRawBytes(maxMessageBytes int) int { return maxMessageBytes - RecordEnvelope - 256 }

// recordLimit is how large a record's JSON value may be for records limited
// to maxMessageBytes; 0 or less means no limit.
func recordLimit(maxMessageBytes int) int { return maxMessageBytes - RecordEnvelope }

// worstTime is the longest time a record carries (RFC 3339 with nanoseconds
// and a zone offset).
var worstTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(11*3600+59*60)))

// Fits reports whether raw, as stored in the inbox, fits a msgx.inbox record
// limited to maxMessageBytes (0: no limit) whatever its ID and times: the
// check Message makes, for a row that does not exist yet (the compatibility
// endpoint answers 413 rather than 200 for a message the bridge would
// record DEAD raw-too-large).
func Fits(raw string, maxMessageBytes int) bool {
	limit := recordLimit(maxMessageBytes)
	if limit <= 0 {
		return true
	}
	if len(raw) > limit {
		return false
	}
	at := worstTime
	v, err := Record{MsgID: math.MaxInt64, ReceivedAt: &at, EnqueuedAt: at, Raw: raw}.Marshal()
	return err == nil && len(v) <= limit
}

// Message returns the msgx.inbox record of inbox row r enqueued at now. A
// row whose record would exceed maxMessageBytes becomes an oversize marker
// (oversize is true): the broker would refuse the record forever and hold
// the whole inbox behind it, so the router gets the marker instead and
// records the message DEAD(MALFORMED) with the size.
func Message(r aodb.Row, topic string, now time.Time, maxMessageBytes int) (m *sarama.ProducerMessage, oversize bool, err error) {
	return ReplayMessage(r, topic, 0, now, maxMessageBytes)
}

// ReplayMessage is Message for the re-injection of a replay of generation
// gen (Record.Replay).
func ReplayMessage(r aodb.Row, topic string, gen int64, now time.Time, maxMessageBytes int) (m *sarama.ProducerMessage, oversize bool, err error) {
	rec := Record{MsgID: r.ID, ReceivedAt: r.ReceivedAt, EnqueuedAt: now, Raw: r.Raw, Replay: gen}
	v, err := rec.Marshal()
	if err != nil {
		return nil, false, fmt.Errorf("encoding inbox record %d: %w", r.ID, err)
	}
	if limit := recordLimit(maxMessageBytes); limit > 0 && len(v) > limit {
		rec.Raw, rec.Oversize = "", len(r.Raw)
		if v, err = rec.Marshal(); err != nil {
			return nil, false, fmt.Errorf("encoding inbox record %d: %w", r.ID, err)
		}
		oversize = true
	}
	return &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(rec.Key()), Value: sarama.ByteEncoder(v)}, oversize, nil
}

// Key returns the record's Kafka key, the decimal MSG_ID.
func (r Record) Key() string { return strconv.FormatInt(r.MsgID, 10) }

// Marshal encodes the record as JSON without HTML escaping: the XML's <, >
// and & stay one byte each, so the record is barely larger than its row.
func (r Record) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Codec encodes Records as JSON; it implements goka.Codec for the router.
type Codec struct{}

// Encode implements goka.Codec.
func (Codec) Encode(v any) ([]byte, error) {
	switch r := v.(type) {
	case Record:
		return r.Marshal()
	case *Record:
		return r.Marshal()
	}
	return nil, fmt.Errorf("ingest codec: cannot encode %T", v)
}

// Decode implements goka.Codec.
func (Codec) Decode(b []byte) (any, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decoding inbox record: %w", err)
	}
	return &r, nil
}

// TopicSpec is how msgx.inbox must look: one partition (global FIFO) and, by
// default, records kept forever because the topic is the source of truth.
func (c Config) TopicSpec() kafka.TopicSpec {
	ret := c.Retention
	if ret == 0 {
		ret = -1
	}
	return kafka.TopicSpec{Name: c.Topic, Partitions: 1, Retention: ret}
}
