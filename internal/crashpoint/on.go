//go:build crashpoints

package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var (
	once   sync.Once
	name   string
	at     int
	mu     sync.Mutex
	passes int
)

func load() {
	spec := os.Getenv("MSGX_CRASHPOINT")
	if spec == "" {
		return
	}
	n, count, ok := strings.Cut(spec, "@")
	at = 1
	if ok {
		v, err := strconv.Atoi(count)
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "MSGX_CRASHPOINT=%q: want <name>[@<n ≥ 1>]\n", spec)
			os.Exit(2)
		}
		at = v
	}
	name = n
}

// Hit kills the process with SIGKILL the n-th time the point MSGX_CRASHPOINT
// names is reached.
func Hit(point string) {
	once.Do(load)
	if name == "" || point != name {
		return
	}
	mu.Lock()
	passes++
	fire := passes == at
	mu.Unlock()
	if fire {
		fmt.Fprintf(os.Stderr, "crashpoint %s@%d: SIGKILL\n", point, at)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; never return into the window
	}
}
