package engine

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestRegisteredFlavors checks the tables the package registers: their
// order of detection, and that the page filter keeps each family they read.
func TestRegisteredFlavors(t *testing.T) {
	var order []string
	for _, f := range flavors {
		order = append(order, f.name)
		for _, r := range f.rows {
			for _, n := range r.names {
				// The live mix's histograms are read by internal/workload
				// from its own read of the page, not by Parse.
				if want := r.signal.kind() != kindLength; wantedName(n) != want || wantedName(n+"_bucket") != want {
					t.Errorf("%s: family %s kept by the page filter: %v, want %v", f.name, n, wantedName(n), want)
				}
			}
		}
	}
	if got := strings.Join(order, " "); !strings.HasPrefix(got, "vllm sglang llamacpp") {
		t.Errorf("flavors detected in the order %q, want vllm sglang llamacpp first", got)
	}
}

// TestRegisterRefuses checks that a wrong table stops the program while it
// initialises, naming what is wrong.
func TestRegisterRefuses(t *testing.T) {
	ok := row{signal: sigRunning, names: names{"x_running"}}
	for _, tc := range []struct {
		name string
		f    flavor
		want string
	}{
		{"no prefix", flavor{name: "x", rows: []row{ok}}, "needs a name and a prefix"},
		{"name taken", flavor{name: "vllm", prefix: "x_", rows: []row{ok}}, "taken by flavor"},
		{"prefix overlaps", flavor{name: "x", prefix: "vllm:x", rows: []row{ok}}, "taken by flavor \"vllm\""},
		{"signal twice", flavor{name: "x", prefix: "x_", rows: []row{ok, ok}}, "read by two rows"},
		{"no family", flavor{name: "x", prefix: "x_", rows: []row{{signal: sigWaiting}}}, "names no family"},
		{"outside prefix", flavor{name: "x", prefix: "x_", rows: []row{{signal: sigWaiting, names: names{"y_waiting"}}}}, "does not start with the prefix"},
		{"signal out of range", flavor{name: "x", prefix: "x_", rows: []row{{signal: numSignals, names: names{"x_a"}}}}, "out of range"},
		{"negative div", flavor{name: "x", prefix: "x_", rows: []row{{signal: sigTTFT, names: names{"x_a"}, div: -1}}}, "div -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(flavors)
			defer func() {
				r, _ := recover().(string)
				if !strings.Contains(r, tc.want) {
					t.Errorf("register panicked with %q, want one containing %q", r, tc.want)
				}
				if len(flavors) != n {
					t.Errorf("a refused table was registered")
				}
			}()
			register(tc.f)
		})
	}
}

