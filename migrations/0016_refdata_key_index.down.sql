DROP TABLE refdata_key_index;
