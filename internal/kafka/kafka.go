package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"msgx/internal/retry"
)

// Config is how msgx talks to Kafka.
type Config struct {
	// Brokers are the bootstrap addresses (host:port, comma-separated) of a
	// Kafka cluster. Empty (the default): msgx run starts the embedded
	// Kafka, which is for development only.
	Brokers []string `env:"MSGX_KAFKA_BROKERS" envSeparator:","`
	// EmbeddedAddr is where the embedded broker listens (host:port) so outside
	// clients such as kcat can read the topics.
	EmbeddedAddr string `env:"MSGX_EMBEDDED_KAFKA_ADDR" envDefault:"127.0.0.1:9092"`
	// Version is the Kafka version the clients assume of the brokers: the
	// request versions they send follow it. The default is Kafka 4's
	// first release, which the embedded Kafka speaks too; a cluster of
	// Kafka 3 needs its own version here (a newer one may send requests
	// it does not know). At least 2.3.0: msgx's consumer groups use static
	// membership (KIP-345), and Kafka 4 answers no request older than
	// Kafka 2.1's (KIP-896).
	Version string `env:"MSGX_KAFKA_VERSION" envDefault:"4.0.0"`
	// Prefix goes before the name of every consumer group and topic msgx
	// uses (the goka groups, their table topics, and the default
	// MSGX_TOPIC_* names), so that deployments with different prefixes
	// share a cluster without meeting; empty (the default) keeps the plain
	// names. Letters, digits, '.', '_' and '-' only (e.g. "t2."). A
	// MSGX_TOPIC_* set is used as written: put ${MSGX_KAFKA_PREFIX} in it to
	// keep the prefix.
	Prefix string `env:"MSGX_KAFKA_PREFIX"`
	// Replication is the replication factor of every topic msgx creates, in
	// replicas (1 on the embedded single broker; 3 is typical on a real
	// cluster).
	Replication int `env:"MSGX_KAFKA_REPLICATION" envDefault:"1"`
	// Acks must be "all": a record counts as written once every in-sync
	// replica has it (decision D3, docs/design.md#kafka-settings); start-up
	// refuses anything else.
	Acks string `env:"MSGX_KAFKA_ACKS" envDefault:"all"`
	// Idempotent must be true: the producers' retries write no duplicates
	// (D3, docs/design.md#kafka-settings); start-up refuses false.
	Idempotent bool `env:"MSGX_KAFKA_IDEMPOTENT" envDefault:"true"`
	// MaxInFlight must be 1, in requests: per-partition order even across
	// retries (D3, docs/design.md#kafka-settings); start-up refuses more.
	MaxInFlight int `env:"MSGX_KAFKA_MAX_IN_FLIGHT" envDefault:"1"`
	// Timeout bounds a produce or admin round trip.
	Timeout time.Duration `env:"MSGX_KAFKA_TIMEOUT" envDefault:"10s"`
	// SessionTimeout is how long the group coordinator waits for a silent
	// member (a crashed process) before giving its partitions to another.
	SessionTimeout time.Duration `env:"MSGX_KAFKA_SESSION_TIMEOUT" envDefault:"10s"`
	// RebalanceTimeout bounds how long a rebalance waits for members to
	// rejoin; callbacks watch goka's context, so they never hold one up long.
	RebalanceTimeout time.Duration `env:"MSGX_KAFKA_REBALANCE_TIMEOUT" envDefault:"20s"`
	// MaxMessageBytes is the largest record msgx produces, in bytes: at most
	// the brokers' message.max.bytes. An inbox row too large for it is
	// recorded as DEAD (MALFORMED, raw-too-large) instead of blocking
	// ingest.
	MaxMessageBytes int `env:"MSGX_KAFKA_MAX_MESSAGE_BYTES" envDefault:"1000000"`
	// InstanceID makes this process a static member of its consumer groups
	// (KIP-345): a restarted process takes its partitions back at once
	// instead of waiting for a rebalance. It must be unique per instance
	// and stable across its restarts. Empty (the default): the daemon takes
	// msgx-<host name>-<hash of MSGX_STATE_DIR> (DefaultInstanceID), so
	// instances on one host differ by their state directories. A duplicate
	// is fenced by the broker and stops with one ERROR line.
	InstanceID string `env:"MSGX_KAFKA_INSTANCE_ID"`
	// TableStorage is where the processors keep their goka tables (the
	// flights and the reference data): "memory" (the default; "" alike)
	// holds them in memory only, recovered from their changelog topics at
	// every start (a few seconds per 100,000 flights; about 1.5 KB of
	// memory per flight); "disk" keeps them in LevelDB under
	// MSGX_STATE_DIR/goka, read back at once after a restart, at the cost of
	// LevelDB's compactions as the tables grow (a fifth of msgx's CPU with
	// 100,000 flights). docs/benchmarks.md has the figures.
	TableStorage string `env:"MSGX_TABLE_STORAGE" envDefault:"memory"`

	// TLS makes every client msgx builds connect to the brokers over TLS;
	// the other TLS settings require it (docs/operations.md#kafka-tls-and-sasl).
	TLS bool `env:"MSGX_KAFKA_TLS" envDefault:"false"`
	// TLSCA is a PEM file of the CA certificates the brokers' certificates
	// must chain to. Empty (the default): the system's trusted roots.
	TLSCA string `env:"MSGX_KAFKA_TLS_CA"`
	// TLSCert is a PEM file of the client certificate, for brokers that
	// authenticate clients by certificate (ssl.client.auth=required); its
	// subject is msgx's principal for the ACLs. Empty (the default): none.
	// With MSGX_KAFKA_TLS_KEY: both or neither.
	TLSCert string `env:"MSGX_KAFKA_TLS_CERT"`
	// TLSKey is a PEM file of the client certificate's private key
	// (unencrypted). Empty (the default): none.
	TLSKey string `env:"MSGX_KAFKA_TLS_KEY"`
	// TLSServerName is the name the brokers' certificates are checked
	// against. Empty (the default): the host of each broker address.
	TLSServerName string `env:"MSGX_KAFKA_TLS_SERVER_NAME"`
	// TLSInsecureSkipVerify accepts any broker certificate: a test aid,
	// refused with MSGX_ENV=production.
	TLSInsecureSkipVerify bool `env:"MSGX_KAFKA_TLS_INSECURE_SKIP_VERIFY" envDefault:"false"`
	// SASLMechanism authenticates every connection: PLAIN, SCRAM-SHA-256 or
	// SCRAM-SHA-512. Empty (the default): no SASL. PLAIN without TLS is
	// refused with MSGX_ENV=production.
	SASLMechanism string `env:"MSGX_KAFKA_SASL_MECHANISM"`
	// SASLUser is the SASL user name. Empty (the default): none; a
	// mechanism needs one.
	SASLUser string `env:"MSGX_KAFKA_SASL_USER"`
	// SASLPassword is the SASL password, never logged. Empty (the default):
	// none. With a mechanism, exactly one of it and
	// MSGX_KAFKA_SASL_PASSWORD_FILE.
	SASLPassword Secret `env:"MSGX_KAFKA_SASL_PASSWORD"`
	// SASLPasswordFile names a file holding the SASL password (one trailing
	// newline is ignored): the password stays out of the environment.
	// Empty (the default): none.
	SASLPasswordFile string `env:"MSGX_KAFKA_SASL_PASSWORD_FILE"`
}

