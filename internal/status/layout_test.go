package status

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweeper"
	"github.com/slaprobe/slaprobe/internal/workload"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/browser"
)

// Widths at which the status page must fit: a desktop, a laptop, a phone.
var layoutWidths = []int{1920, 1280, 500}

// longTarget and longScenario are names as long as operators write them,
// without a space to break at.
const (
	longTarget   = "vllm-llama-3.1-70b-instruct-fp8-production-europe-west4-replica-01"
	longScenario = "customer_support_multilingual_long_context_eval_v2"
	// longConversation is a conversation scenario: its card draws TTFT by
	// turn and counts its follow-ups by cache class.
	longConversation = "coding_agent_over_the_monorepo_with_tool_results_v3"
	// longTrace is a trace-shaped scenario: its card counts its probes by
	// length class, and the target's live mix lists it.
	longTrace = "replay_of_the_production_gateway_trace_2026_11_excerpt"
)

// TestPageFitsAnyScreen opens the status page in headless Chromium at each
// width, with one target and few probes, and with several targets (one
// with a long name and model), every default scenario, a custom scenario
// with a long name, the TTFT split, a breach, a failure with a long error,
// sweep reports and a GPU: the page must not scroll sideways, and nothing
// in a card or a tile may be drawn outside it. The probes page, whose
// table of probes scrolls in its own box, must not scroll sideways either.
// SLAPROBE_SHOT_DIR=dir keeps screenshots (status-few-W.png,
// status-many-W.png).
func TestPageFitsAnyScreen(t *testing.T) {
	bin := browser.Chromium(t)
	for _, c := range []struct {
		name       string
		url        string
		cards      int
		shotHeight int
	}{
		{"few", fewTargets(t), 4, 1400},
		{"many", manyTargets(t), 16, 0},
	} {
		page := pageHTML(t, c.url)
		if n := strings.Count(page, `<section class="card"`); n != c.cards {
			t.Fatalf("%s: %d cards on the page; want %d", c.name, n, c.cards)
		}
		for _, w := range layoutWidths {
			problems, boxes := browser.Overflow(t, bin, page, ".card, .tile", w, 900)
			if boxes != 2*c.cards { // a tile per card
				t.Errorf("%s at %d px: %d cards and tiles measured; want %d", c.name, w, boxes, 2*c.cards)
			}
			for _, p := range problems {
				t.Errorf("%s at %d px: %s", c.name, w, p)
			}
			if c.name == "many" { // the probes page each card links, with its wide table of probes
				probes := pageHTML(t, strings.TrimSuffix(c.url, "/")+"/probes?target="+longTarget)
				problems, _ := browser.Overflow(t, bin, probes, "main", w, 900)
				for _, p := range problems {
					t.Errorf("probes page at %d px: %s", w, p)
				}
			}
			if dir := os.Getenv(browser.EnvShotDir); dir != "" {
				h := c.shotHeight
				if h == 0 {
					h = map[int]int{1920: 5000, 1280: 6000, 500: 12000}[w]
				}
				browser.Screenshot(t, bin, c.url, fmt.Sprintf("status-%s-%d.png", c.name, w), w, h)
			}
		}
	}
}

func pageHTML(t *testing.T, url string) string {
	t.Helper()
	code, body := get(t, url)
	if code != 200 {
		t.Fatalf("GET %s = %d", url, code)
	}
	return body
}

// fewTargets is the plain fixture: one target, the default scenarios, a
// few probes of one of them.
func fewTargets(t *testing.T) string {
	f := newFixture(t)
	for range 3 {
		probe(f.rec, f.clock, okResult("a", "chatbot", f.clock.t))
	}
	return f.srv.URL + "/"
}

