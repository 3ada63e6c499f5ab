-- kafka_binding binds this database to one Kafka cluster
-- (docs/design.md#kafka-binding): the cluster ID and the topic ID of
-- msgx.inbox, recorded at the first start. Every role that uses Kafka
-- compares them with what its brokers answer before it starts, and refuses a
-- different cluster (or a msgx.inbox created again, e.g. a wiped embedded
-- broker): processing against it would mark messages SUCCEEDED against empty
-- goka tables. One row; `msgx bind --force` replaces it.
CREATE TABLE kafka_binding (
    one            boolean     PRIMARY KEY DEFAULT true CHECK (one),
    cluster_id     text        NOT NULL,
    inbox_topic    text        NOT NULL,
    inbox_topic_id text        NOT NULL,
    bound_at       timestamptz NOT NULL,
    -- how the row was written: 'first-start' or 'msgx bind --force'
    bound_by       text        NOT NULL
);

-- Every binding ever recorded, the replaced ones included (audit of moves).
CREATE TABLE kafka_binding_log (
    id             bigserial   PRIMARY KEY,
    cluster_id     text        NOT NULL,
    inbox_topic    text        NOT NULL,
    inbox_topic_id text        NOT NULL,
    bound_at       timestamptz NOT NULL,
    bound_by       text        NOT NULL
);