// Embedded reports whether msgx must run its own broker.
func (c Config) Embedded() bool { return len(c.Brokers) == 0 }

// Validate refuses anything but the producer settings of
// docs/design.md#kafka-settings, and bad values.
func (c Config) Validate() error {
	var errs []error
	if !strings.EqualFold(c.Acks, "all") && c.Acks != "-1" {
		errs = append(errs, fmt.Errorf("MSGX_KAFKA_ACKS=%q: Kafka producers must use acks=all (docs/design.md#kafka-settings)", c.Acks))
	}
	if !c.Idempotent {
		errs = append(errs, errors.New("MSGX_KAFKA_IDEMPOTENT=false: Kafka producers must be idempotent (docs/design.md#kafka-settings)"))
	}
	if c.MaxInFlight != 1 {
		errs = append(errs, fmt.Errorf("MSGX_KAFKA_MAX_IN_FLIGHT=%d: Kafka producers must use max.in.flight=1 (docs/design.md#kafka-settings)", c.MaxInFlight))
	}
	if c.TableStorage != "" && c.TableStorage != TableMemory && c.TableStorage != TableDisk {
		errs = append(errs, fmt.Errorf("MSGX_TABLE_STORAGE=%q: want %s or %s", c.TableStorage, TableMemory, TableDisk))
	}
	if err := CheckPrefix(c.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("MSGX_KAFKA_PREFIX: %w", err))
	}
	if v, err := sarama.ParseKafkaVersion(c.Version); err != nil {
		errs = append(errs, fmt.Errorf("MSGX_KAFKA_VERSION: %w", err))
	} else if !v.IsAtLeast(sarama.V2_3_0_0) {
		errs = append(errs, fmt.Errorf("MSGX_KAFKA_VERSION=%s is older than 2.3.0: msgx's consumer groups need static membership (Kafka 2.3), "+
			"and Kafka 4 answers no request older than Kafka 2.1's; set the brokers' version", c.Version))
	}
	if c.Replication < 1 {
		errs = append(errs, errors.New("MSGX_KAFKA_REPLICATION: must be at least 1"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("MSGX_KAFKA_TIMEOUT: must be positive"))
	}
	if c.SessionTimeout < time.Second {
		errs = append(errs, errors.New("MSGX_KAFKA_SESSION_TIMEOUT: must be at least 1s"))
	}
	if c.MaxMessageBytes < 64<<10 {
		errs = append(errs, errors.New("MSGX_KAFKA_MAX_MESSAGE_BYTES: must be at least 65536"))
	}
	if c.RebalanceTimeout < time.Second {
		errs = append(errs, errors.New("MSGX_KAFKA_REBALANCE_TIMEOUT: must be at least 1s"))
	}
	for _, b := range c.Brokers {
		if !strings.Contains(b, ":") {
			errs = append(errs, fmt.Errorf("MSGX_KAFKA_BROKERS: %q is not host:port", b))
		}
	}
	if c.Embedded() && !strings.Contains(c.EmbeddedAddr, ":") {
		errs = append(errs, fmt.Errorf("MSGX_EMBEDDED_KAFKA_ADDR: %q is not host:port", c.EmbeddedAddr))
	}
	errs = append(errs, c.securityErrors()...)
	return errors.Join(errs...)
}

