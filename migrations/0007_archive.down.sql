-- Reverting loses the archive. The ARCHIVED shadow rows stay in proc_state
-- (0002 allows the state) and keep de-duplicating; they are not restored.
DROP TABLE IF EXISTS schd_snap_log;
DROP INDEX IF EXISTS proc_state_archive;
DROP TABLE IF EXISTS proc_state_hst;
