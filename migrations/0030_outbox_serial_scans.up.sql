-- event_outbox is a queue: a few thousand live rows over the pages a backlog
-- left behind. With its statistics after a vacuum, PostgreSQL planned the
-- publisher's read of the oldest rows as a parallel sequential scan about
-- one time in eight during a million-message backlog, and starting the
-- worker cost more than the read (103 ms against 65 ms per read of 1,000
-- rows). The table is never scanned in parallel.
ALTER TABLE event_outbox SET (parallel_workers = 0);
