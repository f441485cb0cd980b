package render

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

var (
	update = flag.Bool("update", false, "rewrite testdata/*.golden.* from Sample() and richSweep()")
	keep   = flag.String("keep", "", "also write the sample report into this directory, for a visual review")
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./internal/report/render -update` to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run with -update if the change is intended)", name, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s differs in length: got %d lines, want %d (run with -update if intended)", name, len(gl), len(wl))
	}
}

func TestGoldenJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := report.RenderJSON(&buf, Sample()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.json", buf.Bytes())

	// The golden file reads back into the same report.
	var back report.Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := report.RenderJSON(&again, &back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("report.json does not survive a decode/encode round trip")
	}
}

func TestGoldenMarkdown(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderMarkdown(&buf, Sample()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.md", buf.Bytes())
	md := buf.String()
	for _, want := range []string{
		"## Headline", "## Use-case capacity", "## Max safe queue depth", "## Tokens per hour",
		"## Scenario chatbot", "### Closed loop", "### Burst", "| ~", "+ |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

func TestWriteAndLoad(t *testing.T) {
	dir := t.TempDir()
	r := Sample()
	paths, err := Write(filepath.Join(dir, "out"), r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{report.JSONFile, report.MarkdownFile, report.HTMLFile}
	if len(paths) != len(want) {
		t.Fatalf("paths = %v", paths)
	}
	for i, p := range paths {
		if filepath.Base(p) != want[i] {
			t.Errorf("paths[%d] = %s; want %s", i, p, want[i])
		}
		if fi, err := os.Stat(p); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v, size %d", p, err, fi.Size())
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "out", ".*.tmp"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
	back, err := report.Load(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Error("Load(Write(r)) != r")
	}
	if *keep != "" {
		if _, err := Write(*keep, r); err != nil {
			t.Fatal(err)
		}
		noPower := Sample()
		stripPower(noPower)
		if _, err := Write(filepath.Join(*keep, "no-power"), noPower); err != nil {
			t.Fatal(err)
		}
		t.Logf("sample report written to %s", *keep)
	}
}

func TestValidate(t *testing.T) {
	for name, mut := range map[string]func(*report.Report){
		"duplicate scenario": func(r *report.Report) { r.Scenarios = append(r.Scenarios, r.Scenarios[0]) },
		"empty name":         func(r *report.Report) { r.Scenarios[0].Name = "" },
		"zero N":             func(r *report.Report) { r.Scenarios[0].Burst[0].Concurrency = 0 },
		"duplicate N":        func(r *report.Report) { r.Scenarios[0].ClosedLoop[1].Concurrency = 1 },
		"success rate":       func(r *report.Report) { r.Scenarios[0].ClosedLoop[1].SuccessRate = 1.5 },
	} {
		r := Sample()
		mut(r)
		if err := r.Validate(); err == nil {
			t.Errorf("%s: Validate() = nil", name)
		}
		if _, err := Write(t.TempDir(), r); err == nil {
			t.Errorf("%s: Write accepted an invalid report", name)
		}
	}
	if err := Sample().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestHeadline(t *testing.T) {
	r := Sample()
	h := report.ComputeHeadline(r)
	if h.PeakDecode == nil || h.PeakDecode.Scenario != "chatbot" || h.PeakDecode.Concurrency != 1 {
		t.Errorf("peak decode = %+v", h.PeakDecode)
	}
	if h.BestTTFT == nil || h.BestTTFT.Concurrency != 1 {
		t.Errorf("best TTFT = %+v; want a single-user step", h.BestTTFT)
	}
	// A burst of 256 briefly beats every closed-loop step, but a headline
	// comes from sustained load.
	if h.MaxSystemThroughput == nil || h.MaxSystemThroughput.Mode != sweep.ModeClosedLoop || h.MaxSystemThroughput.Concurrency != 32 {
		t.Errorf("max system = %+v; want the closed-loop N=32 step", h.MaxSystemThroughput)
	}

	// Busy steps are left out; a report with bursts only says so.
	r = Sample()
	for i := range r.Scenarios {
		r.Scenarios[i].ClosedLoop = nil
		for j := range r.Scenarios[i].Burst {
			if r.Scenarios[i].Burst[j].Concurrency == 1 {
				r.Scenarios[i].Burst[j].Drain = &sweep.DrainResult{Method: sweep.DrainEngine, Busy: true, Running: 9}
			}
		}
	}
	h2 := report.ComputeHeadline(r)
	if h2.PeakDecode == nil || h2.PeakDecode.Mode != sweep.ModeBurst || h2.PeakDecode.Concurrency == 1 {
		t.Errorf("bursts only, N=1 busy: peak decode = %+v; want a burst step other than the busy N=1", h2.PeakDecode)
	}
	if len(h.MaxSafeQueue) != 4 || h.MaxSafeQueue[0].Scenario != "chatbot" {
		t.Errorf("max safe queue = %+v", h.MaxSafeQueue)
	}
	if h.UsersAt32K == nil || h.UsersAt32K.Scenario != "general_chat" {
		t.Errorf("users at 32K = %+v", h.UsersAt32K)
	}
	if h.RequestsSent == 0 || h.SuccessRate <= 0.99 || h.SuccessRate >= 1 {
		t.Errorf("success = %d/%d = %v", h.RequestsOK, h.RequestsSent, h.SuccessRate)
	}
	// The sample's capacities land where the reference reports put theirs.
	want := map[string][2]int{"chatbot": {110, 140}, "rag": {70, 95}, "agentic": {16, 22}, "tool_calling": {6, 10}}
	for _, q := range r.Capacity.MaxSafeQueue {
		if w := want[q.Scenario]; q.Value < w[0] || q.Value > w[1] {
			t.Errorf("max safe queue %s = %d; want %d..%d", q.Scenario, q.Value, w[0], w[1])
		}
	}
}

func TestScalingEfficiencyInSample(t *testing.T) {
	for _, s := range Sample().Scenarios {
		if len(s.ClosedLoop) == 0 {
			continue
		}
		base := s.ClosedLoop[0].SystemTokensPerSecond
		for _, st := range s.ClosedLoop {
			want := st.SystemTokensPerSecond / (base * float64(st.Concurrency))
			if st.ScalingEfficiency == nil || math.Abs(*st.ScalingEfficiency-want) > 1e-4 {
				t.Errorf("%s N=%d: efficiency %v; want %v", s.Name, st.Concurrency, st.ScalingEfficiency, want)
			}
		}
	}
}

func renderHTML(t *testing.T, r *report.Report) string {
	t.Helper()
	var buf bytes.Buffer
	if err := RenderHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

var externalRef = regexp.MustCompile(`(?i)(src|href|action|xlink:href)\s*=\s*["']?\s*(https?:|//|ftp:)|@import|url\(\s*["']?\s*(https?:|//)|<script|<link|<iframe|<object|<embed`)

func TestHTMLSelfContained(t *testing.T) {
	html := renderHTML(t, Sample())
	if m := externalRef.FindString(html); m != "" {
		t.Errorf("report.html refers outside itself: %q", m)
	}
	for _, bad := range []string{`src="http`, `href="http`, `@import`, `url(http`} {
		if strings.Contains(html, bad) {
			t.Errorf("report.html contains %q", bad)
		}
	}
	if !strings.Contains(html, `Content-Security-Policy`) {
		t.Error("report.html has no CSP meta tag")
	}
}

func TestHTMLHasEveryChart(t *testing.T) {
	r := Sample()
	html := renderHTML(t, r)
	for _, c := range slo.Charts {
		if !strings.Contains(html, `data-chart="`+c+`"`) {
			t.Errorf("no figure with data-chart=%q", c)
		}
		if !strings.Contains(html, `id="chart-`+c+`"`) {
			t.Errorf("no element with id=chart-%s", c)
		}
	}
	for _, u := range r.Capacity.UseCases {
		id := `id="chart-capacity-` + slugify(u.Scenario) + `"`
		if !strings.Contains(html, id) {
			t.Errorf("no capacity figure %s", id)
		}
	}
	if n := strings.Count(html, `data-chart="capacity"`); n != len(r.Capacity.UseCases) {
		t.Errorf("%d capacity figures; want %d", n, len(r.Capacity.UseCases))
	}
	if strings.Contains(html, `data-state="not-measured"`) {
		t.Error("the full sample should not need any placeholder")
	}
	for _, want := range []string{
		"20 ms instant", "3 s TTFT limit", "70 ms MoE ceiling", // threshold lines
		`class="band band-excellent"`, `class="band band-good"`, `class="band band-acceptable"`, `class="band band-poor"`,
		"TTFT ≤ 8 s", "decode ≥ 15 tok/s", "E2E ≤ 2 s", // capacity thresholds
		"<title>chatbot · closed loop N=1 · ", // tooltips
		"~", "tokens per hour", "peak draw",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// Every figure except tile and table panels carries an SVG.
	svgs := strings.Count(html, `<svg class="plot"`)
	if want := len(slo.Charts) - 4 + len(r.Capacity.UseCases); svgs != want {
		t.Errorf("%d plots; want %d", svgs, want)
	}
}

func stripPower(r *report.Report) {
	for i := range r.Scenarios {
		for _, steps := range [][]report.Step{r.Scenarios[i].ClosedLoop, r.Scenarios[i].Burst} {
			for j := range steps {
				steps[j].Power = nil
				steps[j].QueueWaitSeconds = nil
			}
		}
	}
}

func TestHTMLPlaceholders(t *testing.T) {
	r := Sample()
	stripPower(r)
	html := renderHTML(t, r)
	for _, c := range []string{slo.ChartPower, slo.ChartQueueWait} {
		if !regexp.MustCompile(`id="chart-` + c + `" data-chart="` + c + `" data-state="not-measured"`).MatchString(html) {
			t.Errorf("%s: no not-measured placeholder", c)
		}
	}
	if !strings.Contains(html, "GPU power was not measured") {
		t.Error("power placeholder text missing")
	}

	// A run interrupted before anything finished still renders every panel.
	empty := &report.Report{Meta: report.Meta{Model: "m", Interrupted: true}}
	html = renderHTML(t, empty)
	for _, c := range slo.Charts {
		if !strings.Contains(html, `data-chart="`+c+`"`) {
			t.Errorf("empty report: no %s", c)
		}
	}
	if !strings.Contains(html, "interrupted") {
		t.Error("empty report does not say it was interrupted")
	}
	var md bytes.Buffer
	if err := RenderMarkdown(&md, empty); err != nil {
		t.Fatal(err)
	}
}

func TestEscaping(t *testing.T) {
	r := Sample()
	evil := `<script>alert(1)</script>"><img src=x onerror=alert(2)>|*[x](javascript:y)`
	r.Scenarios[0].Name = evil
	r.Scenarios[0].Description = `</desc><svg onload=alert(3)>`
	r.Capacity.MaxSafeQueue[0].Scenario = evil
	r.Meta.Model = `<b onmouseover=alert(4)>model</b>`
	r.Meta.TargetURL = "http://admin:s3cr3t@10.0.0.1:8000/v1?api_key=hunter2#frag"
	r.Notes = []string{`<iframe src="javascript:alert(5)">`}
	r.Headline = report.Headline{} // recompute with the evil names

	html := renderHTML(t, r)
	for _, bad := range []string{"<script>", "<img src=x", "<svg onload", "<b onmouseover", "<iframe", "s3cr3t", "hunter2", "admin:"} {
		if strings.Contains(html, bad) {
			t.Errorf("report.html contains %q unescaped", bad)
		}
	}
	if !strings.Contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the scenario name is not shown escaped")
	}
	if !strings.Contains(html, "http://10.0.0.1:8000/v1") {
		t.Error("redacted target URL missing")
	}
	// The malicious name still yields a safe element id.
	if !regexp.MustCompile(`id="scenario-script-alert-1-script-img-src-x-onerror-alert-2-x-javascript-y"`).MatchString(html) {
		t.Error("slug id for the malicious name not found")
	}

	var md bytes.Buffer
	if err := RenderMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script>", "<img", "<b ", "<iframe", "s3cr3t", "hunter2"} {
		if strings.Contains(md.String(), bad) {
			t.Errorf("report.md contains %q unescaped", bad)
		}
	}
	if regexp.MustCompile(`[^\\]\]\(javascript`).MatchString(md.String()) {
		t.Error("report.md contains a live Markdown link")
	}
	var js bytes.Buffer
	report.RenderJSON(&js, r)
	if strings.Contains(js.String(), "s3cr3t") || strings.Contains(js.String(), "hunter2") {
		t.Error("report.json leaks URL credentials")
	}
}

func TestFormatting(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmtBound(sweep.Bound{Value: 35, Approximate: true}), "~35"},
		{fmtBound(sweep.Bound{Value: 256, AtLeast: true}), "256+"},
		{fmtBound(sweep.Bound{}), "<1"},
		{fmtBound(sweep.Bound{Value: 4}), "4"},
		{fmtRate(172.46), "172.5"},
		{fmtRate(9774.2), "9,774"},
		{fmtSeconds(0.189), "189 ms"},
		{fmtSeconds(6.183), "6.18 s"},
		{fmtSeconds(47.61), "47.6 s"},
		{fmtMS(0.0058), "5.8 ms"},
		{fmtPct(0.41), "41%"},
		{fmtPct(0.9996), "99.9%"},
		{fmtBig(10659600), "10.66 M"},
		{fmtTokens(32768), "32K"},
		{grouped(-1234567.5, 1), "-1,234,567.5"},
		{slugify("Tool Calling / agentic!"), "tool-calling-agentic"},
		{slugify("<>"), "scenario"},
	} {
		if c.got != c.want {
			t.Errorf("got %q; want %q", c.got, c.want)
		}
	}
}

