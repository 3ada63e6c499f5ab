DROP INDEX IF EXISTS flight_change_msg;
DROP TABLE IF EXISTS msg_event;
ALTER TABLE event_outbox DROP COLUMN IF EXISTS state_version, DROP COLUMN IF EXISTS msg_id;
ALTER TABLE transition_applied DROP COLUMN IF EXISTS state_version, DROP COLUMN IF EXISTS outcome;
ALTER TABLE replay_audit_msg DROP COLUMN IF EXISTS inbox_offset, DROP COLUMN IF EXISTS inbox_partition;
ALTER TABLE proc_state_hst DROP COLUMN IF EXISTS decided_at, DROP COLUMN IF EXISTS inbox_offset, DROP COLUMN IF EXISTS inbox_partition;
ALTER TABLE proc_state DROP COLUMN IF EXISTS decided_at, DROP COLUMN IF EXISTS inbox_offset, DROP COLUMN IF EXISTS inbox_partition;
