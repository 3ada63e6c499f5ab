package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/tables/flight"
	"msgx/tables/refdata"
)

// Unfinished counts the messages not yet terminal (PENDING, FAILED, ROUTED)
// and returns the lowest of them: their inbox records or transitions live
// on the Kafka cluster they were routed on, so a move to another cluster
// waits until there are none (docs/operations.md, "Moving to another Kafka
// cluster").
func Unfinished(ctx context.Context, pool *pgxpool.Pool) (n, lowest int64, err error) {
	var low *int64
	err = pool.QueryRow(ctx, `SELECT count(*), min(msg_id) FROM proc_state WHERE state IN ('PENDING', 'FAILED', 'ROUTED')`).Scan(&n, &low)
	if err != nil {
		return 0, 0, fmt.Errorf("counting unfinished messages: %w", err)
	}
	if low != nil {
		lowest = *low
	}
	return n, lowest, nil
}

// TableStates reads the whole flights table value of every flight of the
// read model (doc || table_state, migration 0020), ordered by FLID.
// legacy lists the flights last written before that migration, whose
// table value PostgreSQL does not hold.
func TableStates(ctx context.Context, pool *pgxpool.Pool) (states []*flight.State, legacy []string, err error) {
	rows, err := pool.Query(ctx, `SELECT flid, `+tableValueSQL+` FROM flight_schd ORDER BY flid`)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the flights' table states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var flid string
		var raw []byte
		if err := rows.Scan(&flid, &raw); err != nil {
			return nil, nil, fmt.Errorf("reading the flights' table states: %w", err)
		}
		if raw == nil {
			legacy = append(legacy, flid)
			continue
		}
		s, err := decodeTableState(flid, raw)
		if err != nil {
			return nil, nil, err
		}
		states = append(states, s)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading the flights' table states: %w", err)
	}
	return states, legacy, nil
}

// RefdataStates rebuilds the refdata table value of every category stored in
// ref_master (refdata.SeedState), ordered by RTYPE.
func RefdataStates(ctx context.Context, pool *pgxpool.Pool) ([]*refdata.State, error) {
	rows, err := pool.Query(ctx, `SELECT m.rtype, m.rkey, m.attributes, m.updated_at, m.last_msg_id, m.version, coalesce(k.key_tag, '')
		FROM ref_master m LEFT JOIN refdata_key_index k ON k.rtype = m.rtype ORDER BY m.rtype, m.rkey`)
	if err != nil {
		return nil, fmt.Errorf("reading reference data: %w", err)
	}
	defer rows.Close()
	var out []*refdata.State
	var cur string
	var keyTag string
	var recs map[string]refdata.Entry
	flush := func() {
		if cur != "" {
			out = append(out, refdata.SeedState(cur, keyTag, recs))
		}
	}
	for rows.Next() {
		var rtype, rkey, tag string
		var attrs []byte
		var e refdata.Entry
		if err := rows.Scan(&rtype, &rkey, &attrs, &e.UpdatedAt, &e.LastMsgID, &e.Version, &tag); err != nil {
			return nil, fmt.Errorf("reading reference data: %w", err)
		}
		if err := json.Unmarshal(attrs, &e.Attrs); err != nil {
			return nil, fmt.Errorf("decoding reference record %s %q: %w", rtype, rkey, err)
		}
		e.UpdatedAt = e.UpdatedAt.UTC()
		if rtype != cur {
			flush()
			cur, keyTag, recs = rtype, tag, map[string]refdata.Entry{}
		}
		recs[rkey] = e
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading reference data: %w", err)
	}
	flush()
	return out, nil
}

// ResetSchdSent makes every flight due on the schd topic again: after a
// move, the new cluster's compacted schd topic gets the latest state of
// every flight from the flusher (emitters/schd).
func ResetSchdSent(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	tag, err := pool.Exec(ctx, `UPDATE flight_schd SET schd_sent_version = 0, schd_due_since = COALESCE(schd_due_since, updated_at)
		WHERE schd_sent_version <> 0 OR schd_due_since IS NULL`)
	if err != nil {
		return 0, fmt.Errorf("marking the flights due on the schd topic: %w", err)
	}
	return tag.RowsAffected(), nil
}

// TableState reads the flights table value PostgreSQL holds for flid
// (flight_schd's doc || table_state): found is false when there is no row,
// and s is nil with found true for a row written before migration 0020. The flights
// processor reads it when its table may be ahead of what PostgreSQL
// committed (docs/design.md#group-commits).
func TableState(ctx context.Context, pool *pgxpool.Pool, flid string) (s *flight.State, found bool, err error) {
	var raw []byte
	err = pool.QueryRow(ctx, `SELECT `+tableValueSQL+` FROM flight_schd WHERE flid = $1`, flid).Scan(&raw)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading the table state of flight %s: %w", flid, err)
	case raw == nil:
		return nil, true, nil
	}
	if s, err = decodeTableState(flid, raw); err != nil {
		return nil, false, err
	}
	return s, true, nil
}

// decodeTableState decodes flight flid's table value.
func decodeTableState(flid string, raw []byte) (*flight.State, error) {
	s := &flight.State{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("decoding the table state of flight %s: %w", flid, err)
	}
	if s.FLID != flid {
		return nil, fmt.Errorf("the table state of flight %s names flight %q", flid, s.FLID)
	}
	return s, nil
}
