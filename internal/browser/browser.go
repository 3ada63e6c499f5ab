// Package browser starts a real headless Chromium for tests (driven with
// chromedp): the status page is tested in the browser operators use, not
// in a DOM imitation. Chromium is Debian's chromium package, which
// `make browser` and .ci/run install; MSGX_TEST_CHROMIUM names another
// binary. A test that needs it fails, with the way to install it, when it
// is missing: a skipped browser test would pass CI without testing anything.
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Browser is one headless Chromium with one tab.
type Browser struct {
	// Ctx runs chromedp actions in the tab.
	Ctx context.Context

	mu     sync.Mutex
	errors []string
}

// Path finds the Chromium binary: $MSGX_TEST_CHROMIUM, else chromium,
// chromium-browser or google-chrome on PATH.
func Path() (string, error) {
	if p := os.Getenv("MSGX_TEST_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium found (chromium, chromium-browser or google-chrome on PATH, or MSGX_TEST_CHROMIUM): " +
		"install it with `make browser` (apt-get install -y chromium), as .ci/run does")
}

// TrustSPKI makes Chromium accept, for this run only, certificates whose
// public key has one of the hashes (base64 SHA-256 of the
// SubjectPublicKeyInfo): a test's own CA is trusted without touching the
// machine's NSS database. Chromium honours the flag only with its own
// profile directory, which New always gives it.
func TrustSPKI(hashes ...string) chromedp.ExecAllocatorOption {
	return chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(hashes, ","))
}

// New starts Chromium for t (closed when t ends) with a fresh profile and
// everything that would reach the network switched off, plus the options
// extra (TrustSPKI). Uncaught script errors and console errors of the page
// are collected (Errors).
func New(t testing.TB, extra ...chromedp.ExecAllocatorOption) *Browser {
	t.Helper()
	path, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox, // root on CI
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1280, 1600),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &Browser{Ctx: ctx}
	stop := func() {
		cancelTab()
		cancelAlloc()
	}
	// The first action starts the browser, which lives as long as the
	// context of that action: ctx itself, not one with a timeout, so the
	// bound on the start is kept here.
	started := make(chan error, 1)
	go func() {
		_, err := chromedp.Run(ctx, chromedp.Location())
		started <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			stop()
			t.Fatalf("starting %s: %v", path, err)
		}
	case <-time.After(time.Minute):
		stop()
		t.Fatalf("%s did not start within a minute", path)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError {
				b.add(m.String() + " (" + m.URL + ")")
			}
		}
	}()
	t.Cleanup(stop)
	return b
}

func (b *Browser) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = append(b.errors, s)
}

// Errors are the script errors seen so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// Do runs actions in the tab within timeout.
func (b *Browser) Do(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.Ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Timezone makes the tab's scripts see zone (an IANA name) as the
// browser's time zone, whatever the machine's.
func (b *Browser) Timezone(zone string) error {
	return b.Do(10*time.Second, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone})
		return err
	}))
}

// Text is the text content of the first element matching the CSS selector
// sel, once it exists.
func (b *Browser) Text(sel string) (string, error) {
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// WaitFor polls the JavaScript condition cond (an expression) until it is
// true, failing t with what after timeout.
func (b *Browser) WaitFor(t testing.TB, what, cond string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		var ok bool
		if ok, last = Eval[bool](b, "Boolean("+cond+")"); last == nil && ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	body, _ := Eval[string](b, "document.body ? document.body.innerText : ''")
	t.Fatalf("waiting for %s (%s): not true after %s (last error %v; script errors %q)\npage text:\n%s", what, cond, timeout, last, b.Errors(), body)
}

// BypassCSP makes the tab ignore (on) or obey (off) the pages'
// Content-Security-Policy: a test that runs fetches of its own from a page
// whose policy forbids them (msgx's probes and errors forbid everything)
// turns it on for those, and off again before it looks at the status page,
// whose own policy is part of what it tests.
func (b *Browser) BypassCSP(on bool) error {
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
	defer cancel()
	_, err := chromedp.Call(ctx, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: on})
	return err
}
