-- Earlier versions read a confirmed mark from proc_state.backfill_at: the
-- marks confirmed since 0033 (terminal, no longer owed, not abandoned) get
-- their row's last change as its time.
UPDATE proc_state p SET backfill_at = p.updated_at
WHERE p.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND p.backfill_at IS NULL AND p.backfill_abandoned_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM backfill_owed o WHERE o.msg_id = p.msg_id);
DROP TABLE backfill_owed;
DROP INDEX IF EXISTS proc_state_archive;
CREATE INDEX proc_state_archive ON proc_state (updated_at, msg_id)
    WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NOT NULL AND backfill_abandoned_at IS NULL;
CREATE INDEX proc_state_backfill ON proc_state (backfill_attempts, msg_id)
    WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND backfill_at IS NULL AND backfill_abandoned_at IS NULL;
