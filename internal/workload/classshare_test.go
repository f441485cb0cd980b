package workload

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/prober"
)

// TestClassShares: a histogram's counts split over the length classes, a
// bucket across a class boundary (2048, 8192, …) log-uniformly, and its
// quantiles read the same way.
func TestClassShares(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name   string
		h      Hist
		shares []float64
		p50    float64
	}{
		{"empty", Hist{Upper: []float64{500, inf}, Counts: []float64{0, 0}}, []float64{0, 0, 0, 0, 0}, 0},
		{"inside one class", Hist{Upper: []float64{200, 500, inf}, Counts: []float64{0, 10, 0}}, []float64{1, 0, 0, 0, 0}, math.Sqrt(200 * 500)},
		{"across 2048", Hist{Upper: []float64{1024, 4096, inf}, Counts: []float64{0, 4, 0}}, []float64{0.5, 0.5, 0, 0, 0}, 2048},
		{"two buckets", Hist{Upper: []float64{2048, 8192, 20000}, Counts: []float64{3, 1, 0}}, []float64{0.75, 0.25, 0, 0, 0}, 128}, // 0.5·4096^(2/3): rank 2 of 3 in (0.5, 2048]
		{"+Inf past 96k", Hist{Upper: []float64{100000, inf}, Counts: []float64{0, 2}}, []float64{0, 0, 0, 0, 1}, math.Sqrt(100000 * 200000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClassShares(tc.h)
			for i := range got {
				if math.Abs(got[i]-tc.shares[i]) > 1e-9 {
					t.Fatalf("ClassShares = %v; want %v", got, tc.shares)
				}
			}
			if p := tc.h.Quantile(0.5); math.Abs(p-tc.p50) > 1e-6*max(tc.p50, 1) {
				t.Errorf("Quantile(0.5) = %g; want %g", p, tc.p50)
			}
		})
	}
}

// TestLiveRetain: a reader forgets the targets it is no longer given.
func TestLiveRetain(t *testing.T) {
	l := &Live{}
	l.targets = map[string]*liveTarget{"http://a/metrics": {}, "http://b/metrics": {}}
	l.Retain(map[string]bool{"http://b/metrics": true})
	if _, ok := l.targets["http://a/metrics"]; ok || len(l.targets) != 1 {
		t.Errorf("after Retain(b): %d targets, a kept %v", len(l.targets), ok)
	}
}

// TestLivePageBounded: a metrics page past MaxLivePage is an error naming
// the bound, not a page parsed in memory whatever its size.
func TestLivePageBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		err  bool
	}{{"small", 1 << 10, false}, {"too large", MaxLivePage + 1<<10, true}} {
		t.Run(tc.name, func(t *testing.T) {
			body := "# HELP vllm:request_prompt_tokens x\n# TYPE vllm:request_prompt_tokens histogram\n" +
				"vllm:request_prompt_tokens_bucket{le=\"+Inf\"} 1\nvllm:request_prompt_tokens_sum 1\nvllm:request_prompt_tokens_count 1\n" +
				"# HELP vllm:request_generation_tokens x\n# TYPE vllm:request_generation_tokens histogram\n" +
				"vllm:request_generation_tokens_bucket{le=\"+Inf\"} 1\nvllm:request_generation_tokens_sum 1\nvllm:request_generation_tokens_count 1\n"
			body += strings.Repeat("# padding\n", (tc.size-len(body))/10)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
			defer srv.Close()
			l := &Live{}
			_, err := l.scrape(context.Background(), prober.Target{BaseURL: srv.URL}, srv.URL+"/metrics")
			if (err != nil) != tc.err || (err != nil && !strings.Contains(err.Error(), "metrics page longer than")) {
				t.Errorf("a %d-byte page: %v", len(body), err)
			}
		})
	}
}
