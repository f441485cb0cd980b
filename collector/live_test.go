package collector

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

func TestLiveQueueDepthLabel(t *testing.T) {
	for depth, want := range map[int]string{
		-1: "0", 0: "0", 1: "1", 2: "2-3", 3: "2-3", 4: "4-7", 7: "4-7", 8: "8-15", 15: "8-15",
		16: "16-31", 31: "16-31", 32: "32-63", 64: "64-127", 127: "64-127", 128: "128-255", 255: "128-255",
		256: "256+", 10000: "256+",
	} {
		if got := LiveQueueDepthLabel(depth); got != want {
			t.Errorf("LiveQueueDepthLabel(%d) = %q, want %q", depth, got, want)
		}
	}
}

// liveFind returns the metrics of family name whose labels include want.
func liveFind(t *testing.T, c prometheus.Collector, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			out = append(out, m)
		}
	}
	return out
}

func liveGauge(t *testing.T, c prometheus.Collector, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	ms := liveFind(t, c, name, labels)
	if len(ms) != 1 {
		return 0, false
	}
	return ms[0].GetGauge().GetValue(), true
}

// liveRig is a Live hook on a pool whose engine the test drives.
type liveRig struct {
	ts    *tokenServer
	clk   *liveTestClock
	pool  *engine.Pool
	live  *Live
	model string
	// others is the tokens other requests generate during each probe.
	others float64
}

func newLiveRig(t *testing.T, opts LiveOptions) *liveRig {
	return newLiveRigWith(t, opts, engine.Options{Interval: 15 * time.Second})
}

func newLiveRigWith(t *testing.T, opts LiveOptions, eopts engine.Options) *liveRig {
	ts, srv := newTokenServer(t)
	clk := newLiveTestClock()
	eopts.Clock = clk
	pool := engine.NewPool(eopts, nil)
	t.Cleanup(pool.Close)
	pool.Add(prober.Target{Name: "a", BaseURL: srv.URL + "/a"})
	opts.Clock = clk
	return &liveRig{ts: ts, clk: clk, pool: pool, live: NewLive(pool, opts), model: "m"}
}

// probe runs one probe through the hook: the engine has running/waiting
// requests when it is sent; it gets its first token after ttft and then
// decodes 256 tokens at decode tokens/s (0: it fails with reason).
func (r *liveRig) probe(s prober.Scenario, running, waiting float64, ttft time.Duration, decode float64, reason prober.Reason) {
	r.ts.setQueue("a", running, waiting)
	r.clk.Add(time.Second) // past the watcher's Fresh window: a new scrape
	r.live.BeforeProbe(context.Background(), prober.Target{Name: "a"}, s)
	start := r.clk.Now()
	res := &prober.Result{API: prober.APIChat, Target: "a", Model: r.model, Scenario: s.Name, Start: start, FirstChunkTokens: 1, PromptTokens: s.InputTokens}
	if reason != prober.ReasonNone {
		res.Kind, res.Reason = prober.KindError, reason
		r.clk.Add(s.Timeout)
	} else {
		res.Kind = prober.KindSuccess
		res.FirstToken = start.Add(ttft)
		res.OutputTokens = 257
		res.LastToken = res.FirstToken.Add(time.Duration(256 / decode * float64(time.Second)))
		r.clk.Add(res.E2E())
		r.ts.add("a", float64(res.OutputTokens)+r.others) // what the engine generated meanwhile
	}
	r.live.AfterProbe(res)
}

var liveChatbot, _ = prober.LookupBuiltin("chatbot") // TTFT threshold 3 s

