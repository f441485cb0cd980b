package status

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/internal/workload"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/browser"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// simEngine serves a simulated engine on loopback, fast enough that a
// 12K-token prompt takes milliseconds.
func simEngine(t *testing.T) (string, *http.Client) {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.MaxModelLen = 32768
	cfg.KVCacheTokens = 1 << 21
	cfg.PrefillOverhead = 2 * time.Millisecond
	cfg.PrefillTokensPerSecond = 1e6
	cfg.PrefillQuadratic = 0
	cfg.DecodeBase = time.Millisecond
	cfg.EOSMeanTokens = 0
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return testproc.Serve(t, e.Handler())
}

// statusPage serves the page of the config yml (one target) with the
// recorder and the live mix given; it returns the page's URL and the
// config's scenarios of the target by name.
func statusPage(t *testing.T, yml string, rec *Recorder, c *fakeClock, mix func(string) (workload.LiveMix, time.Time, error)) (string, map[string]prober.Scenario) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slaprobe.yml")
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	scs := map[string]prober.Scenario{}
	for _, s := range cfg.Scenarios(cfg.TargetConfigs[0].Name) {
		scs[s.Name] = s
	}
	s, err := New(Options{Config: func() *config.Config { return cfg }, Recorder: rec, Now: c.now, LiveMix: mix})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Mount(mux.Handle)
	url, _ := testproc.Serve(t, mux)
	return url + "/", scs
}

var classRowRE = regexp.MustCompile(`<tr data-class="([a-z0-9]+)" data-probes="(\d+)" data-good="(\d+)" data-slow="(\d+)" data-error="(\d+)">`)

// classCounts reads the card's class table: class → [probes, good, slow, error].
func classCounts(t *testing.T, html string) map[string][4]int {
	t.Helper()
	out := map[string][4]int{}
	for _, m := range classRowRE.FindAllStringSubmatch(html, -1) {
		var v [4]int
		for i := range v {
			v[i], _ = strconv.Atoi(m[i+2])
		}
		out[m[1]] = v
	}
	return out
}

// TestTraceClassesOnPage probes the simulated engine with a trace-shaped
// scenario whose trace cycles through prompts of 500, 3,000 and 12,000
// tokens (classes 1k, 4k, 16k: 3, 2 and 1 a cycle), drawn in order. The
// 16k class's TTFT threshold is 1 ms, which no probe meets (its prompt
// takes longer to read); the others' is 60 s. The card's table must count
// the probes of each class, good and slow, as slaprobe_trace_probes_total
// does. SLAPROBE_SHOT_DIR=dir keeps a screenshot (status-classes.png).
func TestTraceClassesOnPage(t *testing.T) {
	url, client := simEngine(t)
	dir := t.TempDir()
	var trace strings.Builder
	id := 0
	for i := range 6 {
		in := []int{500, 500, 500, 3000, 3000, 12000}[i]
		var ids []string
		for range (in + 511) / 512 {
			ids = append(ids, strconv.Itoa(id))
			id++
		}
		fmt.Fprintf(&trace, `{"timestamp": %d, "input_length": %d, "output_length": 8, "hash_ids": [%s]}`+"\n", i*1000, in, strings.Join(ids, ", "))
	}
	tracePath := filepath.Join(dir, "trace.jsonl")
	if err := os.WriteFile(tracePath, []byte(trace.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newClock()
	rec := NewRecorder(0, c.now)
	page, scs := statusPage(t, `targets:
  - name: sim
    url: `+url+`
    scenarios: [traffic]
scenarios:
  - name: traffic
    workload:
      trace: `+tracePath+`
      format: mooncake
      order: sequential
      max_context: 32768
      ttft_by_class: {1k: 60s, 4k: 60s, 16k: 1ms}
    timeout: 30s
`, rec, c, nil)
	sc := scs["traffic"]
	metrics := collector.NewTraceMetrics(func() []prober.Scenario { return []prober.Scenario{sc} })
	p := prober.New(slog.New(slog.DiscardHandler), prober.SystemClock{})
	target := prober.Target{Name: "sim", BaseURL: url, API: prober.APIChat, Client: client}
	ctx := context.Background()
	for range 12 {
		rec.BeforeProbe(ctx, target, sc)
		metrics.BeforeProbe(ctx, target, sc)
		res := p.Probe(ctx, target, "", sc)
		if res.Kind != prober.KindSuccess {
			t.Fatalf("probe of class %s: %s %s: %v", res.LengthClass, res.Kind, res.Reason, res.Err)
		}
		c.add(time.Second)
		rec.AfterProbe(&res)
		metrics.AfterProbe(&res)
	}
	html := pageHTML(t, page)
	got := classCounts(t, html)
	want := map[string][4]int{"1k": {6, 6, 0, 0}, "4k": {4, 4, 0, 0}, "16k": {2, 0, 2, 0}, "32k": {}, "96k": {}}
	for class, w := range want {
		if got[class] != w {
			t.Errorf("class %s on the page: probes, good, slow, error = %v; want %v", class, got[class], w)
		}
		for i, result := range []string{"good", "slow", "error"} {
			n := int(testutil.ToFloat64(metricsCounter(t, metrics, class, result)))
			if n != w[i+1] {
				t.Errorf("slaprobe_trace_probes_total{length_class=%q,result=%q} = %d; want %d (the page's)", class, result, n, w[i+1])
			}
		}
	}
	if !strings.Contains(html, `data-classes="12"`) {
		t.Error("the card does not say 12 probes in the window")
	}
	if dir := os.Getenv(browser.EnvShotDir); dir != "" {
		browser.Screenshot(t, browser.Chromium(t), page, "status-classes.png", 1280, 1100)
	}
}

// metricsCounter is the collector's counter of one class and result.
func metricsCounter(t *testing.T, m *collector.TraceMetrics, class, result string) prometheus.Collector {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "n"})
	for _, f := range fams {
		if f.GetName() != "slaprobe_trace_probes_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["length_class"] == class && labels["result"] == result {
				g.Add(s.GetCounter().GetValue())
			}
		}
	}
	return g
}

