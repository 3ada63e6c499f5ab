package trace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"msgx/inspect/trace"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// A trace reads by key on a long history (docs/design.md#trace): with
// 400,000 flight versions of 20,000 flights, 200,000 messages and their
// events, every query of a message's trace and of a flight's is an index
// lookup (checked on the plans, no sequential scan of a history table),
// and the parts the end-to-end test cannot reach come out right: an
// archived message (proc_state_hst), a version whose event still waits in
// the outbox, a late row and the flight's limit.
func TestTraceOnALongHistory(t *testing.T) {
	ctx := context.Background()
	pool, err := sink.OpenPG(ctx, sink.Config{PGDSN: sinktest.NewPG(t), Timeout: time.Minute, PGMaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const flights, versions, msgs = 20000, 20, 200000 // versions per flight
	for _, q := range []string{
		`INSERT INTO inbox_cursor VALUES (1, 300000, NULL, NULL, 'min', now(), now())`,
		`INSERT INTO inbox_hole VALUES (250000, 250001, now(), now(), 'aged')`,
		`INSERT INTO inbox_late_row VALUES (250001, 250000, now())`,
		fmt.Sprintf(`INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at, n_transitions, n_applied, backfill_at, inbox_partition, inbox_offset)
			SELECT i, 'SUCCEEDED', now(), now(), 1, 1, now(), 0, i - 1 FROM generate_series(1, %d) i`, msgs),
		// Message i made version 1 + (i-1)/flights of flight (i-1)%flights, and
		// so on to versions per flight.
		fmt.Sprintf(`INSERT INTO flight_change (flid, state_version, msg_id, source, state, changed, at, recorded_at)
			SELECT ((i - 1) %% %[1]d)::text, 1 + (i - 1) / %[1]d, 1 + (i - 1) %% %[3]d, 'FLOP-ESTT', 'ACTIVE', '{ESTT}', now(), now()
			FROM generate_series(1, %[1]d * %[2]d) i`, flights, versions, msgs),
		`INSERT INTO msg_event SELECT flid, state_version, msg_id, 'msgx.msg', 0, row_number() OVER (), now() FROM flight_change`,
		fmt.Sprintf(`INSERT INTO transition_applied (msg_id, kind, key, applied_at, outcome, state_version)
			SELECT i, 'flight', ((i - 1) %% %d)::text, now(), 'applied', 1 FROM generate_series(1, %d) i`, flights, msgs),
		fmt.Sprintf(`INSERT INTO flight_schd (flid, state, state_version, last_msg_id, updated_at, doc, schd_sent_version)
			SELECT i::text, 'ACTIVE', %d, 1, now(), '{}', %d FROM generate_series(0, %d) i`, versions, versions-1, flights-1),
		// Message 77 is archived; the event of flight 76's newest version
		// (by message 180077) waits in the outbox.
		`UPDATE proc_state SET state = 'ARCHIVED' WHERE msg_id = 77`,
		`INSERT INTO proc_state_hst (msg_id, state, attempts, enqueued_at, updated_at, n_transitions, n_applied, backfill_at,
			backfill_attempts, archived_at, inbox_partition, inbox_offset) VALUES (77, 'SUCCEEDED', 0, now(), now(), 1, 1, now(), 0, now(), 0, 76)`,
		`DELETE FROM msg_event WHERE flid = '76' AND state_version = 20`,
		`INSERT INTO event_outbox (topic, key, value, created_at, msg_id, state_version)
			SELECT 'msgx.msg', '76', '{}', now(), msg_id, 20 FROM flight_change WHERE flid = '76' AND state_version = 20`,
		`ANALYZE`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r, err := trace.New(trace.Deps{PG: pool, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	// Message 77: archived, made version 1 of flight 76 (and, since 20,000
	// flights × 20 versions cycle over 200,000 messages, version 11 too).
	began := time.Now()
	m, err := r.Message(ctx, 77)
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	if m.Decision == nil || m.Decision.ArchivedAt == nil || m.Decision.Inbox == nil || m.Decision.Inbox.Offset != 76 ||
		len(m.Transitions) != 1 || len(m.Versions) != 2 || m.Versions[0].Event == nil || m.Versions[1].Event == nil {
		t.Fatalf("trace of 77: %+v", m)
	}
	if len(m.Where) != 0 {
		t.Fatalf("trace of 77 not complete: %+v (inbox error %q)", m.Where, m.InboxError)
	}
	// The flight whose newest version waits in the outbox, newest 5.
	began = time.Now()
	f, err := r.Flight(ctx, "76", 5)
	tookFlight := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	last := f.Versions[len(f.Versions)-1]
	if f.Total != versions || len(f.Versions) != 5 || f.Versions[0].StateVersion != 16 || last.StateVersion != 20 ||
		last.Event != nil || !last.InOutbox || f.Versions[3].Event == nil {
		t.Fatalf("flight 76: %+v", f)
	}
	if pub, known := last.SchdPublished(); pub || !known {
		t.Fatalf("flight 76 v20 schd %v/%v with sent v19", pub, known)
	}
	mo, err := r.Message(ctx, last.MsgID)
	if err != nil || len(mo.Where) != 2 || mo.Where[0].Step != "publisher" || mo.Where[1].Step != "schd" {
		t.Fatalf("trace of %d: %+v (%v)", last.MsgID, mo.Where, err)
	}
	// A late row, and an ID beyond the watermark (without MySQL the inbox
	// row is unknown, so it is not "not found").
	if l, err := r.Message(ctx, 250001); err != nil || len(l.Where) != 1 || !strings.Contains(l.Where[0].Why, "late row") {
		t.Fatalf("trace of the late row: %+v (%v)", l, err)
	}
	if b, err := r.Message(ctx, 300001); err != nil || len(b.Where) != 1 || !strings.Contains(b.Where[0].Why, "watermark is 300000") ||
		b.InboxError == "" {
		t.Fatalf("trace beyond the watermark: %+v (%v)", b, err)
	}
	if _, err := r.Flight(ctx, "no-such-flight", 5); !errors.Is(err, trace.ErrNotFound) {
		t.Fatalf("trace of an unknown flight: %v", err)
	}
	t.Logf("on %d versions: message trace %s, flight trace %s", flights*versions, took, tookFlight)

	// The plans: no sequential scan of a table that grows with history.
	for name, q := range map[string]string{
		"versions of a message": `SELECT * FROM flight_change c LEFT JOIN msg_event e USING (flid, state_version, msg_id)
			LEFT JOIN flight_schd f ON f.flid = c.flid WHERE c.msg_id = 77`,
		"versions of a flight": `SELECT * FROM flight_change c LEFT JOIN msg_event e USING (flid, state_version, msg_id)
			WHERE c.flid = '76' ORDER BY c.state_version DESC, c.msg_id DESC LIMIT 200`,
		"count of a flight":       `SELECT count(*) FROM flight_change WHERE flid = '76'`,
		"transitions":             `SELECT * FROM transition_applied WHERE msg_id = 77`,
		"decision":                `SELECT msg_id, state FROM proc_state WHERE msg_id = 77 UNION ALL SELECT msg_id, state FROM proc_state_hst WHERE msg_id = 77`,
		"replays of a message":    `SELECT * FROM replay_audit_msg i JOIN replay_audit a ON a.id = i.audit_id WHERE i.msg_id = 77`,
		"the hole of an ID":       `SELECT * FROM inbox_hole WHERE first_id <= 77 ORDER BY first_id DESC LIMIT 1`,
		"msg_event retention key": `DELETE FROM msg_event m USING (SELECT '76' AS flid, 1::bigint AS v, 77::bigint AS id) d WHERE m.flid = d.flid AND m.state_version = d.v AND m.msg_id = d.id`,
	} {
		rows, err := pool.Query(ctx, "EXPLAIN "+q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			plan = append(plan, line)
		}
		rows.Close()
		p := strings.Join(plan, "\n")
		for _, big := range []string{"flight_change", "msg_event", "proc_state", "transition_applied"} {
			if strings.Contains(p, "Seq Scan on "+big+" ") {
				t.Errorf("%s scans %s:\n%s", name, big, p)
			}
		}
	}
}