func TestLiveTTFTByQueueDepth(t *testing.T) {
	r := newLiveRig(t, LiveOptions{})
	for _, x := range []struct {
		running, waiting float64
		ttft             time.Duration
	}{
		{0, 0, 100 * time.Millisecond}, {1, 0, 150 * time.Millisecond}, {2, 1, 300 * time.Millisecond},
		{4, 1, 400 * time.Millisecond}, {10, 2, 900 * time.Millisecond}, {12, 3, time.Second}, {200, 100, 20 * time.Second},
	} {
		r.probe(liveChatbot, x.running, x.waiting, x.ttft, 100, prober.ReasonNone)
	}
	want := map[string]uint64{"0": 1, "1": 1, "2-3": 1, "4-7": 1, "8-15": 2, "256+": 1}
	for _, label := range LiveQueueDepthLabels {
		ms := liveFind(t, r.live, "slaprobe_ttft_by_queue_depth_seconds", map[string]string{"queue_depth": label, "target": "a", "model": "m", "scenario": "chatbot"})
		var got uint64
		if len(ms) == 1 {
			got = ms[0].GetHistogram().GetSampleCount()
		}
		if got != want[label] {
			t.Errorf("queue_depth=%q: %d probes, want %d", label, got, want[label])
		}
	}
	ms := liveFind(t, r.live, "slaprobe_ttft_by_queue_depth_seconds", map[string]string{"queue_depth": "8-15"})
	if len(ms) != 1 || math.Abs(ms[0].GetHistogram().GetSampleSum()-1.9) > 1e-9 {
		t.Errorf("8-15 bucket sum wrong: %v", ms)
	}
}

// Where the engine splits waiting requests by reason, the queue depth counts
// those waiting for capacity only: running 2 + 6 waiting of which 5 are
// deferred is depth 3, not 8; without the split it is 8.
func TestLiveQueueDepthCountsCapacityWaitsOnly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		split    bool
		label    string
		maxDepth float64
	}{
		{"split by reason", true, "2-3", 3},
		{"no split", false, "8-15", 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLiveRig(t, LiveOptions{})
			if tc.split {
				r.ts.setDeferred("a", 5)
			}
			// Every probe meets the same queue and stays under the threshold:
			// the max safe depth is the depth seen, a lower bound.
			for range 3 {
				r.probe(liveChatbot, 2, 6, 500*time.Millisecond, 100, prober.ReasonNone)
			}
			ms := liveFind(t, r.live, "slaprobe_ttft_by_queue_depth_seconds", map[string]string{"queue_depth": tc.label, "scenario": "chatbot"})
			if len(ms) != 1 || ms[0].GetHistogram().GetSampleCount() != 3 {
				t.Errorf("queue_depth=%q: %v, want the 3 probes", tc.label, ms)
			}
			if v, ok := liveGauge(t, r.live, "slaprobe_live_max_safe_queue_depth", map[string]string{"scenario": "chatbot"}); !ok || v != tc.maxDepth {
				t.Errorf("max safe queue depth = %v (%v), want %v", v, ok, tc.maxDepth)
			}
		})
	}
}

func TestLiveMaxSafeQueueDepth(t *testing.T) {
	r := newLiveRig(t, LiveOptions{})
	// TTFT = 0.2 s + 0.25 s per queued request: crosses 3 s at depth 11.2.
	for i := 0; i < 40; i++ {
		d := float64(i % 20)
		jitter := time.Duration((i%3)-1) * 50 * time.Millisecond
		r.probe(liveChatbot, d, 0, time.Duration((0.2+0.25*d)*float64(time.Second))+jitter, 100, prober.ReasonNone)
	}
	labels := map[string]string{"target": "a", "model": "m", "scenario": "chatbot"}
	got, ok := liveGauge(t, r.live, "slaprobe_live_max_safe_queue_depth", labels)
	if !ok || math.Abs(got-11.2) > 0.5 {
		t.Errorf("max safe queue depth = %v (%v), want about 11.2", got, ok)
	}
	if n, _ := liveGauge(t, r.live, "slaprobe_live_max_safe_queue_depth_samples", labels); n != 40 {
		t.Errorf("samples = %v, want 40", n)
	}
	if lb, _ := liveGauge(t, r.live, "slaprobe_live_max_safe_queue_depth_lower_bound", labels); lb != 0 {
		t.Errorf("lower_bound = %v, want 0", lb)
	}
	// code_completion has no TTFT threshold: no estimate.
	cc, _ := prober.LookupBuiltin("code_completion")
	r.probe(cc, 3, 0, time.Second, 100, prober.ReasonNone)
	if _, ok := liveGauge(t, r.live, "slaprobe_live_max_safe_queue_depth", map[string]string{"scenario": "code_completion"}); ok {
		t.Error("estimate for a scenario without a TTFT threshold")
	}
}

