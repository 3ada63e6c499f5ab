package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/tables/flight"
)

// The flights table's placeholders in PostgreSQL (flight_placeholder,
// migration 0028): a master that children name and that is not a flight yet
// is table bookkeeping only, never a row of the read model; it is kept here,
// written in the transaction of the transitions that change it, so that the
// processor's recovery after a crash finds every table value it may have to
// go back to (docs/design.md#group-commits).

// QueuePlaceholders queues on b the upsert of the placeholders put (table
// values, each FLID once) and the deletion of the placeholder rows of gone:
// masters created since (now flights) or placeholders their last child left.
func QueuePlaceholders(b *pgx.Batch, put []*flight.State, gone []string, now time.Time) error {
	if len(gone) > 0 {
		b.Queue(`DELETE FROM flight_placeholder WHERE flid = ANY($1)`, gone)
	}
	if len(put) == 0 {
		return nil
	}
	flids, states := make([]string, len(put)), make([]string, len(put))
	msgs := make([]int64, len(put))
	for i, p := range put {
		if !p.IsPlaceholder() {
			return fmt.Errorf("writing placeholder %s: state %q", p.FLID, p.State)
		}
		j, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encoding placeholder %s: %w", p.FLID, err)
		}
		flids[i], states[i], msgs[i] = p.FLID, string(j), p.LastMsgID
	}
	b.Queue(`INSERT INTO flight_placeholder (flid, last_msg_id, table_state, updated_at)
		SELECT f, m, s::jsonb, $4 FROM unnest($1::text[], $2::bigint[], $3::text[]) AS x(f, m, s)
		ON CONFLICT (flid) DO UPDATE SET last_msg_id = EXCLUDED.last_msg_id, table_state = EXCLUDED.table_state,
			updated_at = EXCLUDED.updated_at`, flids, msgs, states, now)
	return nil
}

// Placeholder reads the placeholder PostgreSQL holds for flid; nil when it
// holds none.
func Placeholder(ctx context.Context, pool *pgxpool.Pool, flid string) (*flight.State, error) {
	var raw []byte
	err := pool.QueryRow(ctx, `SELECT table_state FROM flight_placeholder WHERE flid = $1`, flid).Scan(&raw)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the placeholder of %s: %w", flid, err)
	}
	s, err := decodeTableState(flid, raw)
	if err != nil {
		return nil, err
	}
	if !s.IsPlaceholder() {
		return nil, fmt.Errorf("the placeholder row of %s holds a %s", flid, s.State)
	}
	return s, nil
}

// PlaceholderStates reads every placeholder, ordered by FLID (msgx reseed).
func PlaceholderStates(ctx context.Context, pool *pgxpool.Pool) ([]*flight.State, error) {
	rows, err := pool.Query(ctx, `SELECT flid, table_state FROM flight_placeholder ORDER BY flid`)
	if err != nil {
		return nil, fmt.Errorf("reading the placeholders: %w", err)
	}
	defer rows.Close()
	var out []*flight.State
	for rows.Next() {
		var flid string
		var raw []byte
		if err := rows.Scan(&flid, &raw); err != nil {
			return nil, fmt.Errorf("reading the placeholders: %w", err)
		}
		s, err := decodeTableState(flid, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the placeholders: %w", err)
	}
	return out, nil
}
