package collector

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/gpu/gpumock"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/prober"
)

// tokenServer serves a vLLM page per target (/<target>/metrics) whose
// generation-token counter and running gauge the test sets.
type tokenServer struct {
	mu      sync.Mutex
	tokens  map[string]float64
	running map[string]float64
	waiting map[string]float64
	prompt  map[string]float64
	done    map[string]float64
	// deferred: where set, the page splits waiting by reason, this many
	// deferred and the rest waiting for capacity.
	deferred map[string]float64
}

func newTokenServer(t *testing.T) (*tokenServer, *httptest.Server) {
	ts := &tokenServer{tokens: map[string]float64{}, running: map[string]float64{}, waiting: map[string]float64{}, prompt: map[string]float64{}, done: map[string]float64{}}
	srv := httptest.NewServer(ts)
	t.Cleanup(srv.Close)
	return ts, srv
}

func (ts *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target, _ := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/metrics")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} %g\n", ts.running[target])
	fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\"} %g\n", ts.waiting[target])
	if d, ok := ts.deferred[target]; ok {
		fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting_by_reason gauge\nvllm:num_requests_waiting_by_reason{engine=\"0\",reason=\"capacity\"} %g\n", ts.waiting[target]-d)
		fmt.Fprintf(w, "vllm:num_requests_waiting_by_reason{engine=\"0\",reason=\"deferred\"} %g\n", d)
	}
	fmt.Fprintf(w, "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine=\"0\"} %g\n", ts.tokens[target])
	fmt.Fprintf(w, "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{engine=\"0\"} %g\n", ts.prompt[target])
	// Speculative decoding: half a draft token per generated token, 70 % accepted.
	fmt.Fprintf(w, "# TYPE vllm:spec_decode_num_draft_tokens_total counter\nvllm:spec_decode_num_draft_tokens_total{engine=\"0\"} %g\n", ts.tokens[target]/2)
	fmt.Fprintf(w, "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\nvllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} %g\n", 0.35*ts.tokens[target])
	fmt.Fprintf(w, "# TYPE vllm:e2e_request_latency_seconds histogram\nvllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"+Inf\"} %g\n", ts.done[target])
	fmt.Fprintf(w, "vllm:e2e_request_latency_seconds_sum{engine=\"0\"} 0\nvllm:e2e_request_latency_seconds_count{engine=\"0\"} %g\n", ts.done[target])
}

// setDeferred makes target's page split its waiting requests by reason,
// deferred of them deferred.
func (ts *tokenServer) setDeferred(target string, deferred float64) {
	ts.mu.Lock()
	if ts.deferred == nil {
		ts.deferred = map[string]float64{}
	}
	ts.deferred[target] = deferred
	ts.mu.Unlock()
}

func (ts *tokenServer) setQueue(target string, running, waiting float64) {
	ts.mu.Lock()
	ts.running[target], ts.waiting[target] = running, waiting
	ts.mu.Unlock()
}

// addTraffic adds generated tokens and finished requests with their prompts.
func (ts *tokenServer) addTraffic(target string, tokens, requests, promptPerRequest float64) {
	ts.mu.Lock()
	ts.tokens[target] += tokens
	ts.done[target] += requests
	ts.prompt[target] += requests * promptPerRequest
	ts.mu.Unlock()
}

func (ts *tokenServer) add(target string, tokens float64) {
	ts.mu.Lock()
	ts.tokens[target] += tokens
	ts.mu.Unlock()
}

func TestEnergyCollector(t *testing.T) {
	ts, srv := newTokenServer(t)
	clk := newLiveTestClock()
	gpus := gpumock.New(2)
	gpus.Devices[0].SetLoad(400, 90)
	gpus.Devices[1].SetLoad(600, 95)
	r, err := gpu.New(gpus, nil, gpu.Options{Now: clk.Now, PollInterval: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pool := engine.NewPool(engine.Options{Clock: clk}, nil)
	defer pool.Close()
	for _, name := range []string{"a", "b", "c"} {
		pool.Add(prober.Target{Name: name, BaseURL: srv.URL + "/" + name})
	}
	ec := NewEnergyCollector(r, pool, EnergyOptions{
		PricePerKWh: 0.10,
		Window:      time.Minute,
		DevicesFor:  func(t string) []string { return map[string][]string{"a": {"0"}, "b": {gpumock.UUIDFor(1)}}[t] }, // c: every GPU
		Clock:       clk,
	})
	step := func(spikeW float64) {
		gpus.Devices[0].SetLoad(spikeW, 90)
		gpus.Advance(5 * time.Second)
		clk.Add(5 * time.Second)
		ts.add("a", 1000) // 200 tok/s
		ts.add("b", 500)  // 100 tok/s
		for _, w := range pool.Watchers() {
			if _, err := w.Scrape(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		r.Read()
	}
	for _, w := range pool.Watchers() {
		_, _ = w.Scrape(context.Background())
	}
	r.Read()
	for range 20 {
		step(400)
	}
	figs := map[string]EnergyFigures{}
	for _, f := range ec.Figures() {
		figs[f.Target] = f
	}
	a, b, c := figs["a"], figs["b"], figs["c"]
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// a: 400 W for 200 tok/s = 2 J/token.
	if !a.HasTokens || !a.Power.FromEnergyCounter {
		t.Fatalf("a: %+v", a)
	}
	check("a J/token", a.JoulesPerToken, 2)
	check("a avg W", a.Power.AverageWatts, 400)
	check("a $/h", a.CostPerHour, 0.04)
	check("a $/Mtok", a.CostPerMillionTokens, 2e6/3.6e6*0.10)
	// b, selected by UUID: 600 W for 100 tok/s = 6 J/token.
	check("b J/token", b.JoulesPerToken, 6)
	// c: both GPUs, no tokens: cost but no J/token.
	check("c avg W", c.Power.AverageWatts, 1000)
	check("c $/h", c.CostPerHour, 0.1)
	if c.HasTokens || c.Power.GPUs != 2 {
		t.Errorf("c: %+v", c)
	}

	// A 5-second spike to 700 W shows in the peak and moves the average.
	step(700)
	step(400)
	for _, f := range ec.Figures() {
		if f.Target == "a" {
			check("a peak W", f.Power.PeakWatts, 700)
			check("a J/token with spike", f.JoulesPerToken, (400*55+700*5)/60.0/200)
		}
	}
	liveGolden(t, ec, "nvml_energy_metrics.prom")
}

// Without NVML the energy collector exports only the price.
func TestEnergyCollectorNoDriver(t *testing.T) {
	r, _ := gpu.New(gpumock.NoDriver(), nil, gpu.Options{})
	pool := engine.NewPool(engine.Options{}, nil)
	defer pool.Close()
	liveGolden(t, NewEnergyCollector(r, pool, EnergyOptions{PricePerKWh: slo.DefaultPricePerKWh}), "nvml_energy_no_driver.prom")
}
