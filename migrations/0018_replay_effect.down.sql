ALTER TABLE replay_audit_msg DROP COLUMN effect;
ALTER TABLE replay_audit DROP COLUMN effects;
DROP TABLE flight_change;
ALTER TABLE ref_master DROP COLUMN version;
ALTER TABLE proc_state_hst DROP COLUMN replay_gen;
ALTER TABLE proc_state DROP COLUMN replay_gen;
