-- Back to one open RQRD per category. Fails if an RQRD names several
-- categories (0006 cannot store it).
DROP INDEX req_track_kind_created;
CREATE INDEX req_track_slot_created ON req_track (kind, styp, created_at);
DROP INDEX req_track_open_kind;
CREATE UNIQUE INDEX req_track_open_slot ON req_track (kind, styp) WHERE state IN ('PENDING', 'SENT');
ALTER TABLE req_track DROP CONSTRAINT req_track_shape;
ALTER TABLE req_track ADD CONSTRAINT req_track_check CHECK (CASE kind
    WHEN 'RQFD' THEN styp = 'NONE' AND window_from IS NOT NULL AND window_to IS NOT NULL
                     AND window_from < window_to AND cardinality(rtypes) = 0
    ELSE window_from IS NULL AND window_to IS NULL AND rtypes = ARRAY[styp]
END);
ALTER TABLE req_track DROP COLUMN answered;
