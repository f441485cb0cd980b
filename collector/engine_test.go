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
	for _, c := range []prometheus.Collector{NewEngineCollector(pool), NewLive(pool, LiveOptions{}), NewBandCollector(), NewEnergyCollector(nil, pool, EnergyOptions{})} {
		if err := reg.Register(c); err != nil {
			t.Errorf("register %T: %v", c, err)
		}
	}
}