// TestLiveMixFlagsShapesNotSent: the simulated engine serves background
// traffic of a known mix; the page reads its live mix (as the daemon does,
// two reads of /metrics a minute apart) and sets it beside the target's
// scenarios: short (1,000-token prompts, class 1k) and long (4,000, class
// 4k). Only prompts of 300 tokens: long is flagged, short is not. A third
// of them of 3,000 tokens: neither. Fewer than MinLiveRequests requests:
// none, whatever the mix.
func TestLiveMixFlagsShapesNotSent(t *testing.T) {
	type bg struct{ in, n int }
	for _, tc := range []struct {
		name       string
		background []bg
		stale      []string
		share4k    string
	}{
		{"only short prompts", []bg{{300, 12}}, []string{"long"}, "0.0 %"},
		{"a third long prompts", []bg{{300, 8}, {3000, 4}}, nil, "32.5 %"},
		{"too few requests", []bg{{300, 5}}, nil, "0.0 %"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, client := simEngine(t)
			target := prober.Target{Name: "sim", BaseURL: url, API: prober.APIChat, Client: client}
			ctx := context.Background()
			c := newClock()
			live := &workload.Live{Window: 10 * time.Minute, Refresh: time.Second, Now: c.now}
			if _, err := live.Mix(ctx, target); err == nil {
				t.Fatal("a mix after one read")
			}
			p := prober.New(slog.New(slog.DiscardHandler), prober.SystemClock{})
			for _, b := range tc.background {
				s := prober.Scenario{Name: "bg", Family: prober.FamilyCustom, InputTokens: b.in, OutputTokens: 4, Timeout: 30 * time.Second}
				for range b.n {
					if res := p.Probe(ctx, target, "", s); res.Kind != prober.KindSuccess {
						t.Fatalf("background request: %s %v", res.Reason, res.Err)
					}
				}
			}
			c.add(time.Minute)
			if _, err := live.Mix(ctx, target); err != nil {
				t.Fatal(err)
			}
			page, _ := statusPage(t, `targets:
  - name: sim
    url: `+url+`
    scenarios: [short, long]
scenarios:
  - {name: short, input_tokens: 1000, output_tokens: 64}
  - {name: long, input_tokens: 4000, output_tokens: 64}
`, NewRecorder(0, c.now), c, func(string) (workload.LiveMix, time.Time, error) { return live.Cached(target) })
			html := pageHTML(t, page)
			requests := 0
			for _, b := range tc.background {
				requests += b.n
			}
			if !strings.Contains(html, fmt.Sprintf(`data-live-requests="%d"`, requests)) {
				t.Errorf("the page does not count the %d background requests", requests)
			}
			if !strings.Contains(html, `data-mix-class="4k" data-share="`+tc.share4k+`"`) {
				t.Errorf("the page does not show the 4k class at %s of the mix", tc.share4k)
			}
			for _, name := range []string{"short", "long"} {
				flagged := slices.Contains(tc.stale, name)
				for _, mark := range []string{`data-stale-scenario="` + name + `"`, `data-shape="` + name + `" data-stale="true"`} {
					if strings.Contains(html, mark) != flagged {
						t.Errorf("scenario %s: %s on the page is %v; want %v", name, mark, !flagged, flagged)
					}
				}
			}
			if flagged := strings.Count(html, "the traffic no longer sends this shape"); flagged != 2*len(tc.stale) { // the mix's line and the card's
				t.Errorf("%d warnings on the page; want %d", flagged, 2*len(tc.stale))
			}
			if dir := os.Getenv(browser.EnvShotDir); dir != "" && len(tc.stale) > 0 {
				browser.Screenshot(t, browser.Chromium(t), page, "status-live-mix.png", 1280, 1100)
			}
		})
	}
}
