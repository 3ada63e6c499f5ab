-- Reference data read model (docs/design.md#refdata): one row per record of
-- every reference category, written through by the msgx-refdata processor in
-- the same transaction as the message's completion mark.

-- ref_master is REF_MASTER of the original design, keyed (RTYPE, RKEY). RSTA
-- rows are keyed "RTYP|RSID" (refdata.StatusKey). attributes is the record
-- exactly as the SIS codec and refdata.Apply keep it (refdata.Record as JSON):
-- an empty tag stays "" (unavailable), never a missing key. last_msg_id is the
-- message that last wrote the row; the sink's upserts and deletes are guarded
-- by it so that a replayed or stale write never overwrites or removes a newer
-- row.
--
-- Both key columns use the "C" collation so that the primary key's order is
-- byte order: listings come out of the index in the same order as Go's
-- sort.Strings (the goka table's refdata.State.List), and a prefix match on
-- rkey (e.g. every RSTA status of one resource type, 'GATE|%') can use the
-- primary key instead of needing a separate text_pattern_ops index.
CREATE TABLE ref_master (
    rtype        text COLLATE "C" NOT NULL CHECK (rtype <> ''),
    rkey         text COLLATE "C" NOT NULL CHECK (rkey <> ''),
    attributes   jsonb            NOT NULL CHECK (jsonb_typeof(attributes) = 'object'),
    updated_at   timestamptz      NOT NULL,
    last_msg_id  bigint           NOT NULL CHECK (last_msg_id > 0),
    PRIMARY KEY (rtype, rkey)
);