// The closed-loop text must agree with the queue wait the engine measured:
// no "nothing queues" while a step shows hundreds of ms of queue wait.
func TestClosedLoopTextMatchesQueueWait(t *testing.T) {
	r := Sample()
	html := renderHTML(t, r)
	for _, bad := range []string{"nothing waits", "nothing queues", "no queue"} {
		if strings.Contains(strings.ToLower(html), bad) {
			t.Errorf("report.html claims %q while the sample's closed loop queues", bad)
		}
	}
	// The sample's longest closed-loop queue wait, as measured.
	q := closedQueueWait(r, chartScenarios(r))
	if !q.measured || q.v < 0.3 {
		t.Fatalf("sample closed-loop queue wait = %+v; want a visible one", q)
	}
	want := fmt.Sprintf("its mean queue wait reaches %s (%s, N=%d)", fmtSeconds(q.v), q.scenario, q.n)
	if !strings.Contains(html, want) {
		t.Errorf("closed-loop intro lacks %q", want)
	}
	if !strings.Contains(html, "Measured engine queue wait, part of these TTFTs: up to "+fmtSeconds(q.v)) {
		t.Error("TTFT range chart does not show the measured queue wait")
	}

	// No queue wait measured at all: the text says so instead.
	for i := range r.Scenarios {
		for j := range r.Scenarios[i].ClosedLoop {
			r.Scenarios[i].ClosedLoop[j].QueueWaitSeconds = report.Float(0)
		}
	}
	if html := renderHTML(t, r); !strings.Contains(html, "shows no queue wait at any step") {
		t.Error("zero queue wait: the intro does not say so")
	}
	stripPower(r)
	if html := renderHTML(t, r); !strings.Contains(html, "The engine reported no queue time") {
		t.Error("no queue-time histogram: the intro does not say so")
	}
}

