-- The flight read model (docs/design.md#flight-state): one flight_schd row per
-- FLID with every scalar as its own column and the full flight JSON in doc,
-- plus one detail table per collection. sink.WriteFlight is the only writer;
-- it replaces a flight's detail rows (delete then insert, message order) on
-- every write and never lets a row go back to an older state.

-- flight_schd is one row per FLID. doc is State.View() marshalled (the flight
-- JSON of docs/design.md#events): the read API and the schd topic serve it as
-- stored. The scalar columns are the same values, lower-cased SIS tag names,
-- for SQL readers; a cleared scalar is NULL.
CREATE TABLE flight_schd (
    flid               text        PRIMARY KEY,
    operation_day      date,
    state              text        NOT NULL CHECK (state IN ('ACTIVE', 'DELETED')),
    state_version      bigint      NOT NULL,
    last_msg_id        bigint      NOT NULL,
    updated_at         timestamptz NOT NULL,
    doc                jsonb       NOT NULL,
    -- The highest state_version published on the schd topic; the row is due
    -- while state_version > schd_sent_version (emitters/schd).
    schd_sent_version  bigint      NOT NULL DEFAULT 0,

    -- identity and plan
    alcd text, alsc text, flno text, mvin text, sodt text, flty text, flin text, acft text, reno text,
    -- service and operation
    taop text, tafl text, taid text, trml text, csop text, csft text, maid text,
    -- times
    estt text, actt text, botm text, lacl text, fint text, appt text, egsr text, egst text, padt text,
    naat text, neat text, pedt text, ftss text,
    -- resources and status
    stnd text, phag text, fhag text, mhag text, cncl text, remc text, maxp text, vipp text, vipr text,
    lbno text, lbwt text, paxc text, exsc text, exsr text,
    -- AODB's own flight id field
    ffid text,
    -- attributed elements, by their SIS parts: FDIV (DDES, DDIR), FRET (REID)
    fdiv text, ddes text, ddir text, fret text, reid text,
    -- derived status flags (boarding, last call)
    bdst text, lcst text
);

CREATE INDEX flight_schd_operation_day ON flight_schd (operation_day);
-- Master/shared lookups (MAID must be indexed, docs/design.md#codeshare).
CREATE INDEX flight_schd_maid ON flight_schd (maid) WHERE maid IS NOT NULL;
-- What the schd flusher still owes, oldest change first. The predicate keeps
-- the index as small as the backlog.
CREATE INDEX flight_schd_schd_due ON flight_schd (updated_at, flid) WHERE state_version > schd_sent_version;

-- Collection detail tables. ordinal is the position in the flight's
-- collection (message order) from 1; source_seq is the upstream sequence
-- attribute (GTNO, CKNO, …), nullable and possibly repeated: equal resource
-- numbers are different allocations and are never de-duplicated. Element
-- keys without a column of their own are kept in extra (NULL when none).

CREATE TABLE flight_gtdt (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    gate text, pgot text, pgct text, gotm text, gctm text, gtyp text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);

CREATE TABLE flight_ckdt (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    chkc text, ccls text, pcot text, pcct text, cotm text, cctm text, ctyp text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);

CREATE TABLE flight_cldt (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    belt text, bcls text, pcot text, pcct text, fbag text, lbag text, btyp text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);

-- CHDT's class and type are CCLS/CTYP (not CHCLS/CHTYP).
CREATE TABLE flight_chdt (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    chut text, ccls text, pcbt text, pcet text, cbtm text, cetm text, ctyp text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);

CREATE TABLE flight_psdt (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    psst text, stst text, stet text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);

CREATE TABLE flight_chot (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    chtm text, chid text, chst text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);

CREATE TABLE flight_abtm (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    abdg text, abop text, aotm text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);

-- DELY has no sequence attribute (source_seq stays NULL); "text" is the
-- element's character data.
CREATE TABLE flight_dely (
    flid text NOT NULL, ordinal integer NOT NULL, source_seq text,
    code text, strt text, dura text, "text" text,
    extra jsonb,
    PRIMARY KEY (flid, ordinal)
);

-- ROUT and ERUT are separate collections (at most 4 points each): the kind
-- is part of the key so their ordinals never collide.
CREATE TABLE flight_route_point (
    flid       text    NOT NULL,
    route_kind text    NOT NULL CHECK (route_kind IN ('ROUT', 'ERUT')),
    ordinal    integer NOT NULL,
    rtno text, apcd text, scat text, scdt text,
    extra jsonb,
    PRIMARY KEY (flid, route_kind, ordinal)
);

-- SRVT and VIPF are stored verbatim (the element's XML), never merged.
CREATE TABLE flight_srvt (
    flid text NOT NULL, ordinal integer NOT NULL, raw text NOT NULL,
    PRIMARY KEY (flid, ordinal)
);

CREATE TABLE flight_vipf (
    flid text NOT NULL, ordinal integer NOT NULL, raw text NOT NULL,
    PRIMARY KEY (flid, ordinal)
);
