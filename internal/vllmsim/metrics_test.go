package vllmsim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestMetricsExposition(t *testing.T) {
	tests := []struct {
		name    string
		legacy  bool
		present []string
		absent  []string
	}{
		{
			name:    "v1 names",
			present: []string{"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"},
			absent:  []string{"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"},
		},
		{
			name:    "legacy names",
			legacy:  true,
			present: []string{"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"},
			absent:  []string{"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"},
		},
	}
	common := map[string]string{ // name → type
		"vllm:num_requests_running":           "gauge",
		"vllm:num_requests_waiting":           "gauge",
		"vllm:prompt_tokens_total":            "counter",
		"vllm:generation_tokens_total":        "counter",
		"vllm:num_preemptions_total":          "counter",
		"vllm:request_success_total":          "counter",
		"vllm:prefix_cache_queries_total":     "counter",
		"vllm:prefix_cache_hits_total":        "counter",
		"vllm:time_to_first_token_seconds":    "histogram",
		"vllm:e2e_request_latency_seconds":    "histogram",
		"vllm:request_queue_time_seconds":     "histogram",
		"vllm:request_prefill_time_seconds":   "histogram",
		"vllm:request_decode_time_seconds":    "histogram",
		"vllm:num_requests_waiting_by_reason": "gauge",
		"vllm:engine_sleep_state":             "gauge",
		"vllm:prompt_tokens_cached_total":     "counter",
		"vllm:prompt_tokens_by_source_total":  "counter",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fastConfig()
			cfg.LegacyMetricNames = tt.legacy
			ts := start(t, cfg)
			res := ts.post(t, "/v1/chat/completions", chatBody("metrics", 20, nil), nil)
			tr, _ := ts.e.Trace(res.id())

			status, body := ts.get(t, "/metrics")
			if status != 200 {
				t.Fatalf("/metrics: %d", status)
			}
			for name, typ := range common {
				if !strings.Contains(body, "# TYPE "+name+" "+typ+"\n") {
					t.Errorf("/metrics lacks %s %s", typ, name)
				}
			}
			for _, name := range tt.present {
				if !strings.Contains(body, "# TYPE "+name+" ") {
					t.Errorf("/metrics lacks %s", name)
				}
			}
			for _, name := range tt.absent {
				if strings.Contains(body, name) {
					t.Errorf("/metrics has %s", name)
				}
			}
			labels := `engine="0",model_name="` + cfg.ModelName + `"`
			for _, line := range []string{
				`vllm:generation_tokens_total{` + labels + `} 20`,
				`vllm:request_success_total{engine="0",finished_reason="length",model_name="` + cfg.ModelName + `"} 1`,
				`vllm:request_success_total{engine="0",finished_reason="stop",model_name="` + cfg.ModelName + `"} 0`,
				`vllm:time_to_first_token_seconds_count{` + labels + `} 1`,
			} {
				if !strings.Contains(body, line+"\n") {
					t.Errorf("/metrics lacks line %q", line)
				}
			}
			for _, line := range []string{
				`vllm:num_requests_waiting_by_reason{` + labels + `,reason="capacity"} 0`,
				`vllm:num_requests_waiting_by_reason{` + labels + `,reason="deferred"} 0`,
				`vllm:engine_sleep_state{` + labels + `,sleep_state="awake"} 1`,
				`vllm:engine_sleep_state{` + labels + `,sleep_state="discard_all"} 0`,
				`vllm:engine_sleep_state{` + labels + `,sleep_state="weights_offloaded"} 0`,
				fmt.Sprintf(`vllm:prompt_tokens_by_source_total{%s,source="local_compute"} %d`, labels, tr.PromptTokens-tr.CachedTokens),
				fmt.Sprintf(`vllm:prompt_tokens_by_source_total{%s,source="local_cache_hit"} %d`, labels, tr.CachedTokens),
				`vllm:prompt_tokens_by_source_total{` + labels + `,source="external_kv_transfer"} 0`,
			} {
				if !strings.Contains(body, line+"\n") {
					t.Errorf("/metrics lacks line %q", line)
				}
			}
			if v, _ := metricValue(t, ts.e, "vllm:prompt_tokens_total", nil); int(v) != tr.PromptTokens {
				t.Errorf("prompt_tokens_total = %v, want %d", v, tr.PromptTokens)
			}
			itlName := tt.present[1]
			// One ITL sample per engine output after the first.
			if n, _ := metricValue(t, ts.e, itlName, nil); int(n) != len(tr.Chunks)-1 && int(n) != 19 {
				t.Errorf("%s count = %v, want 19", itlName, n)
			}

			// Exact exposition of the counters and gauges after one request.
			prompt := cfg.ChatPromptTokens([]ChatMessage{{Role: "user", Content: "metrics"}})
			want := fmt.Sprintf(`
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{%[1]s} 20
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{%[1]s} %[2]d
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{%[1]s} %[2]d
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{%[1]s} 0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="abort",model_name="%[3]s"} 0
vllm:request_success_total{engine="0",finished_reason="length",model_name="%[3]s"} 1
vllm:request_success_total{engine="0",finished_reason="stop",model_name="%[3]s"} 0
`, labels, prompt, cfg.ModelName)
			if err := testutil.GatherAndCompare(ts.e.Gatherer(), strings.NewReader(want),
				"vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:prefix_cache_queries_total",
				"vllm:num_requests_running", "vllm:request_success_total"); err != nil {
				t.Error(err)
			}
			if n := testutil.CollectAndCount(ts.e.m.ttft); n != 1 {
				t.Errorf("TTFT histogram has %d series, want 1", n)
			}

			mfs, err := ts.e.Gatherer().Gather()
			if err != nil {
				t.Fatal(err)
			}
			problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				// vLLM's names contain colons: that is its contract, not ours to change.
				if strings.Contains(p.Text, "should not contain ':'") {
					continue
				}
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}
