//go:build crashpoints

package crashpoint

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestHitKills runs this test binary again as a child that reaches the
// point three times with MSGX_CRASHPOINT=p@2: it must die of SIGKILL at the
// second pass and never print the third.
func TestHitKills(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") == "1" {
		for i := 1; i <= 3; i++ {
			os.Stdout.WriteString("pass " + string(rune('0'+i)) + "\n")
			Hit("other")
			Hit("p")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitKills$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", "MSGX_CRASHPOINT=p@2")
	out, err := cmd.Output()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v (%v), want SIGKILL", cmd.ProcessState, err)
	}
	if got := strings.TrimSpace(string(out)); got != "pass 1\npass 2" {
		t.Fatalf("child printed %q, want two passes", got)
	}
}
