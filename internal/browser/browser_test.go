package browser

import (
	"strings"
	"testing"
)

// Without Chromium the browser tests fail and say how to install it.
func TestPathSaysHowToInstall(t *testing.T) {
	t.Setenv("MSGX_TEST_CHROMIUM", "")
	t.Setenv("PATH", t.TempDir())
	_, err := Path()
	if err == nil || !strings.Contains(err.Error(), "make browser") {
		t.Fatalf("Path() without Chromium: %v, want the way to install it", err)
	}
	t.Setenv("MSGX_TEST_CHROMIUM", "/opt/chrome/chrome")
	if p, err := Path(); err != nil || p != "/opt/chrome/chrome" {
		t.Fatalf("Path() with MSGX_TEST_CHROMIUM: %q %v", p, err)
	}
}

// The browser starts and runs a page's script.
func TestBrowserRunsScript(t *testing.T) {
	b := New(t)
	n, err := Eval[int](b, "6 * 7")
	if err != nil || n != 42 {
		t.Fatalf("6 * 7 = %d, %v", n, err)
	}
}
