package flight

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"msgx/tables/message"
)

// world is the serial fold of the codeshare rules: the router's flight
// index (links) and the flights table (states), one message at a time —
// Expand its own transitions against the index, then Apply every resulting
// transition to the table. After each message it checks that the index and
// the table agree on every flight (docs/design.md#codeshare).
type world struct {
	t      *testing.T
	o      Options
	links  map[string]message.FlightLink
	states map[string]*State
	// versions are the versions each flight went through, as "v<n> #<msg>
	// <source> <changed>".
	versions map[string][]string
}

func newWorld(t *testing.T) *world {
	return &world{t: t, links: map[string]message.FlightLink{}, states: map[string]*State{}, versions: map[string][]string{}}
}

// send applies one message's own transitions and returns the transitions
// it made.
func (w *world) send(own ...Transition) []Transition {
	w.t.Helper()
	out, changed, err := Expand(own, w.links, w.o)
	if err != nil {
		w.t.Fatalf("Expand: %v", err)
	}
	for flid, l := range changed {
		if l.IsFlight() {
			w.links[flid] = l
		} else {
			delete(w.links, flid)
		}
	}
	for _, tr := range out {
		r, err := Apply(w.states[tr.FLID], tr, w.o)
		if err != nil {
			w.t.Fatalf("Apply(%s #%d): %v", tr.FLID, tr.MsgID, err)
		}
		for _, v := range r.Versions {
			w.versions[v.FLID] = append(w.versions[v.FLID], fmt.Sprintf("v%d #%d %s %s", v.StateVersion, v.Last.MsgID, v.Last.Source, strings.Join(v.Last.Changed, ",")))
		}
		switch {
		case r.Purge, r.State == nil:
			delete(w.states, tr.FLID)
		default:
			w.states[tr.FLID] = r.State
		}
	}
	w.agree()
	return out
}

// agree checks that the index holds exactly the table's links.
func (w *world) agree() {
	w.t.Helper()
	for flid, s := range w.states {
		if got := LinkOf(s); got != w.links[flid] {
			w.t.Fatalf("flight %s: table %+v, index %+v", flid, got, w.links[flid])
		}
	}
	for flid, l := range w.links {
		if s := w.states[flid]; s == nil || s.IsPlaceholder() {
			w.t.Fatalf("flight %s: index %+v, not a flight in the table", flid, l)
		}
	}
}

func (w *world) mafl(flid string) string {
	s := w.states[flid]
	if s == nil {
		return "<none>"
	}
	var parts []string
	for _, e := range s.MAFL {
		parts = append(parts, e.FLID+":"+e.FLNO)
	}
	if s.IsPlaceholder() {
		for _, c := range sortedFLIDs(s.Links) {
			parts = append(parts, c+":"+s.Links[c].FLNO)
		}
		return "placeholder " + strings.Join(parts, " ")
	}
	return strings.Join(parts, " ")
}

func fl(flno string, kv ...string) map[string]string {
	return with(map[string]string{"FLNO": flno}, kv...)
}

func TestChildrenBeforeTheirMasterInOnePackage(t *testing.T) {
	w := newWorld(t)
	out := w.send(sched(10, "2", fl("MU2", "MAID", "1"), nil), sched(10, "1", fl("CA1"), nil), sched(10, "3", fl("ZH3", "MAID", "1"), nil))
	// One transition per flight: the master's carries the first child's
	// LINK (a placeholder until its own SCHEDULE), its creation and the
	// second child's LINK, in that order.
	if len(out) != 3 || out[1].FLID != "1" || len(out[1].Then) != 2 || out[1].Kind != KindLink || out[1].Then[0].Kind != KindSchedule {
		t.Fatalf("transitions: %+v", out)
	}
	if got := w.mafl("1"); got != "2:MU2 3:ZH3" {
		t.Fatalf("MAFL %s", got)
	}
	if got, want := w.versions["1"], []string{"v1 #10 SCHD-DNLD FLNO,MAFL,STATE", "v2 #10 DERIVED-LINK MAFL"}; !slices.Equal(got, want) {
		t.Fatalf("master's versions %v, want %v", got, want)
	}
	if s := w.states["1"]; s.LastMsgID != 10 {
		t.Fatalf("master %+v", s)
	}
}

