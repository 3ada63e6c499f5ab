-- A replayed message is applied to the current state (docs/design.md#replay).

-- replay_gen is the replay generation of a message: the replay_audit id of
-- the replay that reset it last, until the router decides it; then the
-- generation it was decided under, which every transition of the message
-- carries (a re-routed message emits the same ones). 0: never replayed.
-- proc_state_hst mirrors proc_state (0007); the new column comes after its
-- archived_at (moving that would rewrite the whole archive).
ALTER TABLE proc_state ADD COLUMN replay_gen bigint NOT NULL DEFAULT 0;
ALTER TABLE proc_state_hst ADD COLUMN replay_gen bigint NOT NULL DEFAULT 0;

-- ref_master.version is the category's version (refdata.State.Version) when
-- the record was last written: the order of the writes to a record, which
-- the sink's never-backwards guard compares. A replayed older message
-- writes a record a newer message wrote before it, so last_msg_id (the
-- message that last changed the record) cannot order them.
ALTER TABLE ref_master ADD COLUMN version bigint NOT NULL DEFAULT 0;

-- flight_change is the change history of the flights: one row per flight
-- version, written by the flights processor in the same transaction as the
-- version itself (docs/design.md#flight-change). The replay dry run reads
-- which newer messages changed the tags a replayed message would overwrite.
-- changed is the version's change list (the msg event's "changed"); at is
-- the version's updatedAt (the first enqueue of its message), recorded_at
-- the processor's clock when it was written, by which the maintenance
-- runner deletes rows older than MSGX_FLIGHT_CHANGE_RETENTION. Derived from
-- msgx.inbox: a rebuild empties it. The key includes msg_id because a FLID
-- the history sweep purged may be created again from version 1.
CREATE TABLE flight_change (
    flid           text        NOT NULL,
    state_version  bigint      NOT NULL,
    msg_id         bigint      NOT NULL,
    replay_gen     bigint      NOT NULL DEFAULT 0,
    source         text        NOT NULL,
    state          text        NOT NULL,
    changed        text[]      NOT NULL,
    at             timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL,
    PRIMARY KEY (flid, state_version, msg_id)
);
CREATE INDEX flight_change_recorded ON flight_change (recorded_at);

-- What a replay overwrites (docs/design.md#replay): the dry run's listing,
-- per message, of the flights and categories it would touch and the newer
-- messages that changed the same tags or records (replay_audit.effects, an
-- array in MSG_ID order), and the same for each message a replay reset,
-- worked out just before the reset (replay_audit_msg.effect).
ALTER TABLE replay_audit ADD COLUMN effects jsonb;
ALTER TABLE replay_audit_msg ADD COLUMN effect jsonb;
