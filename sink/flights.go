package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/tables/flight"
)

// DefaultFlightWriteTimeout bounds a flight write whose context has no
// deadline of its own (every database call runs under a timeout; the
// processor normally passes its MSGX_DB_TIMEOUT context).
const DefaultFlightWriteTimeout = 10 * time.Second

// detailTable maps one or more flight collections onto a detail table.
type detailTable struct {
	// table is the PostgreSQL table.
	table string
	// colls are the SIS collections stored in it: one, except ROUT and ERUT
	// sharing flight_route_point (told apart by route_kind).
	colls []string
	// keys are the element keys that have a column of their own (the key
	// lower-cased). Every other key but the sequence attribute goes to
	// extra.
	keys []string
	// seq is the collection's sequence attribute stored in source_seq; ""
	// for DELY and TIPT (no attribute: source_seq stays NULL) and for route
	// points (RTNO is a column of its own).
	seq string
	// kind marks flight_route_point (a route_kind column, no source_seq).
	kind bool
	// raw marks SRVT/VIPF: only the verbatim XML, in raw.
	raw bool
}

// detailTables lists the detail tables in flight.Collections order
// (docs/design.md#flight-state). Their index is their bit in a statement's
// shape.
var detailTables = []detailTable{
	{table: "flight_gtdt", colls: []string{"GTDT"}, seq: "GTNO", keys: []string{"GATE", "PGOT", "PGCT", "GOTM", "GCTM", "GTYP"}},
	{table: "flight_ckdt", colls: []string{"CKDT"}, seq: "CKNO", keys: []string{"CHKC", "CCLS", "PCOT", "PCCT", "COTM", "CCTM", "CTYP"}},
	{table: "flight_cldt", colls: []string{"CLDT"}, seq: "CLNO", keys: []string{"BELT", "BCLS", "PCOT", "PCCT", "FBAG", "LBAG", "BTYP"}},
	{table: "flight_chdt", colls: []string{"CHDT"}, seq: "CHNO", keys: []string{"CHUT", "CCLS", "PCBT", "PCET", "CBTM", "CETM", "CTYP"}},
	{table: "flight_psdt", colls: []string{"PSDT"}, seq: "PSNO", keys: []string{"PSST", "STST", "STET"}},
	{table: "flight_chot", colls: []string{"CHOT"}, seq: "CSNO", keys: []string{"CHTM", "CHID", "CHST"}},
	{table: "flight_abtm", colls: []string{"ABTM"}, seq: "ASNO", keys: []string{"ABDG", "ABOP", "AOTM"}},
	{table: "flight_dely", colls: []string{"DELY"}, keys: []string{"CODE", "STRT", "DURA", flight.TextKey}},
	{table: "flight_route_point", colls: []string{"ROUT", "ERUT"}, kind: true, keys: []string{"RTNO", "APCD", "SCAT", "SCDT"}},
	{table: "flight_psht", colls: []string{"PSHT"}, seq: "PSHN", keys: []string{"PSTM", "PSID", "PUST"}},
	{table: "flight_tipt", colls: []string{"TIPT"}, keys: []string{"TRTM", "TRST"}},
	{table: "flight_srvt", colls: []string{"SRVT"}, raw: true},
	{table: "flight_vipf", colls: []string{"VIPF"}, raw: true},
}

// columns returns the table's inserted columns and their SQL types.
func (d detailTable) columns() (cols, types []string) {
	switch {
	case d.raw:
		return []string{"flid", "ordinal", "raw"}, []string{"text", "integer", "text"}
	case d.kind:
		cols, types = []string{"flid", "route_kind", "ordinal"}, []string{"text", "text", "integer"}
	default:
		cols, types = []string{"flid", "ordinal", "source_seq"}, []string{"text", "integer", "text"}
	}
	for _, k := range d.keys {
		cols = append(cols, ident(strings.ToLower(k)))
		types = append(types, "text")
	}
	return append(cols, "extra"), append(types, "jsonb")
}

// FlightTables lists every table of the flight read model, flight_schd
// first. Tests and maintenance jobs (history sweep) use it.
var FlightTables = func() []string {
	out := []string{"flight_schd"}
	for _, d := range detailTables {
		out = append(out, d.table)
	}
	return out
}()

