package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Options shape a generated day.
type Options struct {
	// Seed makes the stream reproducible.
	Seed uint64
	// Flights in the day's DNLD package (split into packages of PackageSize).
	Flights int
	// PackageSize is the number of FLTR per SCHD DNLD message (default 100).
	PackageSize int
	// Ops is the number of messages after the schedule.
	Ops int
	// Day is the operation day (default 2021-01-23).
	Day time.Time
	// SharedEvery makes one flight in SharedEvery a shared flight of an
	// earlier one of its package (MAID); 0 makes none.
	SharedEvery int
	// Codeshare makes a codeshare-heavy day instead (Codeshare): a third of
	// the flights shared, children often before their masters, re-linked,
	// unlinked, renamed and deleted, masters deleted and sent again,
	// packages that mix masters and children, reference data beside it.
	// SharedEvery is ignored.
	Codeshare bool
}

var months = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}

func sisTime(t time.Time) string {
	return fmt.Sprintf("%02d%s%02d%02d%02d", t.Day(), months[t.Month()-1], t.Year()%100, t.Hour(), t.Minute())
}

type gen struct {
	rng   *rand.Rand
	day   time.Time
	seqn  int
	sent  []string // messages so far, for duplicates
	live  []int    // FLIDs not deleted
	sodt  map[int]time.Time
	flno  map[int]string
	nextF int
}

func (g *gen) meta(typ, styp string) string {
	g.seqn++
	return fmt.Sprintf(`<META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>%s</DTTM><TYPE>%s</TYPE><STYP>%s</STYP></META>`,
		g.seqn, g.day.Add(-2*time.Hour).Format("20060102150405"), typ, styp)
}