// manyTargets is a daemon three targets deep, with everything a card can
// show.
func manyTargets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "slaprobe.yml")
	trace := filepath.Join(dir, "trace.jsonl")
	if err := os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 700, "output_length": 90, "hash_ids": [1, 2]}
{"timestamp": 10, "input_length": 5000, "output_length": 300, "hash_ids": [1, 3, 4, 5, 6, 7, 8, 9, 10, 11]}
{"timestamp": 20, "input_length": 900, "output_length": 120, "hash_ids": [1, 2]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	yml := `targets:
  - name: prod-a
    url: http://vllm-a.inference.svc.cluster.local:8000
  - name: ` + longTarget + `
    url: https://` + longTarget + `.inference.example.com:8443/v1
    model: meta-llama/Meta-Llama-3.1-70B-Instruct-FP8-dynamic
    scenarios: [chatbot, rag, agentic, tool_calling, ` + longScenario + `, ` + longConversation + `, ` + longTrace + `]
  - name: staging
    url: http://10.0.12.7:8000
    api: completions
    scenarios: [chatbot, rag]
global:
  scenarios: [chatbot, rag, agentic, tool_calling]
scenarios:
  - name: ` + longScenario + `
    description: a support conversation in four languages
    input_tokens: 12000
    output_tokens: 512
    interval: 2m
    thresholds: {ttft: 2s, itl: 50ms, e2e: 30s, min_decode_tokens_per_second: 20}
  - name: ` + longConversation + `
    description: a coding agent's conversation, 12 turns
    input_tokens: 16384
    output_tokens: 256
    interval: 5m
    conversation: {turns: 12, new_tokens: 2048}
    thresholds: {ttft: 2s}
  - name: ` + longTrace + `
    workload: {trace: ` + trace + `, format: mooncake, ttft_by_class: {4k: 300ms}}
`
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	rec := NewRecorder(0, c.now)
	rng := rand.New(rand.NewPCG(1, 2))
	send := func(res prober.Result) {
		sc, ok := prober.LookupBuiltin(res.Scenario)
		if !ok {
			sc = prober.Scenario{Name: res.Scenario, OutputTokens: 512}
		}
		rec.BeforeProbe(context.Background(), tgt(res.Target), sc)
		c.add(2 * time.Second)
		rec.AfterProbe(&res)
	}
	// 70 rounds: more than a sparkline draws, most with the engine's
	// timing, some failed, some slow.
	for i := range 70 {
		for _, tc := range cfg.TargetConfigs {
			for _, sc := range cfg.Scenarios(tc.Name) {
				res := okResult(tc.Name, sc.Name, c.t)
				ttft := time.Duration(80+rng.IntN(400)) * time.Millisecond
				if sc.Name == "rag" && tc.Name == "prod-a" {
					ttft += 3 * time.Second // a breach
				}
				res.FirstToken = res.Start.Add(ttft)
				res.LastToken = res.FirstToken.Add(time.Duration(255*(8+rng.IntN(6))) * time.Millisecond)
				res.Engine = prober.EngineTiming{Source: prober.TimingResponse,
					Queue: ttft / 3, HasQueue: true, Prefill: ttft / 2, HasPrefill: true}
				if tc.Name == "prod-a" { // speculative decoding: an acceptance row beside decode speed
					acc := 24 + i%9
					res.SpecDecode = prober.SpecDecode{Draft: 36, Accepted: acc, HasCounts: true, Ratio: float64(acc) / 36, Has: true}
				}
				switch {
				case tc.Name == "staging":
					res.Engine = prober.EngineTiming{} // no split: the "not reported" note
				case i%9 == 4:
					res = prober.Result{Target: tc.Name, Scenario: sc.Name, Kind: prober.KindError, Reason: prober.ReasonHTTP5xx,
						Err: &prober.HTTPError{StatusCode: 503, Message: "upstream_connect_error_or_disconnect/reset_before_headers.reset_reason:" +
							"connection_termination_at_" + longTarget + ".inference.example.com:8443"}}
				}
				if tc.Name == "prod-a" && sc.Name == "agentic" && i == 69 { // the long error as the last probe
					res = prober.Result{Target: tc.Name, Scenario: sc.Name, Kind: prober.KindError, Reason: prober.ReasonHTTP5xx,
						Err: &prober.HTTPError{StatusCode: 503, Message: "upstream_connect_error_or_disconnect/reset_before_headers.reset_reason:" +
							"connection_termination_at_" + longTarget + ".inference.example.com:8443"}}
				}
				if sc.IsConversation() {
					res = conversationResult(tc.Name, sc.Name, c.t, sc.Turns(), rng)
				}
				if sc.Shape != nil {
					res.LengthClass = []string{"1k", "4k", "16k"}[i%3]
				}
				if tc.Name == longTarget && sc.Name == "tool_calling" && i == 69 {
					res = prober.Result{Target: tc.Name, Scenario: sc.Name, Kind: prober.KindError, Reason: prober.ReasonStall, Err: prober.ErrStall}
				}
				send(res)
			}
		}
	}
	finished := c.t.Add(-time.Hour)
	rep := &report.Report{SchemaVersion: report.SchemaVersion, Meta: report.Meta{Model: "meta-llama/Meta-Llama-3.1-70B-Instruct-FP8-dynamic",
		TargetURL: "https://x", StartedAt: finished.Add(-time.Minute), FinishedAt: finished},
		Headline: report.Headline{PeakDecode: &report.Figure{Value: 150.5, Unit: "tok/s", Scenario: longScenario, Concurrency: 16},
			MaxSafeQueue: []report.Figure{{Value: 64, Scenario: longScenario, Approximate: true}}, RequestsSent: 1200, RequestsOK: 1199, SuccessRate: 0.999}}
	snap := sweeper.Snapshot{Enabled: true, Paused: map[string]string{longTarget: "the last sweep failed: " + strings.Repeat("x", 120)},
		Targets: []sweeper.TargetSnapshot{{Target: longTarget, Result: rep,
			LastAttempt: sweeper.Attempt{Started: finished.Add(-time.Minute), Finished: finished, Trigger: "schedule", Complete: false, Error: "dial tcp: lookup " + longTarget + ".inference.example.com: no such host"}}}}
	s, err := New(Options{
		Config:   func() *config.Config { return cfg },
		Recorder: rec,
		NextProbe: func(target, scenario string) (time.Time, bool) {
			return c.t.Add(12 * time.Second), true
		},
		Engine: func(target string) (engine.Status, bool) {
			return engine.Status{Target: target, URL: "https://" + target + ".inference.example.com:8443/metrics", Up: true, Tried: true, HasLatest: true,
				Latest: engine.Snapshot{Time: c.t, Flavor: "vllm", Running: 12, Waiting: 3, HasQueue: true, KVCacheUsage: 0.87, HasKVCache: true}}, true
		},
		GPUs:   fakeGPUs{up: true},
		Sweeps: func() sweeper.Snapshot { return snap },
		LiveMix: func(target string) (workload.LiveMix, time.Time, error) {
			switch target {
			case "prod-a": // short prompts only: rag and agentic are flagged
				inf := math.Inf(1)
				return workload.LiveMix{Prompt: workload.Hist{Upper: []float64{200, 500, 1000, 2000, inf}, Counts: []float64{120, 300, 60, 20, 0}},
					Output: workload.Hist{Upper: []float64{50, 100, 200, 500, inf}, Counts: []float64{100, 200, 150, 50, 0}},
					Window: 15 * time.Minute, Requests: 500}, c.t.Add(-40 * time.Second), nil
			case longTarget:
				return workload.LiveMix{}, c.t.Add(-10 * time.Second), fmt.Errorf("workload: live: https://%s.inference.example.com:8443/metrics: no histogram vllm:request_prompt_tokens in the engine's metrics (%s)", longTarget, strings.Repeat("why ", 20))
			}
			return workload.LiveMix{}, time.Time{}, nil
		},
		Description: "probing three vLLM deployments of " + longTarget,
		Links:       []Link{{Address: "/grafana/d/slaprobe-overview/slaprobe-overview", Text: "Grafana: slaprobe overview"}},
		Now:         c.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Mount(mux.Handle)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}