func TestChildChangesReachTheMaster(t *testing.T) {
	w := newWorld(t)
	w.send(sched(10, "1", fl("CA1"), nil), sched(10, "5", fl("CA5"), nil), sched(10, "2", fl("MU2", "MAID", "1"), nil))
	// A change that leaves the link alone tells the master nothing.
	if out := w.send(flop(11, "2", "ESTT", map[string]string{"ESTT": "23JAN261000"}, nil)); len(out) != 1 {
		t.Fatalf("ESTT of a child: %+v", out)
	}
	w.send(flop(12, "2", "FLNO", map[string]string{"FLNO": "MU22"}, nil))
	if got := w.mafl("1"); got != "2:MU22" {
		t.Fatalf("after the child's FLNO: %s", got)
	}
	// Re-linked to another master: it leaves the first one's MAFL.
	w.send(flop(13, "2", "MAID", map[string]string{"MAID": "5"}, nil))
	if w.mafl("1") != "" || w.mafl("5") != "2:MU22" {
		t.Fatalf("after the re-link: 1 [%s] 5 [%s]", w.mafl("1"), w.mafl("5"))
	}
	// Unlinked, then linked again by a schedule, then deleted.
	w.send(flop(14, "2", "MAID", map[string]string{"MAID": ""}, nil))
	if w.mafl("5") != "" {
		t.Fatalf("after the unlink: %s", w.mafl("5"))
	}
	w.send(sched(15, "2", fl("MU22", "MAID", "5"), nil))
	w.send(del(16, "2"))
	if w.mafl("5") != "" || w.states["2"].State != StateDeleted {
		t.Fatalf("after the child's deletion: %s", w.mafl("5"))
	}
	want := []string{"v1 #10 SCHD-DNLD FLNO,STATE", "v2 #13 DERIVED-LINK MAFL", "v3 #14 DERIVED-LINK MAFL", "v4 #15 DERIVED-LINK MAFL",
		"v5 #16 DERIVED-LINK MAFL"}
	if got := w.versions["5"]; !slices.Equal(got, want) {
		t.Fatalf("master 5's versions %v, want %v", got, want)
	}
}

func TestMasterDeletionCascades(t *testing.T) {
	w := newWorld(t)
	w.send(sched(10, "1", fl("CA1"), nil), sched(10, "2", fl("MU2", "MAID", "1"), nil), sched(10, "3", fl("ZH3", "MAID", "1"), nil),
		sched(10, "4", fl("FM4", "MAID", "3"), nil), sched(10, "9", fl("CA9"), nil))
	out := w.send(flop(20, "1", "FDEL", nil, nil))
	// The master, its children, and the child of a child; each deleted
	// child tells its master it left.
	var flids []string
	for _, tr := range out {
		flids = append(flids, tr.FLID)
	}
	if !slices.Equal(flids, []string{"1", "2", "3", "4"}) {
		t.Fatalf("transitions for %v: %+v", flids, out)
	}
	for _, f := range []string{"1", "2", "3", "4"} {
		if w.states[f].State != StateDeleted {
			t.Fatalf("flight %s: %s", f, w.states[f].State)
		}
	}
	if got, want := w.versions["2"], []string{"v1 #10 SCHD-DNLD FLNO,MAID,STATE", "v2 #20 CASCADE STATE"}; !slices.Equal(got, want) {
		t.Fatalf("child 2's versions %v, want %v", got, want)
	}
	// The master sent again: a revived master lists nobody until a child
	// links again.
	w.send(sched(21, "1", fl("CA1"), nil))
	if got := w.mafl("1"); got != "" {
		t.Fatalf("revived master: %s", got)
	}
	w.send(sched(22, "2", fl("MU2", "MAID", "1"), nil))
	if got := w.mafl("1"); got != "2:MU2" {
		t.Fatalf("revived child: %s", got)
	}
}

