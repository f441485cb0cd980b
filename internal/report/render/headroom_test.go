package render

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/test/browser"
)

// headroomStep is one speed-up of sampleHeadroom: good of 60 requests.
func headroomStep(f float64, good int, p50, p99 float64) sweep.ReplayStep {
	return sweep.ReplayStep{Speedup: f, Requests: 60, Succeeded: 60, Good: good, GoodShare: float64(good) / 60, OfferedRate: 8 * f,
		Duration: time.Duration(7.4 / f * float64(time.Second)), Late: 2 * time.Millisecond, TTFT: sweep.Summary{Mean: p50, P50: p50, P99: p99}}
}

// sampleHeadroom is a report of slaprobe headroom shaped like
// TestReplayHeadroom's runs: slow 1.3 is the engine made 30 % slower.
func sampleHeadroom(slow bool) *report.Report {
	start := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	h := sweep.Headroom{Workload: "steady", Trace: "steady.jsonl", Format: "mooncake", Requests: 60, Rule: "goodput >= 95%",
		BaseRate: 8, Bound: sweep.BoundWithin, Multiple: 3.05,
		Steps: []sweep.ReplayStep{headroomStep(1, 60, 0.004, 0.006), headroomStep(2, 60, 0.005, 0.012), headroomStep(3, 58, 0.012, 0.14),
			headroomStep(3.5, 21, 0.21, 0.48), headroomStep(4, 9, 0.35, 0.71)}}
	if slow {
		h.Multiple = 2.53
		h.Steps = []sweep.ReplayStep{headroomStep(1, 60, 0.005, 0.008), headroomStep(2, 59, 0.008, 0.04), headroomStep(2.5, 58, 0.02, 0.11),
			headroomStep(3, 14, 0.3, 0.62), headroomStep(4, 3, 0.52, 0.95)}
	}
	return &report.Report{SchemaVersion: report.SchemaVersion,
		Meta: report.Meta{ToolVersion: "0.1.0", StartedAt: start, FinishedAt: start.Add(40 * time.Second), TargetURL: "http://127.0.0.1:8000",
			Model: "sim-model", Host: report.Host{OS: "linux", Arch: "amd64", CPUs: 2}},
		Headroom: &h}
}

// sampleHeadroomCompared is the slower run drawn against the faster, as
// compare fills it (compare imports render, so it is written out here).
func sampleHeadroomCompared() *report.Report {
	base, cur := sampleHeadroom(false), sampleHeadroom(true)
	cur.Comparison = &report.Comparison{Base: base, BaseLabel: "fast/report.json",
		Headroom: &report.HeadroomChange{Workload: "steady", Base: 3.05, New: 2.53, BaseText: "3.05×", NewText: "2.53×", Change: 2.53/3.05 - 1,
			Verdict:    report.VerdictWorse,
			Resolution: "the base run's headroom lies in [×3, ×3.5], the new run's in [×2.5, ×3]"}}
	return cur
}

