package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/retry"
)

// NewTransactionalProducer returns a synchronous transactional producer
// for transactional ID txnID: the settings of docs/design.md#kafka-settings
// (acks=all, idempotent, one request in flight — sarama requires the last two
// of a transactional producer anyway), the TLS and SASL settings, and
// timeout as transaction.timeout.ms (the broker aborts a transaction left
// open longer). Building it initialises the producer ID (InitProducerID):
// Kafka bumps the ID's epoch, which fences every other producer with the
// same transactional ID and aborts a transaction it left open
// (docs/design.md#outbox). An unreachable cluster is an outage.
func NewTransactionalProducer(c Config, brokers []string, clientID, txnID string, timeout time.Duration) (sarama.SyncProducer, error) {
	sc := c.producer(clientID)
	sc.Producer.Transaction.ID = txnID
	sc.Producer.Transaction.Timeout = timeout
	// sarama's default of 50 retries with a 100 ms backoff (each try up to
	// a dial timeout) would keep one commit busy for minutes of an outage;
	// the publisher retries whole batches with its own backoff instead.
	sc.Producer.Transaction.Retry.Max = 10
	sc.Producer.Transaction.Retry.Backoff = 100 * time.Millisecond
	// A transaction's records are handed over at once (SendMessages):
	// flush as soon as there is something to send — what arrives while a
	// request is in flight goes into the next one — instead of lingering
	// Flush.Frequency (5 ms) at each of its two produces.
	sc.Producer.Flush.Frequency, sc.Producer.Flush.Messages, sc.Producer.Flush.Bytes = 0, 0, 0
	if err := CheckD3(sc); err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducer(brokers, sc)
	if err != nil {
		return nil, producerError(fmt.Errorf("creating the transactional %s producer %q (%s): %w", clientID, txnID, c.Security(), err), txnID)
	}
	return p, nil
}

// IsFenced reports whether err says that another producer took over this
// producer's transactional ID (PRODUCER_FENCED; INVALID_PRODUCER_EPOCH from
// a partition leader): its transaction is aborted and it must never
// produce again under that ID. A transaction the broker aborted after its
// timeout answers the same way.
func IsFenced(err error) bool { return FenceCode(err) != "" }

// FenceCode names the fencing error in err ("" if there is none); sarama
// prints PRODUCER_FENCED only as "Unknown error … Error code = 90".
func FenceCode(err error) string {
	if err == nil {
		return ""
	}
	var pe sarama.ProducerErrors
	if errors.As(err, &pe) {
		for _, e := range pe {
			if c := FenceCode(e.Err); c != "" {
				return c
			}
		}
	}
	switch {
	case errors.Is(err, sarama.ErrProducerFenced):
		return "PRODUCER_FENCED"
	case errors.Is(err, sarama.ErrInvalidProducerEpoch):
		return "INVALID_PRODUCER_EPOCH"
	}
	return ""
}

// FirstProduceError returns err with the cause of its first failed record
// when err is a batch of them (sarama's ProducerErrors only counts them).
func FirstProduceError(err error) error {
	var pe sarama.ProducerErrors
	if errors.As(err, &pe) && len(pe) > 0 {
		return fmt.Errorf("%w (first: %w)", err, pe[0].Err)
	}
	return err
}

// LastCommitted returns the value of the newest committed record with key
// on partition 0 of topic — what a consumer with isolation.level=
// read_committed reads last for it — or found false. Call it after
// initialising the writing producer's transactional ID, so that none of its
// transactions is still open.
//
// It reads the partition's tail only: each transaction leaves its record
// and a marker, so the newest committed record is normally the second to
// last offset; the window grows fourfold while it holds none, until it
// reaches the log's start.
func LastCommitted(ctx context.Context, c Config, brokers []string, topic string, key []byte) (value []byte, found bool, err error) {
	start, end, err := bounds(ctx, c, brokers, topic, 0)
	if err != nil {
		return nil, false, err
	}
	for window := int64(16); ; window *= 4 {
		from := max(start, end-window)
		if from >= end {
			return nil, false, nil
		}
		err := committedRecords(ctx, c, brokers, topic, 0, from, end, func(r *kgo.Record) {
			if bytes.Equal(r.Key, key) {
				value, found = r.Value, true
			}
		})
		if err != nil || found || from == start {
			return value, found, err
		}
	}
}

