package sink

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgx/tables/flight"
)

// FlightChange is one row of flight_change (migration 0018), the change
// history of the flights: one row per flight version (docs/design.md#flight-change).
type FlightChange struct {
	FLID         string `json:"flid"`
	StateVersion int64  `json:"stateVersion"`
	// MsgID is the message of the change (a derived LINK's: the child's).
	MsgID int64 `json:"msgId"`
	// Replay is the replay generation of a replayed message's change; 0
	// otherwise.
	Replay int64 `json:"replay,omitempty"`
	// Source is the change's source, e.g. "FLOP-ESTT", "DERIVED-LINK".
	Source string `json:"source"`
	// State is the flight's lifecycle state after the change.
	State string `json:"state"`
	// Changed is the version's change list (flight.ChangeOrder).
	Changed []string `json:"changed"`
	// At is the version's updatedAt: its message's first enqueue.
	At time.Time `json:"at"`
}

const flightChangesSQL = `INSERT INTO flight_change (flid, state_version, msg_id, replay_gen, source, state, changed, at, recorded_at)
	SELECT f, v, m, r, s, st, ARRAY(SELECT jsonb_array_elements_text(c)), a, $9
	FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::jsonb[], $8::timestamptz[])
		AS x(f, v, m, r, s, st, c, a)
	ON CONFLICT DO NOTHING`

// Change is one new version for QueueFlightChanges: s is the state Apply
// returned with a new version (Result.Applied), Replay the generation of the
// transition that made it (flight.Transition.Replay).
type Change struct {
	State  *flight.State
	Replay int64
}

// QueueFlightChanges queues, on the batch of the transaction that writes
// the versions, their flight_change rows in one statement. A transition
// delivered again that makes the same version again finds the row there
// and adds nothing. now is recorded_at, what the retention counts from.
func QueueFlightChanges(b *pgx.Batch, changes []Change, now time.Time) error {
	if len(changes) == 0 {
		return nil
	}
	n := len(changes)
	flids, sources, states := make([]string, n), make([]string, n), make([]string, n)
	versions, msgs, replays := make([]int64, n), make([]int64, n), make([]int64, n)
	changed := make([]string, n)
	ats := make([]time.Time, n)
	for i, c := range changes {
		s := c.State
		if s == nil || s.Last == nil {
			return fmt.Errorf("recording a change of flight: no state or no provenance")
		}
		tags := s.Last.Changed
		if tags == nil {
			tags = []string{}
		}
		j, err := json.Marshal(tags)
		if err != nil {
			return fmt.Errorf("encoding the change list of flight %s v%d: %w", s.FLID, s.StateVersion, err)
		}
		flids[i], versions[i], msgs[i], replays[i] = s.FLID, s.StateVersion, s.Last.MsgID, c.Replay
		sources[i], states[i], changed[i], ats[i] = s.Last.Source, s.State, string(j), s.UpdatedAt
	}
	b.Queue(flightChangesSQL, flids, versions, msgs, replays, sources, states, changed, ats, now)
	return nil
}

// FlightChanges is the result of QueueFlightChangesAfter, filled once its
// batch has run.
type FlightChanges struct {
	// Rows are the versions found, oldest first (at most the limit).
	Rows []FlightChange
	// Total is how many versions there are in all.
	Total int
}

// QueueFlightChangesAfter queues on b the read of the versions of flid that
// messages newer than msgID made and whose change list shares a tag with
// tags (every version when tags is empty): at most limit, oldest first, and
// their number.
func QueueFlightChangesAfter(b *pgx.Batch, flid string, msgID int64, tags []string, limit int) *FlightChanges {
	out := &FlightChanges{}
	if tags == nil {
		tags = []string{}
	}
	b.Queue(`SELECT flid, state_version, msg_id, replay_gen, source, state, changed, at, count(*) OVER ()
		FROM flight_change
		WHERE flid = $1 AND msg_id > $2 AND (cardinality($3::text[]) = 0 OR changed && $3::text[])
		ORDER BY state_version, msg_id LIMIT $4`, flid, msgID, tags, limit).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var c FlightChange
			if err := rows.Scan(&c.FLID, &c.StateVersion, &c.MsgID, &c.Replay, &c.Source, &c.State, &c.Changed, &c.At, &out.Total); err != nil {
				return fmt.Errorf("reading the changes of flight %s after message %d: %w", flid, msgID, err)
			}
			c.At = c.At.UTC()
			out.Rows = append(out.Rows, c)
		}
		return rows.Err()
	})
	return out
}
