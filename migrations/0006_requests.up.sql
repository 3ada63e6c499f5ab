-- Outbound requests to the AODB (docs/design.md#requests): RQRD and RQFD
-- messages that msgx writes into the shared outbox COUTMSGS, and how each one
-- ended. The rules live in tables/request; emitters/outbound owns the SQL.
--
-- req_track is not derived from msgx.inbox (it records what we sent), so a
-- rebuild must never truncate it.

-- req_seqn hands out META/SEQN of our requests. The AODB identifies a message
-- by SNDR|TYPE|STYP|SEQN, so a SEQN must not repeat even across a reinstall
-- with a fresh database: the sequence starts at the epoch second of this
-- migration. A later install starts at its own, later, epoch second, which is
-- beyond every SEQN of the earlier one unless it sent more than one request
-- per second on average.
CREATE SEQUENCE req_seqn AS bigint MINVALUE 1;
SELECT setval('req_seqn', GREATEST(1, floor(extract(epoch FROM now()))::bigint));

-- One row per request. styp is the slot key next to kind: the requested
-- reference type of an RQRD (one type per request), 'NONE' for every RQFD.
--   payload       the exact XML written to COUTMSGS_CLOB_MSG; recovery
--                 re-writes these bytes, never a re-encoding.
--   attempts      COUTMSGS inserts started. 0 proves no outbox row exists.
--   outbox_floor  MAX(COUTMSGS_ID) read before the first attempt, committed
--                 before the insert: recovery searches COUTMSGS_ID > floor.
--   outbox_id     COUTMSGS_ID of the confirmed row.
--   sent_at       the instant written into COUTMSGS_DATE_INSERTED.
--   response_msg_id  the inbox MSG_ID that closed it (RESP → DONE, EROR → FAILED).
-- All times come from msgx's injected clock, never from now().
CREATE TABLE req_track (
    id               bigserial   PRIMARY KEY,
    kind             text        NOT NULL CHECK (kind IN ('RQRD', 'RQFD')),
    styp             text        NOT NULL CHECK (styp <> ''),
    rtypes           text[]      NOT NULL DEFAULT '{}',
    window_from      timestamptz,
    window_to        timestamptz,
    seqn             bigint      NOT NULL UNIQUE CHECK (seqn > 0),
    sndr             text        NOT NULL CHECK (sndr <> ''),
    state            text        NOT NULL CHECK (state IN ('PENDING', 'SENT', 'DONE', 'EXPIRED', 'FAILED')),
    payload          text        NOT NULL CHECK (payload <> ''),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    outbox_floor     bigint      CHECK (outbox_floor >= 0),
    outbox_id        bigint      UNIQUE CHECK (outbox_id > 0),
    created_at       timestamptz NOT NULL,
    sent_at          timestamptz,
    closed_at        timestamptz,
    close_reason     text,
    response_msg_id  bigint      CHECK (response_msg_id > 0),
    last_error       text,
    -- An RQFD has a non-empty window and the single slot 'NONE'; an RQRD has
    -- its requested type and no window.
    CHECK (CASE kind
        WHEN 'RQFD' THEN styp = 'NONE' AND window_from IS NOT NULL AND window_to IS NOT NULL
                         AND window_from < window_to AND cardinality(rtypes) = 0
        ELSE window_from IS NULL AND window_to IS NULL AND rtypes = ARRAY[styp]
    END),
    -- The floor is written together with the first attempt.
    CHECK ((attempts = 0) = (outbox_floor IS NULL)),
    -- SENT and DONE only after the outbox row was confirmed.
    CHECK (state NOT IN ('SENT', 'DONE') OR (outbox_id IS NOT NULL AND sent_at IS NOT NULL AND attempts > 0)),
    CHECK ((outbox_id IS NULL) = (sent_at IS NULL)),
    -- Closed exactly when in a final state, always with a reason.
    CHECK ((state IN ('PENDING', 'SENT')) = (closed_at IS NULL)),
    CHECK ((closed_at IS NULL) = (close_reason IS NULL)),
    CHECK (state <> 'DONE' OR response_msg_id IS NOT NULL)
);

-- One open request per slot (docs/design.md#request-slots): a new request must
-- close the open one of its slot in the same transaction, or its insert fails
-- here.
CREATE UNIQUE INDEX req_track_open_slot ON req_track (kind, styp) WHERE state IN ('PENDING', 'SENT');
-- The daily reference schedule asks "was this type requested since HH:MM?".
CREATE INDEX req_track_slot_created ON req_track (kind, styp, created_at);
-- The expiry sweep.
CREATE INDEX req_track_sent ON req_track (sent_at) WHERE state = 'SENT';
-- "Did this inbox message already complete a request?" (a redelivered RESP).
CREATE INDEX req_track_response ON req_track (response_msg_id) WHERE response_msg_id IS NOT NULL;
