package workload

import (
	"strings"
	"testing"
	"time"

	"msgx/processors/router"
	"msgx/tables/message"
	"msgx/tables/route"
	"msgx/tables/sis"
)

func TestDayIsDeterministicAndDecodes(t *testing.T) {
	a := Day(Options{Seed: 7, Flights: 120, Ops: 500, SharedEvery: 10})
	b := Day(Options{Seed: 7, Flights: 120, Ops: 500, SharedEvery: 10})
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatal("same seed, different day")
	}
	if len(a) < 500 {
		t.Fatalf("%d messages", len(a))
	}
	loc, _ := time.LoadLocation("Asia/Shanghai")
	set := router.Config{IgnoreRules: "LDM-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}.Settings(loc)
	kinds := map[string]int{}
	for i, m := range a {
		p := route.Prepare(int64(i+1), m, set)
		if v := route.Decide(p, message.Lookups{}, time.Time{}); v.State == message.StateDead && v.ErrorClass != message.ClassMalformed {
			t.Fatalf("message %d is %s %s: %s", i, v.State, v.ErrorClass, v.Reason)
		}
		if p.Msg != nil {
			kinds[p.Msg.Meta.TYPE+"-"+p.Msg.Meta.STYP]++
		} else if _, err := sis.Decode([]byte(m), loc); err == nil {
			t.Fatalf("message %d decodes but was not planned", i)
		}
	}
	for _, k := range []string{"SCHD-DNLD", "SCHD-ADFT", "FLOP-FDEL", "FLOP-ESTT", "FLOP-GTDT", "LDM-LDM"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the day: %v", k, kinds)
		}
	}
}

// The codeshare day is deterministic, decodes, shares a third of its
// flights and carries every kind of link change.
func TestCodeshareDay(t *testing.T) {
	o := Options{Seed: 3, Flights: 300, Ops: 2000, Codeshare: true}
	a, b := Day(o), Day(o)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatal("same seed, different day")
	}
	loc, _ := time.LoadLocation("Asia/Shanghai")
	set := router.Config{IgnoreRules: "LDM-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}.Settings(loc)
	kinds := map[string]int{}
	shared, flights := map[string]bool{}, map[string]bool{}
	for i, m := range a {
		p := route.Prepare(int64(i+1), m, set)
		if v := route.Decide(p, message.Lookups{}, time.Time{}); v.State == message.StateDead && v.ErrorClass != message.ClassMalformed {
			t.Fatalf("message %d is %s %s: %s", i, v.State, v.ErrorClass, v.Reason)
		}
		if p.Msg == nil {
			continue
		}
		kinds[p.Msg.Meta.TYPE+"-"+p.Msg.Meta.STYP]++
		if p.Msg.Schedule != nil {
			for _, f := range p.Msg.Schedule.Flights {
				flights[f.FLID] = true
				if f.Fields["MAID"] != "" {
					shared[f.FLID] = true
				}
			}
		}
	}
	for _, k := range []string{"SCHD-DNLD", "SCHD-ADFT", "FLOP-FDEL", "FLOP-MAID", "FLOP-FLNO", "AIRL-ADD", "AIRL-DEL", "LDM-LDM"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the day: %v", k, kinds)
		}
	}
	if 3*len(shared) < len(flights) {
		t.Errorf("%d of %d flights shared, want at least a third", len(shared), len(flights))
	}
}
