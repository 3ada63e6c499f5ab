-- The refdata table's whole value per category (refdata.State with its
-- bookkeeping: key tag, the keys the last message deleted, the replay mark),
-- written in the transaction of the group of transitions that made it
-- (docs/design.md#group-commits). The refdata processor reads it back when
-- its goka table may be ahead of PostgreSQL after a crash; ref_master alone
-- cannot say what the category was (a deletion leaves no row). A category
-- last written before this migration has no row.
CREATE TABLE ref_table_state (
    rtype       text        PRIMARY KEY,
    version     bigint      NOT NULL,
    last_msg_id bigint      NOT NULL,
    table_state jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL
);
