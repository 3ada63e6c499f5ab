-- Every answer to msgx's requests and what it did (docs/design.md#requests):
-- one row per RESP that reached request tracking and per EROR, naming the
-- request it completed, answered in part or failed, or saying why none
-- (outcome UNPAIRED). An EROR that pairs with nothing is thus recorded and
-- shown (msgx status, the status page, /metrics), never only logged.
--
-- Like req_track it records what happened to msgx's requests, which the inbox
-- cannot tell again: a rebuild keeps it, and the first outcome of a message
-- stands (msg_id is the key).
CREATE TABLE req_answer (
    msg_id      bigint      PRIMARY KEY CHECK (msg_id > 0),
    type        text        NOT NULL CHECK (type IN ('RESP', 'EROR')),
    kind        text        CHECK (kind IN ('RQRD', 'RQFD')),
    request_id  bigint      REFERENCES req_track (id),
    outcome     text        NOT NULL CHECK (outcome IN ('DONE', 'ANSWERED', 'FAILED', 'LATE', 'UNPAIRED')),
    paired_by   text        CHECK (paired_by IN ('SEQN', 'TYPE')),
    detail      text        NOT NULL,
    code        text,
    text        text,
    at          timestamptz NOT NULL,
    CHECK ((outcome = 'UNPAIRED') = (request_id IS NULL))
);
CREATE INDEX req_answer_request ON req_answer (request_id) WHERE request_id IS NOT NULL;
-- The status report's "EROR answers paired with nothing since the newest request".
CREATE INDEX req_answer_unpaired_eror ON req_answer (at) WHERE type = 'EROR' AND outcome = 'UNPAIRED';
