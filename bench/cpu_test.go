package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of the CPU times of /proc/pid/stat: 100
// on every Linux this runs on (getconf CLK_TCK).
const clockTicks = 100

// procStat is what a benchmark reads of /proc/pid/stat: the command name,
// the parent and the CPU seconds the process spent, its own (utime +
// stime) and that of its reaped children (cutime + cstime).
type procStat struct {
	comm       string
	ppid       int
	own, child float64
}

func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	// The command name is in parentheses and may hold spaces: the fields
	// after it are counted from its closing parenthesis.
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return procStat{}, false
	}
	num := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v / clockTicks }
	ppid, _ := strconv.Atoi(f[1])
	// f[0] is field 3 (state): utime is field 14, so f[11].
	return procStat{comm: s[open+1 : end], ppid: ppid, own: num(11) + num(12), child: num(13) + num(14)}, true
}

// cpuSeconds is the CPU time (user + system, s) a running process has
// spent so far; NaN once it is gone.
func cpuSeconds(pid int) float64 {
	st, ok := readProcStat(pid)
	if !ok {
		return math.NaN()
	}
	return st.own
}

// postgresCPUSeconds is the CPU time every PostgreSQL process on this
// machine has spent so far: the running ones' own, and what the
// postmasters reaped from their exited backends (a backend's CPU is counted
// in its postmaster's cutime once it exits). A difference of two readings
// is what PostgreSQL spent in between, whoever it served: the benchmarks
// run alone.
func postgresCPUSeconds() float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	stats := make(map[int]procStat, len(dirs))
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok {
			stats[pid] = st
		}
	}
	total := 0.0
	for _, st := range stats {
		if st.comm != "postgres" {
			continue
		}
		total += st.own
		if parent, ok := stats[st.ppid]; !ok || parent.comm != "postgres" {
			total += st.child // a postmaster
		}
	}
	return total
}

// processCPUSeconds is the CPU time the running processes named comm have
// spent so far (their own, not their reaped children's).
func processCPUSeconds(comm string) float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	total := 0.0
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok && st.comm == comm {
			total += st.own
		}
	}
	return total
}

// machineBusySeconds is the CPU time every core of the machine has spent
// busy so far (user, nice, system, irq, softirq and steal of /proc/stat's
// first line): what is left of it after msgx, PostgreSQL and MariaDB is the
// benchmark itself, the kernel's own threads and anything else running.
func machineBusySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return math.NaN()
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return math.NaN()
	}
	total := 0.0
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseFloat(f[i], 64)
		total += v
	}
	return total / clockTicks
}

// perMessage formats CPU seconds spent on n messages as µs per message.
func perMessage(seconds float64, n int) string {
	return fmt.Sprintf("%.0f µs", seconds/float64(n)*1e6)
}
