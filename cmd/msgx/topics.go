package main

import (
	"log/slog"

	"github.com/lovoo/goka"
	"github.com/syndtr/goleveldb/leveldb/filter"
	"github.com/syndtr/goleveldb/leveldb/opt"

	"msgx/internal/kafka"
)

// The topics msgx creates at start-up (docs/design.md#kafka-settings), what
// its roles need of them on the cluster (ACLs), and the goka options and
// table storage of the processors.

// topics lists every topic msgx needs, created at start-up.
func topics(cfg Config) []kafka.TopicSpec {
	specs := append([]kafka.TopicSpec{cfg.Ingest.TopicSpec()}, cfg.Router.TopicSpecs()...)
	specs = append(specs, cfg.Flights.TopicSpecs(cfg.Router.Partitions)...)
	specs = append(specs, cfg.Schd.TopicSpec(cfg.Router.Partitions))
	if cfg.Publisher.ExactlyOnce {
		specs = append(specs, cfg.Publisher.TopicSpec())
	}
	return append(specs, tableTopics(cfg)...)
}

// kafkaAccess is what the roles of r need of msgx's topics and groups on
// the cluster (docs/operations.md#kafka-acls lists it as ACLs). Describe is not
// listed: Read and Write imply it.
func kafkaAccess(cfg Config, r role) []kafka.Access {
	topic := func(name, who string, ops ...kafka.ACLOp) kafka.Access {
		return kafka.Access{Resource: "Topic", Name: name, Ops: ops, For: who}
	}
	var out []kafka.Access
	if r.has(roleIngest) {
		out = append(out, topic(cfg.Ingest.Topic, "the ingest bridge writes it", kafka.OpWrite))
	}
	if !r.has(roleProcess) {
		return out
	}
	rw := []kafka.ACLOp{kafka.OpRead, kafka.OpWrite}
	out = append(out,
		topic(cfg.Ingest.Topic, "the router reads it", kafka.OpRead),
		topic(cfg.Router.FlightTopic, "the router writes it, the flights processor reads it", rw...),
		topic(cfg.Router.RefdataTopic, "the router writes it, the refdata processor reads it", rw...),
		topic(cfg.Flights.MsgTopic, "the event publisher writes it", kafka.OpWrite),
		topic(cfg.Schd.Topic, "the schd flusher writes it", kafka.OpWrite))
	if cfg.Publisher.ExactlyOnce {
		out = append(out, topic(cfg.Publisher.PositionTopic, "the event publisher writes and reads its position", rw...))
	}
	for _, t := range tableTopics(cfg) {
		// goka reads a table's configuration before it uses the topic.
		out = append(out, topic(t.Name, "a goka table", kafka.OpRead, kafka.OpWrite, kafka.OpDescribeConfigs))
	}
	for _, g := range processorGroups(cfg) {
		out = append(out, kafka.Access{Resource: "Group", Name: g.Group, Ops: []kafka.ACLOp{kafka.OpRead}, For: "its processor's consumer group"})
	}
	return out
}

// tableTopics are the goka group tables (compacted changelogs), created here
// rather than by goka so that they allow table-sized records: the router's
// has the single partition of msgx.inbox, the others the transition topics'.
func tableTopics(cfg Config) []kafka.TopicSpec {
	return []kafka.TopicSpec{
		cfg.Router.TableSpec(),
		{Name: string(cfg.Flights.Table()), Partitions: cfg.Router.Partitions, Compact: true, MaxMessageBytes: kafka.TableRecordBytes},
		{Name: string(cfg.Refdata.Table()), Partitions: cfg.Router.Partitions, Compact: true, MaxMessageBytes: kafka.TableRecordBytes},
	}
}

// gokaOptions are the processors' Kafka clients and table storage
// (MSGX_TABLE_STORAGE: in memory, or on disk under $MSGX_STATE_DIR/goka;
// what is not there is recovered from the changelog).
func gokaOptions(cfg Config, log *slog.Logger) []goka.ProcessorOption {
	return kafka.GokaOptions(cfg.Kafka, cfg.Kafka.Tables(cfg.StateDir, tableStorage()), log)
}

// tableStorage is LevelDB's configuration for one partition of a goka table
// kept on disk (MSGX_TABLE_STORAGE=disk).
// With goka's defaults (snappy, 2 MiB tables, no filter) a flights table of
// 100,000 flights cost a quarter of msgx's CPU during a million-message
// backlog: compactions (16 %, a third of it compressing) and block reads
// (8 %, decompressing). The values are JSON documents rewritten at every
// change; the disk holds them uncompressed (about twice the space), larger
// tables are merged less often, and a bloom filter answers the lookups of
// new flights without a block read. The write buffer and the block cache
// keep LevelDB's defaults (4 and 8 MiB): twice each raised the million's
// rate by another 3 % and the peak RSS of a 50,000-message backlog by
// 50 MB, to 239 MB of the 256 MB budget (docs/benchmarks.md).
func tableStorage() *opt.Options {
	return &opt.Options{
		CompactionTableSize: 4 * opt.MiB,
		CompactionTotalSize: 40 * opt.MiB,
		Compression:         opt.NoCompression,
		Filter:              filter.NewBloomFilter(10),
	}
}
