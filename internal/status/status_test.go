package status

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/sweeper"
	"github.com/slaprobe/slaprobe/prober"
)

type fakeGPUs struct{ up bool }

func (g fakeGPUs) Up() bool { return g.up }
func (g fakeGPUs) Devices() []gpu.Device {
	return []gpu.Device{{Index: 0, UUID: "GPU-1", Name: "NVIDIA H100 80GB HBM3"}}
}
func (g fakeGPUs) Read() gpu.Readings {
	return gpu.Readings{Time: time.Now(), GPUs: []gpu.Reading{{Device: g.Devices()[0], PowerWatts: 412, HasPower: true,
		PowerLimitWatts: 700, HasPowerLimit: true, UtilizationRatio: 0.93, HasUtilization: true}}}
}

// fixture is a status server over a config with two targets, a recorder
// fed with probes, and fakes of every other source.
type fixture struct {
	srv   *httptest.Server
	rec   *Recorder
	clock *fakeClock
	sweep sweeper.Snapshot
	mux   *http.ServeMux
	// disabled names a scenario the scheduler disabled (max_model_len).
	disabled string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg, err := config.LoadWithFlags("", config.Flags{TargetURLs: []string{"http://vllm-a:8000"}, TargetName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{clock: newClock(), mux: http.NewServeMux()}
	f.rec = NewRecorder(0, f.clock.now)
	s, err := New(Options{
		Config:   func() *config.Config { return cfg },
		Recorder: f.rec,
		NextProbe: func(target, scenario string) (time.Time, bool) {
			return f.clock.t.Add(12 * time.Second), scenario != "tool_calling"
		},
		Disabled: func(target, scenario string) (bool, int) { return scenario == f.disabled, 8192 },
		Engine: func(target string) (engine.Status, bool) {
			return engine.Status{Target: target, URL: "http://vllm-a:8000/metrics", Up: true, Tried: true, HasLatest: true,
				Latest: engine.Snapshot{Time: f.clock.t, Flavor: "vllm", Running: 3, Waiting: 1, HasQueue: true, KVCacheUsage: 0.42, HasKVCache: true}}, true
		},
		GPUs:        fakeGPUs{up: true},
		Sweeps:      func() sweeper.Snapshot { return f.sweep },
		Description: "test daemon",
		Links:       []Link{{Address: "/extra", Text: "Extra"}},
		Now:         f.clock.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Mount(f.mux.Handle)
	for _, p := range []string{"/metrics", "/config", "/-/healthy", "/-/ready", "/extra"} {
		f.mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	}
	f.srv = httptest.NewServer(f.mux)
	t.Cleanup(f.srv.Close)
	return f
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStatusPage(t *testing.T) {
	f := newFixture(t)
	code, body := get(t, f.srv.URL+"/")
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	// Before any probe every default scenario is there, waiting.
	for _, sc := range prober.DefaultScenarios {
		if !strings.Contains(body, `data-scenario="`+sc+`" data-status="waiting"`) {
			t.Errorf("scenario %s is not shown waiting before its first probe", sc)
		}
	}
	// (The config refuses credentials in a target URL; the page shows URLs
	// through report.RedactURL all the same.)

	// chatbot: fast probes within the SLA. rag: its TTFT p95 is over 3 s.
	// agentic: the last probe failed.
	for range 5 {
		probe(f.rec, f.clock, okResult("a", "chatbot", f.clock.t))
		slow := okResult("a", "rag", f.clock.t)
		slow.FirstToken = slow.Start.Add(4 * time.Second)
		slow.LastToken = slow.FirstToken.Add(255 * 10 * time.Millisecond)
		probe(f.rec, f.clock, slow)
	}
	probe(f.rec, f.clock, prober.Result{Target: "a", Scenario: "agentic", Kind: prober.KindError, Reason: prober.ReasonHTTP5xx,
		Err: &prober.HTTPError{StatusCode: 503, Message: "no capacity <now>"}})
	code, body = get(t, f.srv.URL+"/")
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	for _, want := range []string{
		`data-scenario="chatbot" data-status="ok"`,
		`data-scenario="rag" data-status="breach"`,
		"SLA breached: only 0.0 % meet every threshold at once (0 of 5 probes in the last 15 min; objective 99 %); TTFT p95 4.00 s &gt; 3.00 s",
		"within SLA: 100.0 % meet every threshold at once (5 of 5 probes in the last 15 min; objective 99 %)",
		`data-scenario="agentic" data-status="failing"`,
		"last probe failed: error (http_5xx)",
		"HTTP 503: no capacity &lt;now&gt;", // the detail, escaped
		`data-scenario="tool_calling" data-status="waiting"`,
		"not scheduled", // tool_calling has no loop in this fixture
		"in 12 s",       // the others
		"<b>3</b> running, <b>1</b> waiting, KV cache 42 %",
		"412 W of 700 W", "93 %", "NVIDIA H100 80GB HBM3",
		"200.0 ms", "10.0 ms", "100.0 tok/s", // chatbot's TTFT, ITL, decode
		"5 of 5 (100 %)",
		`<svg class="spark"`, `class="limit"`,
		"sweep job is <b>off</b>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	if n := strings.Count(body, `<polyline class="series"`); n != 8 {
		t.Errorf("%d sparkline series; want 8 (TTFT, ITL, decode, E2E of chatbot and rag)", n)
	}
	checkLinks(t, f.srv.URL, "/", body)

	// A scenario that does not fit the model says so instead of waiting.
	f.disabled = "tool_calling"
	_, body = get(t, f.srv.URL+"/")
	for _, want := range []string{`data-scenario="tool_calling" data-status="disabled"`,
		"disabled: 32768 input and 256 output tokens exceed the model&#39;s max_model_len 8192", "none while the scenario is disabled"} {
		if !strings.Contains(body, want) {
			t.Errorf("status page with tool_calling disabled lacks %q", want)
		}
	}
}

var hrefRE = regexp.MustCompile(`href="([^"]*)"`)

// checkLinks follows every link of a page (same server, anchors aside)
// and requires a 2xx.
func checkLinks(t *testing.T, base, from, body string) {
	t.Helper()
	for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
		href := strings.ReplaceAll(m[1], "&amp;", "&")
		if strings.HasPrefix(href, "#") {
			continue
		}
		if !strings.HasPrefix(href, "/") {
			t.Errorf("%s links outside the daemon: %s", from, href)
			continue
		}
		if code, _ := get(t, base+href); code/100 != 2 {
			t.Errorf("%s links to %s, which answers %d", from, href, code)
		}
	}
}

func TestProbesView(t *testing.T) {
	f := newFixture(t)
	res := prober.Result{Target: "a", Scenario: "chatbot", Kind: prober.KindError, Reason: prober.ReasonStall, Err: prober.ErrStall}
	f.rec.BeforeProbe(t.Context(), tgt("a"), scen("chatbot"))
	f.rec.addLog("a", "chatbot", LogLine{Time: f.clock.t, Level: "WARN", Text: `probe failed reason=stall err="stream stalled"`})
	f.rec.AfterProbe(&res)
	probe(f.rec, f.clock, okResult("a", "rag", f.clock.t))
	f.rec.BeforeProbe(t.Context(), tgt("a"), scen("agentic"))

	code, body := get(t, f.srv.URL+"/probes?target=a")
	if code != 200 {
		t.Fatalf("GET /probes?target=a = %d", code)
	}
	for _, want := range []string{"stall", "stream stalled", `probe failed reason=stall err=&#34;stream stalled&#34;`, "in flight", "200.0 ms"} {
		if !strings.Contains(body, want) {
			t.Errorf("probe view lacks %q", want)
		}
	}
	checkLinks(t, f.srv.URL, "/probes?target=a", body)

	_, body = get(t, f.srv.URL+"/probes?target=a&scenario=rag")
	if strings.Contains(body, "stream stalled") || !strings.Contains(body, "200.0 ms") {
		t.Error("?scenario=rag shows other scenarios' probes, or not its own")
	}
	for _, q := range []string{"/probes", "/probes?target=nope"} {
		code, body := get(t, f.srv.URL+q)
		if code != 404 || !strings.Contains(body, `href="/probes?target=a"`) {
			t.Errorf("GET %s = %d; want 404 and links to the known targets", q, code)
		}
	}
}

func TestSweepReports(t *testing.T) {
	f := newFixture(t)
	code, body := get(t, f.srv.URL+"/sweep/a/report.html")
	if code != 404 || !strings.Contains(body, "POST /-/sweep") {
		t.Errorf("report before any sweep: %d %q; want 404 saying how to start one", code, body)
	}
	finished := f.clock.t.Add(-time.Hour)
	rep := &report.Report{SchemaVersion: report.SchemaVersion, Meta: report.Meta{Model: "m-7b", TargetURL: "http://vllm-a:8000",
		StartedAt: finished.Add(-time.Minute), FinishedAt: finished},
		Headline: report.Headline{PeakDecode: &report.Figure{Value: 150.5, Unit: "tok/s", Scenario: "chatbot", Concurrency: 1},
			MaxSafeQueue: []report.Figure{{Value: 64, Scenario: "chatbot", Approximate: true}}, RequestsSent: 10, RequestsOK: 10, SuccessRate: 1}}
	f.sweep = sweeper.Snapshot{Enabled: true, Targets: []sweeper.TargetSnapshot{{Target: "a", Result: rep,
		LastAttempt: sweeper.Attempt{Started: finished.Add(-time.Minute), Finished: finished, Trigger: "request", Complete: true}}}}

	_, page := get(t, f.srv.URL+"/")
	for _, want := range []string{`href="/sweep/a/report.html"`, `href="/sweep/a/report.json"`, "peak decode 150.5 tok/s (chatbot, N=1)",
		"max safe queue chatbot: ~64", "sweep job is <b>on</b>"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	checkLinks(t, f.srv.URL, "/", page)

	code, html := get(t, f.srv.URL+"/sweep/a/report.html")
	if code != 200 || !strings.Contains(html, "<html") || !strings.Contains(html, "m-7b") {
		t.Errorf("report.html: %d %.200q", code, html)
	}
	code, js := get(t, f.srv.URL+"/sweep/a/report.json")
	var back report.Report
	if err := json.Unmarshal([]byte(js), &back); code != 200 || err != nil || back.Meta.Model != "m-7b" || back.SchemaVersion != report.SchemaVersion {
		t.Errorf("report.json: %d %v %+v", code, err, back.Meta)
	}
	if code, _ := get(t, f.srv.URL+"/sweep/b/report.html"); code != 404 {
		t.Errorf("report of an unknown target: %d, want 404", code)
	}
}

func TestQuantileAndFormat(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		q    float64
		want float64
	}{
		{[]float64{1}, 0.95, 1},
		{[]float64{1, 2}, 0.5, 1.5},
		{[]float64{1, 2, 3, 4, 5}, 0.95, 4.8},
		{[]float64{1, 2, 3, 4, 5}, 0.10, 1.4},
	} {
		if got := sweep.Quantile(c.v, c.q); fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", c.want) {
			t.Errorf("quantile(%v, %v) = %v, want %v", c.v, c.q, got, c.want)
		}
	}
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{{0.1046, "s", "104.6 ms"}, {1.5, "s", "1.50 s"}, {165.94, "tok/s", "165.9 tok/s"}} {
		if got := formatValue(c.v, c.unit); got != c.want {
			t.Errorf("formatValue(%v, %s) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

// BenchmarkStatusPage renders / with every kept probe of the four default
// scenarios on two targets: the page's worst case.
func BenchmarkStatusPage(b *testing.B) {
	cfg, err := config.LoadWithFlags("", config.Flags{TargetURLs: []string{"http://a:8000", "http://b:8000"}})
	if err != nil {
		b.Fatal(err)
	}
	c := newClock()
	rec := NewRecorder(0, c.now)
	for range DefaultKeep {
		for _, t := range cfg.TargetConfigs {
			for _, sc := range prober.DefaultScenarios {
				rec.BeforeProbe(b.Context(), tgt(t.Name), scen(sc))
				res := okResult(t.Name, sc, c.t)
				rec.AfterProbe(&res)
			}
		}
		c.add(5 * time.Second)
	}
	s, err := New(Options{Config: func() *config.Config { return cfg }, Recorder: rec, Now: c.now})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.servePage(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// Probes that fail often are a breach even when the last one succeeded.
func TestStatusFailingOften(t *testing.T) {
	f := newFixture(t)
	fail := prober.Result{Target: "a", Scenario: "chatbot", Kind: prober.KindError, Reason: prober.ReasonStreamCut, Err: prober.ErrStall}
	for _, ok := range []bool{true, false, true, false, true} {
		if ok {
			probe(f.rec, f.clock, okResult("a", "chatbot", f.clock.t))
		} else {
			probe(f.rec, f.clock, fail)
		}
	}
	_, body := get(t, f.srv.URL+"/")
	for _, want := range []string{`data-scenario="chatbot" data-status="breach"`, "failing often: 3 of 5 probes in the last 15 min succeeded (below 90 %)",
		"3 of 5 (60 %)", `<line class="fail"`} {
		if !strings.Contains(body, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
}

// The probe view shows the newest probes only.
func TestProbesViewIsBounded(t *testing.T) {
	f := newFixture(t)
	for i := range maxProbeRows + 5 {
		res := okResult("a", "chatbot", f.clock.t)
		res.ResponseID = fmt.Sprint("cmpl-", i)
		probe(f.rec, f.clock, res)
	}
	_, body := get(t, f.srv.URL+"/probes?target=a")
	if n := strings.Count(body, `<tr class="probe"`); n != maxProbeRows {
		t.Errorf("%d probe rows, want %d", n, maxProbeRows)
	}
	if !strings.Contains(body, fmt.Sprintf("the %d newest of the %d kept", maxProbeRows, maxProbeRows+5)) ||
		!strings.Contains(body, fmt.Sprintf("id cmpl-%d", maxProbeRows+4)) || strings.Contains(body, "id cmpl-4<") {
		t.Error("the probe view does not show the newest probes, or does not say it left older ones out")
	}
}

// "Within SLA" is the joint SLO: the share of probes that met every
// threshold at once against the 99 % objective. One slow first token and
// one slow stream in 40 probes keep each metric's p95 within its threshold
// but leave 95 % of the probes good: a breach. One bad probe in 100 is
// 99 %: within.
func TestStatusGoodput(t *testing.T) {
	for _, tc := range []struct {
		n, slowTTFT, slowITL int
		status, text         string
	}{
		{n: 40, slowTTFT: 7, slowITL: 23, status: "breach",
			text: "SLA breached: only 95.0 % meet every threshold at once (38 of 40 probes in the last 15 min; objective 99 %)"},
		{n: 100, slowTTFT: 50, slowITL: -1, status: "ok",
			text: "within SLA: 99.0 % meet every threshold at once (99 of 100 probes in the last 15 min; objective 99 %)"},
		{n: 100, slowTTFT: 50, slowITL: 51, status: "breach",
			text: "SLA breached: only 98.0 % meet every threshold at once (98 of 100 probes in the last 15 min; objective 99 %)"},
	} {
		f := newFixture(t)
		for i := range tc.n {
			r := okResult("a", "chatbot", f.clock.t) // TTFT 200 ms, ITL 10 ms; chatbot: TTFT <= 3 s, ITL <= 70 ms
			switch i {
			case tc.slowTTFT:
				r.FirstToken = r.Start.Add(4 * time.Second)
				r.LastToken = r.FirstToken.Add(255 * 10 * time.Millisecond)
			case tc.slowITL:
				r.LastToken = r.FirstToken.Add(255 * 80 * time.Millisecond)
			}
			probe(f.rec, f.clock, r)
		}
		_, body := get(t, f.srv.URL+"/")
		for _, want := range []string{`data-scenario="chatbot" data-status="` + tc.status + `"`, tc.text} {
			if !strings.Contains(body, want) {
				t.Errorf("%d probes: status page lacks %q", tc.n, want)
			}
		}
		if strings.Contains(body, "&gt; 3.00 s") || strings.Contains(body, "&gt; 70.0 ms") {
			t.Errorf("%d probes: a metric's p95 breaches; the case needs each within its threshold", tc.n)
		}
	}
}

// TestAcceptanceBesideDecode: a scenario whose probes reported speculative
// decoding shows its acceptance in the row after decode speed (p50 and the
// slow p10 over the window); a scenario without it has no such row.
func TestAcceptanceBesideDecode(t *testing.T) {
	c := newClock()
	r := NewRecorder(50, c.now)
	for i, a := range []float64{0.5, 0.6, 0.7, 0.8, 0.9} {
		res := okResult("a", "chatbot", c.t)
		res.ResponseID = fmt.Sprint("cmpl-", i)
		res.SpecDecode = prober.SpecDecode{Ratio: a, Has: true}
		probe(r, c, res)
		probe(r, c, okResult("a", "rag", c.t))
	}
	done, _ := r.Probes("a", "chatbot")
	ms := withAcceptance(done)
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	if want := "TTFT ITL Decode Acceptance E2E"; strings.Join(names, " ") != want {
		t.Fatalf("rows %v, want %s", names, want)
	}
	row := buildRow(acceptance, done, c.t.Add(-time.Hour), prober.Thresholds{})
	if row.P50 != "70 %" || row.Tail != "54 %" || row.Last != "90 %" || row.N != 5 || row.Limit != "" {
		t.Errorf("acceptance row: last %q p50 %q p10 %q n %d limit %q; want 90 %%, 70 %%, 54 %%, 5, none", row.Last, row.P50, row.Tail, row.N, row.Limit)
	}
	rag, _ := r.Probes("a", "rag")
	if got := withAcceptance(rag); len(got) != len(metrics) {
		t.Errorf("a scenario without speculative decoding has %d rows, want %d", len(got), len(metrics))
	}
}
