ALTER TABLE event_outbox RESET (parallel_workers);
