package collector

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slaprobe/slaprobe/prober"
)

// seriesBudget is the number of /metrics series (text format) that one target and scenario adds
// through the probe metrics, by global.classic_histogram_buckets. docs/scaling.md states them.
var seriesBudget = map[ClassicBuckets]int{
	ClassicBucketsFull:    245,
	ClassicBucketsReduced: 160,
	ClassicBucketsNone:    69,
}

// fleetBudget is the whole exposition of BenchmarkScrapeFleet's fleet, 20 targets × every
// built-in scenario: its series and its bytes in the text format. docs/scaling.md states them.
var fleetBudget = map[ClassicBuckets]struct{ series, bytes int }{
	ClassicBucketsFull:    {63824, 7061209},
	ClassicBucketsReduced: {41724, 4589789},
	ClassicBucketsNone:    {18064, 1978869},
}

// thousands writes n with a comma every three digits, as docs/scaling.md does.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
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
		ContinuousUsage: true, ChunkTokens: []int32{1, 1, 2, 4}, PromptLengthOK: true, FirstChunkKind: prober.ChunkReasoning,
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
	h.ServeHTTP(rec, scrapeRequest())
	if rec.Code != http.StatusOK {
		tb.Fatalf("status %d", rec.Code)
	}
	return rec.Body.Bytes()
}

func scrapeRequest() *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	return req
}

// discardWriter is an http.ResponseWriter that counts the body and keeps
// none of it, as a connection does: the benchmark then measures the scrape,
// not the growth of a recorder's buffer to several megabytes.
type discardWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// cpuTime is the CPU time (user and system) the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countLines counts the samples of a text-format body that carry every one of labels
// (name="value" pairs), wherever they stand among the sample's labels.
func countLines(b []byte, labels ...string) int {
	n := 0
next:
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		for _, lb := range labels {
			if !bytes.Contains(l, []byte("{"+lb+",")) && !bytes.Contains(l, []byte(","+lb+",")) &&
				!bytes.Contains(l, []byte(","+lb+"}")) && !bytes.Contains(l, []byte("{"+lb+"}")) {
				continue next
			}
		}
		n++
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
		per := countLines(scrape(t, fleet(mode, 2)), `scenario="chatbot"`, `target="vllm-01"`)
		t.Logf("%s: %d series per target and scenario (%d with the scenario's thresholds)", mode, per, one)
		if want := seriesBudget[mode]; per != want {
			t.Errorf("%s: %d series per target and scenario, want %d", mode, per, want)
		}
		if row := fmt.Sprintf("| `%s` | %d |", mode, per); !strings.Contains(string(doc), row) {
			t.Errorf("docs/scaling.md lacks the row %q", row)
		}

		// The whole scrape of BenchmarkScrapeFleet's fleet, to the byte: its time is the
		// benchmark's to measure, its size is held here.
		body := scrape(t, fleet(mode, 20))
		want := fleetBudget[mode]
		if got := countLines(body); got != want.series || len(body) != want.bytes {
			t.Errorf("%s: 20 targets × %d scenarios scrape %d series in %d bytes, want %d in %d",
				mode, len(prober.Builtin()), got, len(body), want.series, want.bytes)
		}
		if row := fmt.Sprintf("| `%s` | %s | %s |", mode, thousands(want.series), thousands(want.bytes)); !strings.Contains(string(doc), row) {
			t.Errorf("docs/scaling.md lacks the row %q", row)
		}
	}
}

// BenchmarkScrapeFleet serves /metrics for 20 targets × every built-in scenario in each bucket
// mode and reports its size and series count alongside the time per scrape. The body goes to a
// writer that only counts it. cpu-ms/scrape is the process's CPU time (user and system, the
// garbage collector's included) per scrape: on a shared machine it moves far less than ns/op,
// which also counts the time the scrape waited for a core.
//
//	go test -run '^$' -bench ScrapeFleet -benchmem -count 5 ./collector/
func BenchmarkScrapeFleet(b *testing.B) {
	for _, mode := range []ClassicBuckets{ClassicBucketsFull, ClassicBucketsReduced, ClassicBucketsNone} {
		b.Run(string(mode), func(b *testing.B) {
			reg := fleet(mode, 20)
			body := scrape(b, reg)
			h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			req := scrapeRequest()
			w := &discardWriter{header: http.Header{}}
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				w.n = 0
				h.ServeHTTP(w, req)
			}
			b.StopTimer()
			if w.n != len(body) {
				b.Fatalf("scrape of %d bytes, want %d", w.n, len(body))
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/scrape")
			b.ReportMetric(float64(len(body)), "bytes/scrape")
			b.ReportMetric(float64(countLines(body)), "series")
		})
	}
}
