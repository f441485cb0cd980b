package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// TestEngineTailSignalsFromVLLMSim drives the simulated engine with a
// repeated prompt (prefix-cache hits) and then with more concurrent long
// requests than its KV cache holds (preemptions), reads its /metrics
// through a Watcher and EngineCollector, and checks each exported signal
// against the engine's own truth: the cached tokens it reported per
// request, its preemption count, its request count, and a waiting split
// that sums to its waiting queue. The control run, with distinct prompts
// and a KV cache that holds everything, must show neither cause.
func TestEngineTailSignalsFromVLLMSim(t *testing.T) {
	t.Run("repeated prefix, KV pressure", func(t *testing.T) { engineTailRun(t, 400, true) })
	t.Run("distinct prompts, room in the KV cache", func(t *testing.T) { engineTailRun(t, 1<<16, false) })
}

func engineTailRun(t *testing.T, kvTokens int, causes bool) {
	cfg := vllmsim.DefaultConfig()
	cfg.MaxModelLen = 400
	cfg.KVCacheTokens = kvTokens // 400 is 25 blocks: three ~100-token prompts growing by 150 tokens do not fit
	cfg.PrefillOverhead = time.Millisecond
	cfg.PrefillTokensPerSecond = 1e6
	cfg.PrefillQuadratic = 0
	// 150 tokens at 6 ms: each long request runs about 0.9 s, so the three
	// overlap (and preempt) even where a loaded machine starts them apart.
	cfg.DecodeBase = 6 * time.Millisecond
	cfg.DecodePerSeq = 50 * time.Microsecond
	cfg.DecodePerKVToken = 0
	cfg.EOSMeanTokens = 0
	cfg.EnablePromptTokensDetails = true
	sim, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	pool := engine.NewPool(engine.Options{}, nil)
	t.Cleanup(pool.Close)
	w := pool.Add(prober.Target{Name: "sim", BaseURL: srv.URL, Client: srv.Client()})

	var (
		mu                   sync.Mutex
		prompt, cached, reqs int
	)
	complete := func(text string, maxTokens int) {
		body := fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":%d,"min_tokens":%d,"ignore_eos":true}`, cfg.ModelName, text, maxTokens, maxTokens)
		resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Usage.PromptTokensDetails == nil {
			t.Errorf("completion: HTTP %d, body %.200s", resp.StatusCode, b)
			return
		}
		mu.Lock()
		prompt += out.Usage.PromptTokens
		cached += out.Usage.PromptTokensDetails.CachedTokens
		reqs++
		mu.Unlock()
	}
	words := func(seed string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s%d ", seed, i)
		}
		return b.String()
	}

	// A repeated prompt: the second and later requests hit the prefix cache.
	for i := range 4 {
		prefix := "shared"
		if !causes {
			prefix = fmt.Sprintf("distinct%d-", i)
		}
		complete(words(prefix, 30), 4)
	}
	// KV pressure: three concurrent long requests, scraped while they run.
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 3 {
		wg.Go(func() { <-start; complete(words(fmt.Sprintf("p%d-", i), 20), 150) })
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	sawWaiting := false
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		s, err := w.Scrape(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !s.HasWaitingByReason || s.WaitingCapacity != s.Waiting || s.WaitingDeferred != 0 {
			t.Fatalf("waiting %v by reason capacity %v deferred %v (present %v): want capacity == waiting, deferred 0",
				s.Waiting, s.WaitingCapacity, s.WaitingDeferred, s.HasWaitingByReason)
		}
		sawWaiting = sawWaiting || s.WaitingCapacity > 0
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := w.Scrape(context.Background()); err != nil {
		t.Fatal(err)
	}

	st := sim.Stats()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewEngineCollector(pool))
	get := func(name string, labels ...string) float64 {
		t.Helper()
		v, ok := gatherSample(t, reg, name, labels...)
		if !ok {
			t.Errorf("%s%v not exported", name, labels)
		}
		return v
	}
	t.Logf("%d requests, %d prompt tokens of which %d cached (sim), %d preemptions (sim); scrapes under load saw capacity waits: %v",
		reqs, prompt, cached, st.Preemptions, sawWaiting)
	if reqs != 7 || (cached > 0) != causes || (st.Preemptions > 0) != causes {
		t.Fatalf("the load did not do what the test needs: cached %d, preemptions %d, requests %d, causes %v", cached, st.Preemptions, reqs, causes)
	}
	if causes && !sawWaiting {
		t.Error("no scrape saw a request waiting for capacity under KV pressure")
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"cache_hit tokens = the cached_tokens the sim reported", get("slaprobe_engine_prompt_tokens_by_source_total", "source", "cache_hit"), float64(cached)},
		{"computed tokens = prompt - cached", get("slaprobe_engine_prompt_tokens_by_source_total", "source", "computed"), float64(prompt - cached)},
		{"kv_transfer tokens", get("slaprobe_engine_prompt_tokens_by_source_total", "source", "kv_transfer"), 0},
		{"preemptions = the sim's", get("slaprobe_engine_preemptions_total"), float64(st.Preemptions)},
		{"waiting for capacity, idle", get("slaprobe_engine_requests_waiting_by_reason", "reason", "capacity"), 0},
		{"sleeping", get("slaprobe_engine_sleeping"), 0},
		{"queue phase count = requests", get("slaprobe_engine_request_phase_seconds_count", "phase", "queue"), float64(reqs)},
		{"prefill phase count = requests", get("slaprobe_engine_request_phase_seconds_count", "phase", "prefill"), float64(reqs)},
		{"decode phase count = requests", get("slaprobe_engine_request_phase_seconds_count", "phase", "decode"), float64(reqs)},
		{"engine TTFT count = requests", get("slaprobe_engine_ttft_seconds_count"), float64(reqs)},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// gatherSample returns the value of the sample name (a counter, a gauge, or
// a histogram's name_count / name_sum) of the series with the given label
// pairs, target "sim" implied.
func gatherSample(t *testing.T, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	family, suffix := name, ""
	for _, s := range []string{"_count", "_sum"} {
		if f, ok := strings.CutSuffix(name, s); ok {
			family, suffix = f, s
		}
	}
	want := map[string]string{"target": "sim"}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name && mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, want) {
				continue
			}
			switch {
			case mf.GetType() == dto.MetricType_HISTOGRAM && suffix == "_count":
				return float64(m.GetHistogram().GetSampleCount()), true
			case mf.GetType() == dto.MetricType_HISTOGRAM && suffix == "_sum":
				return m.GetHistogram().GetSampleSum(), true
			case m.GetCounter() != nil && mf.GetName() == name:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil && mf.GetName() == name:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		v, ok := want[lp.GetName()]
		if !ok {
			continue
		}
		if v != lp.GetValue() {
			return false
		}
		n++
	}
	return n == len(want)
}
