-- backfill_owed is the backfill sweeper's queue (docs/design.md#backfill):
-- one row per terminal message whose processed mark is neither confirmed nor
-- abandoned, written in the statement that makes the message terminal (its
-- backfill intent) and deleted in the pass that confirms its mark. It
-- replaces the partial index proc_state_backfill: confirming a mark no longer
-- writes a third version of the message's proc_state row (with an entry in
-- each of its indexes), which cost PostgreSQL as much as the row's insert.
CREATE TABLE backfill_owed (
    msg_id      bigint      PRIMARY KEY,
    -- copies of proc_state's backfill_attempts, backfill_next_at and
    -- enqueued_at, for the scan's order and due test
    attempts    integer     NOT NULL DEFAULT 0,
    next_at     timestamptz,
    enqueued_at timestamptz NOT NULL
);
CREATE INDEX backfill_owed_order ON backfill_owed (attempts, msg_id);

INSERT INTO backfill_owed (msg_id, attempts, next_at, enqueued_at)
SELECT msg_id, backfill_attempts, backfill_next_at, enqueued_at FROM proc_state
WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NULL AND backfill_abandoned_at IS NULL;

-- A confirmed mark leaves backfill_at NULL from now on: settled is terminal,
-- not owed and not abandoned. The archive's index no longer names it.
DROP INDEX IF EXISTS proc_state_backfill;
DROP INDEX IF EXISTS proc_state_archive;
CREATE INDEX proc_state_archive ON proc_state (updated_at, msg_id)
    WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_abandoned_at IS NULL;
