-- Earlier versions read table_state alone as the whole table value.
UPDATE flight_schd SET table_state = doc || table_state WHERE table_state IS NOT NULL;
COMMENT ON COLUMN flight_schd.table_state IS NULL;
