-- From this version flight_schd.table_state holds only what the flights
-- table value has beyond doc (links, lastChange, replayed): the whole value
-- is doc || table_state, and a group commit writes and parses one copy of
-- the flight document instead of two. Rows written before hold the whole
-- value, which the concatenation reads alike; nothing is rewritten.
COMMENT ON COLUMN flight_schd.table_state IS
    'the flights table value beyond doc (links, lastChange, replayed): the whole value is doc || table_state; NULL before migration 0020';
