ALTER TABLE flight_schd RESET (fillfactor);
DROP INDEX IF EXISTS flight_schd_schd_due;
CREATE INDEX flight_schd_schd_due ON flight_schd (updated_at, flid) WHERE state_version > schd_sent_version;
ALTER TABLE flight_schd DROP COLUMN IF EXISTS schd_due_since;
