package collector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/prober"
)

// liveTestClock is a settable clock shared by the engine, NVML, energy and
// live tests.
type liveTestClock struct {
	mu sync.Mutex
	t  time.Time
}

func newLiveTestClock() *liveTestClock {
	return &liveTestClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *liveTestClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *liveTestClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// liveGolden compares a collector's exposition with testdata/name; -update
// (the package's golden flag) rewrites it. It also runs promlint.
func liveGolden(t *testing.T, c prometheus.Collector, name string) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	golden(t, reg, name)
}

// engineFixtureServer serves the engine fixtures (testdata/engine_<name>.txt,
// else internal/engine/testdata/<name>.txt) under /<name>/metrics, and 404
// elsewhere.
func engineFixtureServer(t *testing.T) *httptest.Server {
	t.Helper()
	dir := filepath.Join("..", "internal", "engine", "testdata")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// llama.cpp server's /props beside its /metrics.
		if r.URL.Path == "/llamacpp/props" {
			_, _ = w.Write([]byte(`{"default_generation_settings":{"n_ctx":8192},"total_slots":4,"model_path":"m.gguf"}`))
			return
		}
		name, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/metrics")
		if !ok {
			http.NotFound(w, r)
			return
		}
		// Fixtures copied here (llm-d's real page) first, then the parser's.
		b, err := os.ReadFile(filepath.Join("testdata", "engine_"+name+".txt"))
		if err != nil {
			b, err = os.ReadFile(filepath.Join(dir, name+".txt"))
		}
		if err != nil {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestEngineCollectorGolden(t *testing.T) {
	srv := engineFixtureServer(t)
	clk := newLiveTestClock()
	pool := engine.NewPool(engine.Options{Clock: clk}, nil)
	defer pool.Close()
	for _, name := range []string{"vllm_current", "vllm_old", "sglang", "vllmsim", "llmd", "missing", "not_an_engine",
		"vllm_2026", "sglang_2026", "sglang_2026_no_retractions", "llamacpp", "llamacpp_old"} {
		w := pool.Add(prober.Target{Name: name, BaseURL: srv.URL + "/" + name})
		_, _ = w.Scrape(context.Background())
	}
	// "missing" answers 404 twice: the counter counts both.
	_, _ = pool.Watcher("missing").Scrape(context.Background())
	pool.Add(prober.Target{Name: "never_scraped", BaseURL: srv.URL + "/x"})
	liveGolden(t, NewEngineCollector(pool), "engine_metrics.prom")
}

// The engine collector registers beside every other collector of the
// daemon in one registry: no family name may clash (slaprobe_engine_itl_seconds
// is the per-probe engine ITL of engine_timing.go, with other labels).
func TestEngineCollectorRegistersBesideTheOthers(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	NewProbeMetrics(reg)
	pool := engine.NewPool(engine.Options{}, nil)
	defer pool.Close()
	for _, c := range []prometheus.Collector{NewEngineCollector(pool), NewLive(pool, LiveOptions{}), NewBandCollector(), NewEnergyCollector(nil, pool, EnergyOptions{}),
		NewSweepCollector(staticSweeps{}.Snapshot), NewLiveHeadroom(staticSweeps{}.Snapshot, pool, 0)} {
		if err := reg.Register(c); err != nil {
			t.Errorf("register %T: %v", c, err)
		}
	}
}

// A target whose /metrics holds only another application's families, or
// none at all (Ollama: 404), exports slaprobe_engine_up 0 and its scrape
// errors, and nothing else of the engine (internal/engine's
// TestWatcherUnknownEngine: one warning, and probes do not wait on it).
func TestEngineCollectorUnknownEngine(t *testing.T) {
	srv := engineFixtureServer(t)
	pool := engine.NewPool(engine.Options{}, nil)
	defer pool.Close()
	for _, name := range []string{"other_app", "missing"} {
		w := pool.Add(prober.Target{Name: name, BaseURL: srv.URL + "/" + name})
		for range 3 {
			if _, err := w.Scrape(context.Background()); err == nil {
				t.Fatalf("%s: scrape succeeded", name)
			}
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewEngineCollector(pool))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[f.GetName()+"/"+m.GetLabel()[0].GetValue()] = v
		}
	}
	want := map[string]float64{
		"slaprobe_engine_up/other_app": 0, "slaprobe_engine_scrape_errors_total/other_app": 3,
		"slaprobe_engine_up/missing": 0, "slaprobe_engine_scrape_errors_total/missing": 3,
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want only %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
