-- flight_hist keeps the flights the history sweep took out of the read model
-- (their last state, as the flight JSON), one row per purge.
CREATE TABLE flight_hist (
    id             bigserial   PRIMARY KEY,
    flid           text        NOT NULL,
    operation_day  date,
    state          text        NOT NULL,
    state_version  bigint      NOT NULL,
    last_msg_id    bigint      NOT NULL,
    doc            jsonb       NOT NULL,
    purged_at      timestamptz NOT NULL
);
CREATE INDEX flight_hist_flid ON flight_hist (flid);
CREATE INDEX flight_hist_day ON flight_hist (operation_day);
