package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/tables/refdata"
)

// refBatchSize bounds the statements sent in one pipeline. A DNLD may carry
// thousands of records: chunking keeps the client buffer and the server's
// pending results bounded while still costing one round trip per chunk
// rather than one per row.
const refBatchSize = 1000

// refUpsertSQL writes one record. The WHERE of the conflict branch is the
// never-backwards guard: a row already written by a later write (a higher
// version, refdata.Entry.Version, or the same version by a later message)
// is left alone, so a stale write never rolls a record back. Equal ones
// rewrite the same values, which keeps a repeated write idempotent. The
// version, not the message id, orders the writes: a replayed older message
// (docs/design.md#replay) must overwrite what a newer message wrote.
const refUpsertSQL = `INSERT INTO ref_master (rtype, rkey, attributes, updated_at, last_msg_id, version)
	VALUES ($1, $2, $3, $4, $5, $6)
	ON CONFLICT (rtype, rkey) DO UPDATE SET
		attributes = EXCLUDED.attributes, updated_at = EXCLUDED.updated_at, last_msg_id = EXCLUDED.last_msg_id,
		version = EXCLUDED.version
	WHERE (ref_master.version, ref_master.last_msg_id) <= (EXCLUDED.version, EXCLUDED.last_msg_id)`

// refDeleteSQL removes records deleted at category version $3. A row
// written by a later version (re-added after the deletion) is kept for the
// same reason as the upsert guard.
const refDeleteSQL = `DELETE FROM ref_master WHERE rtype = $1 AND rkey = ANY($2) AND version <= $3`

