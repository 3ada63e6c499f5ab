-- The flight tags of the AODB's sample files that 0003 did not model (issue
-- 12): the A-CDM times, the runway, the FLAB label (text + ARES), the PORT
-- group (POTM, POID) and two collections. Each scalar is a flight_schd
-- column like the others (lower-cased SIS tag, NULL when cleared); the
-- writer (sink.WriteFlight) sets every column of flight.FieldTags.
ALTER TABLE flight_schd
    -- A-CDM times (ddMMMyyHHmm) and the runway
    ADD COLUMN cobt text, ADD COLUMN ctot text, ADD COLUMN eobt text, ADD COLUMN tobt text, ADD COLUMN iest text,
    ADD COLUMN runw text,
    -- PORT, by its parts
    ADD COLUMN potm text, ADD COLUMN poid text,
    -- FLAB, by its SIS parts: the text and attribute ARES
    ADD COLUMN flab text, ADD COLUMN ares text;

-- PSHT is keyed by its PSHN attribute (source_seq), like the other
-- sequenced collections.
CREATE TABLE flight_psht (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    pstm text, psid text, pust text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);

-- TIPT has no sequence attribute (source_seq stays NULL): message order.
CREATE TABLE flight_tipt (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    trtm text, trst text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);
