-- The latest DEAD messages of each class (the status report's
-- deadLatestByClass, shown by the status page) without reading every DEAD
-- row: a few index entries per class.
CREATE INDEX proc_state_dead ON proc_state (error_class, msg_id) WHERE state = 'DEAD';
