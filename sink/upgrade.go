package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/tables/flight"
	"msgx/tables/message"
	"msgx/tables/refdata"
)

// LinksVersion is the schema version from which the router derives the
// codeshare transitions from its flight index (migration 0028,
// docs/design.md#codeshare). A database of an earlier version is upgraded
// only with its pipeline drained (UpgradeCheck).
const LinksVersion = 28

// UpgradeCheck refuses to migrate a database of an earlier msgx across
// LinksVersion while it has unfinished messages: their transitions were
// routed by a router that did not count the codeshare transitions, and the
// flight index is filled from the read model, which does not hold their
// effects yet. Run the earlier version until `msgx status` shows no
// unfinished message (and no lag on msgx-flights-loop), then upgrade. A
// new database, or one at LinksVersion or later, passes.
func UpgradeCheck(ctx context.Context, c Config) error {
	v, _, err := MigrationVersion(c)
	if err != nil || v == 0 || v >= LinksVersion {
		return err
	}
	pool, err := OpenPG(ctx, c)
	if err != nil {
		return err
	}
	defer pool.Close()
	n, lowest, err := Unfinished(ctx, pool)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("upgrading the database from schema %d needs a drained pipeline, and %d messages are unfinished (lowest #%d): "+
			"run the earlier msgx version until msgx status shows no unfinished message and no lag on msgx-flights-loop, then start this one",
			v, n, lowest)
	}
	return nil
}

// fillTableStates gives the rows an earlier msgx wrote what this version's
// crash recovery reads back (docs/design.md#group-commits), so that the
// first crash after an upgrade recovers them exactly: the table value of
// every flight whose flight_schd.table_state is NULL (written before
// migration 0020), the placeholders of masters that live children name and
// that are no flights (flight_placeholder, 0028), and the table value of
// every category without ref_table_state (0027). Each is derived from
// PostgreSQL's own rows, which are what the processors committed: a table
// value read from Kafka could be ahead of them. Idempotent and cheap once
// done: it writes only what is missing. The placeholders are filled once,
// for a database that comes from before they were kept (upgrade_todo,
// migration 0028): later, a master the history sweep purged is no
// placeholder although children still name it.
func fillTableStates(ctx context.Context, tx pgx.Tx, now time.Time) error {
	if err := fillFlights(ctx, tx); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `DELETE FROM upgrade_todo WHERE name = 'placeholders'`)
	if err != nil {
		return fmt.Errorf("reading the upgrade's work: %w", err)
	}
	if tag.RowsAffected() > 0 {
		if err := fillPlaceholders(ctx, tx, now); err != nil {
			return err
		}
	}
	return fillCategories(ctx, tx, now)
}