// FlightColumn returns the flight_schd column of a scalar tag of
// flight.FieldTags (the tag lower-cased).
func FlightColumn(tag string) string { return strings.ToLower(tag) }

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// flightColumns are the flight_schd columns a write sets, in parameter order,
// with their SQL types: the fixed ones, then one per flight.FieldTags.
// schd_sent_version is not among them: the schd flusher owns it; the write
// sets schd_due_since from updated_at (buildWriteSQL). Only the
// fixed ones are parameters (paramColumns): the statement reads the scalar
// columns from doc's fields (scalarsSQL).
var flightColumns, flightTypes = func() (cols, types []string) {
	cols = []string{"flid", "operation_day", "state", "state_version", "last_msg_id", "updated_at", "doc", "table_state"}
	types = []string{"text", "date", "text", "bigint", "bigint", "timestamptz", "jsonb", "jsonb"}
	for _, tag := range flight.FieldTags {
		cols = append(cols, ident(FlightColumn(tag)))
		types = append(types, "text")
	}
	return cols, types
}()

// paramColumns is how many of flightColumns are the write's parameters.
const paramColumns = 8

// scalarsSQL derives the scalar columns from doc in the statement: their
// values (a scalar's field, NULL when absent or empty) and the record of
// doc's fields they are read from, one jsonb_to_record per flight. The
// writer sends one copy of each flight — 8 arrays, not 69 — and
// PostgreSQL reads each document once: generated columns, tried instead,
// were computed twice per upsert (the proposed row and the update) and
// cost more than the arrays did.
var scalarsSQL = func() (values, record string) {
	vals := make([]string, len(flight.FieldTags))
	defs := make([]string, len(flight.FieldTags))
	for i, tag := range flight.FieldTags {
		vals[i] = fmt.Sprintf("NULLIF(sc.%s, '')", ident(tag))
		defs[i] = ident(tag) + " text"
	}
	return strings.Join(vals, ", "), "jsonb_to_record(%s -> 'fields') AS sc(" + strings.Join(defs, ", ") + ")"
}

// A write is one statement, built from the vocabulary so that columns and
// parameters cannot drift apart:
//
//	WITH up AS (upsert flight_schd ... RETURNING flid),   -- the flights written
//	     del_<table> AS (DELETE their rows from a detail table), ...
//	     ins_<table> AS (INSERT their new rows into a detail table), ...
//	SELECT count(*) FROM up
//
// The upsert's ON CONFLICT ... WHERE is the "never backwards" rule: a row is
// replaced only by a state at least as new in (state_version, last_msg_id).
// Both only grow (lastMsgId advances without a version bump when a message
// changes nothing visible), so a replay of an older state after a newer one
// changes nothing, while re-writing the same state is an idempotent rewrite.
// RETURNING yields only the rows inserted or updated, and every detail
// delete and insert joins it, so a skipped flight keeps its collections.
//
// Each insert waits for its table's delete through a scalar subquery on it
// (evaluated once, before the first row): the new rows reuse the keys of
// rows deleted in the same statement, and a row deleted by our own
// transaction no longer conflicts with them.
//
// Cost, measured on this project's machines (PostgreSQL 15, 2 cores): every
// table a statement touches costs ~20 µs whether or not it has rows; one
// statement per table was ~1 ms per flight. In one statement a full write is
// ~0.85 ms, an incremental one ~0.27 ms (scalars only) or ~0.45 ms (one
// collection), per flight, 100 writes per transaction (BenchmarkWriteFlight
// in flights_test.go). So the statement text
// depends on the write's shape and each shape is built once (and prepared
// once per connection by pgx):
//
//   - a full write (many flights, or a flight without provenance) deletes
//     from every detail table, since the stored collections are unknown
//     here, and inserts into the tables that have rows;
//   - a one-flight write is incremental: it touches only the tables of the
//     collections its version changed (State.Last.Changed), which is right
//     when the stored row is the previous version (or this one). The upsert
//     then also requires state_version >= the new version - 1, and the
//     statement reports the stored version; when the stored row is older
//     than that (versions were skipped: a batch, a rebuild, a lost write),
//     the write falls back to the full statement in a second round trip.
//     A typical FLOP changes scalars only: the statement is the upsert alone.
//     This relies on processing being deterministic
//     (docs/design.md#determinism): version v of a flight is the same state
//     whichever run wrote it. A rebuild under a different configuration
//     must empty FlightTables first.
//
// A group commit writes its flights with QueueFlightGroup instead: one
// multi-row incremental statement for every flight whose stored row is a
// version the group's changes build on, the subset shape (each detail
// table is emptied only for the flights whose versions changed its
// collections, given as one array per table), and one full statement for
// the rest.
type writeShape struct {
	many        bool
	incremental bool
	subset      bool   // many, and each deleted table has its own FLIDs
	del, ins    uint16 // bit i: detailTables[i] is deleted from / inserted into
}

