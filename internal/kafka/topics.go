package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"

	"msgx/internal/clock"
	"msgx/internal/retry"
)

// TableRecordBytes is the largest goka table record msgx writes: one value
// of msgx-refdata-table holds a whole reference category, larger than a
// broker's default message.max.bytes. Table topics are created with this
// topic-level max.message.bytes and goka's producer may use it.
const TableRecordBytes = 16 << 20

// TopicSpec is how one topic must look.
type TopicSpec struct {
	Name       string
	Partitions int32
	// Compact selects cleanup.policy=compact (goka tables, latest-state topics).
	Compact bool
	// MaxMessageBytes sets the topic's max.message.bytes (0: broker default).
	MaxMessageBytes int
	// Retention: negative keeps records forever (retention.ms=-1), zero leaves
	// the broker default.
	Retention time.Duration
	// Segment sets segment.ms (0: broker default): compaction never cleans
	// a topic's active segment.
	Segment time.Duration
}

func (s TopicSpec) configEntries() map[string]*string {
	entries := map[string]*string{}
	policy := "delete"
	if s.Compact {
		policy = "compact"
	}
	entries["cleanup.policy"] = &policy
	if s.MaxMessageBytes > 0 {
		v := strconv.Itoa(s.MaxMessageBytes)
		entries["max.message.bytes"] = &v
	}
	switch {
	case s.Retention < 0:
		v := "-1"
		entries["retention.ms"] = &v
	case s.Retention > 0:
		v := strconv.FormatInt(s.Retention.Milliseconds(), 10)
		entries["retention.ms"] = &v
	}
	if s.Segment > 0 {
		v := strconv.FormatInt(s.Segment.Milliseconds(), 10)
		entries["segment.ms"] = &v
	}
	return entries
}

// CheckTopicName refuses what Kafka does not accept as a topic name: more
// than 249 characters, "." or "..", or a character other than an ASCII
// letter, a digit, '.', '_' and '-'.
func CheckTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a topic name", name)
	case len(name) > 249:
		return fmt.Errorf("%q is longer than Kafka's 249 characters", name)
	}
	return CheckPrefix(name)
}

// CheckPrefix refuses a character Kafka does not take in a topic name, in
// a prefix of names (MSGX_KAFKA_PREFIX; its length counts in the names).
func CheckPrefix(s string) error {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q has %q: Kafka names take only ASCII letters, digits, '.', '_' and '-'", s, r)
		}
	}
	return nil
}

// EnsureTopics creates every missing topic with its partitions, replication
// and cleanup policy, and refuses an existing topic that is not what msgx
// needs (TopicSpec.Check: its partition count, its cleanup policy, the
// inbox's retention) with one line naming the topic and what to change:
// goka does not create output topics, and an emit to a missing topic stops
// the whole processor (docs/design.md#goka-facts). An existing topic with
// less replication than MSGX_KAFKA_REPLICATION is only warned about (msgx
// never changes an existing topic). A request Kafka refuses for lack of an
// ACL is a DeniedError naming the operation and the topic.
func EnsureTopics(brokers []string, c Config, specs []TopicSpec, log *slog.Logger) error {
	admin, err := newAdmin(brokers, c)
	if err != nil {
		return err
	}
	defer admin.Close()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	// Only msgx's own topics are asked about: a shared cluster may hold
	// thousands of others, which msgx's user need not see.
	md, err := admin.DescribeTopics(names)
	if err != nil {
		return fmt.Errorf("describing kafka topics: %w", err)
	}
	existing := map[string]*sarama.TopicMetadata{}
	for _, t := range md {
		switch {
		case errors.Is(t.Err, sarama.ErrNoError):
			existing[t.Name] = t
		case errors.Is(t.Err, sarama.ErrUnknownTopicOrPartition):
		default:
			return Denied(fmt.Errorf("describing kafka topic %s: %w", t.Name, t.Err), "Describe", "Topic", t.Name)
		}
	}
	var resources []*sarama.ConfigResource
	for _, s := range specs {
		if existing[s.Name] != nil {
			resources = append(resources, &sarama.ConfigResource{Type: sarama.TopicResource, Name: s.Name,
				ConfigNames: []string{"cleanup.policy", "retention.ms"}})
		}
	}
	configs := map[string]map[string]string{}
	if len(resources) > 0 {
		res, err := admin.DescribeConfigs(resources, sarama.DescribeConfigsOptions{})
		if err != nil {
			return fmt.Errorf("describing the configuration of kafka topics: %w", err)
		}
		for _, r := range res {
			if errors.Is(r.ErrorCode, sarama.ErrUnknownTopicOrPartition) {
				// The controller knows the topic, the broker that answered
				// not yet: Kafka's metadata reaches the brokers a moment
				// after a topic is created.
				return retry.Outage("kafka", fmt.Errorf("describing kafka topic %s: %w (just created: not on every broker yet)", r.Name, r.ErrorCode))
			}
			if !errors.Is(r.ErrorCode, sarama.ErrNoError) {
				return Denied(fmt.Errorf("describing the configuration of kafka topic %s: %w", r.Name, r.ErrorCode), "DescribeConfigs", "Topic", r.Name)
			}
			configs[r.Name] = map[string]string{}
			for _, e := range r.Configs {
				configs[r.Name][e.Name] = e.Value
			}
		}
	}
	var created []string
	for _, s := range specs {
		if t := existing[s.Name]; t != nil {
			rf := 0
			if len(t.Partitions) > 0 {
				rf = len(t.Partitions[0].Replicas)
			}
			if problems := s.Check(int32(len(t.Partitions)), configs[s.Name]); len(problems) > 0 {
				return fmt.Errorf("kafka topic %s %s: msgx refuses to use it (docs/operations.md#topics-and-consumer-groups)", s.Name, strings.Join(problems, "; "))
			}
			if rf < c.Replication {
				log.Warn("kafka topic has less replication than MSGX_KAFKA_REPLICATION; msgx does not change an existing topic",
					"component", "kafka", "topic", s.Name, "replication", rf, "want", c.Replication)
			}
			continue
		}
		err := admin.CreateTopic(s.Name, &sarama.TopicDetail{
			NumPartitions:     s.Partitions,
			ReplicationFactor: int16(c.Replication),
			ConfigEntries:     s.configEntries(),
		}, false)
		if errors.Is(err, sarama.ErrTopicAlreadyExists) {
			// Created meanwhile (another instance starting), or created
			// before and not yet known to the broker that answered the
			// metadata request: checked as an existing topic next time.
			return retry.Outage("kafka", fmt.Errorf("kafka topic %s appeared while msgx created it; checking it again: %w", s.Name, err))
		}
		if err != nil {
			return Denied(createError(s.Name, c.Replication, err), "Create", "Topic", s.Name)
		}
		log.Info("created kafka topic", "component", "kafka", "topic", s.Name,
			"partitions", s.Partitions, "compact", s.Compact, "replication", c.Replication)
		created = append(created, s.Name)
	}
	return awaitTopics(admin, created, c.Timeout)
}

