-- Replay of failed, dead and unsupported messages (docs/design.md#replay):
-- the operator's audit trail, and what makes a replay re-runnable
-- after a crash. sink/replay.go owns the SQL.
--
-- Nothing here is derived from msgx.inbox: a rebuild must never truncate it.

-- replay_audit has one row per replay (and per audited dry run). msg_ids are
-- the messages it moved (a dry run: those it listed), count their number
-- (a dry run: how many would move). A replay that runs in several batches
-- appends each batch to its row in the batch's own transaction, so the row
-- always lists exactly the resets that were committed.
CREATE TABLE replay_audit (
    id        bigserial   PRIMARY KEY,
    at        timestamptz NOT NULL,
    who       text        NOT NULL,
    selector  text        NOT NULL,
    dry_run   boolean     NOT NULL,
    count     integer     NOT NULL DEFAULT 0,
    msg_ids   bigint[]    NOT NULL DEFAULT '{}'
);
CREATE INDEX replay_audit_at ON replay_audit (at);

-- replay_audit_msg is the before-image of every message a replay reset:
-- the reset clears error_class, reason and last_error from proc_state, so
-- this is where they are kept. It is written in the same transaction as the
-- reset. produced turns true once the message was re-injected into
-- msgx.inbox: a PENDING message whose newest entry here is not produced was
-- reset by a replay that crashed (or failed) before re-injecting it, and is
-- what a re-run picks up again (sink.ReplaySelector.PendingReplayed).
CREATE TABLE replay_audit_msg (
    audit_id     bigint  NOT NULL REFERENCES replay_audit (id) ON DELETE CASCADE,
    msg_id       bigint  NOT NULL,
    state        text    NOT NULL,
    error_class  text,
    reason       text,
    last_error   text,
    attempts     integer NOT NULL,
    identity_key text,
    produced     boolean NOT NULL DEFAULT false,
    PRIMARY KEY (audit_id, msg_id)
);
-- "the newest replay of message X" (crash-window check, history of a message).
CREATE INDEX replay_audit_msg_msg ON replay_audit_msg (msg_id, audit_id DESC);