// A step that started on a busy engine is marked everywhere the report
// shows it, and the report says how steps were started.
func TestBusyStepsMarked(t *testing.T) {
	r := Sample()
	busy := summarizeDrain(r).Busy
	if len(busy) != 2 {
		t.Fatalf("sample has %d busy steps; want 2", len(busy))
	}
	html := renderHTML(t, r)
	var md bytes.Buffer
	if err := RenderMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"rag burst N=8 (3 running, 1 waiting)", "agentic closed loop N=16 (2 running, 0 waiting)", // top note
		"Burst N=8 started while the engine still had 3 running, 1 waiting requests (after waiting 120 s", // scenario note
		"⚠ busy: 3 running, 1 waiting", // table cell
		"waited for the engine’s /metrics to show it empty",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if !strings.Contains(md.String(), "| 16 ⚠ |") || !strings.Contains(md.String(), "| 8 ⚠ |") {
		t.Error("report.md does not mark the busy rows' N")
	}
	// Latency and throughput table of each busy step: two rows each.
	if n := strings.Count(html, `<tr class="busy">`); n != 2*len(busy) {
		t.Errorf("%d busy rows in report.html; want %d", n, 2*len(busy))
	}
	if !strings.Contains(html, "<dt>Step start</dt>") {
		t.Error("the method section does not say how steps started")
	}
	// The charts flag them: the suspect ring and its legend entry. The
	// agentic N=16 closed-loop step is on the closed-loop charts.
	fig := figureHTML(t, html, slo.ChartDecodeVsConcurrency)
	if !strings.Contains(fig, `class="suspect"`) || !strings.Contains(fig, "started on a busy engine: suspect") {
		t.Error("decode vs concurrency does not flag the busy agentic N=16 step")
	}
	if !strings.Contains(fig, "agentic · closed loop N=16 · ") || !strings.Contains(fig, "(2 running, 0 waiting): suspect</title>") {
		t.Error("the busy point's tooltip does not say it is suspect")
	}
	fig = figureHTML(t, html, slo.ChartTTFTVsQueueDepth)
	if strings.Count(fig, `class="suspect"`) < 2 { // one ring in the plot, one in the legend
		t.Error("TTFT vs queue depth does not flag the busy rag N=8 burst")
	}
	if fig := figureHTML(t, html, slo.ChartScalingEfficiency); !strings.Contains(fig, `class="suspect"`) {
		t.Error("scaling efficiency does not flag the busy step")
	}
	// A chart without busy steps has no suspect legend.
	if fig := figureHTML(t, html, "capacity-code-completion"); strings.Contains(fig, "suspect") {
		t.Error("a chart with no busy step shows the suspect legend")
	}

	// Without engine /metrics every step waited a cooldown: the report says
	// the steps could not be checked.
	for i := range r.Scenarios {
		for _, steps := range [][]report.Step{r.Scenarios[i].ClosedLoop, r.Scenarios[i].Burst} {
			for j := range steps {
				steps[j].Drain = &sweep.DrainResult{Method: sweep.DrainCooldown, WaitedSeconds: 5}
			}
		}
	}
	html = renderHTML(t, r)
	md.Reset()
	RenderMarkdown(&md, r)
	for _, doc := range []string{html, md.String()} {
		if !strings.Contains(doc, "The engine exposed no /metrics with running and waiting counts") {
			t.Error("all-cooldown report does not say the engine had no /metrics")
		}
		if !strings.Contains(doc, "cooldown 5 s") || strings.Contains(doc, "⚠") {
			t.Error("all-cooldown report: wrong step-start cells or a busy mark")
		}
	}
}

