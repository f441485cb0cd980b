package engine

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func parseFile(t *testing.T, path string) Snapshot {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Parse(f)
	if err != nil {
		t.Fatalf("Parse(%s): %v", path, err)
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Snapshot
	}{
		{"vllm_current.txt", Snapshot{
			Flavor: "vllm", Running: 8, Waiting: 2, HasQueue: true, Series: 2,
			KVCacheUsage: 0.375, HasKVCache: true,
			GenerationTokens: 153600, PromptTokens: 614400, HasTokens: true,
			QueueTimeSum: 15, QueueTimeCount: 600, HasQueueTime: true,
			PrefixCacheQueries: 150000, PrefixCacheHits: 3072, HasPrefixCache: true,
			TTFTSum: 90, TTFTCount: 600, HasTTFT: true,
			ITLSum: 2295, ITLCount: 153000, HasITL: true,
			RequestsFinished: 600, HasRequestsFinished: true,
		}},
		{"vllm_old.txt", Snapshot{
			Flavor: "vllm", Running: 12, Waiting: 4, HasQueue: true, Series: 1,
			KVCacheUsage: 0.875, HasKVCache: true,
			GenerationTokens: 2560, PromptTokens: 8000, HasTokens: true,
			PrefixCacheQueries: 8000, PrefixCacheHits: 16, HasPrefixCache: true,
			TTFTSum: 2.5, TTFTCount: 10, HasTTFT: true,
			ITLSum: 51, ITLCount: 2550, HasITL: true,
			RequestsFinished: 10, HasRequestsFinished: true,
		}},
		{"vllm_both_itl_names.txt", Snapshot{
			Flavor: "vllm", Running: 1, HasQueue: true, Series: 1,
			KVCacheUsage: 0.1, HasKVCache: true,
			GenerationTokens: 100, PromptTokens: 1000, HasTokens: true,
			ITLSum: 1.98, ITLCount: 99, HasITL: true,
			PrefixCacheQueries: 70, PrefixCacheHits: 7, HasPrefixCache: true,
		}},
		{"sglang.txt", Snapshot{
			Flavor: "sglang", Running: 10, Waiting: 3, HasQueue: true, Series: 2,
			KVCacheUsage: 0.4, HasKVCache: true,
			GenerationTokens: 65432, PromptTokens: 123456, HasTokens: true,
			QueueTimeSum: 4, QueueTimeCount: 100, HasQueueTime: true,
			TTFTSum: 25, TTFTCount: 100, HasTTFT: true,
			ITLSum: 1040, ITLCount: 65000, HasITL: true,
			RequestsFinished: 100, HasRequestsFinished: true,
			CacheHitRate: 0.2, HasCacheHitRate: true,
		}},
		// Real exposition of llm-d-inference-sim v0.10.2 (copied from
		// test/llmd/testdata/metrics.txt): both ITL names, counters without
		// _total, no engine label.
		{"llmd.txt", Snapshot{
			Flavor: "vllm", HasQueue: true, Series: 1, HasKVCache: true,
			GenerationTokens: 69, PromptTokens: 153, HasTokens: true,
			QueueTimeSum: 0.098617234, QueueTimeCount: 1, HasQueueTime: true,
			PrefixCacheQueries: 153, PrefixCacheHits: 32, HasPrefixCache: true,
			TTFTSum: 0.1, TTFTCount: 5, HasTTFT: true,
			ITLSum: 0.3200000000000002, ITLCount: 64, HasITL: true,
			RequestsFinished: 5, HasRequestsFinished: true,
		}},
		{"untyped.txt", Snapshot{
			Flavor: "vllm", Running: 2, Waiting: 1, HasQueue: true, Series: 1,
			GenerationTokens: 42, PromptTokens: 420, HasTokens: true,
			QueueTimeSum: 1.5, QueueTimeCount: 3, HasQueueTime: true,
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := parseFile(t, filepath.Join("testdata", tc.file))
			checkSnapshot(t, got, tc.want)
		})
	}
}

