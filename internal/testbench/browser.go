package testbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// Browser is Debian's headless Chromium, for tests of the pages.
type Browser struct{ path string }

// RequireBrowser returns the browser, or fails (in CI) or skips the test without one.
func RequireBrowser(t testing.TB) *Browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		Missing(t, "chromium (apt-get install chromium)")
	}
	return &Browser{path: path}
}

// run starts a fresh headless browser on url with args. The flags keep it off the
// network: this machine has none, and without them it tries many connections at start.
func (b *Browser) run(ctx context.Context, url string, args ...string) (stdout, stderr string, err error) {
	profile, err := os.MkdirTemp("", "profinfer-chromium-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(profile)
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--enable-logging=stderr", "--v=0", "--user-data-dir=" + profile,
		// Virtual time lets the page's timers and fetches run before the dump.
		"--virtual-time-budget=8000"}
	cmd := exec.CommandContext(ctx, b.path, append(append(base, args...), url)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("chromium %s: %w\n%s", url, err, tail([]byte(errb.String())))
	}
	return out.String(), errb.String(), err
}

// Shot is a screenshot of a page: as rendered in a window of Width × Height, saved to
// Path (PNG).
type Shot struct {
	Path          string
	Width, Height int
}

// DOM loads url and returns the document as its scripts left it, and the console
// messages that were errors.
func (b *Browser) DOM(ctx context.Context, url string) (dom string, consoleErrors []string, err error) {
	return b.load(ctx, url, "--dump-dom")
}

// DOMShot is DOM in a window of shot's size, saving the screenshot too (its directory
// made where missing): one browser's start, where two would take as long again.
func (b *Browser) DOMShot(ctx context.Context, url string, shot Shot) (dom string, consoleErrors []string, err error) {
	if err := os.MkdirAll(filepath.Dir(shot.Path), 0o755); err != nil {
		return "", nil, err
	}
	return b.load(ctx, url, "--dump-dom", "--screenshot="+shot.Path, fmt.Sprintf("--window-size=%d,%d", shot.Width, shot.Height), "--hide-scrollbars")
}

// load loads url with args, and returns what it printed and its console's errors.
func (b *Browser) load(ctx context.Context, url string, args ...string) (dom string, consoleErrors []string, err error) {
	out, stderr, err := b.run(ctx, url, args...)
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "CONSOLE") && (strings.Contains(l, "Uncaught") || strings.Contains(l, ":ERROR:")) {
			consoleErrors = append(consoleErrors, l)
		}
	}
	return out, consoleErrors, err
}

// Walk calls f on n and every node below it, in document order.
func Walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		Walk(c, f)
	}
}

// Text is the text below n, as the page shows it.
func Text(n *html.Node) string {
	var b strings.Builder
	Walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}