// CommittedKeys returns the keys of the committed records (as
// committedRecords decides) at offsets from … from+n-1 of a partition, by
// offset: a record of an aborted transaction, or one compaction removed, is
// missing from the map.
func CommittedKeys(ctx context.Context, c Config, brokers []string, topic string, partition int32, from int64, n int) (map[int64][]byte, error) {
	start, end, err := bounds(ctx, c, brokers, topic, partition)
	if err != nil {
		return nil, err
	}
	out := make(map[int64][]byte, n)
	if max(from, start) >= end {
		return out, nil // deleted (retention) or never written
	}
	err = committedRecords(ctx, c, brokers, topic, partition, max(from, start), end, func(r *kgo.Record) {
		if r.Offset < from+int64(n) {
			out[r.Offset] = r.Key
		}
	})
	return out, err
}

// bounds are a partition's log start offset and high watermark.
func bounds(ctx context.Context, c Config, brokers []string, topic string, partition int32) (start, end int64, err error) {
	cl, err := NewKgoClient(c, brokers)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	offset := func(list func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
		listed, err := list(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return 0, err
		}
		o, ok := listed.Lookup(topic, partition)
		if !ok {
			return 0, fmt.Errorf("topic %s has no partition %d", topic, partition)
		}
		return o.Offset, o.Err
	}
	if end, err = offset(adm.ListEndOffsets); err == nil {
		start, err = offset(adm.ListStartOffsets)
	}
	if err != nil {
		return 0, 0, retry.Outage("kafka", fmt.Errorf("listing the offsets of %s[%d]: %w", topic, partition, err))
	}
	return start, end, nil
}

// committedRecords reads a partition from offset from to end (its high
// watermark when the read began) and calls fn with every committed record:
// a non-transactional one as it is read, a transactional one when the
// COMMIT marker of its transaction is read, in offset order within a
// transaction.
//
// It does what a consumer with isolation.level=read_committed does, but
// from the records and the transaction markers (read_uncommitted, control
// records kept) instead of the client's filtering. A broker that restarts
// after a crash with a transaction open aborts it without writing a marker
// (kfake, the embedded Kafka, when `msgx run` is killed with it): a
// read_committed client then can neither tell that it reached the end of
// such a log nor trust what it is handed of that producer in the same
// fetch. The rules, per producer ID: a record waits for its transaction's
// marker; a COMMIT marker commits, an ABORT marker drops what waits with
// an epoch up to the marker's; a record with a higher epoch drops what
// waits with a lower one (the epoch was bumped: that transaction can never
// commit); whatever still waits at end is not committed. Every offset
// below the high watermark is a record or a marker, and compaction never
// removes a log's last batch, so the read knows when it is done.
func committedRecords(ctx context.Context, c Config, brokers []string, topic string, partition int32, from, end int64, fn func(*kgo.Record)) error {
	cl, err := NewKgoClient(c, brokers,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	v := resolver{pending: map[int64][]*kgo.Record{}, committed: fn}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return retry.Outage("kafka", fmt.Errorf("reading %s[%d] from offset %d to %d: %w", topic, partition, from, end, err))
		}
		for _, fe := range fs.Errors() {
			return retry.Outage("kafka", fmt.Errorf("reading %s[%d]: %w", topic, partition, fe.Err))
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end || done {
				return
			}
			v.add(kindOf(r), r)
			done = r.Offset >= end-1
		})
		if done {
			return nil
		}
	}
}

// recordKind is what resolver needs of a record.
type recordKind struct {
	control, commit, transactional bool
}

func kindOf(r *kgo.Record) recordKind {
	return recordKind{
		control: r.Attrs.IsControl(),
		// A marker's key is a version and a type (int16 each): 1 commits.
		commit:        len(r.Key) >= 4 && r.Key[2] == 0 && r.Key[3] == 1,
		transactional: r.Attrs.IsTransactional(),
	}
}

// resolver applies committedRecords' rules to a partition's records and
// markers, in offset order.
type resolver struct {
	pending   map[int64][]*kgo.Record // by producer ID, waiting for a marker
	committed func(*kgo.Record)
}

func (v *resolver) add(k recordKind, r *kgo.Record) {
	switch {
	case k.control:
		v.resolve(r.ProducerID, r.ProducerEpoch, k.commit)
	case !k.transactional:
		v.committed(r)
	default:
		v.resolve(r.ProducerID, r.ProducerEpoch-1, false)
		v.pending[r.ProducerID] = append(v.pending[r.ProducerID], r)
	}
}

// resolve ends what waits of producer pid with an epoch up to upTo:
// committed or dropped.
func (v *resolver) resolve(pid int64, upTo int16, commit bool) {
	var keep []*kgo.Record
	for _, r := range v.pending[pid] {
		switch {
		case r.ProducerEpoch > upTo:
			keep = append(keep, r)
		case commit:
			v.committed(r)
		}
	}
	v.pending[pid] = keep
}