// TestReadRowOptions reads a page with a table that is not registered,
// one option of a row at a time.
func TestReadRowOptions(t *testing.T) {
	f := &flavor{
		name: "t", prefix: "t_",
		rows: []row{
			{signal: sigRunning, names: names{"t_running"}, where: label{"kind", "chat"}},
			{signal: sigPreemptions, names: names{"t_preempted_total"}, zeroIfAbsent: true},
			{signal: sigTTFT, names: names{"t_ttft_milliseconds"}, div: 1000},
			{signal: sigKVCache, names: names{"t_kv_percent"}, div: 100},
			{signal: sigITL, names: names{"t_itl_seconds"}},
		},
		histKeep: func(m *dto.Metric) bool { v, ok := labelValue(m, "rank"); return !ok || v == "0" },
	}
	page := `# TYPE t_running gauge
t_running{kind="chat"} 3
t_running{kind="embed"} 40
# TYPE t_ttft_milliseconds histogram
t_ttft_milliseconds_bucket{le="5"} 1
t_ttft_milliseconds_bucket{le="250"} 3
t_ttft_milliseconds_bucket{le="+Inf"} 4
t_ttft_milliseconds_sum 1500
t_ttft_milliseconds_count 4
# TYPE t_kv_percent gauge
t_kv_percent 40
# TYPE t_itl_seconds histogram
t_itl_seconds_bucket{rank="0",le="0.1"} 5
t_itl_seconds_bucket{rank="0",le="+Inf"} 6
t_itl_seconds_sum{rank="0"} 0.5
t_itl_seconds_count{rank="0"} 6
t_itl_seconds_bucket{rank="1",le="0.1"} 5
t_itl_seconds_bucket{rank="1",le="+Inf"} 6
t_itl_seconds_sum{rank="1"} 0.5
t_itl_seconds_count{rank="1"} 6
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	s := f.read(fams)
	if s.Running != 3 || s.Series != 1 || !s.HasQueue {
		t.Errorf("where kind=chat: Running %v over %d series (HasQueue %v), want 3 over 1", s.Running, s.Series, s.HasQueue)
	}
	if s.Preemptions != 0 || !s.HasPreemptions {
		t.Errorf("zeroIfAbsent: Preemptions %v, HasPreemptions %v; want 0, true", s.Preemptions, s.HasPreemptions)
	}
	if !near(s.TTFTSum, 1.5) || s.TTFTCount != 4 || !s.HasTTFT {
		t.Errorf("div 1000: TTFTSum %v, TTFTCount %v; want 1.5 s over 4", s.TTFTSum, s.TTFTCount)
	}
	if h := s.Hists; h == nil || h.TTFT == nil {
		t.Fatalf("no TTFT histogram by value")
	}
	if h := *s.Hists.TTFT; !near(h.Sum, 1.5) || h.Count != 4 || len(h.Buckets) != 2 || h.Buckets[0.005] != 1 || h.Buckets[0.25] != 3 {
		t.Errorf("div 1000: TTFT histogram %+v, want sum 1.5, buckets {0.005: 1, 0.25: 3}", h)
	}
	if !near(s.KVCacheUsage, 0.4) {
		t.Errorf("div 100: KVCacheUsage %v, want 0.4", s.KVCacheUsage)
	}
	if s.ITLCount != 12 {
		t.Errorf("histKeep leaves the counts alone: ITLCount %v, want 12", s.ITLCount)
	}
	if h := s.Hists.ITL; h == nil || h.Count != 6 {
		t.Errorf("histKeep rank 0: ITL histogram %+v, want count 6", h)
	}
}

// TestLlamaCppQueueAndTokens checks llama.cpp's hook: the queue is known
// only with both gauges, tokens only with both counters.
func TestLlamaCppQueueAndTokens(t *testing.T) {
	for _, tc := range []struct {
		name             string
		page             string
		queue, tokens    bool
		prompt, bySource bool
		promptTokens     float64
	}{
		{"all", "llamacpp:requests_processing 1\nllamacpp:requests_deferred 2\nllamacpp:tokens_predicted_total 5\nllamacpp:prompt_tokens_total 7\nllamacpp:prompt_tokens_cached_total 3\n",
			true, true, true, true, 10},
		{"no deferred", "llamacpp:requests_processing 1\nllamacpp:tokens_predicted_total 5\nllamacpp:prompt_tokens_total 7\n",
			false, true, true, false, 7},
		{"no prompt tokens", "llamacpp:requests_processing 1\nllamacpp:requests_deferred 2\nllamacpp:tokens_predicted_total 5\nllamacpp:prompt_tokens_cached_total 3\n",
			true, false, false, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(strings.NewReader(tc.page))
			if err != nil {
				t.Fatal(err)
			}
			if s.Flavor != "llamacpp" || s.HasQueue != tc.queue || s.HasTokens != tc.tokens || s.HasPromptBySource != tc.bySource || s.PromptTokens != tc.promptTokens {
				t.Errorf("flavor %q HasQueue %v HasTokens %v HasPromptBySource %v PromptTokens %v; want llamacpp %v %v %v %v",
					s.Flavor, s.HasQueue, s.HasTokens, s.HasPromptBySource, s.PromptTokens, tc.queue, tc.tokens, tc.bySource, tc.promptTokens)
			}
		})
	}
}

// TestLengthFamilies: the live length mix's families by engine, and why
// an engine has none.
func TestLengthFamilies(t *testing.T) {
	for _, tc := range []struct {
		name, page     string
		prompt, output string
		why, err       string
	}{
		{"vllm", "vllm:num_requests_running 1\n", "vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vLLM exports it", ""},
		{"sglang", "sglang:num_running_reqs 1\n", "sglang:prompt_tokens_histogram", "sglang:generation_tokens_histogram", "--collect-tokens-histogram", ""},
		{"llamacpp", "llamacpp:requests_processing 1\n", "", "", "token counters only", "no length mix from a llamacpp page"},
		{"no engine: vLLM's names", "other_gauge 1\n", "vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vLLM exports it", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parser := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := parser.TextToMetricFamilies(strings.NewReader(tc.page))
			if err != nil {
				t.Fatal(err)
			}
			p, o, why, err := LengthFamilies(fams)
			first := func(ns []string) string {
				if len(ns) == 0 {
					return ""
				}
				return ns[0]
			}
			if first(p) != tc.prompt || first(o) != tc.output || !strings.Contains(why, tc.why) {
				t.Errorf("LengthFamilies = %q, %q, %q; want %q, %q, %q", p, o, why, tc.prompt, tc.output, tc.why)
			}
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
}