func checkSnapshot(t *testing.T, got, want Snapshot) {
	t.Helper()
	type f struct {
		name      string
		got, want float64
	}
	for _, x := range []f{
		{"Running", got.Running, want.Running}, {"Waiting", got.Waiting, want.Waiting},
		{"KVCacheUsage", got.KVCacheUsage, want.KVCacheUsage},
		{"GenerationTokens", got.GenerationTokens, want.GenerationTokens}, {"PromptTokens", got.PromptTokens, want.PromptTokens},
		{"QueueTimeSum", got.QueueTimeSum, want.QueueTimeSum}, {"QueueTimeCount", got.QueueTimeCount, want.QueueTimeCount},
		{"PrefixCacheQueries", got.PrefixCacheQueries, want.PrefixCacheQueries}, {"PrefixCacheHits", got.PrefixCacheHits, want.PrefixCacheHits},
		{"TTFTSum", got.TTFTSum, want.TTFTSum}, {"TTFTCount", got.TTFTCount, want.TTFTCount},
		{"ITLSum", got.ITLSum, want.ITLSum}, {"ITLCount", got.ITLCount, want.ITLCount},
		{"RequestsFinished", got.RequestsFinished, want.RequestsFinished},
		{"CacheHitRate", got.CacheHitRate, want.CacheHitRate},
		{"Series", float64(got.Series), float64(want.Series)},
	} {
		if !near(x.got, x.want) {
			t.Errorf("%s = %v, want %v", x.name, x.got, x.want)
		}
	}
	if got.Flavor != want.Flavor {
		t.Errorf("Flavor = %q, want %q", got.Flavor, want.Flavor)
	}
	for _, b := range []struct {
		name      string
		got, want bool
	}{
		{"HasQueue", got.HasQueue, want.HasQueue}, {"HasKVCache", got.HasKVCache, want.HasKVCache},
		{"HasTokens", got.HasTokens, want.HasTokens}, {"HasQueueTime", got.HasQueueTime, want.HasQueueTime},
		{"HasPrefixCache", got.HasPrefixCache, want.HasPrefixCache}, {"HasTTFT", got.HasTTFT, want.HasTTFT},
		{"HasITL", got.HasITL, want.HasITL}, {"HasRequestsFinished", got.HasRequestsFinished, want.HasRequestsFinished},
		{"HasCacheHitRate", got.HasCacheHitRate, want.HasCacheHitRate},
	} {
		if b.got != b.want {
			t.Errorf("%s = %v, want %v", b.name, b.got, b.want)
		}
	}
}

// The llm-d helper may refresh its fixture; the copy here must still parse
// the same way.
func TestParseLLMDFixture(t *testing.T) {
	path := filepath.Join("..", "..", "test", "llmd", "testdata", "metrics.txt")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no llm-d-inference-sim fixture at %s", path)
	}
	s := parseFile(t, path)
	if s.Flavor != "vllm" || !s.HasQueue || !s.HasTokens || !s.HasKVCache || !s.HasITL || !s.HasPrefixCache {
		t.Errorf("llm-d fixture: %+v; want vLLM queue, tokens, KV cache, ITL and prefix cache", s)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse(strings.NewReader(readTestdata(t, "not_an_engine.txt"))); !errors.Is(err, ErrNoEngineMetrics) {
		t.Errorf("non-engine page: err = %v, want ErrNoEngineMetrics", err)
	}
	if _, err := Parse(strings.NewReader("<html>not metrics</html>\n")); err == nil {
		t.Error("HTML page: no error")
	}
	if _, err := Parse(strings.NewReader("")); !errors.Is(err, ErrNoEngineMetrics) {
		t.Errorf("empty page: err = %v, want ErrNoEngineMetrics", err)
	}
	// A NaN gauge is skipped rather than poisoning the sum.
	s, err := Parse(strings.NewReader("vllm:num_requests_running{engine=\"0\"} NaN\nvllm:num_requests_running{engine=\"1\"} 3\nvllm:num_requests_waiting 0\n"))
	if err != nil || s.Running != 3 {
		t.Errorf("NaN gauge: running=%v err=%v; want 3", s.Running, err)
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestScrapeHTTP(t *testing.T) {
	page := readTestdata(t, "vllm_current.txt")
	var accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			accept = r.Header.Get("Accept")
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte(page))
		case "/slow":
			time.Sleep(200 * time.Millisecond)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	s, err := Scrape(ctx, srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if s.Running != 8 || s.Time.IsZero() {
		t.Errorf("snapshot %+v", s)
	}
	if !strings.HasPrefix(accept, "text/plain") {
		t.Errorf("Accept = %q; want the text format first", accept)
	}
	if _, err := Scrape(ctx, srv.Client(), srv.URL+"/nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: err = %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := Scrape(tctx, srv.Client(), srv.URL+"/slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow: err = %v, want deadline exceeded", err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	if _, err := Scrape(ctx, nil, url+"/metrics"); err == nil {
		t.Error("closed port: no error")
	}
}