// allDetails has a bit for every detail table.
var allDetails = uint16(1)<<len(detailTables) - 1

var writeSQLs sync.Map // writeShape → string

func writeSQL(shape writeShape) string {
	if s, ok := writeSQLs.Load(shape); ok {
		return s.(string)
	}
	s := buildWriteSQL(shape)
	writeSQLs.Store(shape, s)
	return s
}

func buildWriteSQL(shape writeShape) string {
	n := 0
	param := func(col, typ string) string {
		n++
		if shape.many {
			// Arrays of date and jsonb travel as text[]: the casts are per
			// element after unnest. doc is the exception: jsonb_to_record
			// reads it too, and a jsonb array is parsed once, at the bind.
			if typ == "date" || typ == "jsonb" && col != "doc" {
				return fmt.Sprintf("$%d::text[]", n)
			}
			return fmt.Sprintf("$%d::%s[]", n, typ)
		}
		return fmt.Sprintf("$%d::%s", n, typ)
	}
	var b strings.Builder
	sets := make([]string, 0, len(flightColumns))
	for _, c := range flightColumns[1:] {
		sets = append(sets, c+" = EXCLUDED."+c)
	}
	// The flight is due on the schd topic from its first version the topic
	// has not seen (emitters/schd): a new row is due at once; an update sets
	// the mark when it writes a version above the one sent and the mark is
	// not set yet, and keeps it otherwise — so a write to a flight already
	// due changes no indexed column and PostgreSQL updates the row in place
	// (migration 0032).
	sets = append(sets, "schd_due_since = CASE WHEN EXCLUDED.state_version > flight_schd.schd_sent_version"+
		" THEN COALESCE(flight_schd.schd_due_since, EXCLUDED.schd_due_since) ELSE flight_schd.schd_due_since END")
	fmt.Fprintf(&b, "WITH up AS (\n  INSERT INTO flight_schd (%s, schd_due_since)\n", strings.Join(flightColumns, ", "))
	scalars, record := scalarsSQL()
	var ps []string
	if !shape.subset {
		ps = make([]string, paramColumns)
		for i := range ps {
			ps[i] = param(flightColumns[i], flightTypes[i])
		}
	}
	if shape.many {
		sel := make([]string, paramColumns)
		for i, c := range flightColumns[:paramColumns] {
			sel[i] = "r." + c
			if flightTypes[i] == "date" || c == "table_state" {
				sel[i] += "::" + flightTypes[i]
			}
		}
		from := fmt.Sprintf("unnest(%s) AS r(%s)", strings.Join(ps, ", "), strings.Join(flightColumns[:paramColumns], ", "))
		if shape.subset {
			from = flightStage + " r" // copied there by stageFlights
		}
		fmt.Fprintf(&b, "  SELECT %s, %s, r.updated_at\n  FROM %s\n  CROSS JOIN LATERAL %s\n",
			strings.Join(sel, ", "), scalars, from, fmt.Sprintf(record, "r.doc"))
		if shape.subset {
			// The group's incremental write takes a flight only when its
			// stored row is at the version its changes build on (none
			// counts as 0); QueueFlightGroup writes the others whole.
			b.WriteString("  LEFT JOIN flight_schd cur ON cur.flid = r.flid\n  WHERE COALESCE(cur.state_version, 0) = r.base\n")
		}
	} else {
		fmt.Fprintf(&b, "  SELECT %s, %s, %s\n  FROM %s\n", strings.Join(ps, ", "), scalars, ps[slices.Index(flightColumns, "updated_at")],
			fmt.Sprintf(record, ps[slices.Index(flightColumns, "doc")]))
	}
	fmt.Fprintf(&b, "  ON CONFLICT (flid) DO UPDATE SET %s\n", strings.Join(sets, ", "))
	b.WriteString("  WHERE (flight_schd.state_version, flight_schd.last_msg_id) <= (EXCLUDED.state_version, EXCLUDED.last_msg_id)\n")
	if shape.incremental {
		b.WriteString("    AND flight_schd.state_version >= EXCLUDED.state_version - 1\n")
	}
	b.WriteString("  RETURNING flid\n)")
	for i, d := range detailTables {
		switch {
		case shape.del&(1<<i) == 0:
		case shape.subset:
			n++
			fmt.Fprintf(&b, ",\ndel_%s AS (DELETE FROM %s t USING up, unnest($%d::text[]) AS c(flid) WHERE t.flid = up.flid AND c.flid = up.flid RETURNING 1)",
				d.table, d.table, n)
		default:
			fmt.Fprintf(&b, ",\ndel_%s AS (DELETE FROM %s t USING up WHERE t.flid = up.flid RETURNING 1)", d.table, d.table)
		}
	}
	for i, d := range detailTables {
		if shape.ins&(1<<i) == 0 {
			continue
		}
		cols, types := d.columns()
		arrs := make([]string, len(cols))
		sel := make([]string, len(cols))
		for j, c := range cols {
			typ := types[j]
			if typ == "jsonb" {
				typ = "text"
			}
			n++
			arrs[j] = fmt.Sprintf("$%d::%s[]", n, typ)
			sel[j] = "r." + c
			if types[j] == "jsonb" {
				sel[j] += "::jsonb"
			}
		}
		fmt.Fprintf(&b, ",\nins_%s AS (\n  INSERT INTO %s (%s)\n  SELECT %s\n  FROM unnest(%s) AS r(%s)\n  JOIN up ON up.flid = r.flid\n",
			d.table, d.table, strings.Join(cols, ", "), strings.Join(sel, ", "), strings.Join(arrs, ", "), strings.Join(cols, ", "))
		if shape.del&(1<<i) != 0 {
			fmt.Fprintf(&b, "  WHERE (SELECT count(*) FROM del_%s) >= 0\n", d.table)
		}
		b.WriteString(")")
	}
	if shape.incremental {
		// The main query reads the snapshot the statement started with: the
		// stored version before the upsert.
		b.WriteString("\nSELECT (SELECT count(*) FROM up), f.state_version, f.last_msg_id\n" +
			"FROM (SELECT 1) AS one LEFT JOIN flight_schd f ON f.flid = $1")
	} else if shape.subset {
		b.WriteString("\nSELECT flid FROM up")
	} else {
		b.WriteString("\nSELECT count(*) FROM up")
	}
	return b.String()
}

