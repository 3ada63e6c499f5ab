DROP TABLE IF EXISTS replay_audit_msg;
DROP TABLE IF EXISTS replay_audit;