func TestLiveMaxSafeQueueDepthCountsTimeouts(t *testing.T) {
	r := newLiveRig(t, LiveOptions{})
	labels := map[string]string{"target": "a", "model": "m", "scenario": "chatbot"}
	for d := 0.0; d <= 4; d++ {
		r.probe(liveChatbot, d, 0, time.Duration(0.5*float64(time.Second)+d*float64(100*time.Millisecond)), 100, prober.ReasonNone)
	}
	// Healthy so far: the threshold was never crossed, 4 is a lower bound.
	if got, _ := liveGauge(t, r.live, "slaprobe_live_max_safe_queue_depth", labels); got != 4 {
		t.Errorf("before timeouts: %v, want 4", got)
	}
	if lb, _ := liveGauge(t, r.live, "slaprobe_live_max_safe_queue_depth_lower_bound", labels); lb != 1 {
		t.Error("lower_bound should be 1 while never crossed")
	}
	// Probes at depth 20 time out before their first token: they count as
	// TTFT >= timeout (60 s), so the crossing falls between 4 and 20.
	r.probe(liveChatbot, 20, 0, 0, 0, prober.ReasonTimeout)
	r.probe(liveChatbot, 20, 0, 0, 0, prober.ReasonTimeout)
	got, _ := liveGauge(t, r.live, "slaprobe_live_max_safe_queue_depth", labels)
	want := 4 + (3-0.9)/(60-0.9)*16
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("with timeouts: %v, want %v", got, want)
	}
	// No TTFT was observed for them: the histogram has only the 5 successes.
	var n uint64
	for _, m := range liveFind(t, r.live, "slaprobe_ttft_by_queue_depth_seconds", labels) {
		n += m.GetHistogram().GetSampleCount()
	}
	if n != 5 {
		t.Errorf("histogram holds %d probes, want 5", n)
	}
	// Other failures (a 500) say nothing about TTFT.
	r.probe(liveChatbot, 30, 0, 0, 0, prober.ReasonHTTP5xx)
	if s, _ := liveGauge(t, r.live, "slaprobe_live_max_safe_queue_depth_samples", labels); s != 7 {
		t.Errorf("samples = %v, want 7", s)
	}
}

// feedEngine advances the engine for seconds in 5-second scrapes: running
// requests generate rate tokens/s in total, with requests finishing with
// prompts of promptLen tokens.
func (r *liveRig) feedEngine(seconds int, running, rate, promptLen float64) {
	for i := 0; i < seconds/5; i++ {
		r.clk.Add(5 * time.Second)
		r.ts.setQueue("a", running, 0)
		r.ts.addTraffic("a", 5*rate, 5*rate/256, promptLen)
		_, _ = r.pool.Watcher("a").Scrape(context.Background())
	}
}