// nullable returns nil for "" (a cleared or absent value is SQL NULL).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// WriteFlight writes one flight state to the read model inside the caller's
// transaction: the flight_schd row (every column and doc) and that FLID's
// detail rows, replaced as a whole in State order. It is idempotent and never
// goes backwards: when the stored row is newer than s (a higher
// state_version, or the same version with a higher last_msg_id) nothing is
// written. It is one statement (two when the stored row is older than the
// previous version, or absent while s is not a first version).
//
// ctx bounds the call; without a deadline DefaultFlightWriteTimeout applies.
func WriteFlight(ctx context.Context, tx pgx.Tx, s *flight.State) error {
	if s == nil {
		return errors.New("writing flight: nil state")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultFlightWriteTimeout)
		defer cancel()
	}
	if _, err := newestPerFLID([]*flight.State{s}); err != nil {
		return err
	}
	e, err := EncodeFlight(s)
	if err != nil {
		return err
	}
	// Incremental first (one statement in the common case), whole when it
	// cannot be.
	if s.Last != nil {
		if _, done, err := writeIncremental(ctx, tx, e); err != nil || done {
			return err
		}
	}
	_, err = WriteEncodedFlights(ctx, tx, []*Encoded{e})
	return err
}

// WriteFlights writes many flights in full in one statement (a group
// commit uses QueueFlightGroup). A FLID given more than once is written
// once, with its newest state. written counts the flights whose row was
// inserted or replaced (older states are skipped).
func WriteFlights(ctx context.Context, tx pgx.Tx, states []*flight.State) (written int, err error) {
	states, err = newestPerFLID(states)
	if err != nil || len(states) == 0 {
		return 0, err
	}
	encoded := make([]*Encoded, len(states))
	for i, st := range states {
		if encoded[i], err = EncodeFlight(st); err != nil {
			return 0, err
		}
	}
	return WriteEncodedFlights(ctx, tx, encoded)
}