// figureHTML returns the <figure> with the given id suffix.
func figureHTML(t *testing.T, html, id string) string {
	t.Helper()
	i := strings.Index(html, `id="chart-`+id+`"`)
	if i < 0 {
		t.Fatalf("no figure chart-%s", id)
	}
	j := strings.Index(html[i:], "</figure>")
	return html[i : i+j]
}

// Headline tiles say where each figure was measured; one read from a burst
// says it is not sustained.
func TestHeadlineSaysWhatItIs(t *testing.T) {
	r := Sample()
	html := renderHTML(t, r)
	var md bytes.Buffer
	RenderMarkdown(&md, r)
	head := figureSection(t, html, `id="chart-headline"`)
	for _, want := range []string{"chatbot, closed loop N=32", "chatbot, closed loop N=1"} {
		if !strings.Contains(head, want) || !strings.Contains(md.String(), want) {
			t.Errorf("headline lacks %q", want)
		}
	}
	if strings.Contains(head, burstNote) {
		t.Error("a closed-loop headline carries the burst note")
	}
	tput := figureHTML(t, html, slo.ChartSystemThroughput)
	if !strings.Contains(tput, "Highest sustained throughput: 1,909 tok/s (chatbot, closed loop N=32)") ||
		!strings.Contains(tput, "A burst briefly reaches 4,139 tok/s (chatbot, N=256)") {
		t.Error("system throughput findings do not separate the sustained peak from the burst one")
	}
	if strings.Contains(md.String(), "14.90 M | burst N=256") {
		t.Error("tokens per hour quotes a burst as the peak while closed-loop steps exist")
	}

	// Bursts only: every peak tile says it came from a burst.
	for i := range r.Scenarios {
		r.Scenarios[i].ClosedLoop = nil
	}
	r.Headline = report.Headline{}
	html = renderHTML(t, r)
	md.Reset()
	RenderMarkdown(&md, r)
	if n := strings.Count(figureSection(t, html, `id="chart-headline"`), burstNote); n != 3 {
		t.Errorf("bursts only: %d headline tiles say they came from a burst; want 3", n)
	}
	if n := strings.Count(md.String(), burstNote); n != 3 {
		t.Errorf("bursts only: report.md has the burst note %d times; want 3", n)
	}
	if !strings.Contains(md.String(), "burst N=256, not sustained") {
		t.Error("bursts only: tokens per hour does not say its peak is a burst")
	}
}

