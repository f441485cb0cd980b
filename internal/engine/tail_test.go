package engine

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// tailWant is what a fixture must give of the signals that explain a slow tail.
type tailWant struct {
	flavor                           string
	running, waiting                 float64
	hasQueue                         bool
	byReason                         bool
	capacity, deferred, depthWaiting float64
	preempt                          bool
	preemptions                      float64
	bySource, kvSource               bool
	computed, cacheHit, kvTransfer   float64
	tiers                            map[string]float64
	sleepState, sleeping             bool
	admission                        bool
	admissions                       float64
	kvFails                          bool
	kvFailures                       float64
	spec                             bool
	draft, accepted                  float64
	specRate                         bool
	rate                             float64
	promptTokens, genTokens          float64
	kvCache                          bool
	kvUsage                          float64
	phases                           map[string]Histogram
	ttft, itl, kvXfer                *Histogram
}

func TestParseTailFixtures(t *testing.T) {
	sglPhases := map[string]Histogram{
		// tp_rank 1 repeats rank 0's requests: only rank 0 is read.
		PhaseQueue:   {Count: 100, Sum: 9, Buckets: map[float64]uint64{0.1: 70, 1: 95}},
		PhasePrefill: {Count: 100, Sum: 4, Buckets: map[float64]uint64{0.05: 50, 0.5: 95, 5: 100}},
		PhaseDecode:  {Count: 100, Sum: 210, Buckets: map[float64]uint64{0.05: 0, 0.5: 10, 5: 60}},
	}
	sglTTFT := &Histogram{Count: 100, Sum: 30, Buckets: map[float64]uint64{0.1: 20, 0.5: 80, 1: 95}}
	sglITL := &Histogram{Count: 20000, Sum: 260, Buckets: map[float64]uint64{0.01: 5000, 0.02: 15000, 0.05: 19800}}
	sglTiers := map[string]float64{"device": 12000, "host": 3000, "storage": 1000}
	for _, tc := range []struct {
		file string
		want tailWant
	}{
		{"vllm_2026.txt", tailWant{
			flavor: "vllm", running: 8, waiting: 6, hasQueue: true,
			byReason: true, capacity: 4, deferred: 2, depthWaiting: 4,
			preempt: true, preemptions: 12,
			bySource: true, kvSource: true, computed: 50000, cacheHit: 40000, kvTransfer: 10000,
			sleepState: true, admission: true, admissions: 3, kvFails: true, kvFailures: 3,
			spec: true, draft: 6000, accepted: 3000,
			promptTokens: 100000, genTokens: 50000, kvCache: true, kvUsage: 0.7,
			phases: map[string]Histogram{
				PhaseQueue:   {Count: 100, Sum: 20, Buckets: map[float64]uint64{0.1: 50, 1: 93}},
				PhasePrefill: {Count: 100, Sum: 10, Buckets: map[float64]uint64{0.1: 70, 1: 97}},
				PhaseDecode:  {Count: 100, Sum: 300, Buckets: map[float64]uint64{1: 16, 5: 86}},
			},
			ttft:   &Histogram{Count: 100, Sum: 36, Buckets: map[float64]uint64{0.1: 15, 0.5: 70, 1: 93}},
			itl:    &Histogram{Count: 50000, Sum: 1000, Buckets: map[float64]uint64{0.01: 1500, 0.025: 35000, 0.05: 48500}},
			kvXfer: &Histogram{Count: 150, Sum: 1.2, Buckets: map[float64]uint64{0.001: 5, 0.01: 130, 0.1: 149}},
		}},
		// A page of 2025: no split, no by-source, no sleep state; the
		// preemption counter at 0 is still read.
		{"vllm_current.txt", tailWant{
			flavor: "vllm", running: 8, waiting: 2, hasQueue: true, depthWaiting: 2,
			preempt: true, promptTokens: 614400, genTokens: 153600, kvCache: true, kvUsage: 0.375,
			phases: map[string]Histogram{PhaseQueue: {Count: 600, Sum: 15}},
			ttft:   &Histogram{Count: 600, Sum: 90}, itl: &Histogram{Count: 153000, Sum: 2295},
		}},
		{"sglang_2026.txt", tailWant{
			flavor: "sglang", running: 6, waiting: 3, hasQueue: true, depthWaiting: 3,
			preempt: true, preemptions: 9,
			bySource: true, computed: 34000, cacheHit: 16000, tiers: sglTiers,
			specRate: true, rate: 0.55,
			promptTokens: 50000, genTokens: 20000, kvCache: true, kvUsage: 0.4,
			phases: sglPhases, ttft: sglTTFT, itl: sglITL,
		}},
		// Before the first retraction SGLang has no retraction counter: 0.
		{"sglang_2026_no_retractions.txt", tailWant{
			flavor: "sglang", running: 6, waiting: 3, hasQueue: true, depthWaiting: 3,
			preempt: true, preemptions: 0,
			bySource: true, computed: 34000, cacheHit: 16000, tiers: sglTiers,
			specRate: true, rate: 0.55,
			promptTokens: 50000, genTokens: 20000, kvCache: true, kvUsage: 0.4,
			phases: sglPhases, ttft: sglTTFT, itl: sglITL,
		}},
		// llama.cpp's prompt_tokens_total excludes cached tokens; its
		// deferred requests are not split by reason.
		{"llamacpp.txt", tailWant{
			flavor: "llamacpp", running: 2, waiting: 1, hasQueue: true, depthWaiting: 1,
			bySource: true, computed: 7000, cacheHit: 3000,
			spec: true, draft: 2000, accepted: 1200,
			promptTokens: 10000, genTokens: 4000,
		}},
		{"llamacpp_old.txt", tailWant{
			flavor: "llamacpp", running: 2, waiting: 1, hasQueue: true, depthWaiting: 1,
			promptTokens: 7000, genTokens: 4000, kvCache: true, kvUsage: 0.25,
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s := parseFile(t, filepath.Join("testdata", tc.file))
			checkTail(t, s, tc.want)
		})
	}
}