// WriteEncodedFlights is WriteFlights for flights encoded already; each
// FLID must be given once.
func WriteEncodedFlights(ctx context.Context, tx pgx.Tx, encoded []*Encoded) (written int, err error) {
	if len(encoded) == 0 {
		return 0, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultFlightWriteTimeout)
		defer cancel()
	}
	sql, args := fullWrite(encoded)
	if err := tx.QueryRow(ctx, sql, args...).Scan(&written); err != nil {
		return 0, fmt.Errorf("writing %s: %w", describeFlights(encoded), err)
	}
	return written, nil
}

// fullWrite is the statement of a full write of encoded (each FLID once).
func fullWrite(encoded []*Encoded) (string, []any) {
	states := make([]*flight.State, len(encoded))
	for i, e := range encoded {
		states[i] = e.State
	}
	shape := writeShape{many: len(encoded) > 1, del: allDetails}
	var args []any
	if shape.many {
		args = upsertManyArgs(encoded)
	} else {
		args = upsertOneArgs(encoded[0])
	}
	for i, d := range detailTables {
		if cols := detailArgs(d, states); cols != nil {
			shape.ins |= 1 << i
			args = append(args, cols...)
		}
	}
	return writeSQL(shape), args
}

// GroupFlight is one flight of QueueFlightGroup: Enc, the newest state a
// group commit made of it; Base, the version it had before the group's
// first version of it (the newest state's own version when the group made
// none: its lastMsgId moved alone); Changed, every tag the group's
// versions of it changed (their Last.Changed together).
type GroupFlight struct {
	Enc     *Encoded
	Base    int64
	Changed []string
}

// QueueFlightGroup copies a group commit's flights (each FLID once) into
// a staging table of tx (stageFlights, two round trips), queues on b the
// writes that read them, and returns what to run in tx once b has run: one
// statement writes incrementally every flight whose stored row is at
// version Base (none counts as 0) — every collection the group's versions
// did not change is the same in the stored row, so only the tables of
// Changed are rewritten — and returns the flights it wrote; finish writes
// the others whole, in a second statement: versions skipped (a rebuild
// into emptied tables, a lost write), a row without provenance, or a
// stored row at one of the group's versions or newer (a redelivery), which
// the full write's never-backwards rule leaves as it is. In an undisturbed
// run there are none, and the group costs no read of the stored versions
// before its writes.
//
// finish returns the FLIDs written incrementally: their rows were at the
// version before the group's, so every version the group made of them is
// new — no earlier transaction committed it or queued its event
// (Event.New).
func QueueFlightGroup(ctx context.Context, tx pgx.Tx, b *pgx.Batch, flights []GroupFlight) (finish func(context.Context, pgx.Tx) (fresh map[string]bool, err error), err error) {
	var inc []GroupFlight
	var full []*Encoded
	for _, g := range flights {
		if g.Enc.State.Last != nil {
			inc = append(inc, g)
		} else {
			full = append(full, g.Enc)
		}
	}
	written := make(map[string]bool, len(inc))
	if len(inc) > 0 {
		if err := stageFlights(ctx, tx, inc); err != nil {
			return nil, err
		}
		sql, args := subsetWrite(inc)
		b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
			var flid string
			_, err := pgx.ForEachRow(rows, []any{&flid}, func() error { written[flid] = true; return nil })
			return err
		})
	}
	return func(ctx context.Context, tx pgx.Tx) (map[string]bool, error) {
		for _, g := range inc {
			if !written[g.Enc.State.FLID] {
				full = append(full, g.Enc)
			}
		}
		if len(full) == 0 {
			return written, nil
		}
		sql, args := fullWrite(full)
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			return nil, fmt.Errorf("writing %s whole: %w", describeFlights(full), err)
		}
		return written, nil
	}, nil
}

