-- Message-level state owned by the router (docs/design.md#router) and
-- completion written by the applying processors.

-- proc_state holds one row per inbox message: where it is, why, and whether
-- the processed mark still has to be written back to the inbox (backfill).
CREATE TABLE proc_state (
    msg_id                    bigint      PRIMARY KEY,
    state                     text        NOT NULL
        CHECK (state IN ('PENDING', 'FAILED', 'ROUTED', 'SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')),
    identity_key              text        UNIQUE,
    sndr                      text,
    msg_type                  text,
    msg_styp                  text,
    seqn                      text,
    attempts                  integer     NOT NULL DEFAULT 0,
    next_attempt_at           timestamptz,
    error_class               text,
    reason                    text,
    last_error                text,
    received_at               timestamptz,
    enqueued_at               timestamptz NOT NULL,
    updated_at                timestamptz NOT NULL,
    routed_at                 timestamptz,
    n_transitions             integer,
    n_applied                 integer     NOT NULL DEFAULT 0,
    backfill_at               timestamptz,
    backfill_next_at          timestamptz,
    backfill_attempts         integer     NOT NULL DEFAULT 0,
    backfill_error            text,
    backfill_abandoned_at     timestamptz,
    backfill_abandoned_reason text
);

-- Unfinished messages (the queue's head and what waits for completion).
CREATE INDEX proc_state_open ON proc_state (msg_id) WHERE state IN ('PENDING', 'FAILED', 'ROUTED');
-- Terminal rows that still owe the processed mark (backfill sweeper).
CREATE INDEX proc_state_backfill ON proc_state (backfill_attempts, msg_id)
    WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NULL AND backfill_abandoned_at IS NULL;
CREATE INDEX proc_state_state ON proc_state (state, error_class);

-- transition_applied marks each (message, key) transition applied once; the
-- message becomes SUCCEEDED when all n of them are marked.
CREATE TABLE transition_applied (
    msg_id      bigint      NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('flight', 'refdata')),
    key         text        NOT NULL,
    applied_at  timestamptz NOT NULL,
    PRIMARY KEY (msg_id, kind, key)
);

-- flight_index is the router's FLID → operation-day index (the router is its
-- only writer). first_msg_id is the message that created the entry: a
-- re-routed message only sees entries older than itself, so its transitions
-- are the same every time it is routed.
CREATE TABLE flight_index (
    flid           text        PRIMARY KEY,
    operation_day  date,
    first_msg_id   bigint      NOT NULL,
    created_at     timestamptz NOT NULL
);
CREATE INDEX flight_index_day ON flight_index (operation_day);
