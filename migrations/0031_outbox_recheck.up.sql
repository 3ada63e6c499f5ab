-- recheck says whether the publisher must look an outbox row's version up in
-- msg_event before producing it: false when the flights processor queued it
-- as new (the transaction wrote the flight's row from the version before, so
-- no earlier one queued this version's event), true otherwise — a
-- redelivered transition, a full write, and every row an earlier version of
-- msgx queued (the default). At a million versions the lookup was half of
-- the publisher's read.
ALTER TABLE event_outbox ADD COLUMN IF NOT EXISTS recheck boolean NOT NULL DEFAULT true;