// WriteRefData writes the outcome of refdata.Apply to ref_master inside the
// caller's transaction, which also holds the completion mark (MarkApplied):
// the record and the mark commit together or not at all. s is the state
// after Apply and r its Result.
//
// Every key of r.Upserts is written from s.Records (attributes, UpdatedAt,
// LastMsgID, Version); every key of r.Deletes is removed. A deletion carries
// no entry, so its version is s.Version: the category's version after the
// deleting transition, and a replayed Result lists deletes only when it
// replays that very transition.
//
// Writes are idempotent and guarded by (version, last_msg_id): writing the
// same Result twice, or a replayed Result (r.Replay) re-listing the writes
// still current, leaves the same rows, and neither an upsert nor a delete
// touches a row a later write wrote. One case the guard cannot cover without
// tombstones: if s lags PostgreSQL (the goka table was lost and is rebuilt
// from msgx.inbox while PostgreSQL kept the newer rows), re-applying an old
// message re-inserts a key a later message deleted, until that later
// message is re-applied and deletes it again; the rows converge.
//
// Statements are pipelined with tx.SendBatch in chunks of refBatchSize. There
// is no timeout of its own: ctx is the transaction's, bounded by the caller
// like every other statement of that transaction.
func WriteRefData(ctx context.Context, tx pgx.Tx, s *refdata.State, r refdata.Result) error {
	if len(r.Upserts) == 0 && len(r.Deletes) == 0 {
		return nil
	}
	if s == nil || s.RType == "" {
		return errors.New("writing reference data: no state (or a state without RTYPE) for a non-empty result")
	}
	b := &pgx.Batch{}
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		n := b.Len()
		err := tx.SendBatch(ctx, b).Close()
		b = &pgx.Batch{}
		if err != nil {
			return fmt.Errorf("writing %d reference statements of %s (message %d): %w", n, s.RType, s.LastMsgID, err)
		}
		return nil
	}
	// Deletes go first so that a Result naming a key in both lists (Apply
	// never does) ends with the upsert, the state's own view of the key.
	for start := 0; start < len(r.Deletes); start += refBatchSize {
		keys := r.Deletes[start:min(start+refBatchSize, len(r.Deletes))]
		b.Queue(refDeleteSQL, s.RType, keys, s.Version)
	}
	for _, key := range r.Upserts {
		e, ok := s.Records[key]
		if !ok {
			// Apply lists only keys it keeps; a missing one means the Result
			// and the state do not belong together.
			return fmt.Errorf("writing reference data %s %q: upserted key is not in the state", s.RType, key)
		}
		rec := e.Attrs
		if rec == nil {
			rec = refdata.Record{} // the column holds an object, never null
		}
		attrs, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("encoding reference record %s %q: %w", s.RType, key, err)
		}
		b.Queue(refUpsertSQL, s.RType, key, json.RawMessage(attrs), e.UpdatedAt.UTC(), e.LastMsgID, e.Version)
		if b.Len() >= refBatchSize {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// RefRow is one ref_master row as the readers return it.
type RefRow struct {
	// RType is the category (META.TYPE), e.g. "AIRL" or "RSTA".
	RType string
	// RKey is the record key; "RTYP|RSID" for RSTA.
	RKey string
	// Attributes is the stored record (refdata.Record) as JSON.
	Attributes json.RawMessage
	// UpdatedAt is when the record last changed (UTC).
	UpdatedAt time.Time
	// LastMsgID is the message that last wrote the record.
	LastMsgID int64
	// Status is the resource status at the reader's instant ("E" or "D"),
	// computed with refdata.StatusAt; empty for every RTYPE but RSTA.
	Status string
	// StatusUntil is when Status changes by itself (its window's start or
	// end), nil when it holds until the next event or for non-RSTA rows.
	StatusUntil *time.Time
}

const refColumns = `rtype, rkey, attributes, updated_at, last_msg_id`

// RefRecords returns every record of rtype sorted by key (byte order, like
// refdata.State.List); an RTYPE without rows gives an empty slice. RSTA rows
// carry their status at instant at, windows read in loc (the airport time
// zone; nil means UTC). The query is bounded by timeout.
func RefRecords(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration, rtype string, at time.Time, loc *time.Location) ([]RefRow, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("reading reference data %s: non-positive timeout %v", rtype, timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT `+refColumns+` FROM ref_master WHERE rtype = $1 ORDER BY rkey`, rtype)
	if err != nil {
		return nil, fmt.Errorf("reading reference data %s: %w", rtype, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RefRow, error) {
		return scanRefRow(row, at, loc)
	})
	if err != nil {
		return nil, fmt.Errorf("reading reference data %s: %w", rtype, err)
	}
	if out == nil {
		out = []RefRow{}
	}
	return out, nil
}

// RefRecord returns one record; ok is false when (rtype, rkey) has no row. An
// RSTA row carries its status at instant at (windows read in loc). The query
// is bounded by timeout.
func RefRecord(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration, rtype, rkey string, at time.Time, loc *time.Location) (RefRow, bool, error) {
	if timeout <= 0 {
		return RefRow{}, false, fmt.Errorf("reading reference record %s %q: non-positive timeout %v", rtype, rkey, timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	row, err := scanRefRow(pool.QueryRow(ctx, `SELECT `+refColumns+` FROM ref_master WHERE rtype = $1 AND rkey = $2`, rtype, rkey), at, loc)
	if errors.Is(err, pgx.ErrNoRows) {
		return RefRow{}, false, nil
	}
	if err != nil {
		return RefRow{}, false, fmt.Errorf("reading reference record %s %q: %w", rtype, rkey, err)
	}
	return row, true, nil
}

// scanRefRow scans refColumns and, for RSTA, derives the status at at.
func scanRefRow(row pgx.Row, at time.Time, loc *time.Location) (RefRow, error) {
	var r RefRow
	var attrs []byte
	if err := row.Scan(&r.RType, &r.RKey, &attrs, &r.UpdatedAt, &r.LastMsgID); err != nil {
		return RefRow{}, err
	}
	r.Attributes = json.RawMessage(attrs)
	r.UpdatedAt = r.UpdatedAt.UTC()
	if r.RType == refdata.RSTA {
		var rec refdata.Record
		if err := json.Unmarshal(attrs, &rec); err != nil {
			return RefRow{}, fmt.Errorf("decoding RSTA %q: %w", r.RKey, err)
		}
		// The status depends on the record only; the entry's bookkeeping
		// fields are filled for completeness.
		r.Status, r.StatusUntil = refdata.StatusAt(refdata.Entry{Attrs: rec, UpdatedAt: r.UpdatedAt, LastMsgID: r.LastMsgID}, at, loc)
		if r.StatusUntil != nil {
			u := r.StatusUntil.UTC()
			r.StatusUntil = &u
		}
	}
	return r, nil
}

// RefState is a category's refdata table value as it was encoded, for
// QueueRefTableStates (EncodeRefState): its JSON and the columns beside
// it, copied, so that the state may change after it was encoded.
type RefState struct {
	rtype              string
	version, lastMsgID int64
	json               string
}

// EncodeRefState encodes s for QueueRefTableStates.
func EncodeRefState(s *refdata.State) (*RefState, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding the table state of category %s: %w", s.RType, err)
	}
	return &RefState{rtype: s.RType, version: s.Version, lastMsgID: s.LastMsgID, json: string(b)}, nil
}

// QueueRefTableStates queues, in one statement on b, the write of each
// category's table value to ref_table_state (migration 0027), never
// replacing a newer one (version, last_msg_id). Each RTYPE must be given
// once.
func QueueRefTableStates(b *pgx.Batch, states []*RefState, now time.Time) {
	if len(states) == 0 {
		return
	}
	rtypes, docs := make([]string, len(states)), make([]string, len(states))
	versions, msgs := make([]int64, len(states)), make([]int64, len(states))
	for i, s := range states {
		rtypes[i], docs[i], versions[i], msgs[i] = s.rtype, s.json, s.version, s.lastMsgID
	}
	b.Queue(`INSERT INTO ref_table_state (rtype, version, last_msg_id, table_state, updated_at)
		SELECT r, v, m, d::jsonb, $5 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[]) AS x(r, v, m, d)
		ON CONFLICT (rtype) DO UPDATE SET version = EXCLUDED.version, last_msg_id = EXCLUDED.last_msg_id,
			table_state = EXCLUDED.table_state, updated_at = EXCLUDED.updated_at
		WHERE (ref_table_state.version, ref_table_state.last_msg_id) <= (EXCLUDED.version, EXCLUDED.last_msg_id)`,
		rtypes, versions, msgs, docs, now)
}

// RefTableState reads the refdata table value PostgreSQL holds for rtype:
// found is false when ref_table_state has no row, and legacy then tells
// whether ref_master holds records of it all the same (written before
// migration 0027: the table value is unknown here).
func RefTableState(ctx context.Context, pool *pgxpool.Pool, rtype string) (s *refdata.State, found, legacy bool, err error) {
	var raw []byte
	err = pool.QueryRow(ctx, `SELECT (SELECT table_state FROM ref_table_state WHERE rtype = $1),
		EXISTS (SELECT 1 FROM ref_master WHERE rtype = $1)`, rtype).Scan(&raw, &legacy)
	if err != nil {
		return nil, false, false, fmt.Errorf("reading the table state of category %s: %w", rtype, err)
	}
	if raw == nil {
		return nil, false, legacy, nil
	}
	s = &refdata.State{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, false, false, fmt.Errorf("decoding the table state of category %s: %w", rtype, err)
	}
	if s.Records == nil {
		s.Records = map[string]refdata.Entry{}
	}
	return s, true, false, nil
}

// JSON is the encoded table value.
func (s *RefState) JSON() string { return s.json }
