package trace

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"msgx/sink"
)

// Text writes m for people: one line per step, tables for the transitions,
// versions and replays, and where the path stops.
func (m Message) Text(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	p("message %d (times in UTC)", m.MsgID)
	switch {
	case m.Inbox != nil:
		line := fmt.Sprintf("  inbox\tCMINMSGS row, %d bytes, received %s, processed mark %s", m.Inbox.Bytes, stamp(m.Inbox.ReceivedAt), stamp(m.Inbox.ProcessedAt))
		if m.Inbox.Status != "" {
			line += ", status " + m.Inbox.Status
		}
		line += "; its DATETIMEs read in " + m.Inbox.Zone
		p("%s", line)
	case m.InboxError != "":
		p("  inbox\tunknown: %s", m.InboxError)
	default:
		p("  inbox\tno CMINMSGS row with this ID")
	}
	d := m.Decision
	if d == nil {
		p("  enqueued\t-")
		p("  router\t-")
	} else {
		p("  enqueued\tmsgx.inbox %s at %s", position(d.Inbox), stamp(&d.EnqueuedAt))
		line := fmt.Sprintf("  router\t%s", d.State)
		if d.ErrorClass != "" {
			line += " (" + d.ErrorClass + ")"
		}
		if d.Reason != "" {
			line += " " + d.Reason
		}
		// A codec or payload reason names the message type already
		// ("FLOP-BOTM (FLID 15) …").
		if typ := d.Type + "-" + d.STYP; d.Type != "" && !strings.HasPrefix(d.Reason, typ) {
			line += ", " + typ
		}
		line += fmt.Sprintf(", attempts %d", d.Attempts)
		if d.DecidedAt != nil {
			line += ", decided " + stamp(d.DecidedAt)
		}
		line += ", last change " + stamp(&d.UpdatedAt)
		if d.NTransitions != nil {
			line += fmt.Sprintf(", transitions %d/%d applied", d.NApplied, *d.NTransitions)
		}
		if d.ReplayGen != 0 {
			line += fmt.Sprintf(", decided under replay #%d", d.ReplayGen)
		}
		p("%s", line)
		if d.LastError != "" {
			p("  \terror: %s", d.LastError)
		}
		if d.ArchivedAt != nil {
			p("  \tarchived %s (its transition marks went with it)", stamp(d.ArchivedAt))
		}
	}
	if line := requestLine(m); line != "" {
		p("  request\t%s", line)
	}
	if len(m.Transitions) > 0 {
		p("  transitions")
		p("    KIND\tKEY\tAPPLIED\tOUTCOME\tVERSION")
		for _, t := range m.Transitions {
			p("    %s\t%s\t%s\t%s\t%s", t.Kind, t.Key, stamp(&t.AppliedAt), orDash(t.Outcome), versionText(t.StateVersion))
		}
	}
	if len(m.Versions) > 0 {
		p("  versions")
		versionTable(p, m.Versions, false)
	}
	if d != nil {
		bf := d.Backfill
		switch {
		case bf.MarkedAt != nil:
			p("  backfill\tmarked %s", stamp(bf.MarkedAt))
		case bf.Confirmed:
			p("  backfill\tmarked (its time is the inbox row's, which was not read)")
		case m.Inbox != nil && m.Inbox.ProcessedAt != nil:
			p("  backfill\tthe inbox row carries its processed mark (%s)%s: kept as it is (the mark is never overwritten); "+
				"the sweeper records it at its next pass", stamp(m.Inbox.ProcessedAt), markedBefore(m))
		case bf.AbandonedAt != nil:
			p("  backfill\tabandoned %s: %s", stamp(bf.AbandonedAt), bf.AbandonedReason)
		case bf.DueAt != nil:
			p("  backfill\tdue %s, %d attempt(s)", stamp(bf.DueAt), bf.Attempts)
		default:
			p("  backfill\t-")
		}
	}
	if len(m.Replays) > 0 {
		p("  replays")
		p("    AUDIT\tAT\tWHO\tSELECTOR\tBEFORE\tRE-INJECTED")
		for _, r := range m.Replays {
			before := r.Before.State
			if r.Before.ErrorClass != "" {
				before += " (" + r.Before.ErrorClass + ")"
			}
			if r.Before.Reason != "" {
				before += " " + r.Before.Reason
			}
			before += fmt.Sprintf(", attempts %d", r.Before.Attempts)
			inj := "no"
			if r.Produced {
				inj = "msgx.inbox " + position(r.Inbox)
			}
			p("    #%d\t%s\t%s\t%s\t%s\t%s", r.AuditID, stamp(&r.At), r.Who, r.Selector, before, inj)
		}
	}
	if len(m.Where) == 0 {
		p("  path\tcomplete")
	}
	for i, f := range m.Where {
		label := "  stuck at"
		if i > 0 {
			label = "  also"
		}
		p("%s\t%s: %s", label, f.Step, f.Why)
	}
	return tw.Flush()
}