func checkTail(t *testing.T, s Snapshot, w tailWant) {
	t.Helper()
	if s.Flavor != w.flavor {
		t.Errorf("Flavor = %q, want %q", s.Flavor, w.flavor)
	}
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"Running", s.Running, w.running}, {"Waiting", s.Waiting, w.waiting},
		{"WaitingCapacity", s.WaitingCapacity, w.capacity}, {"WaitingDeferred", s.WaitingDeferred, w.deferred},
		{"DepthWaiting", s.DepthWaiting(), w.depthWaiting},
		{"Preemptions", s.Preemptions, w.preemptions},
		{"PromptComputed", s.PromptComputed, w.computed}, {"PromptCacheHit", s.PromptCacheHit, w.cacheHit},
		{"PromptKVTransfer", s.PromptKVTransfer, w.kvTransfer},
		{"AdmissionRejections", s.AdmissionRejections, w.admissions}, {"KVTransferFailures", s.KVTransferFailures, w.kvFailures},
		{"SpecDraftTokens", s.SpecDraftTokens, w.draft}, {"SpecAcceptedTokens", s.SpecAcceptedTokens, w.accepted},
		{"SpecAcceptRate", s.SpecAcceptRate, w.rate},
		{"PromptTokens", s.PromptTokens, w.promptTokens}, {"GenerationTokens", s.GenerationTokens, w.genTokens},
		{"KVCacheUsage", s.KVCacheUsage, w.kvUsage},
	} {
		if !near(x.got, x.want) {
			t.Errorf("%s = %v, want %v", x.name, x.got, x.want)
		}
	}
	for _, b := range []struct {
		name      string
		got, want bool
	}{
		{"HasQueue", s.HasQueue, w.hasQueue}, {"HasWaitingByReason", s.HasWaitingByReason, w.byReason},
		{"HasPreemptions", s.HasPreemptions, w.preempt},
		{"HasPromptBySource", s.HasPromptBySource, w.bySource}, {"HasPromptKVTransfer", s.HasPromptKVTransfer, w.kvSource},
		{"HasSleepState", s.HasSleepState, w.sleepState}, {"Sleeping", s.Sleeping, w.sleeping},
		{"HasAdmissionRejections", s.HasAdmissionRejections, w.admission},
		{"HasKVTransferFailures", s.HasKVTransferFailures, w.kvFails},
		{"HasSpecDecode", s.HasSpecDecode, w.spec}, {"HasSpecAcceptRate", s.HasSpecAcceptRate, w.specRate},
		{"HasKVCache", s.HasKVCache, w.kvCache},
	} {
		if b.got != b.want {
			t.Errorf("%s = %v, want %v", b.name, b.got, b.want)
		}
	}
	if !reflect.DeepEqual(s.CacheTokensByTier, w.tiers) {
		t.Errorf("CacheTokensByTier = %v, want %v", s.CacheTokensByTier, w.tiers)
	}
	var h Histograms
	if s.Hists != nil {
		h = *s.Hists
	}
	for _, p := range Phases {
		got, ok := h.Phase[p]
		want, wok := w.phases[p]
		if ok != wok {
			t.Errorf("phase %s present = %v, want %v", p, ok, wok)
			continue
		}
		checkHist(t, "phase "+p, &got, &want)
	}
	checkHist(t, "TTFT", h.TTFT, w.ttft)
	checkHist(t, "ITL", h.ITL, w.itl)
	checkHist(t, "KVTransfer", h.KVTransfer, w.kvXfer)
	if len(s.Notes) != 0 {
		t.Errorf("Notes = %q, want none", s.Notes)
	}
}

func checkHist(t *testing.T, name string, got, want *Histogram) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Errorf("%s = %+v, want %+v", name, got, want)
		return
	}
	if got == nil {
		return
	}
	if got.Count != want.Count || !near(got.Sum, want.Sum) {
		t.Errorf("%s count/sum = %d/%v, want %d/%v", name, got.Count, got.Sum, want.Count, want.Sum)
	}
	if want.Buckets != nil && !reflect.DeepEqual(got.Buckets, want.Buckets) {
		t.Errorf("%s buckets = %v, want %v", name, got.Buckets, want.Buckets)
	}
}