// Sarama returns a client configuration with the producer settings of
// docs/design.md#kafka-settings, consumers starting at the oldest offset and
// the TLS and SASL settings. goka's default (newest) silently skips every
// record written before a group first starts. Every sarama client msgx
// builds starts from it.
func (c Config) Sarama(clientID string) *sarama.Config {
	sc := sarama.NewConfig()
	sc.ClientID = clientID
	if v, err := sarama.ParseKafkaVersion(c.Version); err == nil {
		sc.Version = v
	}
	sc.Net.DialTimeout = c.Timeout
	// A JoinGroup request blocks up to the rebalance timeout: reads must
	// wait longer than that.
	sc.Net.ReadTimeout = max(3*c.Timeout, c.RebalanceTimeout+c.Timeout)
	sc.Net.WriteTimeout = c.Timeout
	sc.Metadata.Retry.Max = 5
	sc.Metadata.Retry.Backoff = 500 * time.Millisecond

	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Idempotent = c.Idempotent
	sc.Net.MaxOpenRequests = c.MaxInFlight
	sc.Producer.Return.Successes = true
	sc.Producer.Return.Errors = true
	sc.Producer.Retry.Max = 10
	sc.Producer.Retry.Backoff = 250 * time.Millisecond
	sc.Producer.Timeout = c.Timeout
	sc.Producer.Compression = sarama.CompressionNone
	sc.Producer.Flush.Frequency = 5 * time.Millisecond
	sc.Producer.Flush.MaxMessages = 1000
	// Batches are split to stay under this; one record above it would be
	// refused by the broker forever.
	sc.Producer.MaxMessageBytes = c.MaxMessageBytes

	sc.Consumer.Return.Errors = true
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	// A callback may block for minutes while the head of the queue is retried;
	// the group keeps its partition meanwhile (docs/design.md#goka-facts).
	sc.Consumer.MaxProcessingTime = 10 * time.Minute
	sc.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	if c.SessionTimeout > 0 {
		sc.Consumer.Group.Session.Timeout = c.SessionTimeout
		sc.Consumer.Group.Heartbeat.Interval = c.SessionTimeout / 3
	}
	if c.RebalanceTimeout > 0 {
		sc.Consumer.Group.Rebalance.Timeout = c.RebalanceTimeout
	}
	sc.Consumer.Group.InstanceId = c.instanceID()
	c.secureSarama(sc)
	return sc
}

