DROP TABLE IF EXISTS flight_hist;
