package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/prober"
)

var (
	update = flag.Bool("update", false, "rewrite testdata/report.golden.* from Sample()")
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
		t.Fatalf("%v (run `go test ./internal/report -update` to create it)", err)
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
	if err := RenderJSON(&buf, Sample()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.json", buf.Bytes())

	// The golden file reads back into the same report.
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := RenderJSON(&again, &back); err != nil {
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
	want := []string{JSONFile, MarkdownFile, HTMLFile}
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
	back, err := Load(paths[0])
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

func TestLoadRejectsOtherSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(path, []byte(`{"schema_version":"slaprobe.report/v0"}`), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "slaprobe.report/v1") {
		t.Fatalf("err = %v; want a schema version error", err)
	}
}

func TestValidate(t *testing.T) {
	for name, mut := range map[string]func(*Report){
		"duplicate scenario": func(r *Report) { r.Scenarios = append(r.Scenarios, r.Scenarios[0]) },
		"empty name":         func(r *Report) { r.Scenarios[0].Name = "" },
		"zero N":             func(r *Report) { r.Scenarios[0].Burst[0].Concurrency = 0 },
		"duplicate N":        func(r *Report) { r.Scenarios[0].ClosedLoop[1].Concurrency = 1 },
		"success rate":       func(r *Report) { r.Scenarios[0].ClosedLoop[1].SuccessRate = 1.5 },
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
	h := ComputeHeadline(r)
	if h.PeakDecode == nil || h.PeakDecode.Scenario != "chatbot" || h.PeakDecode.Concurrency != 1 {
		t.Errorf("peak decode = %+v", h.PeakDecode)
	}
	if h.BestTTFT == nil || h.BestTTFT.Concurrency != 1 {
		t.Errorf("best TTFT = %+v; want a single-user step", h.BestTTFT)
	}
	// A burst of 256 briefly beats every closed-loop step, but a headline
	// comes from sustained load.
	if h.MaxSystemThroughput == nil || h.MaxSystemThroughput.Mode != prober.ModeClosedLoop || h.MaxSystemThroughput.Concurrency != 32 {
		t.Errorf("max system = %+v; want the closed-loop N=32 step", h.MaxSystemThroughput)
	}

	// Busy steps are left out; a report with bursts only says so.
	r = Sample()
	for i := range r.Scenarios {
		r.Scenarios[i].ClosedLoop = nil
		for j := range r.Scenarios[i].Burst {
			if r.Scenarios[i].Burst[j].Concurrency == 1 {
				r.Scenarios[i].Burst[j].Drain = &prober.DrainResult{Method: prober.DrainEngine, Busy: true, Running: 9}
			}
		}
	}
	h2 := ComputeHeadline(r)
	if h2.PeakDecode == nil || h2.PeakDecode.Mode != prober.ModeBurst || h2.PeakDecode.Concurrency == 1 {
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

func renderHTML(t *testing.T, r *Report) string {
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
	for _, c := range Charts {
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
	if want := len(Charts) - 4 + len(r.Capacity.UseCases); svgs != want {
		t.Errorf("%d plots; want %d", svgs, want)
	}
}

func stripPower(r *Report) {
	for i := range r.Scenarios {
		for _, steps := range [][]Step{r.Scenarios[i].ClosedLoop, r.Scenarios[i].Burst} {
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
	for _, c := range []string{ChartPower, ChartQueueWait} {
		if !regexp.MustCompile(`id="chart-` + c + `" data-chart="` + c + `" data-state="not-measured"`).MatchString(html) {
			t.Errorf("%s: no not-measured placeholder", c)
		}
	}
	if !strings.Contains(html, "GPU power was not measured") {
		t.Error("power placeholder text missing")
	}

	// A run interrupted before anything finished still renders every panel.
	empty := &Report{Meta: Meta{Model: "m", Interrupted: true}}
	html = renderHTML(t, empty)
	for _, c := range Charts {
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
	r.Headline = Headline{} // recompute with the evil names

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
	RenderJSON(&js, r)
	if strings.Contains(js.String(), "s3cr3t") || strings.Contains(js.String(), "hunter2") {
		t.Error("report.json leaks URL credentials")
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "",
		"http://127.0.0.1:8000":              "http://127.0.0.1:8000",
		"https://u:p@h.example:443/v1?k=v#f": "https://h.example:443/v1",
		"http://[::1]:8000/":                 "http://[::1]:8000/",
		"://bad":                             "(invalid URL)",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestFormatting(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmtBound(Bound{Value: 35, Approximate: true}), "~35"},
		{fmtBound(Bound{Value: 256, AtLeast: true}), "256+"},
		{fmtBound(Bound{}), "<1"},
		{fmtBound(Bound{Value: 4}), "4"},
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
