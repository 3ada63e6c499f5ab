DROP TABLE ref_table_state;
