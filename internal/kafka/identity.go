package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"msgx/internal/retry"
)

// Identity names one Kafka cluster and one incarnation of its msgx.inbox
// topic: what PostgreSQL is bound to (docs/design.md#kafka-binding). The
// cluster ID alone is not enough: every embedded broker of an older msgx
// reported "kfake", and a wiped cluster keeps its ID while losing its
// topics. A topic created again (a wiped broker, a new cluster) gets a new
// topic ID, so the pair recognises both.
type Identity struct {
	// ClusterID is the cluster's ID as its metadata reports it.
	ClusterID string `json:"clusterId"`
	// InboxTopic is the internal topic's name (MSGX_TOPIC_INBOX).
	InboxTopic string `json:"inboxTopic"`
	// InboxTopicID is the topic's ID; "" when the topic does not exist.
	InboxTopicID string `json:"inboxTopicId"`
}

func (id Identity) String() string {
	topic := id.InboxTopicID
	if topic == "" {
		topic = "absent"
	}
	return fmt.Sprintf("cluster %s, %s topic id %s", id.ClusterID, id.InboxTopic, topic)
}

// Mismatch says how seen differs from the bound identity b, or "" when
// they are the same cluster and the same msgx.inbox. Pure.
func (b Identity) Mismatch(seen Identity) string {
	switch {
	case b.ClusterID != seen.ClusterID && b.InboxTopicID != seen.InboxTopicID:
		return "another Kafka cluster"
	case b.ClusterID != seen.ClusterID:
		return "another Kafka cluster ID"
	case b.InboxTopic != seen.InboxTopic:
		return "another inbox topic name"
	case seen.InboxTopicID == "":
		return "the inbox topic is missing (a wiped or another cluster)"
	case b.InboxTopicID != seen.InboxTopicID:
		return "the inbox topic was created again (a wiped or another cluster)"
	}
	return ""
}

// ReadIdentity asks the cluster for its ID and the ID of inboxTopic (""
// when the topic does not exist yet). An unreachable cluster is an outage.
func ReadIdentity(ctx context.Context, c Config, brokers []string, inboxTopic string) (Identity, error) {
	cl, err := NewKgoClient(c, brokers)
	if err != nil {
		return Identity{}, err
	}
	defer cl.Close()
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, inboxTopic)
	if err != nil {
		return Identity{}, retry.Outage("kafka", fmt.Errorf("reading the cluster identity: %w", err))
	}
	id := Identity{ClusterID: md.Cluster, InboxTopic: inboxTopic}
	if td, ok := md.Topics[inboxTopic]; ok {
		switch {
		case td.Err == nil:
			id.InboxTopicID = td.ID.String()
		case errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		default:
			return Identity{}, fmt.Errorf("reading the identity of topic %s: %w", inboxTopic, td.Err)
		}
	}
	if id.ClusterID == "" {
		return Identity{}, errors.New("the Kafka cluster reports no cluster ID: msgx cannot bind the database to it")
	}
	return id, nil
}

// newClusterID returns a random cluster ID for a new embedded broker (kfake's
// default, "kfake", is the same for every one).
func newClusterID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "msgx-" + hex.EncodeToString(b)
}