// figureSection returns the element that starts at marker, up to its
// closing </section>.
func figureSection(t *testing.T, html, marker string) string {
	t.Helper()
	i := strings.Index(html, marker)
	if i < 0 {
		t.Fatalf("no %s", marker)
	}
	return html[i : i+strings.Index(html[i:], "</section>")]
}

// A report written before samples were kept (v1) still renders
// (internal/report's TestLoadV1Report checks how it loads).
func TestRenderV1Report(t *testing.T) {
	r, err := report.Load(filepath.Join("..", "testdata", "report.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := RenderHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
}

// A step in which no request ended has no figures: its row is dashes, a note
// under its scenario says why, and nothing else (headline, charts) takes its
// zeros for numbers.
func TestStepThatMeasuredNothing(t *testing.T) {
	r := Sample()
	sc := &r.Scenarios[0]
	why := "no request ended inside the 4s window: a request of " + sc.Name + " takes about 6.7s here; set step.duration (bench: --step.duration) to 14s or more"
	last := len(sc.ClosedLoop) - 1
	n := sc.ClosedLoop[last].Concurrency
	sc.ClosedLoop[last] = report.Step{Concurrency: n, NotMeasured: why, DurationSeconds: 4}
	var md bytes.Buffer
	if err := RenderMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	html := renderHTML(t, r)
	for _, doc := range []string{md.String(), html} {
		if !strings.Contains(doc, fmt.Sprintf("Closed loop N=%d measured nothing: %s.", n, why)) {
			t.Errorf("no note for the step that measured nothing")
		}
	}
	row := fmt.Sprintf("| %d | – | – |", n)
	if !strings.Contains(md.String(), row) || strings.Contains(md.String(), fmt.Sprintf("| %d | 0 / 0 |", n)) {
		t.Errorf("report.md: the row of N=%d is not dashes", n)
	}

	// Nothing measured anywhere: the headline says so rather than showing
	// an empty table.
	for i := range r.Scenarios {
		for _, steps := range [][]report.Step{r.Scenarios[i].ClosedLoop, r.Scenarios[i].Burst} {
			for j := range steps {
				steps[j] = report.Step{Concurrency: steps[j].Concurrency, NotMeasured: why}
			}
		}
	}
	r.Headline, r.Capacity = report.Headline{}, report.Capacity{}
	md.Reset()
	if err := RenderMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "No step completed a request") || !strings.Contains(renderHTML(t, r), "No step completed a request") {
		t.Error("a report with nothing measured does not say so in its headline")
	}
}
