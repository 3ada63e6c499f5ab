package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var units = []string{"msgx-ingest.service", "msgx-process@.service", "msgx@.service"}

// unitCopies writes the shipped units into a temporary directory with one
// change: ExecStart's /usr/local/bin/msgx becomes an executable of that
// directory, since systemd-analyze verify refuses a unit whose binary does
// not exist and no msgx is installed here. (With --root=, verify also needs
// the whole unit tree of the host below that root: it fails on this
// machine's symlinked /lib.)
func unitCopies(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "msgx")
	if err := os.Symlink("/usr/bin/true", bin); err != nil {
		t.Fatal(err)
	}
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "ExecStart=/usr/local/bin/msgx ") {
			t.Fatalf("%s: no ExecStart=/usr/local/bin/msgx", u)
		}
		b = []byte(strings.ReplaceAll(string(b), "/usr/local/bin/msgx", bin))
		if err := os.WriteFile(filepath.Join(dir, u), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// systemd-analyze verify accepts every unit without a word: it prints
// nothing for a clean unit, and an unknown or misspelt directive is only a
// warning (exit 0), so any output fails the test. It works without systemd
// as PID 1 when given unit file paths.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze := tool(t, "systemd-analyze", "systemd")
	dir := unitCopies(t)
	for _, u := range units {
		cmd := exec.Command(analyze, "verify", "--man=no", filepath.Join(dir, u))
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", u, err, out)
		}
	}
}

// The units run msgx as it expects to be run: a non-root user, restarted on
// failure but not for an invalid configuration (exit 2), SIGTERM for a
// graceful stop that systemd waits for longer than MSGX_SHUTDOWN_TIMEOUT,
// the shared environment file, and the hardening systemd-analyze security
// scores (printed for docs/operations.md#the-systemd-sandbox; the test fails above
// 2.0, "OK").
func TestSystemdUnitsHardening(t *testing.T) {
	analyze := tool(t, "systemd-analyze", "systemd")
	env, err := os.ReadFile("systemd/msgx.env.example")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^MSGX_ENV=production$`).Match(env) || !regexp.MustCompile(`(?m)^MSGX_SHUTDOWN_TIMEOUT=30s$`).Match(env) {
		t.Error("msgx.env.example: MSGX_ENV=production and MSGX_SHUTDOWN_TIMEOUT=30s expected")
	}
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		want := []string{"User=msgx", "EnvironmentFile=/etc/msgx/msgx.env", "KillSignal=SIGTERM", "TimeoutStopSec=45s",
			"NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=\n"}
		if u != "msgx@.service" {
			want = append(want, "Restart=on-failure", "RestartPreventExitStatus=2", "Type=exec")
		}
		for _, w := range want {
			if !strings.Contains(s, "\n"+w) {
				t.Errorf("%s lacks %q", u, strings.TrimSpace(w))
			}
		}
		if strings.Contains(s, "ExecReload") {
			t.Errorf("%s: msgx has no reload (no SIGHUP handling)", u)
		}
	}
	dir := unitCopies(t)
	for _, u := range units {
		out, err := exec.Command(analyze, "security", "--offline=yes", "--threshold=20", filepath.Join(dir, u)).CombinedOutput()
		score := regexp.MustCompile(`Overall exposure level for \S+: (\S+ \S+)`).FindSubmatch(out)
		if err != nil || score == nil {
			t.Errorf("systemd-analyze security %s: %v\n%s", u, err, out)
			continue
		}
		t.Logf("systemd-analyze security %s: %s\n%s", u, score[1], out)
	}
}
