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

var nan = math.NaN()

// cpuUse is the CPU time (s) each process of a backlog has spent so far:
// msgx (the child process; the embedded Kafka is inside it), PostgreSQL
// (every backend, postmaster and worker), MariaDB (mariadbd), Apache
// Kafka's JVM (NaN when it is not the benchmark's own, and on kfake) and
// the machine as a whole (every core's busy time).
type cpuUse struct {
	msgx, pg, my, jvm, busy float64
}

// readCPU reads cpuUse now, of the msgx process msgxPid (0: none yet) and
// the JVM jvmPid (0: none).
func readCPU(msgxPid, jvmPid int) cpuUse {
	u := cpuUse{pg: postgresCPUSeconds(), my: processCPUSeconds("mariadbd"), jvm: nan, busy: machineBusySeconds()}
	if msgxPid != 0 {
		u.msgx = cpuSeconds(msgxPid)
	}
	if jvmPid != 0 {
		u.jvm = cpuSeconds(jvmPid)
	}
	return u
}

// since is what was spent from an earlier reading to u.
func (u cpuUse) since(earlier cpuUse) cpuUse {
	return cpuUse{msgx: u.msgx - earlier.msgx, pg: u.pg - earlier.pg, my: u.my - earlier.my,
		jvm: u.jvm - earlier.jvm, busy: u.busy - earlier.busy}
}

// perMessage is u in µs per message of n.
func (u cpuUse) perMessage(n int) cpuUse {
	f := 1e6 / float64(n)
	return cpuUse{msgx: u.msgx * f, pg: u.pg * f, my: u.my * f, jvm: u.jvm * f, busy: u.busy * f}
}

// cpuMedian is the median of each process's figure over runs.
func cpuMedian(runs []cpuUse) cpuUse {
	pick := func(f func(cpuUse) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	return cpuUse{msgx: pick(func(u cpuUse) float64 { return u.msgx }), pg: pick(func(u cpuUse) float64 { return u.pg }),
		my: pick(func(u cpuUse) float64 { return u.my }), jvm: pick(func(u cpuUse) float64 { return u.jvm }),
		busy: pick(func(u cpuUse) float64 { return u.busy })}
}

// cpuHeading names the figures of cpuFigure.
const cpuHeading = "CPU per message, msgx / PostgreSQL / MariaDB / Kafka's JVM"

// cpuFigure formats µs per message of col: the JVM's as "in msgx" on kfake
// and "—" when it was not measured (an operator's Kafka).
func cpuFigure(perMsg cpuUse, col column) string {
	jvm := fmt.Sprintf("%.0f", perMsg.jvm)
	switch {
	case col == kfake:
		jvm = "in msgx"
	case perMsg.jvm != perMsg.jvm:
		jvm = "—"
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f / %s µs", perMsg.msgx, perMsg.pg, perMsg.my, jvm)
}
