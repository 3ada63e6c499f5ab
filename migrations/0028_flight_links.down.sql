DROP TABLE IF EXISTS upgrade_todo;
DROP TABLE IF EXISTS purge_pending;
ALTER TABLE proc_state_hst DROP COLUMN IF EXISTS flight_plan;
ALTER TABLE proc_state DROP COLUMN IF EXISTS flight_plan;
DROP TABLE IF EXISTS flight_placeholder;
DROP INDEX IF EXISTS flight_index_children;
ALTER TABLE flight_index DROP COLUMN IF EXISTS state, DROP COLUMN IF EXISTS maid, DROP COLUMN IF EXISTS flno;
