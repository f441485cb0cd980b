package engine

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
)

var update = flag.Bool("update", false, "rewrite the generated fixtures in testdata/")

// TestVLLMSimExposition reads the simulated engine's real /metrics, current
// and legacy names, after a few requests, and keeps a copy as a fixture
// (go test ./internal/engine -run VLLMSim -update).
func TestVLLMSimExposition(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := "vllmsim.txt"
		if legacy {
			name = "vllmsim_legacy.txt"
		}
		t.Run(name, func(t *testing.T) {
			cfg := vllmsim.DefaultConfig()
			cfg.TimeScale = 0.001
			cfg.LegacyMetricNames = legacy
			eng, err := vllmsim.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			srv := httptest.NewServer(eng.Handler())
			defer srv.Close()
			for range 3 {
				body := `{"model":"` + cfg.ModelName + `","prompt":"how many joules per token","max_tokens":8,"min_tokens":8,"ignore_eos":true}`
				resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("completion: HTTP %d", resp.StatusCode)
				}
			}
			resp, err := http.Get(srv.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()

			s, err := Scrape(context.Background(), srv.Client(), srv.URL+"/metrics")
			if err != nil {
				t.Fatal(err)
			}
			if s.Flavor != "vllm" || !s.HasQueue || !s.HasKVCache || !s.HasTokens || !s.HasITL || !s.HasQueueTime || !s.HasRequestsFinished {
				t.Errorf("snapshot misses families: %+v", s)
			}
			if s.GenerationTokens != 24 || s.RequestsFinished != 3 || s.Running != 0 || s.Waiting != 0 {
				t.Errorf("tokens %v finished %v running %v waiting %v; want 24, 3, 0, 0", s.GenerationTokens, s.RequestsFinished, s.Running, s.Waiting)
			}
			oldName := strings.Contains(string(page), "vllm:gpu_cache_usage_perc")
			if oldName != legacy {
				t.Errorf("legacy=%v but page has old KV name: %v", legacy, oldName)
			}
			path := filepath.Join("testdata", name)
			if *update {
				if err := os.WriteFile(path, page, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("fixture %s missing; run with -update", path)
			}
			// The stored fixture parses the same way.
			fs := parseFile(t, path)
			if fs.GenerationTokens != s.GenerationTokens || fs.HasITL != s.HasITL || fs.HasKVCache != s.HasKVCache {
				t.Errorf("fixture %s: %+v", path, fs)
			}
		})
	}
}
