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
	sc := c.Sarama(clientID)
	sc.Producer.Transaction.ID = txnID
	sc.Producer.Transaction.Timeout = timeout
	// sarama's default of 50 retries with a 100 ms backoff (each try up to
	// a dial timeout) would keep one commit busy for minutes of an outage;
	// the publisher retries whole batches with its own backoff instead.
	sc.Producer.Transaction.Retry.Max = 10
	sc.Producer.Transaction.Retry.Backoff = 100 * time.Millisecond
	if err := CheckD3(sc); err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducer(brokers, sc)
	if err != nil {
		return nil, retry.Outage("kafka", fmt.Errorf("creating the transactional %s producer %q (%s): %w", clientID, txnID, c.Security(), err))
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
// on partition 0 of topic, read with isolation.level=read_committed: what
// a transactional producer last committed there (found false: nothing).
// Call it after initialising the producer's ID, so that no transaction of
// that ID is still open and the last stable offset is the end of the log.
//
// It reads the partition's tail only: each transaction leaves its record
// and a marker, so the newest committed record is normally the second to
// last offset; the window grows fourfold while it holds none (aborted
// transactions at the end) until it reaches the log's start.
func LastCommitted(ctx context.Context, c Config, brokers []string, topic string, key []byte) (value []byte, found bool, err error) {
	cl, err := NewKgoClient(c, brokers)
	if err != nil {
		return nil, false, err
	}
	adm := kadm.NewClient(cl)
	offset := func(list func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
		listed, err := list(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return 0, err
		}
		o, ok := listed.Lookup(topic, 0)
		if !ok {
			return 0, fmt.Errorf("topic %s has no partition 0", topic)
		}
		return o.Offset, o.Err
	}
	// The last stable offset: read_committed consumers see nothing at or
	// beyond it.
	end, err := offset(adm.ListCommittedOffsets)
	var start int64
	if err == nil {
		start, err = offset(adm.ListStartOffsets)
	}
	cl.Close()
	if err != nil {
		return nil, false, retry.Outage("kafka", fmt.Errorf("listing the offsets of %s: %w", topic, err))
	}
	for window := int64(16); ; window *= 4 {
		from := max(start, end-window)
		if from >= end {
			return nil, false, nil
		}
		value, found, err = scanCommitted(ctx, c, brokers, topic, key, from, end)
		if err != nil || found || from == start {
			return value, found, err
		}
	}
}

// scanCommitted reads partition 0 of topic from offset from up to end (a
// last stable offset) with read_committed and returns the newest value of
// key. Control records (transaction markers) are kept so that the read
// knows when it reached end: the log's last offset before it is a marker,
// and compaction never removes a log's last batch.
func scanCommitted(ctx context.Context, c Config, brokers []string, topic string, key []byte, from, end int64) ([]byte, bool, error) {
	cl, err := NewKgoClient(c, brokers,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, false, err
	}
	defer cl.Close()
	var value []byte
	found := false
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, false, retry.Outage("kafka", fmt.Errorf("reading %s from offset %d to %d: %w", topic, from, end, err))
		}
		for _, fe := range fs.Errors() {
			return nil, false, retry.Outage("kafka", fmt.Errorf("reading %s: %w", topic, fe.Err))
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() && bytes.Equal(r.Key, key) {
				value, found = r.Value, true
			}
			if r.Offset >= end-1 {
				done = true
			}
		})
		if done {
			return value, found, nil
		}
	}
}
