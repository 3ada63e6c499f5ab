-- The ingest bridge's durable state (docs/design.md#ingest).

-- inbox_cursor is the single-row watermark W of the MySQL inbox: every ID in
-- (start, watermark] has been produced to msgx.inbox. hole_since is when the
-- gap right after W was first seen (it survives restarts); hole_end is the last
-- missing ID of that gap, so a partly filled gap keeps its timer while a new
-- gap after it starts a fresh one.
CREATE TABLE inbox_cursor (
    id          smallint    PRIMARY KEY CHECK (id = 1),
    watermark   bigint      NOT NULL CHECK (watermark >= 0),
    hole_since  timestamptz,
    hole_end    bigint,
    seed_mode   text        NOT NULL,
    seeded_at   timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- inbox_hole records every gap the bridge released without reading it
-- (a permanent hole): the IDs first_id..last_id were skipped. Recent holes are
-- watched for late rows.
CREATE TABLE inbox_hole (
    first_id     bigint      PRIMARY KEY,
    last_id      bigint      NOT NULL CHECK (last_id >= first_id),
    observed_at  timestamptz NOT NULL,
    released_at  timestamptz NOT NULL,
    reason       text        NOT NULL
);
CREATE INDEX inbox_hole_released_at ON inbox_hole (released_at);

-- inbox_late_row lists IDs that appeared in the inbox after their hole had been
-- released. They are reported, never enqueued out of order.
CREATE TABLE inbox_late_row (
    msg_id    bigint      PRIMARY KEY,
    hole_id   bigint      NOT NULL REFERENCES inbox_hole (first_id),
    seen_at   timestamptz NOT NULL
);