// fillFlights derives the table value of each flight without one from its
// row: the flight JSON (doc) with the bookkeeping the table adds — the
// links of its live children (flight_schd rows naming it), the provenance of
// its version and its last replayed change (flight_change).
func fillFlights(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT s.flid, s.doc,
			(SELECT jsonb_object_agg(c.flid, c.flno) FROM flight_schd c
				WHERE c.maid = s.flid AND c.flid <> s.flid AND c.state = 'ACTIVE'),
			l.msg_id, l.source, l.changed,
			(SELECT jsonb_build_array(r.replay_gen, r.msg_id) FROM flight_change r
				WHERE r.flid = s.flid AND r.replay_gen > 0 ORDER BY r.state_version DESC LIMIT 1)
		FROM flight_schd s
		LEFT JOIN flight_change l ON l.flid = s.flid AND l.state_version = s.state_version
		WHERE s.table_state IS NULL`)
	if err != nil {
		return fmt.Errorf("reading the flights without a table state: %w", err)
	}
	type filled struct{ flid, state string }
	var out []filled
	for rows.Next() {
		var flid string
		var doc []byte
		var children map[string]*string
		var lastMsg *int64
		var source *string
		var changed []string
		var replayed []int64
		if err := rows.Scan(&flid, &doc, &children, &lastMsg, &source, &changed, &replayed); err != nil {
			rows.Close()
			return fmt.Errorf("reading the flights without a table state: %w", err)
		}
		s := &flight.State{}
		if err := json.Unmarshal(doc, s); err != nil {
			rows.Close()
			return fmt.Errorf("decoding flight %s: %w", flid, err)
		}
		for c, flno := range children {
			if s.Links == nil {
				s.Links = map[string]flight.ChildLink{}
			}
			l := flight.ChildLink{Live: true}
			if flno != nil {
				l.FLNO = *flno
			}
			s.Links[c] = l
		}
		if lastMsg != nil && source != nil {
			s.Last = &flight.Provenance{MsgID: *lastMsg, Source: *source, Changed: changed}
		}
		if len(replayed) == 2 {
			s.Replayed = &message.ReplayMark{Gen: replayed[0], MsgID: replayed[1]}
		}
		b, err := json.Marshal(s)
		if err != nil {
			rows.Close()
			return fmt.Errorf("encoding flight %s: %w", flid, err)
		}
		out = append(out, filled{flid, string(b)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the flights without a table state: %w", err)
	}
	for _, f := range out {
		if _, err := tx.Exec(ctx, `UPDATE flight_schd SET table_state = $2 WHERE flid = $1 AND table_state IS NULL`, f.flid, f.state); err != nil {
			return fmt.Errorf("filling the table state of flight %s: %w", f.flid, err)
		}
	}
	return nil
}

// fillPlaceholders writes the placeholder of every master that live
// children in the read model name and that is no flight, unless it has one
// (flight.Placeholders).
func fillPlaceholders(ctx context.Context, tx pgx.Tx, now time.Time) error {
	rows, err := tx.Query(ctx, `SELECT `+tableValueSQL+` FROM flight_schd c
		WHERE c.state = 'ACTIVE' AND c.maid IS NOT NULL AND c.maid <> c.flid AND c.table_state IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM flight_schd m WHERE m.flid = c.maid)
			AND NOT EXISTS (SELECT 1 FROM flight_placeholder p WHERE p.flid = c.maid)`)
	if err != nil {
		return fmt.Errorf("reading the children of masters without a placeholder: %w", err)
	}
	var children []*flight.State
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			rows.Close()
			return fmt.Errorf("reading the children of masters without a placeholder: %w", err)
		}
		s := &flight.State{}
		if err := json.Unmarshal(raw, s); err != nil {
			rows.Close()
			return fmt.Errorf("decoding a child flight: %w", err)
		}
		children = append(children, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	put := flight.Placeholders(children)
	if len(put) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if err := QueuePlaceholders(b, put, nil, now); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

// fillCategories writes the table value of every category ref_master holds
// records of and ref_table_state does not: refdata.SeedState, with the
// category's version and last message taken from its records and from the
// applied marks of its transitions (a transition that only deleted records,
// or changed nothing, left its message and version there alone).
func fillCategories(ctx context.Context, tx pgx.Tx, now time.Time) error {
	rows, err := tx.Query(ctx, `SELECT m.rtype, m.rkey, m.attributes, m.updated_at, m.last_msg_id, m.version, COALESCE(k.key_tag, ''),
			COALESCE((SELECT max(a.msg_id) FROM transition_applied a WHERE a.kind = 'refdata' AND a.key = m.rtype), 0),
			COALESCE((SELECT max(a.state_version) FROM transition_applied a WHERE a.kind = 'refdata' AND a.key = m.rtype), 0)
		FROM ref_master m LEFT JOIN refdata_key_index k ON k.rtype = m.rtype
		WHERE NOT EXISTS (SELECT 1 FROM ref_table_state t WHERE t.rtype = m.rtype)
		ORDER BY m.rtype, m.rkey`)
	if err != nil {
		return fmt.Errorf("reading the categories without a table state: %w", err)
	}
	type cat struct {
		keyTag           string
		recs             map[string]refdata.Entry
		lastMsg, version int64
	}
	cats := map[string]*cat{}
	var order []string
	for rows.Next() {
		var rtype, rkey, tag string
		var attrs []byte
		var e refdata.Entry
		var lastMsg, version int64
		if err := rows.Scan(&rtype, &rkey, &attrs, &e.UpdatedAt, &e.LastMsgID, &e.Version, &tag, &lastMsg, &version); err != nil {
			rows.Close()
			return fmt.Errorf("reading the categories without a table state: %w", err)
		}
		if err := json.Unmarshal(attrs, &e.Attrs); err != nil {
			rows.Close()
			return fmt.Errorf("decoding reference record %s %q: %w", rtype, rkey, err)
		}
		e.UpdatedAt = e.UpdatedAt.UTC()
		c := cats[rtype]
		if c == nil {
			c = &cat{keyTag: tag, recs: map[string]refdata.Entry{}, lastMsg: lastMsg, version: version}
			cats[rtype] = c
			order = append(order, rtype)
		}
		c.recs[rkey] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(order) == 0 {
		return nil
	}
	states := make([]*RefState, 0, len(order))
	for _, rtype := range order {
		c := cats[rtype]
		s := refdata.SeedState(rtype, c.keyTag, c.recs)
		s.LastMsgID = max(s.LastMsgID, c.lastMsg)
		s.Version = max(s.Version, c.version)
		e, err := EncodeRefState(s)
		if err != nil {
			return err
		}
		states = append(states, e)
	}
	b := &pgx.Batch{}
	QueueRefTableStates(b, states, now)
	return tx.SendBatch(ctx, b).Close()
}
