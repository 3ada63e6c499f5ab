-- table_state is the flights table's whole value for the FLID (flight.State
-- with its bookkeeping: links, provenance, replay mark), written in the same
-- statement as doc. It lets `msgx reseed` write the goka flights table of a
-- new Kafka cluster from PostgreSQL (docs/operations.md, "Moving to another
-- Kafka cluster"). NULL for rows last written before this migration.
ALTER TABLE flight_schd ADD COLUMN table_state jsonb;
