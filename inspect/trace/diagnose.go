package trace

import (
	"fmt"
	"strings"
	"time"

	"msgx/tables/message"
)

// Diagnose says, first to last, which steps of m's path are missing or
// waiting and why (pure: it reads only the trace). Nothing is returned for
// a path that is complete: decided, every transition applied, every msg
// event produced, schd caught up, processed mark written.
func Diagnose(m Message) []Finding {
	var out []Finding
	add := func(step, format string, args ...any) {
		out = append(out, Finding{Step: step, Why: fmt.Sprintf(format, args...)})
	}
	d := m.Decision
	if d == nil {
		return notRead(m)
	}
	if n := len(m.Replays); n > 0 && d.State == message.StatePending && !m.Replays[n-1].Produced {
		add("replay", "reset by replay #%d but never re-injected into msgx.inbox (the replay failed or crashed): run msgx replay --pending",
			m.Replays[n-1].AuditID)
		return out
	}
	switch d.State {
	case message.StatePending:
		add("router", "read from msgx.inbox, not decided yet: the router is working on it or on a message before it (FIFO)")
		return out
	case message.StateFailed:
		add("router", "FAILED (%s) at the head of the queue, attempt %d; next try %s: %s", d.ErrorClass, d.Attempts,
			stamp(d.NextAttemptAt), d.LastError)
		return out
	case message.StateRouted:
		n := 0
		if d.NTransitions != nil {
			n = *d.NTransitions
		}
		kinds := map[string]bool{}
		for _, t := range m.Transitions {
			kinds[t.Kind] = true
		}
		step := "flights"
		if kinds["refdata"] && !kinds["flight"] {
			step = "refdata"
		}
		add(step, "ROUTED: %d of %d transitions applied; the rest wait at the flights/refdata processors (see their lag in msgx status)",
			d.NApplied, n)
		return out
	case message.StateDead:
		if replayable(d) {
			add("router", "DEAD (%s): %s; replayable: msgx replay --ids %d --dry-run shows whether the router would decide it "+
				"otherwise now (its verdict), then run it without --dry-run", d.ErrorClass, orNone(d.Reason, d.LastError), m.MsgID)
		} else {
			add("router", "DEAD (%s): %s; not replayable (fix the message at its source)", d.ErrorClass, orNone(d.Reason, d.LastError))
		}
	}
	// Terminal: what it made must reach Kafka.
	latest := map[string]Version{}
	for _, v := range m.Versions {
		// An event leaves the outbox only once produced, so one with no
		// recorded position that is not there either was produced before
		// positions were recorded (migration 0026): not a missing step.
		if v.Event == nil && v.InOutbox {
			add("publisher", "the msg event of flight %s v%d waits in the outbox: the publisher has not produced it (Kafka down? docs/operations.md#msgxeventsnotpublished)", v.FLID, v.StateVersion)
		}
		if l, ok := latest[v.FLID]; !ok || v.StateVersion > l.StateVersion {
			latest[v.FLID] = v
		}
	}
	for _, v := range m.Versions {
		if latest[v.FLID].StateVersion != v.StateVersion {
			continue
		}
		if pub, known := v.SchdPublished(); known && !pub {
			add("schd", "flight %s v%d is not on the schd topic yet (published up to v%d): the flusher sends it at its next flush (MSGX_SCHD_FLUSH_PERIOD)",
				v.FLID, v.StateVersion, *v.SchdSent)
		}
	}
	bf := d.Backfill
	switch {
	case d.State == message.StateArchived || bf.Confirmed || bf.MarkedAt != nil:
	case m.Inbox != nil && m.Inbox.ProcessedAt != nil:
		// The row carries a mark (written before a replay reset the
		// message, or before a crash lost its record): the mark is
		// monotonic, so nothing is owed; the sweeper records it as found.
	case bf.AbandonedAt != nil:
		add("backfill", "the processed mark was abandoned %s (%s): reconcile the inbox row by hand or msgx backfill reopen %d",
			stamp(bf.AbandonedAt), bf.AbandonedReason, m.MsgID)
	default:
		why := fmt.Sprintf("processed mark not written yet: due %s, %d attempt(s)", stamp(bf.DueAt), bf.Attempts)
		if bf.Error != "" {
			why += ", last error: " + bf.Error
		}
		add("backfill", "%s", why)
	}
	return out
}

// notRead explains a message the router never read.
func notRead(m Message) []Finding {
	in := m.Ingest
	f := Finding{Step: "ingest"}
	switch {
	case in == nil:
		f.Why = "ingest has never run against this database (no inbox cursor)"
	case in.LateAt != nil:
		f.Why = fmt.Sprintf("the row appeared %s, after the bridge had released its ID as a hole: it is reported as a late row and never enqueued out of order (docs/operations.md#msgxlaterows)", stamp(in.LateAt))
	case in.Hole != nil:
		f.Why = fmt.Sprintf("the bridge released IDs %d–%d as a permanent hole %s (%s): the row was not there when the bridge passed", in.Hole.FirstID, in.Hole.LastID, stamp(&in.Hole.ReleasedAt), in.Hole.Reason)
	case m.MsgID > in.Watermark:
		f.Why = fmt.Sprintf("not read from the inbox yet: the watermark is %d", in.Watermark)
		if in.HoleSince != nil {
			f.Why += fmt.Sprintf("; the gap after it has been waiting since %s (an insert not committed yet?)", stamp(in.HoleSince))
		}
		if m.Inbox == nil && m.InboxError == "" {
			f.Why += "; and the inbox has no such row"
		}
	default:
		f = Finding{Step: "router", Why: fmt.Sprintf("produced to msgx.inbox (watermark %d) but the router has not read it yet: see its lag in msgx status", in.Watermark)}
	}
	return []Finding{f}
}

// replayable is the replay whitelist of docs/design.md#replay (the SQL
// condition of ingest/replay), for a message's record.
func replayable(d *Decision) bool {
	switch d.State {
	case message.StateFailed, message.StateDead:
		return message.ReplayableClass(d.ErrorClass)
	case message.StateSkipped:
		return strings.HasPrefix(d.Reason, message.ReasonUnsupported)
	}
	return false
}

func orNone(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return "no reason recorded"
}

// stamp prints a time in UTC ("Z"), msgx's own times and the inbox's
// alike: one zone for every time of a trace (the inbox line names the zone
// its DATETIMEs were read in).
func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
