package collector

import (
	"bytes"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// TestScrapeSnapshots checks that a histogram child's cached snapshot gives
// way to every observation, that children come and go with their vector, and
// that the exposition is what the vectors hold, scrape after scrape.
func TestScrapeSnapshots(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewProbeMetricsWith(reg, ProbeMetricsOptions{ClassicBuckets: ClassicBucketsNone})
	steps := []struct {
		name string
		do   func()
		want int // slaprobe_ttft_seconds_count of vllm-00 chatbot; -1: no such series
	}{
		{"first probe", func() { m.Observe(fullResult("vllm-00", "chatbot", 0)) }, 1},
		{"unchanged", func() {}, 1},
		{"second probe", func() { m.Observe(fullResult("vllm-00", "chatbot", 1)) }, 2},
		{"another target", func() { m.Observe(fullResult("vllm-01", "chatbot", 1)) }, 2},
		{"forgotten", func() { m.ForgetTarget("vllm-00") }, -1},
		{"back", func() { m.Observe(fullResult("vllm-00", "chatbot", 2)) }, 1},
	}
	for _, s := range steps {
		s.do()
		got := -1
		for _, l := range bytes.Split(scrape(t, reg), []byte("\n")) {
			if bytes.HasPrefix(l, []byte(`slaprobe_ttft_seconds_count{api="chat",model="m",scenario="chatbot",target="vllm-00"} `)) {
				got = int(l[len(l)-1] - '0')
			}
		}
		if got != s.want {
			t.Errorf("%s: ttft count %d, want %d", s.name, got, s.want)
		}
		// The cached exposition equals a fresh one of the same vector, exemplars
		// (OpenMetrics) and native buckets (protobuf) included.
		for _, f := range []expfmt.FormatType{expfmt.TypeTextPlain, expfmt.TypeOpenMetrics, expfmt.TypeProtoDelim} {
			want, err := testutil.CollectAndFormat(m.ttft.HistogramVec, f)
			if err != nil {
				t.Fatal(err)
			}
			got2, err := testutil.CollectAndFormat(m.ttft, f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got2, want) {
				t.Errorf("%s, %v: the cached exposition differs from the vector's:\n%s\nwant\n%s", s.name, f, got2, want)
			}
		}
	}
}

// TestScrapeConcurrent scrapes while probes are observed; run with -race.
func TestScrapeConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewProbeMetricsWith(reg, ProbeMetricsOptions{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 50 {
				m.Observe(fullResult([]string{"a", "b"}[w], []string{"chatbot", "rag"}[i%2], i))
				if i%10 == 0 {
					m.ForgetTarget("b")
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 20 {
				scrape(t, reg)
			}
		})
	}
	wg.Wait()
	want, err := testutil.CollectAndFormat(m.ttft.HistogramVec, expfmt.TypeTextPlain)
	if err != nil {
		t.Fatal(err)
	}
	got, err := testutil.CollectAndFormat(m.ttft, expfmt.TypeTextPlain)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("after concurrent probes and scrapes the cached exposition differs:\n%s\nwant\n%s", got, want)
	}
}