func TestLiveScalingEfficiency(t *testing.T) {
	r := newLiveRig(t, LiveOptions{EfficiencyWindow: time.Minute, EfficiencySmoothing: 30 * time.Second})
	rag, _ := prober.LookupBuiltin("rag")
	labels := map[string]string{"target": "a", "model": "m"}

	// Before any idle probe there is no baseline, so no efficiency.
	r.feedEngine(90, 8, 400, 1024)
	if _, ok := liveGauge(t, r.live, "slaprobe_live_scaling_efficiency_ratio", labels); ok {
		t.Fatal("efficiency without a single-stream baseline")
	}
	// Idle probes: chatbot decodes alone at 100 tok/s, rag at 80 tok/s.
	r.probe(liveChatbot, 0, 0, 100*time.Millisecond, 100, prober.ReasonNone)
	r.probe(rag, 0, 0, 400*time.Millisecond, 80, prober.ReasonNone)
	// A probe sent while the engine is busy is not a baseline.
	r.probe(liveChatbot, 5, 0, 200*time.Millisecond, 40, prober.ReasonNone)
	if v, _ := liveGauge(t, r.live, "slaprobe_live_single_stream_decode_tokens_per_second", map[string]string{"scenario": "chatbot"}); math.Abs(v-100) > 1e-6 {
		t.Errorf("chatbot baseline = %v, want 100", v)
	}
	// Sent while idle, but another request ran meanwhile (the engine made more
	// tokens than the probe): not a single-stream speed either.
	r.others = 300
	r.probe(liveChatbot, 0, 0, 100*time.Millisecond, 70, prober.ReasonNone)
	r.others = 0
	if v, _ := liveGauge(t, r.live, "slaprobe_live_single_stream_decode_tokens_per_second", map[string]string{"scenario": "chatbot"}); math.Abs(v-100) > 1e-6 {
		t.Errorf("chatbot baseline = %v after a shared probe, want 100 still", v)
	}

	// 8 running requests of ~1K prompts make 400 tok/s: 400 / (100 × 8) = 0.5.
	r.feedEngine(180, 8, 400, 1000)
	got, ok := liveGauge(t, r.live, "slaprobe_live_scaling_efficiency_ratio", labels)
	if !ok || math.Abs(got-0.5) > 0.01 {
		t.Errorf("efficiency = %v (%v), want 0.5", got, ok)
	}
	if e, _ := r.live.Efficiency("a"); e.Scenario != "chatbot" {
		t.Errorf("baseline scenario = %q, want chatbot (closest to 1K prompts)", e.Scenario)
	}
	// Traffic moves to 4K prompts: rag's baseline is closer: 400/(80×8) = 0.625.
	r.feedEngine(300, 8, 400, 4000)
	got, _ = liveGauge(t, r.live, "slaprobe_live_scaling_efficiency_ratio", labels)
	if math.Abs(got-0.625) > 0.01 {
		t.Errorf("efficiency with 4K prompts = %v, want 0.625", got)
	}
	// The engine goes idle: the estimate stops, then disappears.
	r.feedEngine(30, 0, 0, 0)
	before, _ := r.live.Efficiency("a")
	r.feedEngine(240, 0, 0, 0)
	after, _ := r.live.Efficiency("a")
	if !after.At.Equal(before.At) {
		t.Error("efficiency updated while nothing ran")
	}
	if _, ok := liveGauge(t, r.live, "slaprobe_live_scaling_efficiency_ratio", labels); ok {
		t.Error("stale efficiency still exported")
	}
}

func TestLiveSetBaselineAndForget(t *testing.T) {
	r := newLiveRig(t, LiveOptions{EfficiencyWindow: time.Minute, EfficiencySmoothing: time.Second})
	r.live.SetBaseline("a", "m", "chatbot", 1024, 200, 30)
	r.probe(liveChatbot, 4, 0, time.Second, 50, prober.ReasonNone) // names the target's model
	r.feedEngine(120, 4, 400, 1024)
	if got, ok := liveGauge(t, r.live, "slaprobe_live_scaling_efficiency_ratio", nil); !ok || math.Abs(got-0.5) > 0.01 {
		t.Errorf("efficiency from a sweep baseline = %v (%v), want 0.5", got, ok)
	}
	r.live.ForgetTarget("a")
	for _, name := range []string{"slaprobe_live_scaling_efficiency_ratio", "slaprobe_ttft_by_queue_depth_seconds",
		"slaprobe_live_max_safe_queue_depth", "slaprobe_live_single_stream_decode_tokens_per_second"} {
		if ms := liveFind(t, r.live, name, nil); len(ms) != 0 {
			t.Errorf("%s survived ForgetTarget", name)
		}
	}
}

