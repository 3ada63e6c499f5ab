ALTER TABLE event_outbox DROP COLUMN IF EXISTS recheck;