func wrap(meta, body string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><MSG>` + meta + body + `</MSG>`
}

func (g *gen) fltr(flid int, master int) string {
	t := g.day.Add(time.Duration(5*60+g.rng.IntN(17*60)) * time.Minute)
	g.sodt[flid] = t
	g.flno[flid] = fmt.Sprintf("CA%04d", flid%10000)
	var b strings.Builder
	fmt.Fprintf(&b, "<FLTR><FLID>%d</FLID><ALCD>CA</ALCD><FLNO>%s</FLNO><MVIN>%s</MVIN><SODT>%s</SODT><FLTY>W</FLTY><FLIN>D</FLIN>",
		flid, g.flno[flid], []string{"A", "D"}[g.rng.IntN(2)], sisTime(t))
	fmt.Fprintf(&b, "<ACFT>%s</ACFT><RENO>B%04d</RENO><TRML>T%d</TRML><STND>%d</STND>", []string{"738", "320", "333"}[g.rng.IntN(3)], g.rng.IntN(9999), 1+g.rng.IntN(2), 100+g.rng.IntN(200))
	if master != 0 {
		fmt.Fprintf(&b, "<MAID>%d</MAID>", master)
	}
	fmt.Fprintf(&b, `<ROUT RTNO="1"><APCD>%s</APCD><SCAT>%s</SCAT></ROUT>`, []string{"PEK", "SHA", "CTU", "XIY"}[g.rng.IntN(4)], sisTime(t.Add(2*time.Hour)))
	fmt.Fprintf(&b, `<PSDT PSNO="1"><PSST>%d</PSST><STST>%s</STST><STET>%s</STET></PSDT>`, 100+g.rng.IntN(200), sisTime(t.Add(-time.Hour)), sisTime(t))
	b.WriteString("</FLTR>")
	return b.String()
}

// Day returns the messages of one generated day, in inbox order.
func Day(o Options) []string {
	if o.PackageSize <= 0 {
		o.PackageSize = 100
	}
	if o.Day.IsZero() {
		o.Day = time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)
	}
	g := &gen{rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed)), day: o.Day, sodt: map[int]time.Time{}, flno: map[int]string{}, nextF: 100000}
	if o.Codeshare {
		return g.codeshare(o)
	}
	var out []string
	add := func(m string) { out = append(out, m); g.sent = append(g.sent, m) }

	// The day's schedule, in packages; with SharedEvery, some flights share
	// an earlier flight of their package as master.
	for start := 0; start < o.Flights; start += o.PackageSize {
		n := min(o.PackageSize, o.Flights-start)
		var body strings.Builder
		fmt.Fprintf(&body, "<SCHD><RECS>%d</RECS>", n)
		var pkg []int
		for i := 0; i < n; i++ {
			flid := g.nextF
			g.nextF++
			master := 0
			if o.SharedEvery > 0 && len(pkg) > 0 && g.rng.IntN(o.SharedEvery) == 0 {
				master = pkg[g.rng.IntN(len(pkg))]
			} else {
				pkg = append(pkg, flid)
			}
			body.WriteString(g.fltr(flid, master))
			g.live = append(g.live, flid)
		}
		body.WriteString("</SCHD>")
		add(wrap(g.meta("SCHD", "DNLD"), body.String()))
	}

	for i := 0; i < o.Ops; i++ {
		r := g.rng.IntN(1000)
		switch {
		case r < 20 && len(g.sent) > 0: // a duplicate of an earlier message
			out = append(out, g.sent[g.rng.IntN(len(g.sent))])
		case r < 30:
			add(wrap(g.meta("LDM", "LDM"), "<LDM/>"))
		case r < 35:
			out = append(out, fmt.Sprintf("garbage %d <<", i))
		case r < 60: // a new flight
			flid := g.nextF
			g.nextF++
			add(wrap(g.meta("SCHD", "ADFT"), "<SCHD><RECS>1</RECS>"+g.fltr(flid, 0)+"</SCHD>"))
			g.live = append(g.live, flid)
		case r < 80 && len(g.live) > 10: // a deletion
			k := g.rng.IntN(len(g.live))
			flid := g.live[k]
			g.live = append(g.live[:k], g.live[k+1:]...)
			add(wrap(g.meta("FLOP", "FDEL"), fmt.Sprintf("<FLOP><FLID>%d</FLID><FDEL></FDEL></FLOP>", flid)))
		default:
			if len(g.live) == 0 {
				continue
			}
			flid := g.live[g.rng.IntN(len(g.live))]
			styp, payload := g.flop(flid)
			add(wrap(g.meta("FLOP", styp), fmt.Sprintf("<FLOP><FLID>%d</FLID>%s</FLOP>", flid, payload)))
		}
	}
	return out
}

func (g *gen) flop(flid int) (styp, payload string) {
	t := g.sodt[flid].Add(time.Duration(g.rng.IntN(120)-30) * time.Minute)
	switch g.rng.IntN(10) {
	case 0:
		return "ESTT", "<ESTT>" + sisTime(t) + "</ESTT>"
	case 1:
		return "ACTT", "<ACTT>" + sisTime(t) + "</ACTT>"
	case 2:
		if g.rng.IntN(4) == 0 {
			return "GTDT", `<GTDT GTNO="0"/>`
		}
		return "GTDT", fmt.Sprintf(`<GTDT GTNO="1"><GATE>G%d</GATE><PGOT>%s</PGOT></GTDT><GTDT GTNO="2"><GATE>G%d</GATE></GTDT>`, g.rng.IntN(60), sisTime(t.Add(-time.Hour)), g.rng.IntN(60))
	case 3:
		return "CKDT", fmt.Sprintf(`<CKDT CKNO="1"><CHKC>%02d</CHKC><CCLS>Y</CCLS></CKDT>`, g.rng.IntN(99))
	case 4:
		return "DELY", fmt.Sprintf(`<DELY CODE="%s" STRT="%s" DURA="%04d">delay</DELY>`, []string{"WX", "AT", "TC"}[g.rng.IntN(3)], sisTime(t), g.rng.IntN(200))
	case 5:
		if g.rng.IntN(2) == 0 {
			return "BOTM", "<BOTM></BOTM>"
		}
		return "BOTM", "<BOTM>" + sisTime(t) + "</BOTM>"
	case 6:
		if g.rng.IntN(2) == 0 {
			return "CNCL", "<CNCL></CNCL>"
		}
		return "CNCL", "<CNCL>" + sisTime(t) + "</CNCL>"
	case 7:
		return "HNAG", fmt.Sprintf("<FHAG>%d</FHAG><PHAG>%d</PHAG>", g.rng.IntN(1000), g.rng.IntN(1000))
	case 8:
		return "PSDT", fmt.Sprintf(`<PSDT PSNO="1"><PSST>%d</PSST></PSDT>`, 100+g.rng.IntN(200))
	default:
		return "TRML", fmt.Sprintf("<TRML>T%d</TRML>", 1+g.rng.IntN(3))
	}
}

// codeshare is Day's codeshare-heavy day: the schedule in packages where a
// third of the flights are shared, listed before or after their masters,
// some naming masters that come only later; then operations, a good part of
// which change the links: a child renamed (FLNO), moved to another master,
// unlinked, linked again, deleted; a master deleted (its children go with
// it) and sent again; a child created before its master; small packages
// restating masters and children together; reference data; duplicates,
// ignored and malformed messages.
func (g *gen) codeshare(o Options) []string {
	var out []string
	add := func(m string) { out = append(out, m); g.sent = append(g.sent, m) }
	master := map[int]int{} // child → its master (0: none)
	deleted := map[int]bool{}
	var masters []int
	pick := func(list []int) int { return list[g.rng.IntN(len(list))] }
	// A FLTR whose flight number is the flight's current one (fltr gives a
	// fresh one otherwise).
	fltr := func(flid, m int) string {
		flno, known := g.flno[flid]
		f := g.fltr(flid, m)
		if known {
			f = strings.Replace(f, "<FLNO>"+g.flno[flid]+"</FLNO>", "<FLNO>"+flno+"</FLNO>", 1)
			g.flno[flid] = flno
		}
		return f
	}
	pkg := func(flids []int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "<SCHD><RECS>%d</RECS>", len(flids))
		for _, f := range flids {
			b.WriteString(fltr(f, master[f]))
		}
		b.WriteString("</SCHD>")
		return b.String()
	}
	// The schedule: in each package a third are shared flights of a master
	// of the package or of an earlier one, or of a flight that comes later;
	// the package lists its flights shuffled, so a child often precedes its
	// master.
	future := g.nextF + o.Flights
	for start := 0; start < o.Flights; start += o.PackageSize {
		n := min(o.PackageSize, o.Flights-start)
		flids := make([]int, n)
		for i := range flids {
			flids[i] = g.nextF
			g.nextF++
		}
		for _, f := range flids {
			switch {
			case g.rng.IntN(3) == 0 && len(masters) > 0:
				master[f] = pick(masters)
			case g.rng.IntN(30) == 0:
				master[f] = future + g.rng.IntN(20) // created later by an ADFT
			default:
				masters = append(masters, f)
			}
			g.live = append(g.live, f)
		}
		g.rng.Shuffle(len(flids), func(i, j int) { flids[i], flids[j] = flids[j], flids[i] })
		add(wrap(g.meta("SCHD", "DNLD"), pkg(flids)))
	}
	g.nextF = future
	children := func() []int {
		var cs []int
		for _, f := range g.live {
			if master[f] != 0 {
				cs = append(cs, f)
			}
		}
		return cs
	}
	flop := func(flid int, styp, payload string) {
		add(wrap(g.meta("FLOP", styp), fmt.Sprintf("<FLOP><FLID>%d</FLID>%s</FLOP>", flid, payload)))
	}
	for i := 0; i < o.Ops; i++ {
		if len(g.live) < 10 {
			break
		}
		cs := children()
		switch r := g.rng.IntN(100); {
		case r < 2 && len(g.sent) > 0: // a duplicate of an earlier message
			out = append(out, g.sent[g.rng.IntN(len(g.sent))])
		case r < 3:
			add(wrap(g.meta("LDM", "LDM"), "<LDM/>"))
		case r < 4:
			out = append(out, fmt.Sprintf("garbage %d <<", i))
		case r < 9 && len(cs) > 0: // a child renamed
			c := pick(cs)
			g.flno[c] = fmt.Sprintf("MU%04d", g.rng.IntN(10000))
			flop(c, "FLNO", "<FLNO>"+g.flno[c]+"</FLNO>")
		case r < 14 && len(cs) > 0: // a child moved to another master
			c := pick(cs)
			master[c] = pick(masters)
			flop(c, "MAID", fmt.Sprintf("<MAID>%d</MAID>", master[c]))
		case r < 17 && len(cs) > 0: // a child unlinked
			c := pick(cs)
			master[c] = 0
			flop(c, "MAID", "<MAID></MAID>")
		case r < 20: // a plain flight linked to a master
			f := pick(g.live)
			if m := pick(masters); m != f {
				master[f] = m
				flop(f, "MAID", fmt.Sprintf("<MAID>%d</MAID>", m))
			}
		case r < 23 && len(cs) > 0: // a child deleted
			c := pick(cs)
			deleted[c] = true
			flop(c, "FDEL", "<FDEL></FDEL>")
		case r < 26: // a master deleted: its children go with it
			m := pick(masters)
			deleted[m] = true
			flop(m, "FDEL", "<FDEL></FDEL>")
		case r < 29: // a deleted flight (a master, often) sent again
			var dels []int
			for f := range deleted {
				dels = append(dels, f)
			}
			if len(dels) == 0 {
				continue
			}
			slices.Sort(dels)
			f := pick(dels)
			delete(deleted, f)
			add(wrap(g.meta("SCHD", "ADFT"), "<SCHD><RECS>1</RECS>"+fltr(f, master[f])+"</SCHD>"))
		case r < 33: // a new flight, a third of them shared; some masters created late
			f := g.nextF
			g.nextF++
			if g.rng.IntN(3) == 0 {
				master[f] = pick(masters)
			} else {
				masters = append(masters, f)
			}
			g.live = append(g.live, f)
			add(wrap(g.meta("SCHD", "ADFT"), "<SCHD><RECS>1</RECS>"+fltr(f, master[f])+"</SCHD>"))
		case r < 36: // a package restating masters with their children
			m := pick(masters)
			flids := []int{m}
			for _, c := range cs {
				if master[c] == m && len(flids) < 6 {
					flids = append(flids, c)
				}
			}
			flids = append(flids, pick(g.live))
			slices.Sort(flids)
			flids = slices.Compact(flids)
			g.rng.Shuffle(len(flids), func(i, j int) { flids[i], flids[j] = flids[j], flids[i] })
			for _, f := range flids {
				delete(deleted, f)
			}
			add(wrap(g.meta("SCHD", "DNLD"), pkg(flids)))
		case r < 41: // reference data beside it
			code := fmt.Sprintf("Z%d", g.rng.IntN(30))
			switch g.rng.IntN(3) {
			case 0:
				add(wrap(g.meta("AIRL", "ADD"), fmt.Sprintf("<AIRL><ITOP>%s</ITOP><ANAM>Air %s</ANAM></AIRL>", code, code)))
			case 1:
				add(wrap(g.meta("AIRL", "UPD"), fmt.Sprintf("<AIRL><ITOP>%s</ITOP><ANAM>Air %s %d</ANAM></AIRL>", code, code, i)))
			default:
				add(wrap(g.meta("AIRL", "DEL"), fmt.Sprintf("<AIRL><ITOP>%s</ITOP></AIRL>", code)))
			}
		default:
			f := pick(g.live)
			styp, payload := g.flop(f)
			flop(f, styp, payload)
		}
	}
	return out
}
