package event

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"msgx/sink"
)

// position is the record the exactly-once publisher commits in the same
// Kafka transaction as a batch's events, to the position topic under its
// transactional ID (docs/design.md#outbox). It says exactly which outbox
// rows the transaction took care of, so that a publisher starting after a
// crash between the Kafka commit and the PostgreSQL delete can delete them
// without publishing them again:
//
//   - LastID is the position proper, the batch's last event_outbox id. It
//     is not enough on its own: ids are taken when a flights transaction
//     inserts its rows, and transactions commit in another order, so a row
//     with a smaller id can become visible after a larger one was published;
//     deleting every row at or below LastID would drop it unpublished.
//   - Rows are the ids of every row of the batch, published or skipped as a
//     duplicate, as [first, last] ranges (a batch is mostly one range).
//   - Digest is a hash of those rows' content: a row with one of those ids
//     that is not the row published (PostgreSQL restored from a backup, its
//     sequence behind the ids Kafka saw) does not match, and is published
//     again instead of being deleted.
//   - Events say where each published row landed (topic, partition,
//     offset), as runs of consecutive ids and offsets: what msg_event records.
type position struct {
	Version     int        `json:"v"`
	LastID      int64      `json:"lastOutboxId"`
	Rows        [][2]int64 `json:"rows"`
	Digest      string     `json:"digest"`
	Topics      []string   `json:"topics"`
	Events      []run      `json:"events"`
	CommittedAt time.Time  `json:"at"`
}

// run is n published rows with ids ID, ID+1, … that landed at offsets
// Offset, Offset+1, … of one partition (Topic indexes position.Topics).
type run struct {
	ID        int64 `json:"id"`
	N         int   `json:"n"`
	Topic     int   `json:"t"`
	Partition int32 `json:"p"`
	Offset    int64 `json:"o"`
}

const positionVersion = 1

// positionRowBytes bounds the JSON one row adds to a position (a range and
// a run of its own, every number at its widest); positionSlack the rest.
const (
	positionRowBytes = 128
	positionSlack    = 4096
)

// maxTransactionRows is the most outbox rows one transaction may carry so
// that its position record stays within maxBytes (MSGX_KAFKA_MAX_MESSAGE_BYTES).
func maxTransactionRows(maxBytes int) int {
	return max(1, (maxBytes-positionSlack)/positionRowBytes)
}

// newPosition describes a batch: all its rows in id order, and where the
// published ones landed.
func newPosition(all []sink.OutboxRow, produced []sink.Produced, at time.Time) position {
	p := position{Version: positionVersion, Digest: digest(all), CommittedAt: at, Rows: [][2]int64{}, Topics: []string{}, Events: []run{}}
	for _, r := range all {
		if n := len(p.Rows); n > 0 && p.Rows[n-1][1]+1 == r.ID {
			p.Rows[n-1][1] = r.ID
		} else {
			p.Rows = append(p.Rows, [2]int64{r.ID, r.ID})
		}
		p.LastID = max(p.LastID, r.ID)
	}
	topics := map[string]int{}
	for _, e := range produced {
		t, ok := topics[e.Event.Topic]
		if !ok {
			t = len(p.Topics)
			topics[e.Event.Topic] = t
			p.Topics = append(p.Topics, e.Event.Topic)
		}
		if n := len(p.Events); n > 0 {
			last := &p.Events[n-1]
			if last.Topic == t && last.Partition == e.Partition &&
				last.ID+int64(last.N) == e.ID && last.Offset+int64(last.N) == e.Offset {
				last.N++
				continue
			}
		}
		p.Events = append(p.Events, run{ID: e.ID, N: 1, Topic: t, Partition: e.Partition, Offset: e.Offset})
	}
	return p
}

// ids are the outbox ids of every row of the batch, ascending.
func (p position) ids() []int64 {
	var out []int64
	for _, r := range p.Rows {
		for id := r[0]; id <= r[1]; id++ {
			out = append(out, id)
		}
	}
	return out
}

// check verifies that rows (what PostgreSQL holds of p.ids()) are exactly
// the batch p describes.
func (p position) check(rows []sink.OutboxRow) error {
	if p.Version != positionVersion {
		return fmt.Errorf("position record version %d, this msgx reads %d", p.Version, positionVersion)
	}
	if n := len(p.ids()); len(rows) != n {
		return fmt.Errorf("%d of the batch's %d outbox rows are in PostgreSQL", len(rows), n)
	}
	if d := digest(rows); d != p.Digest {
		return fmt.Errorf("the outbox rows with the batch's ids differ from what it published (digest %s, published %s)", d[:12], p.Digest[:min(12, len(p.Digest))])
	}
	return nil
}

// split returns, for rows that passed check, the published ones with where
// they landed and the ids of the others (skipped as duplicates).
func (p position) split(rows []sink.OutboxRow) (produced []sink.Produced, skipped []int64, err error) {
	type at struct {
		topic     string
		partition int32
		offset    int64
	}
	where := map[int64]at{}
	for _, r := range p.Events {
		if r.Topic < 0 || r.Topic >= len(p.Topics) || r.N < 1 {
			return nil, nil, fmt.Errorf("position record: bad run %+v", r)
		}
		for i := 0; i < r.N; i++ {
			where[r.ID+int64(i)] = at{p.Topics[r.Topic], r.Partition, r.Offset + int64(i)}
		}
	}
	for _, r := range rows {
		w, ok := where[r.ID]
		switch {
		case !ok:
			skipped = append(skipped, r.ID)
		case w.topic != r.Event.Topic:
			return nil, nil, fmt.Errorf("position record: row %d published to %s, the outbox says %s", r.ID, w.topic, r.Event.Topic)
		default:
			produced = append(produced, sink.Produced{ID: r.ID, Event: r.Event, Partition: w.partition, Offset: w.offset})
		}
	}
	return produced, skipped, nil
}

// digest hashes the rows' ids and contents in order (lengths prefix every
// variable field, so no two different batches encode alike).
func digest(rows []sink.OutboxRow) string {
	h := sha256.New()
	var b [8]byte
	num := func(v int64) {
		binary.BigEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	bytes := func(v []byte, null bool) {
		if null {
			num(-1)
			return
		}
		num(int64(len(v)))
		h.Write(v)
	}
	for _, r := range rows {
		num(r.ID)
		bytes([]byte(r.Event.Topic), false)
		bytes([]byte(r.Event.Key), false)
		bytes(r.Event.Value, r.Event.Value == nil)
		num(r.Event.MsgID)
		num(r.Event.StateVersion)
	}
	return hex.EncodeToString(h.Sum(nil))
}