// flightStage is the temporary table the group's incremental write reads
// its flights from (stageFlights), and flightStageSQL readies it: created
// by the first group of each connection, emptied at each commit, and
// emptied here too, since one transaction can write several runs.
//
// Why a table and not one array per column, as the full write: pgx
// encodes a statement's parameters into a buffer it shrinks back to 256
// bytes after every statement (and its wire buffer to 1 KB), so a group's
// few MB of flight documents were copied and thrown away a few times
// their size at every group (docs/design.md#group-commits). COPY streams
// them in 64 KB pieces. operation_day and table_state travel as text and
// are cast by the statement, as in the arrays.
const (
	flightStage    = "msgx_flight_stage"
	flightStageSQL = `CREATE TEMP TABLE IF NOT EXISTS ` + flightStage + ` (flid text, operation_day text, state text,
		state_version bigint, last_msg_id bigint, updated_at timestamptz, doc jsonb, table_state text, base bigint)
		ON COMMIT DELETE ROWS; DELETE FROM ` + flightStage
)

var flightStageColumns = []string{"flid", "operation_day", "state", "state_version", "last_msg_id", "updated_at", "doc", "table_state", "base"}

// stageFlights copies flights into flightStage, inside tx, for
// subsetWrite's statement.
func stageFlights(ctx context.Context, tx pgx.Tx, flights []GroupFlight) error {
	// Without parameters pgx sends this as a simple query: both statements
	// in one round trip.
	if _, err := tx.Exec(ctx, flightStageSQL); err != nil {
		return fmt.Errorf("readying the flights' staging table: %w", err)
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{flightStage}, flightStageColumns, pgx.CopyFromSlice(len(flights), func(i int) ([]any, error) {
		e := flights[i].Enc
		s := e.State
		return []any{s.FLID, nullable(s.OperationDay), s.State, s.StateVersion, s.LastMsgID, s.UpdatedAt, e.doc, e.tableState, flights[i].Base}, nil
	}))
	if err != nil {
		return fmt.Errorf("copying %d flights to write: %w", len(flights), err)
	}
	return nil
}

// subsetWrite is the statement of QueueFlightGroup's incremental write.
func subsetWrite(flights []GroupFlight) (string, []any) {
	shape := writeShape{many: true, subset: true}
	var args []any
	changing := make([][]*flight.State, len(detailTables))
	for i, d := range detailTables {
		var flids []string
		for _, g := range flights {
			if slices.ContainsFunc(d.colls, func(c string) bool { return slices.Contains(g.Changed, c) }) {
				flids = append(flids, g.Enc.State.FLID)
				changing[i] = append(changing[i], g.Enc.State)
			}
		}
		if flids != nil {
			shape.del |= 1 << i
			args = append(args, flids)
		}
	}
	for i, d := range detailTables {
		if cols := detailArgs(d, changing[i]); cols != nil {
			shape.ins |= 1 << i
			args = append(args, cols...)
		}
	}
	return writeSQL(shape), args
}

// incrementalWrite is the statement of an incremental single-flight write.
func incrementalWrite(e *Encoded) (string, []any) {
	s := e.State
	shape := writeShape{incremental: true}
	for i, d := range detailTables {
		for _, c := range d.colls {
			if slices.Contains(s.Last.Changed, c) {
				shape.del |= 1 << i
			}
		}
	}
	args := upsertOneArgs(e)
	for i, d := range detailTables {
		if shape.del&(1<<i) == 0 {
			continue
		}
		if cols := detailArgs(d, []*flight.State{s}); cols != nil {
			shape.ins |= 1 << i
			args = append(args, cols...)
		}
	}
	return writeSQL(shape), args
}

// incrementalDone interprets the result of an incremental write.
func incrementalDone(s *flight.State, written int, storedVersion, storedMsg *int64) bool {
	switch {
	case written > 0 && storedVersion == nil && s.StateVersion > 1:
		// A first write of a flight at a later version (a rebuild into
		// empty tables): the collections its last change did not touch
		// are missing. The full write rewrites the same state whole.
		return false
	case written > 0:
		return true
	}
	// Not written: either the stored row is newer (a replay; done) or it is
	// older than the previous version (fall back to a full write).
	return storedVersion != nil && (*storedVersion > s.StateVersion ||
		*storedVersion == s.StateVersion && *storedMsg > s.LastMsgID)
}

