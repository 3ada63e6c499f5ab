-- refdata_key_index is the router's RTYPE → key-tag index of the reference
-- categories keyed by their records' first child (refdata.FirstChildTypes),
-- written with the decision of every message routed to such a category; the
-- router is its only writer, as it is of flight_index. An incremental message keyed
-- by another tag than the category's records would be rejected by
-- refdata.Apply, so the router decides it DEAD(PROTOCOL) instead of emitting
-- it. msg_id is the message that last set the entry.
CREATE TABLE refdata_key_index (
    rtype    text   PRIMARY KEY,
    key_tag  text   NOT NULL CHECK (key_tag <> ''),
    msg_id   bigint NOT NULL
);