func TestAbsentMasterOfAPackageCascades(t *testing.T) {
	// A DNLD in delete mode that carries the child but not its master: the
	// child's own record comes first, then the master's absent-delete,
	// whose cascade deletes the child the package just restated.
	w := newWorld(t)
	w.send(sched(10, "1", fl("CA1"), nil), sched(10, "2", fl("MU2", "MAID", "1"), nil))
	absent := del(20, "1")
	absent.Source = "SCHD-DNLD"
	out := w.send(sched(20, "2", fl("MU2", "MAID", "1"), nil), absent)
	if len(out) != 2 || out[0].FLID != "2" || len(out[0].Then) != 1 || !out[0].Then[0].Cascade || out[1].FLID != "1" {
		t.Fatalf("transitions %+v", out)
	}
	if w.states["2"].State != StateDeleted {
		t.Fatalf("child %+v", w.states["2"])
	}
}

func TestPlaceholderLeavesWithItsLastChild(t *testing.T) {
	w := newWorld(t)
	w.send(sched(10, "2", fl("MU2", "MAID", "1"), nil))
	if got := w.mafl("1"); got != "placeholder 2:MU2" {
		t.Fatalf("placeholder: %s", got)
	}
	if p := w.states["1"]; p.LastMsgID != 10 {
		t.Fatalf("the placeholder remembers the message that made it: %+v", p)
	}
	w.send(flop(11, "2", "MAID", map[string]string{"MAID": "7"}, nil))
	if _, ok := w.states["1"]; ok {
		t.Fatalf("placeholder of 1 kept: %s", w.mafl("1"))
	}
	if got := w.mafl("7"); got != "placeholder 2:MU2" {
		t.Fatalf("placeholder 7: %s", got)
	}
}

func TestMutualMastersTerminate(t *testing.T) {
	w := newWorld(t)
	w.send(sched(10, "1", fl("CA1", "MAID", "2"), nil), sched(10, "2", fl("MU2", "MAID", "1"), nil))
	w.send(del(11, "1"))
	if w.states["1"].State != StateDeleted || w.states["2"].State != StateDeleted {
		t.Fatalf("1 %s, 2 %s", w.states["1"].State, w.states["2"].State)
	}
}

func TestPurgeTellsTheMaster(t *testing.T) {
	w := newWorld(t)
	w.send(sched(10, "1", fl("CA1"), nil), sched(10, "2", fl("MU2", "MAID", "1"), nil))
	w.links["2"] = w.links["2"] // the router purges what its index holds past the retention
	out := w.send(Transition{Kind: KindPurge, Source: SourceHistory, FLID: "2", PurgeBefore: "2026-02-01", At: at(30)})
	if len(out) != 2 || out[1].Kind != KindLink || out[1].MsgID != 0 || out[1].Source != SourceHistory || out[1].Link.Live {
		t.Fatalf("transitions %+v", out)
	}
	if _, ok := w.states["2"]; ok || w.mafl("1") != "" {
		t.Fatalf("after the purge: child %v, master [%s]", w.states["2"], w.mafl("1"))
	}
}

