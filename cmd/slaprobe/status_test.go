package main

import (
	"bufio"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/browser"
)

var statusURLRE = regexp.MustCompile(`status page:\s+(http://127\.0\.0\.1:\d+)/`)

// TestDemoStatusPageInChromium is what a new user does first: start the
// demo, open the URL it prints, and expect the four default scenarios to
// show live numbers within a minute, with every link on the page working
// and the page fitting a laptop's and a phone's width.
// SLAPROBE_SHOT_DIR=dir keeps the screenshots (demo-status.png,
// demo-probes.png).
func TestDemoStatusPageInChromium(t *testing.T) {
	bin := browser.Chromium(t)
	slaprobe := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, slaprobe, "demo", "--web.listen-address=127.0.0.1:0", "--log.level=warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := statusURLRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urlc <- m[1]:
				default:
				}
			}
		}
	}()
	var base string
	select {
	case base = <-urlc:
	case <-time.After(30 * time.Second):
		t.Fatalf("the demo printed no status page URL\nstderr:\n%s", stderr.String())
	}

	// Live numbers: every scenario's card is "within SLA" (its probes
	// succeeded and were judged), as Chromium renders it.
	scenarios := []string{"chatbot", "rag", "agentic", "tool_calling"}
	var dom string
	for {
		dom = browser.DOM(t, bin, base+"/")
		missing := []string{}
		for _, s := range scenarios {
			if !strings.Contains(dom, `data-scenario="`+s+`" data-status="ok"`) {
				missing = append(missing, s)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Since(started) > time.Minute {
			t.Fatalf("a minute after the demo started, %v show no live numbers\nstderr:\n%s", missing, stderr.String())
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("all four scenarios live %.0f s after start", time.Since(started).Seconds())
	for _, want := range []string{">TTFT<", ">ITL<", ">Decode<", ">E2E<", `<svg class="spark"`, "running", "waiting", "Next probe", "NVML"} {
		if !strings.Contains(dom, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	if n := len(regexp.MustCompile(`\d+\.\d ms`).FindAllString(dom, -1)); n < 8 {
		t.Errorf("only %d millisecond figures on the page; want TTFT and ITL of every scenario", n)
	}
	// What a new user sees fits the window, on a laptop and on a phone.
	for _, w := range []int{1280, 500} {
		problems, boxes := browser.Overflow(t, bin, dom, ".card, .tile", w, 900)
		if boxes != 2*len(scenarios) {
			t.Errorf("at %d px: %d cards and tiles measured; want %d", w, boxes, 2*len(scenarios))
		}
		for _, p := range problems {
			t.Errorf("at %d px: %s", w, p)
		}
	}
	browser.Screenshot(t, bin, base+"/", "demo-status.png", 1400, 1400)
	browser.Screenshot(t, bin, base+"/probes?target=sim", "demo-probes.png", 1400, 1400)

	pages := browser.Crawl(t, base+"/", 2)
	for u, code := range pages {
		if code < 200 || code >= 400 {
			t.Errorf("crawl from /: %s answers %d", u, code)
		}
	}
	for _, want := range []string{"/metrics", "/config", "/-/healthy", "/-/ready", "/sim/metrics", "/probes?target=sim"} {
		if _, ok := pages[base+want]; !ok {
			t.Errorf("the status page does not link %s (crawled %d URLs)", want, len(pages))
		}
	}
	t.Logf("crawled %d URLs from /, none failed", len(pages))
}
