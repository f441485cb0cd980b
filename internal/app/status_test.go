package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/browser"
)

// TestStatusPageSweepReportInChromium wires the whole daemon against the
// simulated engine, probes the four default scenarios every few seconds,
// runs a small daemon sweep through POST /-/sweep, and opens its report
// from the status page in headless Chromium, as a person would: the page
// links report.html, the report renders its charts, and every link from /
// answers. SLAPROBE_SHOT_DIR=dir keeps the screenshots (app-status.png,
// app-sweep-report.png).
func TestStatusPageSweepReportInChromium(t *testing.T) {
	bin := browser.Chromium(t)
	eng, err := vllmsim.New(vllmsim.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sim := httptest.NewServer(eng.Handler())
	defer sim.Close()

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "slaprobe.yml")
	cfg := `targets:
  - name: sim
    url: ` + sim.URL + `
engine: {scrape_interval: 2s, scrape_timeout: 1s}
power: {nvml: false}
scenarios:
  - {name: chatbot, interval: 3s}
  - {name: rag, interval: 3s}
  - {name: agentic, interval: 4s}
  - {name: tool_calling, interval: 5s}
sweep:
  enabled: true
  scenarios: [chatbot]
  closed_loop: {concurrency: [1, 2], warmup: 500ms, duration: 2s}
  burst: {concurrency: [1, 2]}
  state_file: ` + filepath.Join(dir, "sweep-state.json") + `
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := runApp(t, Options{ConfigFile: cfgPath, Description: "status page test"})

	page := func() string {
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET / = %d", resp.StatusCode)
		}
		return string(b)
	}
	waitFor := func(what string, limit time.Duration, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			p := page()
			if ok(p) {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %v: %s", limit, what)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	waitFor("not every scenario shows live numbers", time.Minute, func(p string) bool {
		for _, s := range []string{"chatbot", "rag", "agentic", "tool_calling"} {
			if !strings.Contains(p, `data-scenario="`+s+`" data-status="ok"`) {
				return false
			}
		}
		return true
	})

	resp, err := http.Post(srv.URL+"/-/sweep", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /-/sweep = %d, want 202", resp.StatusCode)
	}
	waitFor("the sweep is not shown running", 10*time.Second, func(p string) bool {
		return strings.Contains(p, "sweeping sim") || strings.Contains(p, `href="/sweep/sim/report.html"`)
	})
	waitFor("the status page links no sweep report", 2*time.Minute, func(p string) bool {
		return strings.Contains(p, `href="/sweep/sim/report.html"`) && !strings.Contains(p, "sweeping sim")
	})

	// Chromium: the page as rendered links the report, and the report
	// opens with its charts.
	dom := browser.DOM(t, bin, srv.URL+"/")
	var reportURL string
	for _, l := range browser.Links(srv.URL+"/", dom) {
		if strings.HasSuffix(l, "/report.html") {
			reportURL = l
		}
	}
	if reportURL != srv.URL+"/sweep/sim/report.html" {
		t.Fatalf("report link in the rendered page: %q", reportURL)
	}
	rdom := browser.DOM(t, bin, reportURL)
	for _, want := range []string{`data-chart="` + slo.ChartDecodeVsConcurrency + `"`, `data-chart="` + slo.ChartTTFTVsQueueDepth + `"`, "chatbot"} {
		if !strings.Contains(rdom, want) {
			t.Errorf("the daemon's report.html lacks %s in Chromium's DOM", want)
		}
	}
	browser.Screenshot(t, bin, srv.URL+"/", "app-status.png", 1400, 1800)
	browser.Screenshot(t, bin, reportURL, "app-sweep-report.png", 1400, 3000)

	pages := browser.Crawl(t, srv.URL+"/", 2)
	for u, code := range pages {
		if code < 200 || code >= 400 {
			t.Errorf("crawl from /: %s answers %d", u, code)
		}
	}
	for _, want := range []string{"/sweep/sim/report.html", "/sweep/sim/report.json", "/probes?target=sim"} {
		if _, ok := pages[srv.URL+want]; !ok {
			t.Errorf("the status page does not link %s", want)
		}
	}
}

// runApp builds the daemon from opts, serves its handler and runs it until the test ends; a Run
// that ends in an error fails the test.
func runApp(t *testing.T, opts Options) *httptest.Server {
	t.Helper()
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Daemon.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		srv.Close()
	})
	return srv
}