// awaitTopics waits until the brokers know every one of topics with a
// leader on each partition. Kafka answers CreateTopics once the
// controller recorded a topic; the brokers learn it a moment later, and a
// client that used it at once (the publisher reading its position,
// another instance's metadata request) would be told it does not exist.
// Still unknown after timeout: an outage, retried by the caller.
func awaitTopics(admin sarama.ClusterAdmin, topics []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for len(topics) > 0 {
		md, err := admin.DescribeTopics(topics)
		if err == nil {
			topics = slices.DeleteFunc(topics, func(name string) bool {
				for _, t := range md {
					if t.Name == name && errors.Is(t.Err, sarama.ErrNoError) && len(t.Partitions) > 0 {
						return !slices.ContainsFunc(t.Partitions, func(p *sarama.PartitionMetadata) bool { return p.Leader < 0 })
					}
				}
				return false
			})
		}
		if len(topics) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return retry.Outage("kafka", fmt.Errorf("kafka topics %s created but not yet on the brokers after %v (last: %v)", strings.Join(topics, ", "), timeout, err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// Check says what makes an existing topic with partitions and configs
// (its cleanup.policy and retention.ms) unfit for s, in words naming the
// setting; nil when it fits. Pure.
//   - the partition count must be s's: Kafka cannot shrink a topic, and
//     growing one moves keys to other partitions;
//   - a compacted topic (goka's tables, msgx.schd, the publisher's
//     position) must be compact only: "delete" loses state once its
//     retention passes;
//   - any other must not be compacted: msgx.inbox is the source of truth,
//     the transition topics and msgx.msg are streams;
//   - a topic s keeps forever (msgx.inbox without MSGX_INBOX_RETENTION)
//     needs retention.ms=-1, one with a retention at least that long.
func (s TopicSpec) Check(partitions int32, configs map[string]string) []string {
	var out []string
	if partitions != s.Partitions {
		out = append(out, fmt.Sprintf("has %d partitions, msgx needs %d", partitions, s.Partitions))
	}
	// A setting the broker did not report is not judged (kfake reports
	// only what a topic was created with).
	policy, known := configs["cleanup.policy"]
	switch {
	case !known:
	case s.Compact && policy != "compact":
		out = append(out, fmt.Sprintf("has cleanup.policy=%s, msgx needs compact (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact)", policy, s.Name))
	case !s.Compact && policy != "delete":
		out = append(out, fmt.Sprintf("has cleanup.policy=%s, msgx needs delete (a compacted %s loses records)", policy, s.Name))
	}
	if _, known := configs["retention.ms"]; known && s.Retention != 0 {
		ms, err := strconv.ParseInt(configs["retention.ms"], 10, 64)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("has retention.ms=%q, not a number", configs["retention.ms"]))
		case s.Retention < 0 && ms != -1:
			out = append(out, fmt.Sprintf("has retention.ms=%d, msgx needs -1 (keep forever: it is the source of truth; or set MSGX_INBOX_RETENTION)", ms))
		case s.Retention > 0 && ms != -1 && ms < s.Retention.Milliseconds():
			out = append(out, fmt.Sprintf("has retention.ms=%d, shorter than the %d msgx was configured with", ms, s.Retention.Milliseconds()))
		}
	}
	return out
}

// createError is the error of creating topic name. A cluster that answers
// INVALID_REPLICATION_FACTOR has fewer brokers up than the replication asks
// for — a broker restarting, or a replication the cluster can never give —
// and one that answers NOT_CONTROLLER is electing its controller: both are
// waited for as outages (the caller retries and says so), never a reason to
// exit.
func createError(name string, replication int, err error) error {
	err = fmt.Errorf("creating kafka topic %s: %w", name, err)
	switch {
	case errors.Is(err, sarama.ErrInvalidReplicationFactor):
		return retry.Outage("kafka", fmt.Errorf("%w (fewer brokers up than MSGX_KAFKA_REPLICATION=%d: a broker away, or a replication the cluster cannot give)",
			err, replication))
	case errors.Is(err, sarama.ErrNotController):
		return retry.Outage("kafka", err)
	}
	return err
}

func newAdmin(brokers []string, c Config) (sarama.ClusterAdmin, error) {
	admin, err := sarama.NewClusterAdmin(brokers, c.Sarama("msgx-admin"))
	if err != nil {
		err = fmt.Errorf("connecting kafka admin (%s): %w", c.Security(), err)
		if retry.IsOutage(err) {
			return nil, retry.Outage("kafka", err)
		}
		return nil, err
	}
	return admin, nil
}

// InputBuffer is how many records of an input stream a processor's consumer
// holds per partition ahead of its callback; with goka's own queue of 10
// that bounds the raw messages waiting in memory to a few dozen.
const InputBuffer = 16

// GokaOptions returns the options every msgx goka processor is built with: the
// producer of docs/design.md#kafka-settings, consumers from the oldest offset,
// topic replication from the configuration (goka's default of 2 fails on a
// one-broker cluster), the given local storage, logs through slog, and
// consumer groups that stop for good when a duplicate static member ID
// fences them (ErrDuplicateInstance).
func GokaOptions(c Config, sb storage.Builder, log *slog.Logger) []goka.ProcessorOption {
	tmc := goka.NewTopicManagerConfig()
	tmc.Table.Replication = c.Replication
	tmc.Stream.Replication = c.Replication
	producer := c.producer("msgx-producer")
	producer.Producer.MaxMessageBytes = max(producer.Producer.MaxMessageBytes, TableRecordBytes)
	// The input streams carry whole messages (msgx.inbox records of up to
	// MSGX_KAFKA_MAX_MESSAGE_BYTES): sarama's default buffer of 256
	// records per partition could hold 256 of them at once ahead of the
	// processor, which handles one at a time anyway.
	group := c.Sarama("msgx-consumer")
	group.ChannelBufferSize = InputBuffer
	return []goka.ProcessorOption{
		goka.WithConsumerGroupBuilder(fenceAware(goka.ConsumerGroupBuilderWithConfig(group), group.Consumer.Group.InstanceId)),
		goka.WithConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(c.Sarama("msgx-consumer"))),
		goka.WithProducerBuilder(goka.ProducerBuilderWithConfig(producer)),
		goka.WithTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(c.Sarama("msgx-topics"), tmc)),
		goka.WithStorageBuilder(sb),
		goka.WithLogger(SlogAdapter{Log: log, Level: slog.LevelInfo}),
	}
}