// writeIncremental writes s touching only the detail tables of the
// collections its version changed. done is false when the caller must still
// do a full write: the stored row is older than the previous version
// (nothing was written), or there was no row and s is not a first version
// (the row was written without the untouched collections; the full write
// completes it within the same transaction).
func writeIncremental(ctx context.Context, tx pgx.Tx, e *Encoded) (written int, done bool, err error) {
	s := e.State
	sql, args := incrementalWrite(e)
	var storedVersion, storedMsg *int64
	if err := tx.QueryRow(ctx, sql, args...).Scan(&written, &storedVersion, &storedMsg); err != nil {
		return 0, false, fmt.Errorf("writing flight %s v%d: %w", s.FLID, s.StateVersion, err)
	}
	done = incrementalDone(s, written, storedVersion, storedMsg)
	if !done || written == 0 {
		return 0, done, nil
	}
	return written, true, nil
}

// newestPerFLID drops nil states and, per FLID, keeps the newest state (the
// last one on a tie): one INSERT ... ON CONFLICT cannot touch a row twice.
func newestPerFLID(states []*flight.State) ([]*flight.State, error) {
	idx := make(map[string]int, len(states))
	out := make([]*flight.State, 0, len(states))
	for _, s := range states {
		if s == nil {
			continue
		}
		if s.FLID == "" {
			return nil, errors.New("writing flight: empty FLID")
		}
		if s.State != flight.StateActive && s.State != flight.StateDeleted {
			return nil, fmt.Errorf("writing flight %s: state %q", s.FLID, s.State)
		}
		i, seen := idx[s.FLID]
		if !seen {
			idx[s.FLID] = len(out)
			out = append(out, s)
			continue
		}
		if prev := out[i]; s.StateVersion > prev.StateVersion ||
			(s.StateVersion == prev.StateVersion && s.LastMsgID >= prev.LastMsgID) {
			out[i] = s
		}
	}
	return out, nil
}

func describeFlights(encoded []*Encoded) string {
	if len(encoded) == 1 {
		return fmt.Sprintf("flight %s v%d", encoded[0].State.FLID, encoded[0].State.StateVersion)
	}
	return fmt.Sprintf("%d flights (first %s)", len(encoded), encoded[0].State.FLID)
}

// Encoded is a flight state with the JSON of its doc and table_state
// columns (EncodeFlight), for a caller that encodes away from the write: the
// flights processor encodes in its goka callback, beside its group commit
// worker.
//
// table_state holds the table value's bookkeeping (links, lastChange,
// replayed), doc the rest: the table value is doc || table_state
// (tableValueSQL). One copy of the document is written and parsed, not two.
// Rows written before that hold the whole value in table_state, which the
// concatenation reads alike.
type Encoded struct {
	State           *flight.State
	doc, tableState string
}

// tableValueSQL is the flights table value of a flight_schd row: NULL for
// a row written before migration 0020.
const tableValueSQL = `(doc || table_state)`

// TableValue is the JSON of the whole table value, as json.Marshal of the
// *flight.State writes it: the flights table's value too. The doc is the
// table value without its last three fields (its bookkeeping: links,
// lastChange, replayed), which come last, each left out when empty: the
// whole value is the two objects joined.
func (e *Encoded) TableValue() []byte {
	if len(e.tableState) <= 2 {
		return []byte(e.doc)
	}
	b := make([]byte, 0, len(e.doc)+len(e.tableState))
	b = append(b, e.doc[:len(e.doc)-1]...)
	b = append(b, ',')
	return append(b, e.tableState[1:]...)
}

// Doc is the flight JSON of the state (its doc column): its msg event
// carries it (flight.EncodeEvent).
func (e *Encoded) Doc() string { return e.doc }

// EncodeFlight encodes s for QueueFlightGroup and WriteEncodedFlights.
func EncodeFlight(s *flight.State) (*Encoded, error) {
	if s == nil {
		return nil, errors.New("encoding flight: nil state")
	}
	// MarshalJSON directly: json.Marshal would compact its (compact)
	// output once more, a pass over every byte.
	doc, err := s.Doc()
	if err != nil {
		return nil, fmt.Errorf("encoding flight %s: %w", s.FLID, err)
	}
	return &Encoded{State: s, doc: string(doc), tableState: string(s.AppendBookkeeping(nil))}, nil
}

func upsertOneArgs(e *Encoded) []any {
	s := e.State
	return []any{s.FLID, nullable(s.OperationDay), s.State, s.StateVersion, s.LastMsgID, s.UpdatedAt, e.doc, e.tableState}
}

