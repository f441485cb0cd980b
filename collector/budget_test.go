package collector

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slaprobe/slaprobe/prober"
)

// seriesBudget is the number of /metrics series (text format) that one target and scenario adds
// through the probe metrics, by global.classic_histogram_buckets. docs/scaling.md states them.
var seriesBudget = map[ClassicBuckets]int{
	ClassicBucketsFull:    269,
	ClassicBucketsReduced: 175,
	ClassicBucketsNone:    69,
}

// fullResult is a successful probe of a reasoning model with continuous usage, whose engine reported
// its own timing: it fills every probe histogram.
func fullResult(target, scenario string, i int) *prober.Result {
	t0 := time.Unix(1_800_000_000, 0).Add(time.Duration(i) * time.Second)
	return &prober.Result{
		API: prober.APIChat, Target: target, Model: "m", Scenario: scenario, Kind: prober.KindSuccess,
		Start: t0, FirstToken: t0.Add(300 * time.Millisecond), FirstContent: t0.Add(900 * time.Millisecond),
		LastToken: t0.Add(3 * time.Second), Reasoning: true,
		PromptTokens: 1000, OutputTokens: 256, RequestedTokens: 256, FirstChunkTokens: 1,
		ContinuousUsage: true, ChunkTokens: []int32{1, 1, 2, 4}, PromptLengthOK: true,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		Engine: prober.EngineTiming{Source: prober.TimingResponse, Queue: 10 * time.Millisecond, HasQueue: true,
			Prefill: 250 * time.Millisecond, HasPrefill: true, ITL: 10 * time.Millisecond, HasITL: true},
	}
}

// fleet registers the probe metrics of targets × the nine built-in scenarios, each probed once.
func fleet(mode ClassicBuckets, targets int) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	m := NewProbeMetricsWith(reg, ProbeMetricsOptions{ClassicBuckets: mode})
	scenarios := prober.Builtin()
	m.SetThresholds(scenarios)
	for ti := range targets {
		target := fmt.Sprintf("vllm-%02d", ti)
		m.SetPlannedTokensPerHour(target, prober.PlannedTokensPerHour(scenarios))
		for si, s := range scenarios {
			m.SetScenarioEnabled(target, "m", s.Name, "chat", true)
			m.Observe(fullResult(target, s.Name, si))
		}
	}
	return reg
}

// scrape serves reg's /metrics once in the text format Prometheus asks for.
func scrape(tb testing.TB, reg *prometheus.Registry) []byte {
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("status %d", rec.Code)
	}
	return rec.Body.Bytes()
}

func countLines(b []byte, filter string) int {
	n := 0
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(l) > 0 && l[0] != '#' && bytes.Contains(l, []byte(filter)) {
			n++
		}
	}
	return n
}

// TestSeriesBudget counts the series one target and scenario adds, in each bucket mode, and
// checks the figures docs/scaling.md gives operators.
func TestSeriesBudget(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "scaling.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []ClassicBuckets{ClassicBucketsFull, ClassicBucketsReduced, ClassicBucketsNone} {
		one := countLines(scrape(t, fleet(mode, 1)), `scenario="chatbot"`)
		// Only the series labelled with the scenario and the target count: thresholds are per scenario.
		per := countLines(scrape(t, fleet(mode, 2)), `scenario="chatbot",target="vllm-01"`)
		t.Logf("%s: %d series per target and scenario (%d with the scenario's thresholds)", mode, per, one)
		if want := seriesBudget[mode]; per != want {
			t.Errorf("%s: %d series per target and scenario, want %d", mode, per, want)
		}
		if row := fmt.Sprintf("| `%s` | %d |", mode, per); !strings.Contains(string(doc), row) {
			t.Errorf("docs/scaling.md lacks the row %q", row)
		}
	}
}

// BenchmarkScrapeFleet serves /metrics for 20 targets × 9 scenarios in each bucket mode and
// reports its size and series count alongside the time per scrape.
//
//	go test -run '^$' -bench ScrapeFleet -count 5 ./collector/
func BenchmarkScrapeFleet(b *testing.B) {
	for _, mode := range []ClassicBuckets{ClassicBucketsFull, ClassicBucketsReduced, ClassicBucketsNone} {
		b.Run(string(mode), func(b *testing.B) {
			reg := fleet(mode, 20)
			body := scrape(b, reg)
			b.ResetTimer()
			for b.Loop() {
				scrape(b, reg)
			}
			b.ReportMetric(float64(len(body)), "bytes/scrape")
			b.ReportMetric(float64(countLines(body, "")), "series")
		})
	}
}
