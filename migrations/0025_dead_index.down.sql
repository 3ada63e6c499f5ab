DROP INDEX IF EXISTS proc_state_dead;
