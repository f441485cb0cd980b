package workload

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestParseLengthHistogramsByEngine: the live mix reads the length
// histograms its engine's table names, and says why where there are none.
func TestParseLengthHistogramsByEngine(t *testing.T) {
	const sglang = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 1
# TYPE sglang:prompt_tokens_histogram histogram
sglang:prompt_tokens_histogram_bucket{model_name="m",le="100"} 2
sglang:prompt_tokens_histogram_bucket{model_name="m",le="1000"} 7
sglang:prompt_tokens_histogram_bucket{model_name="m",le="+Inf"} 9
sglang:prompt_tokens_histogram_sum{model_name="m"} 9000
sglang:prompt_tokens_histogram_count{model_name="m"} 9
# TYPE sglang:generation_tokens_histogram histogram
sglang:generation_tokens_histogram_bucket{model_name="m",le="100"} 6
sglang:generation_tokens_histogram_bucket{model_name="m",le="1000"} 9
sglang:generation_tokens_histogram_bucket{model_name="m",le="+Inf"} 9
sglang:generation_tokens_histogram_sum{model_name="m"} 900
sglang:generation_tokens_histogram_count{model_name="m"} 9
`
	bounds := []float64{100, 1000, math.Inf(1)}
	for _, tc := range []struct {
		name           string
		page           string
		prompt, output CumHist
		err            string
	}{
		{"sglang", sglang, CumHist{bounds, []float64{2, 7, 9}}, CumHist{bounds, []float64{6, 9, 9}}, ""},
		{"sglang without --collect-tokens-histogram", "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1\n",
			CumHist{}, CumHist{}, "no histogram sglang:prompt_tokens_histogram in the engine's metrics (SGLang exports it when started with --collect-tokens-histogram)"},
		{"llama.cpp server", "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 10\n",
			CumHist{}, CumHist{}, "llama.cpp server exports token counters only"},
		{"vllm without the histograms", "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n",
			CumHist{}, CumHist{}, "no histogram vllm:request_prompt_tokens in the engine's metrics (vLLM exports it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, o, err := ParseLengthHistograms(strings.NewReader(tc.page))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p, tc.prompt) || !reflect.DeepEqual(o, tc.output) {
				t.Errorf("prompt %+v output %+v, want %+v and %+v", p, o, tc.prompt, tc.output)
			}
		})
	}
}
