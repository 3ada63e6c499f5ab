package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"

	"msgx/internal/retry"
)

// DefaultInstanceID is the static member ID of an instance that does not
// set MSGX_KAFKA_INSTANCE_ID: "msgx-<host>-<8 hex digits>", the digits
// hashed from the absolute MSGX_STATE_DIR. Two instances on one host need
// their own state directories anyway (goka's local tables, the embedded
// Kafka's data), so they get distinct IDs; one instance restarted with its
// directory keeps its ID and takes its partitions back at once (KIP-345).
func DefaultInstanceID(stateDir string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	sum := sha256.Sum256([]byte(filepath.Clean(stateDir)))
	return "msgx-" + host + "-" + hex.EncodeToString(sum[:4])
}

// ErrDuplicateInstance: the broker fenced this process out of a consumer
// group because another one joined it with the same static member ID
// (group.instance.id). Retrying cannot help — the two would fence each
// other in turn and neither would get work done — so the processor stops
// (retry.Permanent) and the daemon with it.
var ErrDuplicateInstance = errors.New("another consumer registered with the same group.instance.id")

// fenceAware builds consumer groups that turn a fence for a duplicate
// instance ID into a permanent error naming MSGX_KAFKA_INSTANCE_ID.
//
// The fence reaches the member that was replaced in one of two ways: its
// JoinGroup or SyncGroup answers FENCED_INSTANCE_ID (Consume returns it), or
// its heartbeat does, and sarama only reports that on the group's error
// channel and ends the session — goka then logs it and calls Consume again
// five seconds later, which would rejoin and fence the other member in turn,
// for ever. The wrapper watches that channel too, and its next Consume
// returns the error instead of rejoining.
func fenceAware(b goka.ConsumerGroupBuilder, instanceID string) goka.ConsumerGroupBuilder {
	return func(brokers []string, group, clientID string) (sarama.ConsumerGroup, error) {
		cg, err := b(brokers, group, clientID)
		if err != nil {
			return nil, err
		}
		f := &fencedGroup{ConsumerGroup: cg, group: group, instanceID: instanceID, errs: make(chan error, InputBuffer)}
		go f.watch()
		return f, nil
	}
}

type fencedGroup struct {
	sarama.ConsumerGroup
	group, instanceID string
	errs              chan error
	fenced            atomic.Bool

	mu     sync.Mutex
	denied error              // a fetch Kafka refused for lack of an ACL
	cancel context.CancelFunc // ends the session Consume runs
}

// watch passes the group's errors on (dropping them when nobody listens,
// as sarama does) and notes a fence; it ends when the group is closed.
//
// It also ends the session on a fetch Kafka refuses for lack of an ACL
// (Read on the topic): sarama reports it only here and fetches again for
// ever, goka only logs it, and the processor would stand still while
// every check said it runs. Consume then returns the refusal, and the
// component is restarted with backoff until the ACL is granted.
func (f *fencedGroup) watch() {
	defer close(f.errs)
	for err := range f.ConsumerGroup.Errors() {
		if errors.Is(err, sarama.ErrFencedInstancedId) {
			f.fenced.Store(true)
		}
		var ce *sarama.ConsumerError
		if errors.As(err, &ce) && IsDenied(ce.Err) {
			f.mu.Lock()
			f.denied = Denied(fmt.Errorf("fetching %s/%d: %w", ce.Topic, ce.Partition, ce.Err), "Read", "Topic", ce.Topic)
			if f.cancel != nil {
				f.cancel()
			}
			f.mu.Unlock()
		}
		select {
		case f.errs <- err:
		default:
		}
	}
}

func (f *fencedGroup) Errors() <-chan error { return f.errs }

func (f *fencedGroup) Consume(ctx context.Context, topics []string, h sarama.ConsumerGroupHandler) error {
	if f.fenced.Load() {
		return f.err(sarama.ErrFencedInstancedId)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.mu.Lock()
	f.denied, f.cancel = nil, cancel
	f.mu.Unlock()
	err := f.ConsumerGroup.Consume(ctx, topics, h)
	f.mu.Lock()
	denied := f.denied
	f.cancel = nil
	f.mu.Unlock()
	switch {
	case errors.Is(err, sarama.ErrFencedInstancedId):
		f.fenced.Store(true)
		return f.err(err)
	case denied != nil:
		return denied
	case IsDenied(err):
		return Denied(fmt.Errorf("joining consumer group %s: %w", f.group, err), "Read", "Group", f.group)
	}
	return err
}

func (f *fencedGroup) err(cause error) error {
	return retry.Permanent(fmt.Errorf("MSGX_KAFKA_INSTANCE_ID=%q: %w in consumer group %s (%v): another msgx instance uses the same static member ID, "+
		"and the broker fenced this one out; give every instance its own MSGX_KAFKA_INSTANCE_ID, or leave it unset "+
		"(the default is the host name and a hash of MSGX_STATE_DIR, which differs per instance)",
		f.instanceID, ErrDuplicateInstance, f.group, cause))
}
