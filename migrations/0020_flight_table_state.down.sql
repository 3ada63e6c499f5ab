ALTER TABLE flight_schd DROP COLUMN IF EXISTS table_state;