// ProducerBuilder builds the goka producer of a component that produces on
// its own instead of through goka's callback (the router's batch worker):
// the settings of docs/design.md#kafka-settings, checked first, and records
// up to TableRecordBytes (router-table entries).
func ProducerBuilder(c Config) (goka.ProducerBuilder, error) {
	sc := c.producer("msgx-producer")
	sc.Producer.MaxMessageBytes = max(sc.Producer.MaxMessageBytes, TableRecordBytes)
	if err := CheckD3(sc); err != nil {
		return nil, err
	}
	return goka.ProducerBuilderWithConfig(sc), nil
}

// ReadTable recovers a goka table from its changelog into memory and calls fn
// with the running view: the operator's read-only window on a processor's
// state (`msgx table get …`). It gives up when ctx ends.
func ReadTable(ctx context.Context, brokers []string, c Config, table goka.Table, codec goka.Codec, log *slog.Logger, fn func(*goka.View) error) error {
	tmc := goka.NewTopicManagerConfig()
	tmc.Table.Replication = c.Replication
	view, err := goka.NewView(brokers, table, codec,
		goka.WithViewStorageBuilder(MemoryStorage()),
		goka.WithViewConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(c.Sarama("msgx-view"))),
		goka.WithViewTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(c.Sarama("msgx-view-topics"), tmc)),
		goka.WithViewLogger(SlogAdapter{Log: log, Level: slog.LevelDebug}))
	if err != nil {
		return fmt.Errorf("opening table %s (%s): %w", table, c.Security(), err)
	}
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- view.Run(vctx) }()
	select {
	case <-view.WaitRunning():
	case err := <-errc:
		return fmt.Errorf("reading table %s: %w", table, err)
	case <-ctx.Done():
		return fmt.Errorf("reading table %s: %w", table, ctx.Err())
	}
	ferr := fn(view)
	cancel()
	<-errc
	return ferr
}

