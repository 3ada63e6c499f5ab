DROP INDEX flight_change_msg;
DROP TABLE msg_event;
ALTER TABLE event_outbox DROP COLUMN state_version, DROP COLUMN msg_id;
ALTER TABLE transition_applied DROP COLUMN state_version, DROP COLUMN outcome;
ALTER TABLE replay_audit_msg DROP COLUMN inbox_offset, DROP COLUMN inbox_partition;
ALTER TABLE proc_state_hst DROP COLUMN decided_at, DROP COLUMN inbox_offset, DROP COLUMN inbox_partition;
ALTER TABLE proc_state DROP COLUMN decided_at, DROP COLUMN inbox_offset, DROP COLUMN inbox_partition;
