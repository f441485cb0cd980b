// Package browser drives headless Chromium for tests that check what a
// person sees in the daemon's pages: the DOM after load, the console, a
// screenshot, and a crawl of every link.
//
// Chromium comes from Debian (`make test-deps`). Without it the tests
// skip, unless SLAPROBE_REQUIRE_DEPS=1 (set by `make test`), where they
// fail instead. Set SLAPROBE_SHOT_DIR to keep the screenshots.
package browser

import (
	"bytes"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/testproc"
)

const (
	// EnvRequire, when "1", turns a missing Chromium into a failure.
	EnvRequire = "SLAPROBE_REQUIRE_DEPS"
	// EnvShotDir names a directory that receives a copy of every screenshot.
	EnvShotDir = "SLAPROBE_SHOT_DIR"
	// EnvChromium names the browser binary (Chromium or Google Chrome), used before chromium and
	// chromium-browser on PATH: for machines where apt cannot install Chromium (Ubuntu's is a snap).
	EnvChromium = "SLAPROBE_CHROMIUM"
)

// Chromium returns the path of the browser ($SLAPROBE_CHROMIUM, else chromium
// or chromium-browser on PATH), or skips (fails under SLAPROBE_REQUIRE_DEPS=1)
// when there is none. Skips under -short too.
func Chromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the headless browser")
	}
	if p := os.Getenv(EnvChromium); p != "" {
		if testproc.IsExecutable(p) {
			testproc.Busy(t) // a browser keeps the cores busy: not beside a timing check
			return p
		}
		t.Fatalf("%s=%q is not an executable file; unset it or name a Chromium or Chrome binary", EnvChromium, p)
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			testproc.Busy(t)
			return p
		}
	}
	msg := "chromium not found: run `make test-deps` (Debian package chromium); where apt cannot install it " +
		"(Ubuntu ships it as a snap: snap install chromium), install Chromium or Google Chrome by other means and set " +
		EnvChromium + " to its binary"
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s (%s=1)", msg, EnvRequire)
	}
	t.Skip(msg)
	return ""
}

// Run runs headless Chromium on page with no network activity of its own
// and returns stdout and stderr.
func Run(t testing.TB, bin, page string, args ...string) (string, string) {
	t.Helper()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--disable-extensions", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(),
		"--enable-logging=stderr", "--v=0",
	}
	stdout, stderr, err := testproc.Run(exec.Command(bin, append(append(base, args...), page)...), 2*time.Minute)
	if err != nil {
		t.Fatalf("chromium %v %s: %v", args, page, err)
	}
	return stdout, stderr
}

// Console returns the console lines Chromium logged for the page (a CSP
// violation, a script error).
func Console(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "Uncaught") {
			out = append(out, line)
		}
	}
	return out
}

// DOM loads page and returns the DOM after load; console output fails the
// test.
func DOM(t testing.TB, bin, page string) string {
	t.Helper()
	dom, stderr := Run(t, bin, page, "--dump-dom")
	if c := Console(stderr); len(c) > 0 {
		t.Errorf("console output while loading %s:\n%s", page, strings.Join(c, "\n"))
	}
	return dom
}

// Screenshot renders page at width×height into name (a PNG in the test's
// temporary directory, copied to $SLAPROBE_SHOT_DIR when set), checks that
// it has real content, and returns its path.
func Screenshot(t testing.TB, bin, page, name string, width, height int) string {
	t.Helper()
	shot := filepath.Join(t.TempDir(), name)
	_, stderr := Run(t, bin, page, "--screenshot="+shot, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height))
	if c := Console(stderr); len(c) > 0 {
		t.Errorf("console output while taking %s:\n%s", name, strings.Join(c, "\n"))
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if r := img.Bounds(); r.Dx() != width || r.Dy() != height {
		t.Errorf("screenshot %s is %dx%d, want %dx%d", name, r.Dx(), r.Dy(), width, height)
	}
	if n := colours(img); n < 8 {
		t.Errorf("screenshot %s has %d distinct colours: a blank page?", name, n)
	}
	if dir := os.Getenv(EnvShotDir); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
	}
	return shot
}

func colours(img image.Image) int {
	seen := map[uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 7 {
		for x := r.Min.X; x < r.Max.X; x += 7 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			seen[cr>>8<<16|cg>>8<<8|cb>>8] = true
		}
	}
	return len(seen)
}

var hrefRE = regexp.MustCompile(`(?i)href="([^"]*)"`)

// Links returns the targets of every link in an HTML page, resolved
// against page's URL, anchors within the page left out.
func Links(page, html string) []string {
	base, err := url.Parse(page)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range hrefRE.FindAllStringSubmatch(html, -1) {
		href := strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(m[1])
		if href == "" || strings.HasPrefix(href, "#") {
			continue
		}
		u, err := base.Parse(href)
		if err != nil {
			out = append(out, href) // reported as broken by Crawl
			continue
		}
		u.Fragment = ""
		out = append(out, u.String())
	}
	return out
}

// Crawl fetches start and every link reachable from it on the same host
// and port, following links of HTML pages up to depth levels, and returns
// the status of every URL fetched. Links to other hosts are fetched but
// not followed.
func Crawl(t testing.TB, start string, depth int) map[string]int {
	t.Helper()
	su, err := url.Parse(start)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	seen := map[string]int{}
	level := []string{start}
	for d := 0; d <= depth && len(level) > 0; d++ {
		var next []string
		for _, u := range level {
			if _, ok := seen[u]; ok {
				continue
			}
			resp, err := client.Get(u)
			if err != nil {
				seen[u] = -1
				t.Errorf("crawl: GET %s: %v", u, err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seen[u] = resp.StatusCode
			pu, _ := url.Parse(u)
			if pu == nil || pu.Host != su.Host || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				continue
			}
			next = append(next, Links(u, string(body))...)
		}
		level = next
	}
	return seen
}
