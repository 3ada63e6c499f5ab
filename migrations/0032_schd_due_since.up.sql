-- schd_due_since marks a flight the schd flusher owes a record (since its
-- first version the topic has not seen): the flights processor sets it when
-- it writes such a version and it is not set yet, the flusher clears it
-- when it has sent the newest version (emitters/schd). It replaces the
-- partial index on state_version > schd_sent_version, whose columns every
-- write changed: PostgreSQL cannot update a row in place on its page (HOT,
-- no new index entries) when an indexed column or one an index predicate
-- names changes. Now a write to a flight already due changes no indexed
-- column, and fillfactor leaves room on the page for the new version. At a
-- million messages the flight row's upsert was PostgreSQL's largest
-- statement (~45 µs per message against ~27 at 50,000), growing with the
-- dead versions and index entries of the non-HOT updates.
ALTER TABLE flight_schd ADD COLUMN IF NOT EXISTS schd_due_since timestamptz;
UPDATE flight_schd SET schd_due_since = updated_at WHERE state_version > schd_sent_version;
DROP INDEX IF EXISTS flight_schd_schd_due;
CREATE INDEX flight_schd_schd_due ON flight_schd (schd_due_since, flid) WHERE schd_due_since IS NOT NULL;
-- A flight row is ~1 KB: 70 % keeps two new versions' room on each page
-- (applies to pages written from now on).
ALTER TABLE flight_schd SET (fillfactor = 70);