// TestLiveBaselineIgnoresSnapshotsFromDuringTheProbe: however fresh the
// engine snapshot taken when the probe was sent, the check that the probe
// ran alone reads one taken after its last token (an older one misses the
// probe's own tokens, and the baseline would be lost).
func TestLiveBaselineIgnoresSnapshotsFromDuringTheProbe(t *testing.T) {
	r := newLiveRigWith(t, LiveOptions{}, engine.Options{Interval: 15 * time.Second, Fresh: time.Hour})
	r.probe(liveChatbot, 0, 0, 100*time.Millisecond, 100, prober.ReasonNone)
	if v, ok := liveGauge(t, r.live, "slaprobe_live_single_stream_decode_tokens_per_second", map[string]string{"scenario": "chatbot"}); !ok || math.Abs(v-100) > 1e-6 {
		t.Errorf("baseline = %v (%v), want 100 from an idle probe", v, ok)
	}
}

// TestLiveBaselinesFromSweep: only closed-loop steps at concurrency 1 that
// succeeded become baselines.
func TestLiveBaselinesFromSweep(t *testing.T) {
	r := newLiveRig(t, LiveOptions{})
	step := func(n, ok int, decode float64) sweep.StepResult {
		return sweep.StepResult{Mode: sweep.ModeClosedLoop, Concurrency: n, Succeeded: ok, Decode: sweep.Summary{Mean: decode}}
	}
	r.live.SetBaselinesFromSweep(&sweep.Result{Target: "a", Model: "m", Scenarios: []sweep.ScenarioResult{
		{ScenarioSpec: sweep.ScenarioSpec{Name: "chatbot", InputTokens: 1024}, ClosedLoop: []sweep.StepResult{step(1, 10, 180), step(2, 10, 150)},
			Burst: []sweep.StepResult{{Mode: sweep.ModeBurst, Concurrency: 1, Succeeded: 1, Decode: sweep.Summary{Mean: 999}}}},
		{ScenarioSpec: sweep.ScenarioSpec{Name: "rag", InputTokens: 4096}, ClosedLoop: []sweep.StepResult{step(1, 0, 0)}}, // failed: no baseline
	}})
	if got, ok := liveGauge(t, r.live, "slaprobe_live_single_stream_decode_tokens_per_second", map[string]string{"scenario": "chatbot"}); !ok || got != 180 {
		t.Errorf("chatbot baseline = %v (%v), want 180 from closed loop N=1", got, ok)
	}
	if ms := liveFind(t, r.live, "slaprobe_live_single_stream_decode_tokens_per_second", map[string]string{"scenario": "rag"}); len(ms) != 0 {
		t.Errorf("a failed N=1 step became a baseline: %v", ms)
	}
}

// Several probes of one scenario in flight: each AfterProbe takes the queue
// state its own BeforeProbe saw.
func TestLivePendingMatchesStart(t *testing.T) {
	r := newLiveRig(t, LiveOptions{})
	tgt := prober.Target{Name: "a"}
	r.ts.setQueue("a", 0, 0)
	r.live.BeforeProbe(context.Background(), tgt, liveChatbot)
	startA := r.clk.Now()
	r.clk.Add(time.Second)
	r.ts.setQueue("a", 40, 0)
	r.live.BeforeProbe(context.Background(), tgt, liveChatbot)
	startB := r.clk.Now()
	// B finishes first.
	r.live.AfterProbe(&prober.Result{API: prober.APIChat, Target: "a", Model: "m", Scenario: "chatbot", Kind: prober.KindSuccess, Start: startB, FirstToken: startB.Add(5 * time.Second)})
	r.live.AfterProbe(&prober.Result{API: prober.APIChat, Target: "a", Model: "m", Scenario: "chatbot", Kind: prober.KindSuccess, Start: startA, FirstToken: startA.Add(100 * time.Millisecond)})
	for label, sum := range map[string]float64{"0": 0.1, "32-63": 5} {
		ms := liveFind(t, r.live, "slaprobe_ttft_by_queue_depth_seconds", map[string]string{"queue_depth": label})
		if len(ms) != 1 || math.Abs(ms[0].GetHistogram().GetSampleSum()-sum) > 1e-9 {
			t.Errorf("queue_depth %s: %v, want one probe of %v s", label, ms, sum)
		}
	}
}

