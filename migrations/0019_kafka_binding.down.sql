DROP TABLE IF EXISTS kafka_binding_log;
DROP TABLE IF EXISTS kafka_binding;