func TestDisagreementIsRejected(t *testing.T) {
	s := created(t, "2", fl("MU2", "MAID", "1"), nil)
	cascade := Transition{MsgID: 20, Source: SourceCascade, Kind: KindDelete, FLID: "2", At: at(20), Fields: map[string]string{"MAID": "3"}, Cascade: true}
	if _, err := Apply(s, cascade, Options{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("cascade from another master: %v", err)
	}
	tr := flop(20, "2", "ESTT", map[string]string{"ESTT": "23JAN261000"}, nil)
	tr.Expect = &message.FlightLink{State: StateActive, MAID: "1", FLNO: "MU9"}
	if _, err := Apply(s, tr, Options{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "expects flight 2") {
		t.Fatalf("a step whose Expect the table does not meet: %v", err)
	}
	tr.Expect = &message.FlightLink{State: StateActive, MAID: "1", FLNO: "MU2"}
	if _, err := Apply(s, tr, Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestRedeliveredTransitionChangesNothing(t *testing.T) {
	w := newWorld(t)
	w.send(sched(10, "1", fl("CA1"), nil))
	out := w.send(sched(11, "2", fl("MU2", "MAID", "1"), nil), flop(11, "1", "ESTT", map[string]string{"ESTT": "23JAN261000"}, nil))
	for _, tr := range out {
		r := mustApply(t, w.states[tr.FLID], tr, Options{})
		if !r.Replay || len(r.Versions) != 0 || r.State.StateVersion != w.states[tr.FLID].StateVersion {
			t.Fatalf("redelivery of %s: %+v", tr.FLID, r)
		}
	}
}

// TestIndexFollowsTheTable plays random codeshare-heavy messages through
// the fold: the index and the table agree after every message (world.agree)
// under both schedule options, and LinkAfter of a full state's link is the
// link Apply gives that state.
func TestIndexFollowsTheTable(t *testing.T) {
	for _, o := range []Options{{}, {ScheduleMissing: ScheduleMissingClear}} {
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, 7))
			w := newWorld(t)
			w.o = o
			flid := func() string { return fmt.Sprint(1 + rng.IntN(12)) }
			maybeMAID := func(m map[string]string) map[string]string {
				switch rng.IntN(3) {
				case 0:
					m["MAID"] = flid()
				case 1:
					m["MAID"] = ""
				}
				return m
			}
			for msg := int64(1); msg <= 300; msg++ {
				var own []Transition
				switch r := rng.IntN(10); {
				case r < 3:
					seen := map[string]bool{}
					for range 1 + rng.IntN(4) {
						f := flid()
						if !seen[f] {
							seen[f] = true
							own = append(own, sched(msg, f, maybeMAID(fl(fmt.Sprintf("X%d", rng.IntN(3)))), nil))
						}
					}
				case r < 4:
					own = []Transition{adft(msg, flid(), maybeMAID(map[string]string{"FLNO": fmt.Sprintf("A%d", rng.IntN(3))}), nil)}
				case r < 6:
					f := flid()
					if !w.links[f].IsFlight() {
						continue // the router answers no-match
					}
					if rng.IntN(2) == 0 {
						own = []Transition{del(msg, f)}
					} else {
						own = []Transition{flop(msg, f, "MAID", maybeMAID(map[string]string{}), nil)}
						if _, ok := own[0].Fields["MAID"]; !ok {
							own[0] = flop(msg, f, "FLNO", map[string]string{"FLNO": fmt.Sprintf("F%d", rng.IntN(3))}, nil)
						}
					}
				default:
					f := flid()
					if !w.links[f].IsFlight() {
						continue
					}
					own = []Transition{flop(msg, f, "ESTT", map[string]string{"ESTT": "23JAN261000"}, nil)}
				}
				w.send(own...)
			}
			for flid, s := range w.states {
				if s.IsPlaceholder() {
					continue
				}
				for _, tr := range []Transition{
					flop(999, flid, "FLNO", map[string]string{"FLNO": "Z"}, nil), flop(999, flid, "MAID", map[string]string{"MAID": "3"}, nil),
					del(999, flid), sched(999, flid, map[string]string{"ALCD": "CA"}, nil), adft(999, flid, map[string]string{"MAID": "4"}, nil),
				} {
					got, err := LinkAfter(LinkOf(s), tr, o)
					if err != nil {
						t.Fatal(err)
					}
					if want := LinkOf(mustApply(t, s, tr, o).State); got != want {
						t.Fatalf("seed %d: LinkAfter(%+v, %s) = %+v, Apply gives %+v", seed, LinkOf(s), tr.Source, got, want)
					}
				}
			}
		}
	}
}
