package engine

import (
	"reflect"
	"strings"
	"testing"
)

// A fakeserve page and a vLLM page that say the same things, each in its
// engine's names and units.
const (
	fakeservePage = `# TYPE fakeserve_active_requests gauge
fakeserve_active_requests{pool="a"} 3
fakeserve_active_requests{pool="b"} 2
# TYPE fakeserve_queue_depth gauge
fakeserve_queue_depth{pool="a"} 4
fakeserve_queue_depth{pool="b"} 1
# TYPE fakeserve_kv_used_percent gauge
fakeserve_kv_used_percent{pool="a"} 30
fakeserve_kv_used_percent{pool="b"} 50
# TYPE fakeserve_output_tokens_total counter
fakeserve_output_tokens_total 5000
# TYPE fakeserve_input_tokens_total counter
fakeserve_input_tokens_total 20000
# TYPE fakeserve_queue_wait_seconds histogram
fakeserve_queue_wait_seconds_bucket{le="0.1"} 30
fakeserve_queue_wait_seconds_bucket{le="1"} 38
fakeserve_queue_wait_seconds_bucket{le="+Inf"} 40
fakeserve_queue_wait_seconds_sum 6
fakeserve_queue_wait_seconds_count 40
# TYPE fakeserve_ttft_seconds histogram
fakeserve_ttft_seconds_bucket{le="0.1"} 10
fakeserve_ttft_seconds_bucket{le="0.5"} 35
fakeserve_ttft_seconds_bucket{le="+Inf"} 40
fakeserve_ttft_seconds_sum 9
fakeserve_ttft_seconds_count 40
# TYPE fakeserve_token_gap_milliseconds histogram
fakeserve_token_gap_milliseconds_bucket{le="10"} 1000
fakeserve_token_gap_milliseconds_bucket{le="25"} 4500
fakeserve_token_gap_milliseconds_bucket{le="+Inf"} 4960
fakeserve_token_gap_milliseconds_sum 74400
fakeserve_token_gap_milliseconds_count 4960
# TYPE fakeserve_request_seconds histogram
fakeserve_request_seconds_bucket{le="+Inf"} 40
fakeserve_request_seconds_sum 120
fakeserve_request_seconds_count 40
# TYPE fakeserve_prefix_lookups_total counter
fakeserve_prefix_lookups_total 20000
# TYPE fakeserve_prefix_hits_total counter
fakeserve_prefix_hits_total 8000
# TYPE fakeserve_evictions_total counter
fakeserve_evictions_total 7
# TYPE fakeserve_build_info gauge
fakeserve_build_info{version="0.1"} 1
`
	vllmSamePage = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 3
vllm:num_requests_running{engine="1"} 2
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0"} 4
vllm:num_requests_waiting{engine="1"} 1
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0"} 0.3
vllm:kv_cache_usage_perc{engine="1"} 0.5
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total 5000
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total 20000
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{le="0.1"} 30
vllm:request_queue_time_seconds_bucket{le="1"} 38
vllm:request_queue_time_seconds_bucket{le="+Inf"} 40
vllm:request_queue_time_seconds_sum 6
vllm:request_queue_time_seconds_count 40
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1"} 10
vllm:time_to_first_token_seconds_bucket{le="0.5"} 35
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 40
vllm:time_to_first_token_seconds_sum 9
vllm:time_to_first_token_seconds_count 40
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{le="0.01"} 1000
vllm:inter_token_latency_seconds_bucket{le="0.025"} 4500
vllm:inter_token_latency_seconds_bucket{le="+Inf"} 4960
vllm:inter_token_latency_seconds_sum 74.4
vllm:inter_token_latency_seconds_count 4960
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 40
vllm:e2e_request_latency_seconds_sum 120
vllm:e2e_request_latency_seconds_count 40
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total 20000
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total 8000
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total 7
`
)

// TestFakeserveReadLikeVLLM: the one reader, given only fakeserve's table,
// turns its page into the Snapshot a vLLM page saying the same fills.
func TestFakeserveReadLikeVLLM(t *testing.T) {
	fake, err := Parse(strings.NewReader(fakeservePage))
	if err != nil {
		t.Fatalf("Parse(fakeserve page): %v", err)
	}
	vllm, err := Parse(strings.NewReader(vllmSamePage))
	if err != nil {
		t.Fatalf("Parse(vLLM page): %v", err)
	}
	if fake.Flavor != "fakeserve" || vllm.Flavor != "vllm" {
		t.Fatalf("flavors %q and %q, want fakeserve and vllm", fake.Flavor, vllm.Flavor)
	}
	// The fields a test could forget are compared too: all of them.
	fake.Flavor = vllm.Flavor
	if !reflect.DeepEqual(fake, vllm) {
		t.Errorf("fakeserve page read as\n%s\nthe vLLM page as\n%s", dumpSnapshot(fake, nil), dumpSnapshot(vllm, nil))
	}
	// And what each says is what the pages hold, not two equal mistakes.
	for _, c := range []struct {
		name      string
		got, want float64
		has       bool
	}{
		{"Running", vllm.Running, 5, vllm.HasQueue && vllm.Series == 2},
		{"Waiting", vllm.Waiting, 5, true},
		{"KVCacheUsage", vllm.KVCacheUsage, 0.4, vllm.HasKVCache},
		{"GenerationTokens", vllm.GenerationTokens, 5000, vllm.HasTokens},
		{"PromptTokens", vllm.PromptTokens, 20000, true},
		{"QueueTimeSum", vllm.QueueTimeSum, 6, vllm.HasQueueTime && vllm.QueueTimeCount == 40},
		{"TTFTSum", vllm.TTFTSum, 9, vllm.HasTTFT && vllm.TTFTCount == 40},
		{"ITLSum", vllm.ITLSum, 74.4, vllm.HasITL && vllm.ITLCount == 4960},
		{"RequestsFinished", vllm.RequestsFinished, 40, vllm.HasRequestsFinished},
		{"PrefixCacheHits", vllm.PrefixCacheHits, 8000, vllm.HasPrefixCache && vllm.PrefixCacheQueries == 20000},
		{"Preemptions", vllm.Preemptions, 7, vllm.HasPreemptions},
	} {
		if !near(c.got, c.want) || !c.has {
			t.Errorf("%s = %v (present %v), want %v", c.name, c.got, c.has, c.want)
		}
	}
	if h := vllm.Hists; h == nil || h.ITL == nil || h.ITL.Buckets[0.025] != 4500 || h.TTFT == nil || h.Phase[PhaseQueue].Count != 40 {
		t.Errorf("histograms by value: %+v, want ITL, TTFT and the queue phase", h)
	}
}

// TestFakeserveDetection: a fakeserve page is recognised by its own
// families, and a family it does not read is left out by the page filter.
func TestFakeserveDetection(t *testing.T) {
	s, err := Parse(strings.NewReader("# TYPE fakeserve_build_info gauge\nfakeserve_build_info 1\n"))
	if err != nil || s.Flavor != "fakeserve" || s.HasQueue {
		t.Errorf("a page with only fakeserve_build_info: flavor %q, HasQueue %v, err %v; want fakeserve, false, nil", s.Flavor, s.HasQueue, err)
	}
	if wantedName("fakeserve_build_info") || !wantedName("fakeserve_ttft_seconds_bucket") {
		t.Errorf("page filter: keeps fakeserve_build_info %v, fakeserve_ttft_seconds_bucket %v; want false, true",
			wantedName("fakeserve_build_info"), wantedName("fakeserve_ttft_seconds_bucket"))
	}
	if _, err := Parse(strings.NewReader("# TYPE fakeserved_queue_depth gauge\nfakeserved_queue_depth 1\n")); err == nil {
		t.Errorf("fakeserved_queue_depth read as fakeserve's: the prefix must match whole")
	}
}
