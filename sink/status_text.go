package sink

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
// figures print as "?", and a section that could not be read says why.
func (r Report) Text(w io.Writer) error {
	p := &stTextWriter{}
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
			seed += " at " + stStamp(*in.SeededAt)
		}
	}
	t.row("watermark W", stCount(in.Watermark), seed)
	t.row("MAX(CMINMSGS_ID)", stCount(in.MaxID), in.MaxIDError)
	t.row("lag", stCount(in.Lag), "IDs above W")
	if u := in.OldestUnread; u != nil {
		t.row("next unread", fmt.Sprintf("#%d", u.MsgID), "received "+stAgo(u.AgeSeconds))
	}
	if h := in.Hole; h != nil {
		t.row("open hole", stIDRange(h.From, h.To), fmt.Sprintf("open %s (since %s)", stFmtAge(h.AgeSeconds), stStamp(h.Since)))
	} else {
		t.row("open hole", "none", "")
	}
	holes := fmt.Sprintf("%s IDs", stCount(in.PermanentHoleIDs))
	if len(in.RecentHoles) > 0 {
		h := in.RecentHoles[0]
		holes += fmt.Sprintf("; last %s released %s (%s)", stIDRange(h.From, h.To), stStamp(h.ReleasedAt), h.Reason)
	}
	t.row("permanent holes", stCount(in.PermanentHoles), holes)
	late := ""
	if in.LateRows > 0 {
		late = "IDs " + stJoinIDs(in.LateRowIDs, in.LateRows)
	}
	t.row("late rows", stCount(in.LateRows), late)
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
			detail = stFmtCounts(m.SkippedByReasonClass)
		case message.StateDead:
			detail = stFmtCounts(m.DeadByClass)
			if m.DeadRecent > 0 {
				detail += fmt.Sprintf("; %d in the last %s", m.DeadRecent, stFmtAge(m.DeadRecentWindowSeconds))
			}
		}
		t.row(st, stCount(n), detail)
	}
	t.row("backlog", stCount(m.Backlog), "PENDING + FAILED + ROUTED")
	t.flush()
	t = p.table()
	if h := m.OldestUnfinished; h != nil {
		d := fmt.Sprintf("#%d %s, enqueued %s, %d attempts", h.MsgID, h.State, stAgo(h.AgeSeconds), h.Attempts)
		if h.ErrorClass != "" {
			d += ", " + h.ErrorClass
		}
		if h.NextAttemptAt != nil {
			d += ", next attempt " + stStamp(*h.NextAttemptAt)
		}
		if h.LastError != "" {
			d += ": " + h.LastError
		}
		t.row("oldest unfinished", d)
	} else if m.Backlog == 0 {
		t.row("oldest unfinished", "none")
	}
	if d := m.LatestDead; d != nil {
		s := fmt.Sprintf("#%d %s", d.MsgID, stOrDash(d.ErrorClass))
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
		pend = fmt.Sprintf("oldest enqueued %s", stAgo(b.OldestPendingAgeSeconds))
	}
	t.row("pending", stCount(b.Pending), pend)
	t.row("overdue", stCount(b.Overdue), "pending longer than "+stFmtAge(b.OverdueAfterSeconds))
	ab := "?"
	if b.Abandoned != nil {
		ab = fmt.Sprint(stSum(b.Abandoned))
	}
	t.row("abandoned", ab, stFmtCounts(b.Abandoned))
	t.flush()
	p.errors(b.Errors)

	p.section("KAFKA GROUPS")
	if len(r.Groups) > 0 {
		t = p.table()
		t.row("GROUP", "TOPIC", "STATE", "MEMBERS", "COMMITTED", "END", "LAG", "")
		for _, g := range r.Groups {
			t.row(g.Group, g.Topic, stOrDash(g.State), fmt.Sprint(g.Members), stCount(g.Committed), fmt.Sprint(g.End), fmt.Sprint(g.Lag), g.Error)
		}
		t.flush()
	}
	if r.GroupsError != "" {
		p.errors([]string{r.GroupsError})
	}

	if len(r.Components) > 0 {
		p.section("COMPONENTS")
		t = p.table()
		t.row("NAME", "STATE", "LAST ERROR")
		for _, c := range r.Components {
			e := c.LastError
			if e != "" && c.LastErrorAt != nil {
				e += " (" + stStamp(*c.LastErrorAt) + ")"
			}
			t.row(c.Name, stOrDash(c.State), e)
		}
		t.flush()
	}
	_, err := io.WriteString(w, p.b.String())
	if err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// stTextWriter collects the text in memory: a report is small, and one write
// at the end leaves a single error to handle.
type stTextWriter struct{ b strings.Builder }

func (p *stTextWriter) line(format string, args ...any) {
	fmt.Fprintf(&p.b, format, args...)
	p.b.WriteByte('\n')
}

func (p *stTextWriter) blank() { p.b.WriteByte('\n') }

func (p *stTextWriter) section(title string) {
	p.blank()
	p.line("%s", title)
}

func (p *stTextWriter) errors(errs []string) {
	for _, e := range errs {
		p.line("  error: %s", e)
	}
}

// stTextTable aligns the cells of one table. Every row of a table has the
// same number of cells (empty ones included), because tabwriter aligns a
// column only over consecutive lines that have a cell in it; the padding
// this leaves at the end of lines is trimmed on flush.
type stTextTable struct {
	out *strings.Builder
	buf *strings.Builder
	tw  *tabwriter.Writer
}

func (p *stTextWriter) table() stTextTable {
	buf := &strings.Builder{}
	return stTextTable{out: &p.b, buf: buf, tw: tabwriter.NewWriter(buf, 0, 0, 2, ' ', 0)}
}

func (t stTextTable) row(cells ...string) {
	fmt.Fprintf(t.tw, "  %s\n", strings.Join(cells, "\t"))
}

func (t stTextTable) flush() {
	_ = t.tw.Flush() // writes to a strings.Builder
	for _, l := range strings.SplitAfter(t.buf.String(), "\n") {
		if l != "" {
			t.out.WriteString(strings.TrimRight(l, " \n") + "\n")
		}
	}
}

// stCount prints an unknown (-1) figure as "?".
func stCount(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

func stAgo(s int64) string {
	if s < 0 {
		return "at an unknown time"
	}
	return stFmtAge(s) + " ago"
}

func stStamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