// With the engine's /metrics down, probes go on and nothing is recorded.
func TestLiveEngineDown(t *testing.T) {
	pool := engine.NewPool(engine.Options{}, nil)
	defer pool.Close()
	pool.Add(prober.Target{Name: "a", BaseURL: "http://127.0.0.1:1"})
	l := NewLive(pool, LiveOptions{})
	start := time.Now()
	l.BeforeProbe(context.Background(), prober.Target{Name: "a"}, liveChatbot)
	l.BeforeProbe(context.Background(), prober.Target{Name: "unknown"}, liveChatbot)
	l.AfterProbe(&prober.Result{API: prober.APIChat, Target: "a", Scenario: "chatbot", Kind: prober.KindSuccess, Start: start, FirstToken: start.Add(time.Second)})
	l.AfterProbe(nil)
	if ms := liveFind(t, l, "slaprobe_ttft_by_queue_depth_seconds", nil); len(ms) != 0 {
		t.Error("recorded a probe without engine state")
	}
	if time.Since(start) > 2*time.Second {
		t.Error("BeforeProbe was slow with the engine down")
	}
}

func TestLiveLint(t *testing.T) {
	r := newLiveRig(t, LiveOptions{EfficiencyWindow: time.Minute})
	r.probe(liveChatbot, 0, 0, 200*time.Millisecond, 100, prober.ReasonNone)
	r.probe(liveChatbot, 3, 1, 900*time.Millisecond, 60, prober.ReasonNone)
	r.feedEngine(120, 4, 300, 1024)
	liveGolden(t, r.live, "engine_live_metrics.prom")
}

// Without engine scraping (no pool) the hook is inert and collects nothing.
func TestLiveWithoutPool(t *testing.T) {
	l := NewLive(nil, LiveOptions{})
	l.BeforeProbe(context.Background(), prober.Target{Name: "a"}, liveChatbot)
	now := time.Now()
	l.AfterProbe(&prober.Result{API: prober.APIChat, Target: "a", Scenario: "chatbot", Kind: prober.KindSuccess, Start: now, FirstToken: now.Add(time.Second)})
	if n := len(liveFind(t, l, "slaprobe_ttft_by_queue_depth_seconds", nil)); n != 0 {
		t.Errorf("%d series without engine state", n)
	}
}

// A target whose model keeps changing keeps the live state of one model:
// the state of each model before is dropped when the next one is probed.
func TestLiveOneModelPerTarget(t *testing.T) {
	r := newLiveRig(t, LiveOptions{})
	for i := range 50 {
		r.model = "m" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		r.probe(liveChatbot, 1, 0, 100*time.Millisecond, 100, prober.ReasonNone)
	}
	r.live.mu.Lock()
	depth, decode, base := len(r.live.depth), len(r.live.decode), len(r.live.baselines)
	r.live.mu.Unlock()
	if depth > 1 || decode > 1 || base > 1 {
		t.Errorf("after 50 models on one target: %d depth, %d decode, %d baseline series kept; want 1 model's", depth, decode, base)
	}
	if ms := liveFind(t, r.live, "slaprobe_ttft_by_queue_depth_seconds", map[string]string{"target": "a"}); len(ms) != 1 || !hasLabel(ms[0], r.model) {
		t.Errorf("TTFT by queue depth: %d series, want the last model's only", len(ms))
	}
}

func hasLabel(m *dto.Metric, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetValue() == v {
			return true
		}
	}
	return false
}
