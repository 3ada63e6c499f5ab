package sink

import (
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

const flightChangeSQL = `INSERT INTO flight_change (flid, state_version, msg_id, replay_gen, source, state, changed, at, recorded_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`

// QueueFlightChange queues, on the batch of the transaction that writes
// version s of a flight, its flight_change row: s is the state Apply
// returned with a new version (Result.Applied), replay the generation of
// the transition that made it (flight.Transition.Replay). A transition
// delivered again that makes the same version again finds the row there
// and adds nothing. now is recorded_at, what the retention counts from.
func QueueFlightChange(b *pgx.Batch, s *flight.State, replay int64, now time.Time) error {
	if s == nil || s.Last == nil {
		return fmt.Errorf("recording a change of flight: no state or no provenance")
	}
	changed := s.Last.Changed
	if changed == nil {
		changed = []string{}
	}
	b.Queue(flightChangeSQL, s.FLID, s.StateVersion, s.Last.MsgID, replay, s.Last.Source, s.State, changed, s.UpdatedAt, now)
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
