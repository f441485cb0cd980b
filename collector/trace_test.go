package collector

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/internal/workload"
	"github.com/slaprobe/slaprobe/prober"
)

// TestTraceMetricsByClass: probes of a trace-shaped scenario against the simulated engine are
// counted per length class, judged against their class's TTFT threshold, and the draws, the
// thresholds and the trace's shared share are exported.
func TestTraceMetricsByClass(t *testing.T) {
	cfg := vllmsim.DefaultConfig()
	cfg.MaxModelLen = 32768
	cfg.PrefillOverhead, cfg.PrefillTokensPerSecond, cfg.PrefillQuadratic = time.Millisecond, 1e6, 0
	cfg.DecodeBase, cfg.DecodePerSeq, cfg.DecodePerKVToken, cfg.EOSMeanTokens = time.Millisecond, 0, 0, 0
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(e.Close)

	var b bytes.Buffer
	if err := workload.Generate(&b, workload.FormatMooncake, workload.GenOptions{Requests: 40, Seed: 3, InputMin: 300, InputMax: 12000,
		OutputMin: 2, OutputMax: 4, Prefixes: 1, PrefixBlocks: 2, SharedProb: 0.5}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	os.WriteFile(path, b.Bytes(), 0o600)
	shape, err := workload.Load("traffic", workload.Config{Spec: workload.Spec{Path: path, Format: workload.FormatMooncake},
		Order: workload.OrderSequential, TTFTByClass: map[string]model.Duration{"1k": model.Duration(time.Nanosecond)}})
	if err != nil {
		t.Fatal(err)
	}
	s := prober.Scenario{Name: "traffic", Family: prober.FamilyCustom, InputTokens: 1000, OutputTokens: 3, Timeout: 30 * time.Second, Shape: shape}
	m := NewTraceMetrics(func() []prober.Scenario { return []prober.Scenario{s} })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)

	target := prober.Target{Name: "sim", API: prober.APIChat, BaseURL: srv.URL, Model: cfg.ModelName}
	p := prober.New(slog.New(slog.DiscardHandler), prober.SystemClock{})
	classes := map[string]int{}
	for range 40 {
		m.BeforeProbe(context.Background(), target, s)
		res := p.Probe(context.Background(), target, "", s)
		if res.Kind != prober.KindSuccess || res.LengthClass == "" {
			t.Fatalf("probe: %s %s %v class %q", res.Kind, res.Reason, res.Err, res.LengthClass)
		}
		classes[res.LengthClass]++
		m.AfterProbe(&res)
	}
	if len(classes) < 2 {
		t.Fatalf("classes drawn %v; the test needs at least two", classes)
	}
	for class, n := range classes {
		result := "good"
		if class == "1k" {
			result = "slow" // its threshold is 1 ns
		}
		if got := testutil.ToFloat64(m.probes.WithLabelValues("sim", "traffic", class, result)); int(got) != n {
			t.Errorf("slaprobe_trace_probes_total{length_class=%q, result=%q} = %v; want %d", class, result, got, n)
		}
	}
	var out strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		out.WriteString(mf.String())
	}
	for _, want := range []string{`name:"slaprobe_trace_ttft_seconds"`, `name:"slaprobe_trace_draws_total"`, `value:"sent"`,
		`name:"slaprobe_trace_ttft_threshold_seconds"`, `name:"slaprobe_trace_shared_prefix_ratio"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("gathered metrics lack %s", want)
		}
	}
	if n := testutil.CollectAndCount(m, "slaprobe_trace_draws_total"); n != 6 {
		t.Errorf("%d draw outcome series; want 6", n)
	}
}
