-- The latest DEAD messages of each class (the status report's
-- deadLatestByClass, shown by the status page) read from a few index entries
-- per class. Without it the newest rows of a class whose last DEAD message is
-- old are found by walking the whole primary key backwards (seconds on 3
-- million rows). Partial: DEAD rows only (5 MB for 135k of them). Built at
-- start-up before the processors run (about a second on 3 million rows).
CREATE INDEX proc_state_dead ON proc_state (error_class, msg_id) WHERE state = 'DEAD';
