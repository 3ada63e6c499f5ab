-- Maintenance (docs/design.md#maintenance).

-- proc_state_hst keeps every column of an archived proc_state row as it was
-- when archived, plus the time it was archived. The main table keeps an
-- ARCHIVED shadow row (msg_id, identity_key) so that identity de-duplication
-- (I5) outlives the archive: the UNIQUE identity_key constraint stays on
-- proc_state and nothing about it moves here.
--
-- The column list mirrors 0002: a migration that adds a column to proc_state
-- must add it here too (sink's archive test compares the two tables).
CREATE TABLE proc_state_hst (
    msg_id                    bigint      PRIMARY KEY,
    -- Only terminal rows are archived (PENDING, FAILED, ROUTED never are).
    state                     text        NOT NULL CHECK (state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')),
    identity_key              text,
    sndr                      text,
    msg_type                  text,
    msg_styp                  text,
    seqn                      text,
    attempts                  integer     NOT NULL,
    next_attempt_at           timestamptz,
    error_class               text,
    reason                    text,
    last_error                text,
    received_at               timestamptz,
    enqueued_at               timestamptz NOT NULL,
    updated_at                timestamptz NOT NULL,
    routed_at                 timestamptz,
    n_transitions             integer,
    n_applied                 integer     NOT NULL,
    backfill_at               timestamptz,
    backfill_next_at          timestamptz,
    backfill_attempts         integer     NOT NULL,
    backfill_error            text,
    backfill_abandoned_at     timestamptz,
    backfill_abandoned_reason text,
    archived_at               timestamptz NOT NULL
);

-- Archive candidates, oldest settled first: terminal, processed mark confirmed,
-- not on the abandoned list (docs/design.md#archive). The partial index holds
-- only the few days of rows between settlement and archive, so the job's scan
-- does not grow with the shadow rows it leaves behind.
CREATE INDEX proc_state_archive ON proc_state (updated_at, msg_id)
    WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NOT NULL AND backfill_abandoned_at IS NULL;

-- schd_snap_log is an append-only trace of the schedule packages (SCHD
-- DNLD/RESP) the router decided (docs/design.md#schedule-merge). It is written
-- outside any business transaction: a crash may lose a line, never state.
CREATE TABLE schd_snap_log (
    id             bigserial   PRIMARY KEY,
    msg_id         bigint      NOT NULL,
    styp           text        NOT NULL,
    operation_days date[]      NOT NULL DEFAULT '{}',
    flights        integer     NOT NULL,
    recv_at        timestamptz NOT NULL,
    -- The last operation day the package covers: a package about a far
    -- future day is kept until that day is past the retention too.
    scope_end      date        NOT NULL
);
-- Retention deletes by (scope_end, recv_at) (docs/design.md#snaplog-retention).
CREATE INDEX schd_snap_log_retention ON schd_snap_log (scope_end, recv_at);
