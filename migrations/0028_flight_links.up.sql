-- Shared flights in inbox order (docs/design.md#codeshare): the router
-- computes every transition a message causes — a child's LINK to its
-- master, a master's cascade to its children — from its flight index, and
-- sends each flight its transitions in inbox order.
--
-- Every statement is IF NOT EXISTS (or idempotent): a process killed after
-- this migration committed but before golang-migrate cleared its dirty flag
-- applies it again at the next start (sink.Migrate).

-- The index holds each flight's own link as the messages the router decided
-- so far left it: its lifecycle state ('ACTIVE', 'DELETED'; NULL: not a
-- flight — a FLID the history sweep purged, or one only a SCHEDULE the
-- router has not applied yet named), its raw MAID and FLNO.
ALTER TABLE flight_index ADD COLUMN IF NOT EXISTS state text, ADD COLUMN IF NOT EXISTS maid text, ADD COLUMN IF NOT EXISTS flno text;
-- A deployment upgraded with a drained pipeline (msgx refuses the upgrade
-- otherwise, cmd/msgx) has the flights table's links in its read model.
UPDATE flight_index i SET state = s.state, maid = s.maid, flno = s.flno
	FROM flight_schd s WHERE s.flid = i.flid AND i.state IS NULL;
-- A master's live children, for its cascade.
CREATE INDEX IF NOT EXISTS flight_index_children ON flight_index (maid) WHERE state = 'ACTIVE' AND maid IS NOT NULL;

-- The placeholders of the flights table (masters that children name and
-- that are not flights yet, flight.State.IsPlaceholder), written with the
-- transitions that change them, so that the flights processor's crash
-- recovery finds every table value in PostgreSQL (docs/design.md#group-commits).
-- Not part of the read model. Filled for an upgraded database at start-up
-- (sink.Migrate, from the children in flight_schd).
CREATE TABLE IF NOT EXISTS flight_placeholder (
    flid        text        PRIMARY KEY,
    last_msg_id bigint      NOT NULL,
    table_state jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- The shape of a ROUTED message's flight transitions beyond what its own
-- records say: per flight, the order of its own step and the LINK and
-- cascade steps the message causes, with the router's expected link after
-- each (router.FlightPlan). A message found ROUTED again after a crash
-- re-emits exactly these; the index has moved on since. Cleared when the
-- message is SUCCEEDED.
ALTER TABLE proc_state ADD COLUMN IF NOT EXISTS flight_plan jsonb;
ALTER TABLE proc_state_hst ADD COLUMN IF NOT EXISTS flight_plan jsonb;

-- The history sweep's purges the router is handing to the flights processor
-- (router.Router.Purge): written before their transitions are produced,
-- deleted with the index change after, so that a crash in between produces
-- them again at the router's next start instead of leaving the index and the
-- flights table apart.
CREATE TABLE IF NOT EXISTS purge_pending (
    flid         text        PRIMARY KEY,
    purge_before date        NOT NULL,
    created_at   timestamptz NOT NULL
);

-- Work the start after this migration does in Go (sink.Migrate): filling
-- in the placeholders of a database an earlier version wrote. A row is
-- deleted in the transaction that does its work.
CREATE TABLE IF NOT EXISTS upgrade_todo (
    name text PRIMARY KEY
);
INSERT INTO upgrade_todo (name) SELECT 'placeholders' WHERE EXISTS (SELECT 1 FROM flight_schd)
    AND NOT EXISTS (SELECT 1 FROM flight_placeholder) ON CONFLICT DO NOTHING;
