-- event_outbox holds the events of the flights processor (msg events, schd
-- tombstones of purged flights) from the transaction that wrote the state
-- they announce until the publisher has produced them. goka's own emits are
-- asynchronous and its table moves on before they are acknowledged, so a
-- crash could lose an intermediate version's event; committed here with the
-- state, every version is announced at least once.
CREATE TABLE event_outbox (
    id          bigserial   PRIMARY KEY,
    topic       text        NOT NULL,
    key         text        NOT NULL,
    value       bytea,
    origin_at   timestamptz,
    created_at  timestamptz NOT NULL
);