// producer is Sarama's configuration for a producer: a produce request
// is answered within Producer.Timeout (MSGX_KAFKA_TIMEOUT), so its read
// waits that and a margin, not the consumer groups' longer bound (a
// JoinGroup may wait out a rebalance). A broker frozen mid-request (a GC
// pause, SIGSTOP) holds a producer no longer than that: by then Kafka has
// usually moved the partition's leadership, which the retry finds — the
// fault campaign's frozen broker held ingest for the full 30 s before.
func (c Config) producer(clientID string) *sarama.Config {
	sc := c.Sarama(clientID)
	sc.Net.ReadTimeout = c.Timeout + 5*time.Second
	return sc
}

func (c Config) instanceID() string {
	if c.InstanceID != "" {
		return c.InstanceID
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return ""
	}
	return "msgx-" + host
}

// CheckD3 verifies a built sarama configuration really carries the producer
// settings of docs/design.md#kafka-settings (the original design's decision
// D3); start-up calls it on every producer configuration it creates.
func CheckD3(sc *sarama.Config) error {
	if sc.Producer.RequiredAcks != sarama.WaitForAll || !sc.Producer.Idempotent || sc.Net.MaxOpenRequests != 1 {
		return fmt.Errorf("kafka producer %q is not D3 (acks=%d idempotent=%v max.in.flight=%d)",
			sc.ClientID, sc.Producer.RequiredAcks, sc.Producer.Idempotent, sc.Net.MaxOpenRequests)
	}
	return nil
}

// SlogAdapter routes goka's and sarama's printf-style logs to slog at a
// fixed level (sarama is chatty: debug; goka reports group changes: info).
type SlogAdapter struct {
	Log   *slog.Logger
	Level slog.Level
}

// Print implements sarama.StdLogger and goka.Logger.
func (a SlogAdapter) Print(v ...any) { a.emit(fmt.Sprint(v...)) }

// Println implements sarama.StdLogger and goka.Logger.
func (a SlogAdapter) Println(v ...any) { a.emit(fmt.Sprintln(v...)) }

// Printf implements sarama.StdLogger and goka.Logger.
func (a SlogAdapter) Printf(format string, v ...any) { a.emit(fmt.Sprintf(format, v...)) }

func (a SlogAdapter) emit(msg string) {
	a.Log.Log(context.Background(), a.Level, strings.TrimSpace(msg))
}

// NewSyncProducer returns a synchronous producer with the settings of
// docs/design.md#kafka-settings (acks=all, idempotent, one request in flight),
// checked before it is built. clientID names it to the brokers (msgx-ingest,
// msgx-publisher, …). An unreachable cluster is an outage (retry.IsOutage):
// callers retry it.
func NewSyncProducer(c Config, brokers []string, clientID string) (sarama.SyncProducer, error) {
	sc := c.producer(clientID)
	if err := CheckD3(sc); err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducer(brokers, sc)
	if err != nil {
		return nil, producerError(fmt.Errorf("creating the %s producer (%s): %w", clientID, c.Security(), err), "")
	}
	return p, nil
}

// producerError is the error of building a producer: a refusal for lack of
// an ACL (the idempotent producer's InitProducerId needs IdempotentWrite on
// the cluster, or Write on a topic; a transactional one Write on its
// transactional ID txnID) as a DeniedError, anything else an outage.
func producerError(err error, txnID string) error {
	if IsDenied(err) {
		return Denied(err, "Write", "TransactionalId", txnID)
	}
	return retry.Outage("kafka", err)
}
