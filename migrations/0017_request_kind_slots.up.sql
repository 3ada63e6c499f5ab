-- One open request per kind (SPEC §9, seeds 001 §1.2, US-09 AC1): one RQRD,
-- whatever categories its STYP list names, and one RQFD. 0006 kept one open
-- RQRD per category.
--
-- An RQRD now names one or more categories: rtypes in the order sent, styp
-- their comma-separated list (META/STYP as sent). answered lists the
-- categories whose RESP was applied; the request is DONE when all are.

-- The open RQRDs of different categories become one: the newest stays open,
-- the others are closed as a newer request of their kind would have closed
-- them when it was registered.
WITH newest AS (
    SELECT id, seqn, created_at FROM req_track
    WHERE kind = 'RQRD' AND state IN ('PENDING', 'SENT') ORDER BY id DESC LIMIT 1)
UPDATE req_track r SET state = 'EXPIRED', closed_at = GREATEST(n.created_at, r.created_at),
    close_reason = 'SUPERSEDED by SEQN ' || n.seqn
FROM newest n
WHERE r.kind = 'RQRD' AND r.state IN ('PENDING', 'SENT') AND r.id <> n.id;

ALTER TABLE req_track ADD COLUMN answered text[] NOT NULL DEFAULT '{}';
UPDATE req_track SET answered = rtypes WHERE kind = 'RQRD' AND state = 'DONE';

ALTER TABLE req_track DROP CONSTRAINT req_track_check;
ALTER TABLE req_track ADD CONSTRAINT req_track_shape CHECK (CASE kind
    WHEN 'RQFD' THEN styp = 'NONE' AND window_from IS NOT NULL AND window_to IS NOT NULL
                     AND window_from < window_to AND cardinality(rtypes) = 0 AND cardinality(answered) = 0
    ELSE window_from IS NULL AND window_to IS NULL AND cardinality(rtypes) > 0
         AND styp = array_to_string(rtypes, ',') AND answered <@ rtypes
END);

DROP INDEX req_track_open_slot;
CREATE UNIQUE INDEX req_track_open_kind ON req_track (kind) WHERE state IN ('PENDING', 'SENT');

-- The daily reference schedule asks "which categories were requested since
-- HH:MM?".
DROP INDEX req_track_slot_created;
CREATE INDEX req_track_kind_created ON req_track (kind, created_at);
