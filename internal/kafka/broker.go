package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is the embedded single-node Kafka (kfake) msgx runs when no cluster
// is configured. It persists every topic, offset and group to its data
// directory with synced writes, so stopping and restarting msgx keeps the
// internal topic (the source of truth) and the consumer groups' positions.
type Broker struct {
	cluster *kfake.Cluster
	addr    string
}

// StartBroker starts the embedded broker listening on addr ("host:port";
// port 0 picks a free one). An empty dataDir keeps everything in memory
// (tests only). It speaks plaintext without authentication; extra kfake
// options let tests require SASL (kfake.EnableSASL, kfake.Superuser) or TLS
// (kfake.TLS).
func StartBroker(addr, dataDir string, log *slog.Logger, extra ...kfake.Opt) (*Broker, error) {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DefaultNumPartitions(1),
		// Let clients choose short session timeouts, so a crashed member's
		// partitions move on quickly.
		kfake.GroupMinSessionTimeout(time.Second),
		// Room above the producers' MSGX_KAFKA_MAX_MESSAGE_BYTES limit.
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "16777216"}),
		kfake.WithLogger(kfakeLogger{log: log}),
		// kfake listens on 127.0.0.1 by default; honour the configured host
		// so the broker can be exposed where the operator wants it.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, addr)
		}),
	}
	// Every new embedded cluster gets its own ID, so that two brokers are
	// never taken for one (docs/design.md#kafka-binding). kfake keeps it
	// in meta.json: a broker started again on its data directory reads its
	// ID back and ignores this one.
	opts = append(opts, kfake.ClusterID(newClusterID()))
	if dataDir != "" {
		if err := os.MkdirAll(dataDir, 0o750); err != nil {
			return nil, fmt.Errorf("creating kafka data dir: %w", err)
		}
		opts = append(opts, kfake.DataDir(dataDir), kfake.SyncWrites())
	}
	opts = append(opts, extra...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("starting embedded kafka on %s: %w", addr, err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) == 0 {
		c.Close()
		return nil, fmt.Errorf("embedded kafka on %s: no listener", addr)
	}
	return &Broker{cluster: c, addr: addrs[0]}, nil
}

// Addrs returns the bootstrap address list of the broker.
func (b *Broker) Addrs() []string { return []string{b.addr} }

// Close stops the broker and flushes its state to disk.
func (b *Broker) Close() { b.cluster.Close() }

// Run blocks until ctx ends, then closes the broker. It lets the broker be one
// of the components main joins.
func (b *Broker) Run(ctx context.Context) error {
	<-ctx.Done()
	b.Close()
	return nil
}

type kfakeLogger struct{ log *slog.Logger }

func (l kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var sl slog.Level
	switch level {
	case kfake.LogLevelError:
		sl = slog.LevelError
	case kfake.LogLevelWarn:
		sl = slog.LevelWarn
	default:
		// kfake logs every request at info; that is debug for an operator.
		sl = slog.LevelDebug
	}
	l.log.Log(context.Background(), sl, fmt.Sprintf(format, args...), "component", "kafka-embedded")
}
