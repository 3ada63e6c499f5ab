-- What `msgx trace` reads about one message or one flight without scanning
-- a topic (docs/design.md#trace). Every column is written by the component
-- that knows the fact, in the statement or transaction that already records
-- the step, so a trace never claims a step that did not commit.
--
-- Every statement is IF NOT EXISTS: a process killed after this migration
-- committed but before golang-migrate cleared its dirty flag applies it
-- again at the next start (sink.Migrate), which must then be a no-op.

-- The msgx.inbox record the router first read the message from (goka's
-- ctx.Partition/Offset), set when sink.Messages.Load creates the row; a
-- later copy (an ingest duplicate, a replay) leaves it. NULL: a row created
-- before this migration. proc_state_hst mirrors proc_state (0007).
--
-- decided_at is when the router recorded its decision (ROUTED or terminal
-- at once, DEAD(EXHAUSTED)); a replay's reset clears it. updated_at cannot
-- say it: the backfill sweeper and completion move it.
ALTER TABLE proc_state ADD COLUMN IF NOT EXISTS inbox_partition integer, ADD COLUMN IF NOT EXISTS inbox_offset bigint, ADD COLUMN IF NOT EXISTS decided_at timestamptz;
ALTER TABLE proc_state_hst ADD COLUMN IF NOT EXISTS inbox_partition integer, ADD COLUMN IF NOT EXISTS inbox_offset bigint, ADD COLUMN IF NOT EXISTS decided_at timestamptz;

-- Where a replay re-injected the message into msgx.inbox, written with
-- produced = true.
ALTER TABLE replay_audit_msg ADD COLUMN IF NOT EXISTS inbox_partition integer, ADD COLUMN IF NOT EXISTS inbox_offset bigint;

-- What each transition did (written with its applied mark): outcome is the
-- flights processor's flight.Result.Outcome ("applied", "no-change",
-- "no-match", "replay", …) or the refdata processor's ("applied",
-- "no-change", "replay", "rejected: …"); state_version is the flight or
-- category version it produced, NULL when it changed nothing. A mark
-- written again by a redelivery keeps the first.
ALTER TABLE transition_applied ADD COLUMN IF NOT EXISTS outcome text, ADD COLUMN IF NOT EXISTS state_version bigint;

-- The version an outbox msg event announces (NULL for a schd tombstone),
-- so that the publisher can index what it produced.
ALTER TABLE event_outbox ADD COLUMN IF NOT EXISTS msg_id bigint, ADD COLUMN IF NOT EXISTS state_version bigint;

-- msg_event is where each flight version's msg event landed: written by
-- the outbox publisher (emitters/event) after Kafka acknowledged the
-- produce, in the transaction that deletes the outbox rows: a crash before
-- that commit produces the rows again, and the confirmed copy is recorded.
-- A version announced again later (a redelivered transition re-queues the
-- current version's event) keeps its first recorded position. Keyed like
-- flight_change; the maintenance runner deletes a row with its
-- flight_change row (MSGX_FLIGHT_CHANGE_RETENTION), a rebuild empties both.
CREATE TABLE IF NOT EXISTS msg_event (
    flid             text        NOT NULL,
    state_version    bigint      NOT NULL,
    msg_id           bigint      NOT NULL,
    topic            text        NOT NULL,
    kafka_partition  integer     NOT NULL,
    kafka_offset     bigint      NOT NULL,
    produced_at      timestamptz NOT NULL,
    PRIMARY KEY (flid, state_version, msg_id)
);

-- "The versions message X made" (every flight it touched, derived links
-- included) without reading the whole change history.
CREATE INDEX IF NOT EXISTS flight_change_msg ON flight_change (msg_id);