// TestGoldenHeadroomMarkdown: a headroom report's report.md, drawn against
// a baseline, is the golden file: headline, the step table, the headroom
// sentence, the change and the base run's steps.
func TestGoldenHeadroomMarkdown(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderMarkdown(&buf, sampleHeadroomCompared()); err != nil {
		t.Fatal(err)
	}
	golden(t, "headroom.golden.md", buf.Bytes())
	for _, want := range []string{
		"# steady headroom on sim-model compared with fast/report.json", "| Traffic headroom | 2.53× |",
		"| ×3 | 24.0 req/s | 23.3% missed | 14 / 60 |", "steady headroom 3.05× → 2.53×: 17 % less (significant:",
		"### The base run", "| ×3 | 24.0 req/s | 96.7% held | 58 / 60 |",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if strings.Contains(buf.String(), "## Scenario") || strings.Contains(buf.String(), "bootstrap") {
		t.Error("a headroom report.md speaks of scenarios or of the step comparison's bootstrap")
	}
}

// TestHeadroomBoundWording: the headroom's three bounds read as what they are.
func TestHeadroomBoundWording(t *testing.T) {
	steps := []sweep.ReplayStep{headroomStep(0.5, 60, 0.01, 0.02), headroomStep(4, 60, 0.01, 0.02)}
	for _, c := range []struct {
		h          sweep.Headroom
		text, says string
	}{
		{sweep.Headroom{Rule: "goodput >= 95%", Bound: sweep.BoundWithin, Multiple: 3.05, Steps: steps}, "3.05×", "interpolated between ×0.5, which held, and ×4"},
		{sweep.Headroom{Rule: "goodput >= 95%", Bound: sweep.BoundAtLeast, Multiple: 4, Steps: steps}, "≥4×", "At least 4×"},
		{sweep.Headroom{Rule: "goodput >= 95%", Bound: sweep.BoundBelow, Steps: steps}, "<0.5×", "even ×0.5 missed"},
		{sweep.Headroom{Rule: "goodput >= 95%", Bound: sweep.BoundUnknown}, "?", "unknown"},
	} {
		if got := c.h.String(); got != c.text {
			t.Errorf("%s: String %q; want %q", c.h.Bound, got, c.text)
		}
		if got := HeadroomSentence(&c.h); !strings.Contains(got, c.says) {
			t.Errorf("%s: %q; want it to say %q", c.h.Bound, got, c.says)
		}
	}
}

var refLine = regexp.MustCompile(`<line class="ref" x1="([^"]+)" x2="([^"]+)" y1="([^"]+)" y2="([^"]+)" stroke="([^"]+)"`)

// TestChromiumHeadroom: a headroom report.html against its baseline
// renders in headless Chromium: its chart is in the DOM with both runs,
// the rule's line and the headroom's, nothing reached the console, and the
// screenshot has content (SLAPROBE_REPORT_SHOT_DIR keeps it).
func TestChromiumHeadroom(t *testing.T) {
	bin := chromium(t)
	page := writeSample(t, sampleHeadroomCompared())
	dom, stderr := runChromium(t, bin, page, "--dump-dom")
	if errs := browser.Console(stderr); len(errs) > 0 {
		t.Errorf("console output while loading report.html:\n%s", strings.Join(errs, "\n"))
	}
	for _, want := range []string{`data-chart="traffic-headroom"`, "good share (base)", "headroom 2.53×", "goodput &gt;= 95%", "Traffic headroom",
		"How much more traffic can it take?",
		`data-chart="traffic-headroom-base"`, "3.05× the trace's traffic meets"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered DOM lacks %q", want)
		}
	}
	if strings.Contains(dom, `data-chart="decode-vs-concurrency"`) || strings.Contains(dom, "Experience bands") || strings.Contains(dom, "All measurements") {
		t.Error("a headroom report draws the sweep's charts")
	}
	// In the chart: the rule a horizontal line, the headroom a vertical one, each labelled.
	fig := dom[strings.Index(dom, `data-chart="traffic-headroom"`):]
	fig = fig[:strings.Index(fig, "</figure>")]
	var vertical, horizontal bool
	for _, m := range refLine.FindAllStringSubmatch(fig, -1) {
		vertical = vertical || (m[1] == m[2] && m[5] == colorCapacityMrk)
		horizontal = horizontal || (m[3] == m[4] && m[5] == colorCapTTFT)
	}
	for _, want := range []string{">headroom 2.53×</text>", ">goodput &gt;= 95%</text>"} {
		if !strings.Contains(fig, want) {
			t.Errorf("the headroom chart lacks the label %q", want)
		}
	}
	if !vertical || !horizontal {
		t.Errorf("the headroom chart: vertical headroom line %v, horizontal rule line %v; want both", vertical, horizontal)
	}
	shot := filepath.Join(t.TempDir(), "shot.png")
	_, stderr = runChromium(t, bin, page, "--screenshot="+shot, "--window-size=1400,1800")
	if errs := browser.Console(stderr); len(errs) > 0 {
		t.Errorf("console output while taking the screenshot:\n%s", strings.Join(errs, "\n"))
	}
	checkScreenshot(t, shot, 1400, 1800)
	if dir := os.Getenv("SLAPROBE_REPORT_SHOT_DIR"); dir != "" {
		b, _ := os.ReadFile(shot)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "headroom-1400x1800.png"), b, 0o644)
	}
}
