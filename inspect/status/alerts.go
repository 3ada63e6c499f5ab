package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"msgx/tables/message"
)

// Alerts derives, from a report alone, the plain-language things a human
// must look at, most urgent first. It is pure: Collect and Merge call
// it, and it is table-tested. The rules:
//
//   - a source that could not be read (PostgreSQL, MySQL, Kafka): the report
//     is incomplete, and whatever it cannot see may be wrong;
//   - ingest has no cursor (never seeded): nothing is read;
//   - the open hole is older than HoleAge;
//   - the watermark beyond MAX(CMINMSGS_ID) (wrong inbox, or IDs reused:
//     rows up to W would never be read);
//   - more than InboxLag IDs above the watermark;
//   - the next inbox row has waited longer than UnreadAge (not repeated
//     when an old hole already explains it);
//   - the oldest unfinished message is older than OldestUnfinishedAge;
//   - a consumer group has no live member (nothing consumes), is more than
//     GroupLag records behind, or could not be read;
//   - any late row (never enqueued; needs reconciling by hand);
//   - any DEAD message (each needs a decision: replay or accept), with how
//     many went DEAD within DeadWindow;
//   - any abandoned or overdue processed mark;
//   - the newest request of a kind FAILED (the AODB answered EROR) or
//     EXPIRED unanswered, a request open longer than RequestTimeout, and
//     EROR answers that paired with no request since the newest request;
//   - a component the daemon reports neither running nor standby.
//
// "Growing" is judged from one snapshot by ages, not by comparing two
// reports: when ingest, the router or a processor falls behind, the age of
// the next unread row or of the oldest unfinished message grows past its
// threshold, and DeadRecent counts the DEAD of the last window.
func Alerts(r Report, th Config) []string {
	out := []string{}
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	// Blind spots first: every other line is only as good as what was read.
	for _, sec := range []struct {
		name string
		errs []string
	}{{"inbox", r.Inbox.Errors}, {"messages", r.Messages.Errors}, {"backfill", r.Backfill.Errors}, {"requests", r.Requests.Errors}} {
		if len(sec.errs) > 0 {
			add("status incomplete: cannot read the %s section from PostgreSQL: %s%s", sec.name, sec.errs[0], more(len(sec.errs)-1))
		}
	}
	if r.Inbox.MaxIDError != "" {
		add("status incomplete: cannot read the MySQL inbox: %s", r.Inbox.MaxIDError)
	}
	if r.GroupsError != "" {
		add("status incomplete: cannot read the Kafka consumer groups: %s", r.GroupsError)
	}

	in := r.Inbox
	if !in.Seeded && len(in.Errors) == 0 && in.Watermark >= 0 {
		add("ingest is not seeded (no inbox_cursor): nothing is read from the inbox until ingest starts once with MSGX_CUTOVER_WATERMARK set")
	}
	holeAlert := false
	if h := in.Hole; h != nil && time.Duration(h.AgeSeconds)*time.Second >= th.HoleAge() {
		holeAlert = true
		add("inbox hole at IDs %s open for %s (threshold %s): ingest holds every row after W=%d; it should have been released after MSGX_MAX_COMMIT_DELAY — is the ingest bridge running?",
			idRange(h.From, h.To), fmtAge(h.AgeSeconds), fmtDur(th.HoleAge()), in.Watermark)
	}
	if in.MaxID >= 0 && in.Watermark > in.MaxID && in.Seeded {
		// The newest rows vanished, or this is not the inbox ingest read
		// (a replica, a restored copy), or AUTO_INCREMENT went back: new
		// rows with IDs up to W would never be read (I1).
		add("watermark W=%d is beyond MAX(CMINMSGS_ID)=%d: new inbox rows with IDs up to W would never be read; check that MSGX_MYSQL_DSN is the primary inbox and its AUTO_INCREMENT did not go back",
			in.Watermark, in.MaxID)
	}
	if in.Lag > th.InboxLag {
		add("ingest is %d IDs behind the inbox (W=%d, MAX(CMINMSGS_ID)=%d; threshold %d)", in.Lag, in.Watermark, in.MaxID, th.InboxLag)
	}
	if u := in.OldestUnread; u != nil && !holeAlert && u.AgeSeconds >= 0 && time.Duration(u.AgeSeconds)*time.Second >= th.UnreadAge {
		add("inbox row #%d has waited %s for ingest (threshold %s): ingest is not keeping up", u.MsgID, fmtAge(u.AgeSeconds), fmtDur(th.UnreadAge))
	}

	if h := r.Messages.OldestUnfinished; h != nil && time.Duration(h.AgeSeconds)*time.Second >= th.OldestUnfinishedAge {
		var what string
		switch h.State {
		case message.StateFailed:
			what = fmt.Sprintf("is FAILED (%s, %d attempts) and blocks every message behind it", orDash(h.ErrorClass), h.Attempts)
		case message.StateRouted:
			what = "is ROUTED and still waits for the flights/refdata processors to apply it"
		default:
			what = fmt.Sprintf("is %s: the router has not decided it", h.State)
		}
		line := fmt.Sprintf("oldest unfinished message #%d %s; enqueued %s ago (threshold %s)", h.MsgID, what, fmtAge(h.AgeSeconds), fmtDur(th.OldestUnfinishedAge))
		if h.LastError != "" {
			line += ": " + h.LastError
		}
		out = append(out, line)
	}

	// Groups: one "not consuming" line per group, one lag line per topic.
	idle := map[string]bool{}
	for _, g := range r.Groups {
		if g.Error != "" {
			add("consumer group %s on %s: %s", g.Group, g.Topic, g.Error)
		}
		if g.State != "" && g.Members == 0 && !idle[g.Group] {
			idle[g.Group] = true
			var lag int64
			for _, o := range r.Groups {
				if o.Group == g.Group {
					lag += o.Lag
				}
			}
			add("consumer group %s has no running member (state %s): nothing consumes its input; %s waiting", g.Group, g.State, plural(lag, "record"))
		}
		if g.Lag > th.GroupLag {
			add("consumer group %s is %s behind on %s (threshold %d)", g.Group, plural(g.Lag, "record"), g.Topic, th.GroupLag)
		}
	}

	if in.LateRows > 0 {
		add("%s never processed (IDs %s): they appeared after their hole had been released; reconcile them by hand",
			plural(in.LateRows, "late inbox row"), joinIDs(in.LateRowIDs, in.LateRows))
	}

	m := r.Messages
	if dead := sum(m.DeadByClass); dead > 0 {
		line := fmt.Sprintf("%s to decide on (replay or accept): %s", plural(dead, "DEAD message"), fmtCounts(m.DeadByClass))
		if m.DeadRecent > 0 {
			line += fmt.Sprintf("; %d new in the last %s", m.DeadRecent, fmtAge(m.DeadRecentWindowSeconds))
		}
		if d := m.LatestDead; d != nil {
			line += fmt.Sprintf("; latest #%d %s", d.MsgID, orDash(d.ErrorClass))
			if d.LastError != "" {
				line += ": " + d.LastError
			}
		}
		out = append(out, line)
	}

	b := r.Backfill
	if n := sum(b.Abandoned); n > 0 {
		add("%s abandoned (%s): reconcile by hand (msgx backfill abandoned, then msgx backfill reopen)", plural(n, "processed mark"), fmtCounts(b.Abandoned))
	}
	if b.Overdue > 0 {
		add("%s overdue (pending longer than %s): is the MySQL inbox writable and the backfill sweeper running?", plural(b.Overdue, "processed mark"), fmtAge(b.OverdueAfterSeconds))
	}

	out = append(out, requestAlerts(r.Requests, th)...)

	for _, c := range r.Components {
		if c.State == ComponentRunning || c.State == ComponentStandby {
			continue
		}
		line := fmt.Sprintf("component %s is %s", c.Name, orDash(c.State))
		if c.LastError != "" {
			line += ": " + c.LastError
			if c.LastErrorAt != nil {
				line += fmt.Sprintf(" (%s ago)", fmtAge(ageSeconds(r.GeneratedAt, *c.LastErrorAt)))
			}
		}
		out = append(out, line)
	}
	return out
}

// plural is "1 record", "2 records".
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func idRange(from, to int64) string {
	if to <= from {
		return fmt.Sprint(from)
	}
	return fmt.Sprintf("%d-%d", from, to)
}

// joinIDs lists ids, saying when the list is only the newest of total.
func joinIDs(ids []int64, total int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	out := strings.Join(s, ", ")
	if total > int64(len(ids)) {
		out = fmt.Sprintf("newest %d: %s", len(ids), out)
	}
	return out
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// fmtCounts is "A 1, B 2" in key order, skipping zeros.
func fmtCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(s, ", ")
}

func fmtDur(d time.Duration) string { return fmtAge(seconds(d)) }

// fmtAge writes whole seconds for people: 45s, 12m5s, 3h4m, 2d5h.
func fmtAge(s int64) string {
	switch {
	case s < 0:
		return "?"
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 86400:
		if s%3600/60 == 0 {
			return fmt.Sprintf("%dh", s/3600)
		}
		return fmt.Sprintf("%dh%dm", s/3600, s%3600/60)
	default:
		if s%86400/3600 == 0 {
			return fmt.Sprintf("%dd", s/86400)
		}
		return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
	}
}
