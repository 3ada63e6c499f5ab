DROP TABLE IF EXISTS flight_index;
DROP TABLE IF EXISTS transition_applied;
DROP TABLE IF EXISTS proc_state;