// Abort stops a goka callback without committing its message, so that the
// message is delivered again after restart. goka's Context.Fail panics only
// while the processor runs; once goka's context is done (shutdown,
// rebalance) Fail merely records the error and returns — and a callback that
// then returns normally has its message committed without its work: a silent
// loss. Abort always unwinds.
func Abort(ctx goka.Context, err error) {
	ctx.Fail(err)
	panic(fmt.Errorf("callback aborted: %w", err))
}

// Halt stops a processor on the message at hand without applying or
// committing it: one ERROR line names the reason and what an operator must
// do, setHalted(reason) lets the component report it (readiness, msgx
// status), and the callback waits until goka's context ends (shutdown, a
// rebalance), then clears the reason and unwinds uncommitted (Abort): the
// message is delivered again, and halts again, until the cause is fixed. It
// never returns.
func Halt(ctx goka.Context, log *slog.Logger, component, reason, todo string, setHalted func(reason string)) {
	log.Error(component+" processor halted: "+reason, "what_to_do", todo)
	setHalted(reason)
	<-ctx.Context().Done()
	setHalted("")
	Abort(ctx, fmt.Errorf("%s processor halted: %s", component, reason))
}

// ResetGroups deletes the consumer groups (their committed offsets): the
// next run of their processors starts from the oldest offset. A group with
// active members is refused by the broker.
func ResetGroups(brokers []string, c Config, groups []string) error {
	admin, err := newAdmin(brokers, c)
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, g := range groups {
		if err := admin.DeleteConsumerGroup(g); err != nil && !errors.Is(err, sarama.ErrGroupIDNotFound) {
			return fmt.Errorf("deleting consumer group %s: %w", g, err)
		}
	}
	return nil
}

// RecreateTopics deletes the topics and creates them again empty, with the
// given specs (waiting for a deletion the broker finishes asynchronously).
func RecreateTopics(ctx context.Context, clk clock.Clock, brokers []string, c Config, specs []TopicSpec, log *slog.Logger) error {
	admin, err := newAdmin(brokers, c)
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, s := range specs {
		if err := admin.DeleteTopic(s.Name); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return fmt.Errorf("deleting topic %s: %w", s.Name, err)
		}
	}
	for {
		err := EnsureTopics(brokers, c, specs, log)
		if err == nil {
			return nil
		}
		if serr := clock.Sleep(ctx, clk, 500*time.Millisecond); serr != nil {
			return fmt.Errorf("recreating topics: %w (last: %v)", serr, err)
		}
	}
}

// RunProcessor runs a goka processor until ctx ends; a stop caused by the
// context is not an error.
func RunProcessor(ctx context.Context, p *goka.Processor, name string) error {
	if err := p.Run(ctx); err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s processor: %w", name, err)
	}
	return nil
}

// GokaEmitterOptions are the options of an emitter that writes a goka
// table's topic directly (msgx reseed): the processors' producer settings,
// table-sized records, and goka's default hasher, so that each key lands on
// the partition the processor itself would write it to.
func GokaEmitterOptions(c Config, log *slog.Logger) []goka.EmitterOption {
	tmc := goka.NewTopicManagerConfig()
	tmc.Table.Replication = c.Replication
	tmc.Stream.Replication = c.Replication
	producer := c.producer("msgx-reseed")
	producer.Producer.MaxMessageBytes = max(producer.Producer.MaxMessageBytes, TableRecordBytes)
	return []goka.EmitterOption{
		goka.WithEmitterProducerBuilder(goka.ProducerBuilderWithConfig(producer)),
		goka.WithEmitterTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(c.Sarama("msgx-topics"), tmc)),
		goka.WithEmitterLogger(SlogAdapter{Log: log, Level: slog.LevelInfo}),
	}
}
