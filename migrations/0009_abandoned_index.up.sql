-- The abandoned-backfill list (msgx status, msgx backfill abandoned) without a
-- scan of the whole proc_state.
CREATE INDEX proc_state_abandoned ON proc_state (backfill_abandoned_reason, msg_id) WHERE backfill_abandoned_at IS NOT NULL;
