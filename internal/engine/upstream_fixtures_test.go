package engine

import (
	"path/filepath"
	"sort"
	"testing"
)

// TestParseUpstreamFixtures: the fixtures written from each engine's own
// test data and metrics code (testdata/README.md names the repository, path
// and commit of each) parse, and yield the signals slaprobe reads from them:
// the first-contract fields (checkSnapshot) and the ones that explain a
// slow tail.
func TestParseUpstreamFixtures(t *testing.T) {
	type tail struct {
		preemptions, hasPreemptions      bool
		computed, cacheHit               float64
		hasPromptBySource                bool
		specDraft, specAccepted          float64
		hasSpecDecode, hasSpecAcceptRate bool
		phases                           []string
		ttftCount, itlCount              float64
		hasHists                         bool
	}
	for _, tc := range []struct {
		file string
		want Snapshot
		tail tail
	}{
		// vLLM's own test (tests/entrypoints/instrumentator/test_metrics.py):
		// 10 requests of 10 tokens: 10 TTFTs, 90 inter-token gaps.
		{"vllm_upstream_test.txt", Snapshot{
			Flavor: "vllm", HasQueue: true, Series: 1, HasKVCache: true,
			GenerationTokens: 100, PromptTokens: 110, HasTokens: true,
			QueueTimeSum: 0.002, QueueTimeCount: 10, HasQueueTime: true,
			PrefixCacheQueries: 110, HasPrefixCache: true,
			TTFTSum: 0.35, TTFTCount: 10, HasTTFT: true,
			ITLSum: 0.45, ITLCount: 90, HasITL: true,
			RequestsFinished: 10, HasRequestsFinished: true,
		}, tail{hasPreemptions: true, phases: []string{PhaseDecode, PhasePrefill, PhaseQueue},
			ttftCount: 10, itlCount: 90, hasHists: true}},
		// SGLang's own test (test/srt/test_metrics.py): one request of 32
		// tokens. Its cached-token counter has no sample until a cache hit
		// (the exposition parser drops a family without samples), so prompt
		// tokens by source wait for the first hit; its speculative gauges
		// read 0 without speculative decoding: no acceptance then, not 0.
		{"sglang_upstream_test.txt", Snapshot{
			Flavor: "sglang", HasQueue: true, Series: 1, HasKVCache: true,
			GenerationTokens: 32, PromptTokens: 5, HasTokens: true,
			QueueTimeSum: 0.003, QueueTimeCount: 1, HasQueueTime: true,
			TTFTSum: 0.045, TTFTCount: 1, HasTTFT: true,
			ITLSum: 0.155, ITLCount: 31, HasITL: true,
			RequestsFinished: 1, HasRequestsFinished: true,
			HasCacheHitRate: true,
		}, tail{hasPreemptions: true,
			phases: []string{PhaseQueue}, ttftCount: 1, itlCount: 31, hasHists: true}},
		// llama.cpp server's metrics code: prompt_tokens_total leaves cached
		// tokens out; the draft counters of a draft model.
		{"llamacpp_upstream.txt", Snapshot{
			Flavor: "llamacpp", Running: 1, Waiting: 2, HasQueue: true, Series: 1,
			GenerationTokens: 800, PromptTokens: 4800, HasTokens: true,
		}, tail{computed: 1200, cacheHit: 3600, hasPromptBySource: true,
			specDraft: 900, specAccepted: 600, hasSpecDecode: true}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := parseFile(t, filepath.Join("testdata", tc.file))
			checkSnapshot(t, got, tc.want)
			w := tc.tail
			if got.HasPreemptions != w.hasPreemptions || got.Preemptions != 0 {
				t.Errorf("preemptions = %v (%v), want 0 (%v)", got.Preemptions, got.HasPreemptions, w.hasPreemptions)
			}
			if got.HasPromptBySource != w.hasPromptBySource || !near(got.PromptComputed, w.computed) || !near(got.PromptCacheHit, w.cacheHit) {
				t.Errorf("prompt by source = computed %v, cache hit %v (%v); want %v, %v (%v)",
					got.PromptComputed, got.PromptCacheHit, got.HasPromptBySource, w.computed, w.cacheHit, w.hasPromptBySource)
			}
			if got.HasSpecDecode != w.hasSpecDecode || !near(got.SpecDraftTokens, w.specDraft) || !near(got.SpecAcceptedTokens, w.specAccepted) {
				t.Errorf("spec decode = %v drafted, %v accepted (%v); want %v, %v (%v)",
					got.SpecDraftTokens, got.SpecAcceptedTokens, got.HasSpecDecode, w.specDraft, w.specAccepted, w.hasSpecDecode)
			}
			if got.HasSpecAcceptRate != w.hasSpecAcceptRate {
				t.Errorf("spec acceptance rate = %v (%v), want present %v", got.SpecAcceptRate, got.HasSpecAcceptRate, w.hasSpecAcceptRate)
			}
			if got.CacheTokensByTier != nil {
				t.Errorf("cache tokens by tier = %v, want none", got.CacheTokensByTier)
			}
			if (got.Hists != nil) != w.hasHists {
				t.Fatalf("histograms = %+v, want present %v", got.Hists, w.hasHists)
			}
			if got.Hists == nil {
				return
			}
			var phases []string
			for p := range got.Hists.Phase {
				phases = append(phases, p)
			}
			sort.Strings(phases)
			if len(phases) != len(w.phases) {
				t.Errorf("phases = %v, want %v", phases, w.phases)
			}
			for i := range phases {
				if i < len(w.phases) && phases[i] != w.phases[i] {
					t.Errorf("phases = %v, want %v", phases, w.phases)
					break
				}
			}
			if got.Hists.TTFT == nil || float64(got.Hists.TTFT.Count) != w.ttftCount {
				t.Errorf("TTFT histogram = %+v, want count %v", got.Hists.TTFT, w.ttftCount)
			}
			if got.Hists.ITL == nil || float64(got.Hists.ITL.Count) != w.itlCount {
				t.Errorf("ITL histogram = %+v, want count %v", got.Hists.ITL, w.itlCount)
			}
			if len(got.Notes) != 0 {
				t.Errorf("notes %v: something on the page was not read", got.Notes)
			}
		})
	}
}
