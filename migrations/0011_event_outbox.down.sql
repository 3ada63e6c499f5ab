DROP TABLE IF EXISTS event_outbox;
