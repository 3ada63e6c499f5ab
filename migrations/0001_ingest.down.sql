DROP TABLE IF EXISTS inbox_late_row;
DROP TABLE IF EXISTS inbox_hole;
DROP TABLE IF EXISTS inbox_cursor;
