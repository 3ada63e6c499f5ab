package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"msgx/tables/message"
)

// Text writes the report for people (msgx status without --json): alerts
// first, then one short section per source with aligned columns. Unknown
// figures print as "?" (a committed offset never made prints as "none"),
// and a section that could not be read says why.
func (r Report) Text(w io.Writer) error {
	p := &textWriter{}
	p.line("msgx status at %s", r.GeneratedAt.UTC().Format(time.RFC3339))
	p.blank()
	if len(r.Alerts) == 0 {
		p.line("ALERTS: none (keeping up, nothing stuck)")
	} else {
		p.line("ALERTS (%d)", len(r.Alerts))
		for _, a := range r.Alerts {
			p.line("  ! %s", a)
		}
	}

	in := r.Inbox
	p.section("INBOX")
	t := p.table()
	seed := "not seeded"
	if in.Seeded {
		seed = "seeded " + in.SeedMode
		if in.SeededAt != nil {
			seed += " at " + stamp(*in.SeededAt)
		}
	}
	t.row("watermark W", countText(in.Watermark), seed)
	t.row("MAX(CMINMSGS_ID)", countText(in.MaxID), in.MaxIDError)
	t.row("lag", countText(in.Lag), "IDs above W")
	if u := in.OldestUnread; u != nil {
		t.row("next unread", fmt.Sprintf("#%d", u.MsgID), "received "+ago(u.AgeSeconds))
	}
	if in.Zone != "" {
		t.row("inbox zone", "", "CMINMSGS_DATE_* read and written in "+in.Zone)
	}
	if h := in.Hole; h != nil {
		t.row("open hole", idRange(h.From, h.To), fmt.Sprintf("open %s (since %s)", fmtAge(h.AgeSeconds), stamp(h.Since)))
	} else {
		t.row("open hole", "none", "")
	}
	holes := fmt.Sprintf("%s IDs", countText(in.PermanentHoleIDs))
	if len(in.RecentHoles) > 0 {
		h := in.RecentHoles[0]
		holes += fmt.Sprintf("; last %s released %s (%s)", idRange(h.From, h.To), stamp(h.ReleasedAt), h.Reason)
	}
	t.row("permanent holes", countText(in.PermanentHoles), holes)
	late := ""
	if in.LateRows > 0 {
		late = "IDs " + joinIDs(in.LateRowIDs, in.LateRows)
	}
	t.row("late rows", countText(in.LateRows), late)
	t.flush()
	p.errors(in.Errors)

	m := r.Messages
	p.section("MESSAGES")
	t = p.table()
	t.row("STATE", "COUNT", "DETAIL")
	for _, st := range []string{message.StatePending, message.StateFailed, message.StateRouted, message.StateSucceeded, message.StateSkipped, message.StateDead, message.StateArchived} {
		n := int64(-1)
		if v, ok := m.ByState[st]; ok {
			n = v
		}
		detail := ""
		switch st {
		case message.StateSkipped:
			detail = fmtCounts(m.SkippedByReasonClass)
		case message.StateDead:
			detail = fmtCounts(m.DeadByClass)
			if m.DeadRecent > 0 {
				detail += fmt.Sprintf("; %d in the last %s", m.DeadRecent, fmtAge(m.DeadRecentWindowSeconds))
			}
		}
		t.row(st, countText(n), detail)
	}
	t.row("backlog", countText(m.Backlog), "PENDING + FAILED + ROUTED")
	t.flush()
	t = p.table()
	if h := m.OldestUnfinished; h != nil {
		d := fmt.Sprintf("#%d %s, enqueued %s, %d attempts", h.MsgID, h.State, ago(h.AgeSeconds), h.Attempts)
		if h.ErrorClass != "" {
			d += ", " + h.ErrorClass
		}
		if h.NextAttemptAt != nil {
			d += ", next attempt " + stamp(*h.NextAttemptAt)
		}
		if h.LastError != "" {
			d += ": " + h.LastError
		}
		t.row("oldest unfinished", d)
	} else if m.Backlog == 0 {
		t.row("oldest unfinished", "none")
	}
	if d := m.LatestDead; d != nil {
		s := fmt.Sprintf("#%d %s", d.MsgID, orDash(d.ErrorClass))
		if d.LastError != "" {
			s += ": " + d.LastError
		}
		t.row("latest DEAD", s)
	}
	t.flush()
	p.errors(m.Errors)

	b := r.Backfill
	p.section("BACKFILL (processed marks)")
	t = p.table()
	pend := ""
	if b.Pending > 0 {
		pend = fmt.Sprintf("oldest enqueued %s", ago(b.OldestPendingAgeSeconds))
	}
	t.row("pending", countText(b.Pending), pend)
	t.row("overdue", countText(b.Overdue), "pending longer than "+fmtAge(b.OverdueAfterSeconds))
	ab := "?"
	if b.Abandoned != nil {
		ab = fmt.Sprint(sum(b.Abandoned))
	}
	t.row("abandoned", ab, fmtCounts(b.Abandoned))
	t.flush()
	p.errors(b.Errors)

	r.Requests.text(p)

	p.section("KAFKA GROUPS")
	if len(r.Groups) > 0 {
		t = p.table()
		t.row("GROUP", "TOPIC", "STATE", "MEMBERS", "COMMITTED", "END", "LAG", "")
		for _, g := range r.Groups {
			t.row(g.Group, g.Topic, orDash(g.State), fmt.Sprint(g.Members), committedText(g.Committed), fmt.Sprint(g.End), fmt.Sprint(g.Lag), g.Error)
		}
		t.flush()
	}
	if r.GroupsError != "" {
		p.errors([]string{r.GroupsError})
	}

	if pub := r.Publisher; pub != nil {
		p.section("EVENT PUBLISHER (event_outbox → Kafka)")
		t = p.table()
		if pub.ExactlyOnce {
			t.row("mode", "exactly once", fmt.Sprintf("Kafka transactions as %q; consumers read with isolation.level=read_committed", pub.TransactionalID))
			t.row("transactions", fmt.Sprintf("%d committed", pub.Committed), fmt.Sprintf("%d aborted", pub.Aborted))
			if pub.Fenced != "" {
				since := ""
				if pub.FencedAt != nil {
					since = " since " + stamp(*pub.FencedAt)
				}
				t.row("fenced", "YES"+since, pub.Fenced)
			} else {
				t.row("fenced", "no", "")
			}
			t.row("position", fmt.Sprint(pub.Position), "last event_outbox id committed with its events")
		} else {
			t.row("mode", "at least once", "MSGX_EXACTLY_ONCE=false: consumers de-duplicate by (FLID, stateVersion)")
		}
		t.row("events", fmt.Sprintf("%d published", pub.Published),
			fmt.Sprintf("%d duplicates not published; %d reconciled at start-up", pub.Deduplicated, pub.Reconciled))
		t.flush()
	}

	p.section("COMPONENTS")
	switch {
	case r.ComponentsError != "":
		p.line("  not reached: %s", r.ComponentsError)
	case len(r.Components) == 0:
		p.line("  none reported")
	default:
		t = p.table()
		t.row("NAME", "STATE", "LAST ERROR")
		for _, c := range r.Components {
			e := c.LastError
			if e != "" && c.LastErrorAt != nil {
				e += " (" + stamp(*c.LastErrorAt) + ")"
			}
			t.row(c.Name, orDash(c.State), e)
		}
		t.flush()
	}
	_, err := io.WriteString(w, p.b.String())
	if err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// textWriter collects the text in memory: a report is small, and one write
// at the end leaves a single error to handle.
type textWriter struct{ b strings.Builder }

func (p *textWriter) line(format string, args ...any) {
	fmt.Fprintf(&p.b, format, args...)
	p.b.WriteByte('\n')
}

func (p *textWriter) blank() { p.b.WriteByte('\n') }

func (p *textWriter) section(title string) {
	p.blank()
	p.line("%s", title)
}

func (p *textWriter) errors(errs []string) {
	for _, e := range errs {
		p.line("  error: %s", e)
	}
}

// textTable aligns the cells of one table. Every row of a table has the
// same number of cells (empty ones included), because tabwriter aligns a
// column only over consecutive lines that have a cell in it; the padding
// this leaves at the end of lines is trimmed on flush.
type textTable struct {
	out *strings.Builder
	buf *strings.Builder
	tw  *tabwriter.Writer
}

func (p *textWriter) table() textTable {
	buf := &strings.Builder{}
	return textTable{out: &p.b, buf: buf, tw: tabwriter.NewWriter(buf, 0, 0, 2, ' ', 0)}
}

func (t textTable) row(cells ...string) {
	fmt.Fprintf(t.tw, "  %s\n", strings.Join(cells, "\t"))
}

func (t textTable) flush() {
	_ = t.tw.Flush() // writes to a strings.Builder
	for _, l := range strings.SplitAfter(t.buf.String(), "\n") {
		if l != "" {
			t.out.WriteString(strings.TrimRight(l, " \n") + "\n")
		}
	}
}

// countText prints an unknown (-1) figure as "?".
func countText(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

// committedText prints a group's committed offset; -1 is "none": the group
// has never committed on the topic (kafka.GroupLag), not an unknown figure.
func committedText(n int64) string {
	if n < 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

func ago(s int64) string {
	if s < 0 {
		return "at an unknown time"
	}
	return fmtAge(s) + " ago"
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// text writes the REQUESTS section: counts by kind, the open requests with
// their age, and the last DONE / FAILED / EXPIRED of each kind with its
// answer.
func (q RequestStatus) text(p *textWriter) {
	p.section("REQUESTS (to the AODB, COUTMSGS)")
	t := p.table()
	t.row("KIND", "PENDING", "SENT", "DONE", "EXPIRED", "FAILED")
	for _, k := range requestKinds {
		cells := []string{k}
		for _, st := range requestStates {
			n := int64(-1)
			if v, ok := q.ByKind[k][st]; ok {
				n = v
			}
			cells = append(cells, countText(n))
		}
		t.row(cells...)
	}
	t.flush()
	t = p.table()
	if len(q.Open) == 0 && q.Latest != nil {
		t.row("open", "none", "")
	}
	for _, o := range q.Open {
		d := fmt.Sprintf("%s, open %s (timeout %s)", o.State, fmtAge(o.AgeSeconds), fmtAge(q.TimeoutSeconds))
		if o.OutboxID != 0 {
			d += fmt.Sprintf(", COUTMSGS_ID %d", o.OutboxID)
		}
		if o.LastError != "" {
			d += ": " + o.LastError
		}
		t.row("open", o.describe(), d)
	}
	for _, k := range requestKinds {
		for _, st := range []string{"DONE", "FAILED", "EXPIRED"} {
			c, ok := q.LastClosed[k][st]
			if !ok {
				continue
			}
			d := "closed " + stamp(*c.ClosedAt)
			switch st {
			case "DONE":
				d += fmt.Sprintf(", answered by #%d", c.AnswerMsgID)
			case "FAILED":
				if c.AnswerMsgID != 0 {
					d += fmt.Sprintf(", EROR #%d", c.AnswerMsgID)
				}
				if c.ErorCode != "" {
					d += " " + c.ErorCode
				}
				if c.ErorText != "" {
					d += ": " + c.ErorText
				}
			default:
				d += ", " + c.CloseReason
			}
			t.row("last "+st, c.describe(), d)
		}
	}
	unpaired := ""
	if u := q.LatestUnpaired; u != nil {
		unpaired = fmt.Sprintf("latest #%d at %s: %s", u.MsgID, stamp(u.At), u.Detail)
	}
	t.row("EROR unpaired", countText(q.UnpairedErors), unpaired)
	t.flush()
	p.errors(q.Errors)
}