// vLLM's fallback when prompt_tokens_by_source is absent: cached tokens are
// cache hits and the rest computed; the transfer is not split out.
func TestParsePromptCachedFallback(t *testing.T) {
	page := `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running 1
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total 1000
# TYPE vllm:prompt_tokens_cached_total counter
vllm:prompt_tokens_cached_total 300
# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{engine="0",sleep_state="awake"} 1
vllm:engine_sleep_state{engine="1",sleep_state="awake"} 0
vllm:engine_sleep_state{engine="1",sleep_state="weights_offloaded"} 1
`
	s, err := Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if !s.HasPromptBySource || s.HasPromptKVTransfer || s.PromptCacheHit != 300 || s.PromptComputed != 700 {
		t.Errorf("fallback: bySource=%v kv=%v hit=%v computed=%v; want true false 300 700",
			s.HasPromptBySource, s.HasPromptKVTransfer, s.PromptCacheHit, s.PromptComputed)
	}
	if !s.HasSleepState || !s.Sleeping {
		t.Errorf("one engine with awake=0: HasSleepState=%v Sleeping=%v, want both true", s.HasSleepState, s.Sleeping)
	}
}

// histPage is a vLLM page whose TTFT histogram has, per engine, the given
// bucket bounds.
func histPage(bounds ...[]float64) string {
	var b strings.Builder
	b.WriteString("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n")
	b.WriteString("# TYPE vllm:time_to_first_token_seconds histogram\n")
	for e, bs := range bounds {
		for i, ub := range bs {
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"%d\",le=\"%g\"} %d\n", e, ub, i)
		}
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"%d\",le=\"+Inf\"} %d\n", e, len(bs))
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{engine=\"%d\"} 1\n", e)
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{engine=\"%d\"} %d\n", e, len(bs))
	}
	return b.String()
}

func TestParseHistogramLimits(t *testing.T) {
	bounds := func(n int) []float64 {
		bs := make([]float64, n)
		for i := range bs {
			bs[i] = float64(i+1) / 100
		}
		return bs
	}
	for _, tc := range []struct {
		name     string
		page     string
		wantHist bool
		note     string
	}{
		{"same bounds summed", histPage(bounds(3), bounds(3)), true, ""},
		{"at the bucket limit", histPage(bounds(MaxHistogramBuckets)), true, ""},
		{"over the bucket limit", histPage(bounds(MaxHistogramBuckets + 1)), false, "65 buckets, more than the 64"},
		{"different bounds", histPage(bounds(3), []float64{0.5, 1, 2}), false, "different bucket bounds"},
		{"different bucket counts", histPage(bounds(3), bounds(4)), false, "different bucket bounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(strings.NewReader(tc.page))
			if err != nil {
				t.Fatal(err)
			}
			has := s.Hists != nil && s.Hists.TTFT != nil
			if has != tc.wantHist {
				t.Errorf("TTFT histogram present = %v, want %v", has, tc.wantHist)
			}
			if has && tc.name == "same bounds summed" {
				if h := s.Hists.TTFT; h.Count != 6 || h.Buckets[0.03] != 4 {
					t.Errorf("summed TTFT = %+v; want count 6 and le=0.03 at 4", h)
				}
			}
			switch {
			case tc.note == "" && len(s.Notes) > 0:
				t.Errorf("Notes = %q, want none", s.Notes)
			case tc.note != "" && (len(s.Notes) != 1 || !strings.Contains(s.Notes[0], tc.note) ||
				!strings.Contains(s.Notes[0], "vllm:time_to_first_token_seconds")):
				t.Errorf("Notes = %q, want one naming the family and %q", s.Notes, tc.note)
			}
			// The scalar fields are read whatever happens to a histogram.
			if !s.HasTTFT {
				t.Error("HasTTFT = false; the sum and count must still be read")
			}
		})
	}
}

// An SGLang cache tier slaprobe does not know still counts as a cache hit,
// but does not become a label value.
func TestParseSGLangUnknownTier(t *testing.T) {
	page := readTestdata(t, "sglang_2026.txt") +
		"sglang:cached_tokens_total{cache_source=\"made_up\",model_name=\"Qwen/Qwen3-8B\"} 4000.0\n"
	s, err := Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if s.PromptCacheHit != 20000 || s.PromptComputed != 30000 {
		t.Errorf("cache_hit %v computed %v, want 20000 and 30000", s.PromptCacheHit, s.PromptComputed)
	}
	if want := map[string]float64{"device": 12000, "host": 3000, "storage": 1000}; !reflect.DeepEqual(s.CacheTokensByTier, want) {
		t.Errorf("tiers = %v, want %v", s.CacheTokensByTier, want)
	}
}