func upsertManyArgs(encoded []*Encoded) []any {
	n := len(encoded)
	flids, lifecycle, docs, tstates := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	days := make([]*string, n)
	versions, lastMsgs := make([]int64, n), make([]int64, n)
	updated := make([]time.Time, n)
	for i, e := range encoded {
		s := e.State
		flids[i], days[i], lifecycle[i], docs[i], tstates[i] = s.FLID, nullable(s.OperationDay), s.State, e.doc, e.tableState
		versions[i], lastMsgs[i], updated[i] = s.StateVersion, s.LastMsgID, s.UpdatedAt
	}
	return []any{flids, days, lifecycle, versions, lastMsgs, updated, docs, tstates}
}

// detailArgs returns the parameter arrays of d's insert, one per column of
// d.columns(), or nil when no flight has rows for d. Ordinals count from 1 in
// each collection's (message) order.
func detailArgs(d detailTable, states []*flight.State) []any {
	var (
		flids, kinds, raws []string
		ordinals           []int32
		seqs, extras       []*string
		vals               = make([][]*string, len(d.keys))
	)
	for _, s := range states {
		for _, coll := range d.colls {
			for i, e := range s.Collections[coll] {
				flids, ordinals = append(flids, s.FLID), append(ordinals, int32(i+1))
				if d.raw {
					raws = append(raws, rawOf(e))
					continue
				}
				if d.kind {
					kinds = append(kinds, coll)
				} else {
					seqs = append(seqs, nullable(e[d.seq]))
				}
				for j, k := range d.keys {
					vals[j] = append(vals[j], nullable(e[k]))
				}
				extras = append(extras, extraOf(e, d.keys, d.seq))
			}
		}
	}
	switch {
	case len(flids) == 0:
		return nil
	case d.raw:
		return []any{flids, ordinals, raws}
	}
	out := []any{flids, ordinals, seqs}
	if d.kind {
		out = []any{flids, kinds, ordinals}
	}
	for _, v := range vals {
		out = append(out, v)
	}
	return append(out, extras)
}

// extraOf returns the element's keys without a column of their own as a
// JSON object, or nil when there are none.
func extraOf(e flight.Element, own []string, seqKey string) *string {
	var extra map[string]string
	for k, v := range e {
		if k != seqKey && !slices.Contains(own, k) {
			if extra == nil {
				extra = map[string]string{}
			}
			extra[k] = v
		}
	}
	if extra == nil {
		return nil
	}
	b, _ := json.Marshal(extra) // a map[string]string always encodes
	s := string(b)
	return &s
}

// rawOf is the verbatim XML of a SRVT/VIPF entry. The codec always sets
// RawKey alone; an entry built otherwise is kept as its JSON, so nothing is
// lost.
func rawOf(e flight.Element) string {
	if raw, ok := e[flight.RawKey]; ok && len(e) == 1 {
		return raw
	}
	b, _ := json.Marshal(e)
	return string(b)
}

// GetFlight returns the stored flight JSON (doc) of flid, and false when the
// FLID is unknown. ctx bounds the call.
func GetFlight(ctx context.Context, pool *pgxpool.Pool, flid string) (json.RawMessage, bool, error) {
	var doc []byte
	err := pool.QueryRow(ctx, "SELECT doc FROM flight_schd WHERE flid = $1", flid).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading flight %s: %w", flid, err)
	}
	return json.RawMessage(doc), true, nil
}

// FlightsByDay returns the stored flight JSON of every flight, ACTIVE or
// DELETED, whose operation day is day's calendar date (read in day's own
// location), ordered by FLID (numerically: FLIDs are digit strings). ctx
// bounds the call.
func FlightsByDay(ctx context.Context, pool *pgxpool.Pool, day time.Time) ([]json.RawMessage, error) {
	d := day.Format(time.DateOnly)
	rows, err := pool.Query(ctx, `SELECT doc FROM flight_schd WHERE operation_day = $1::date
		ORDER BY length(flid), flid`, d)
	if err != nil {
		return nil, fmt.Errorf("reading flights of %s: %w", d, err)
	}
	defer rows.Close()
	out := []json.RawMessage{}
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("reading flights of %s: %w", d, err)
		}
		out = append(out, json.RawMessage(doc))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading flights of %s: %w", d, err)
	}
	return out, nil
}