// Text writes f for people: the read model's row, the archives, then one
// line per version.
func (f Flight) Text(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	p("flight %s (times in UTC)", f.FLID)
	if c := f.Current; c != nil {
		day := "-"
		if c.OperationDay != nil {
			day = c.OperationDay.Format("2006-01-02")
		}
		p("  now\t%s v%d, last message %d, operation day %s, updated %s, schd published up to v%d",
			c.State, c.StateVersion, c.LastMsgID, day, stamp(&c.UpdatedAt), c.SchdSentVersion)
	} else {
		p("  now\tnot in the read model")
	}
	for _, pu := range f.Purged {
		p("  purged\t%s at v%d (last message %d)", stamp(&pu.PurgedAt), pu.StateVersion, pu.LastMsgID)
	}
	if len(f.Versions) < f.Total {
		p("  versions\tthe newest %d of %d", len(f.Versions), f.Total)
	} else {
		p("  versions\t%d", f.Total)
	}
	if len(f.Versions) > 0 {
		versionTable(p, f.Versions, true)
	}
	return tw.Flush()
}

func versionTable(p func(string, ...any), vs []Version, byFlight bool) {
	if byFlight {
		p("    VERSION\tMSG\tSOURCE\tSTATE\tCHANGED\tAT\tMSG EVENT\tSCHD")
	} else {
		p("    FLID\tVERSION\tSOURCE\tSTATE\tCHANGED\tAT\tMSG EVENT\tSCHD")
	}
	for _, v := range vs {
		ev := "produced, position not recorded"
		switch {
		case v.Event != nil:
			ev = fmt.Sprintf("%s %d@%d", v.Event.Topic, v.Event.Partition, v.Event.Offset)
		case v.InOutbox:
			ev = "in the outbox"
		}
		schd := "unknown (not in the read model)"
		if pub, known := v.SchdPublished(); known {
			schd = fmt.Sprintf("published (v%d)", *v.SchdSent)
			if !pub {
				schd = fmt.Sprintf("not yet (v%d)", *v.SchdSent)
			}
		}
		source := v.Source
		if v.Replay != 0 {
			source += fmt.Sprintf(" (replay #%d)", v.Replay)
		}
		changed := strings.Join(v.Changed, ",")
		if byFlight {
			p("    v%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s", v.StateVersion, v.MsgID, source, v.State, orDash(changed), stamp(&v.At), ev, schd)
		} else {
			p("    %s\tv%d\t%s\t%s\t%s\t%s\t%s\t%s", v.FLID, v.StateVersion, source, v.State, orDash(changed), stamp(&v.At), ev, schd)
		}
	}
}

// markedBefore says which replay reset a message whose inbox mark is older
// than the reset ("" when none did).
func markedBefore(m Message) string {
	if len(m.Replays) == 0 || m.Inbox == nil || m.Inbox.ProcessedAt == nil {
		return ""
	}
	r := m.Replays[len(m.Replays)-1]
	if m.Inbox.ProcessedAt.After(r.At) {
		return ""
	}
	return fmt.Sprintf(", written before replay #%d reset the message", r.AuditID)
}

func position(p *sink.InboxPosition) string {
	if p == nil {
		return "position not recorded"
	}
	return fmt.Sprintf("%d@%d", p.Partition, p.Offset)
}

func versionText(v int64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("v%d", v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// requestLine says what an answer to msgx's requests did: the request it
// closed or answered, or why none; "" for any other message.
func requestLine(m Message) string {
	if a := m.Request; a != nil {
		line := a.Outcome + ": " + a.Detail
		if a.Type == "EROR" && (a.Code != "" || a.Text != "") {
			line += "; the EROR says " + strings.TrimSpace(a.Code+" "+a.Text)
		}
		if a.RequestState != "" {
			line += fmt.Sprintf("; request %d is %s now (msgx request show %d)", a.RequestID, a.RequestState, a.RequestID)
		}
		return line
	}
	d := m.Decision
	if d == nil {
		return ""
	}
	switch {
	case strings.EqualFold(d.Type, "EROR"):
		return "no pairing recorded yet: an EROR is paired with its request right after its decision, and again when it is delivered again"
	case d.STYP != "RESP":
		return ""
	case d.State == "SKIPPED" && d.Reason == "no-match":
		return "none: it answers no open request, so the RESP guard (MSGX_RESP_GUARD) SKIPPED it and applied nothing"
	case d.State == "DEAD":
		return "none: the message is DEAD, so nothing of it was applied and it answers no request"
	case d.State == "SKIPPED":
		return "none: the message was SKIPPED (" + d.Reason + "), so it answers no request"
	case d.State == "SUCCEEDED":
		return "no outcome recorded (decided before msgx recorded answers)"
	default:
		return "not yet: a RESP answers its request in the transaction that applies its data"
	}
}
