package prober_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/llmd"
)

// TestWarmLLMD runs warm conversations against the third-party simulator's
// prefix cache (--enable-kvcache), whose TTFT grows with the uncached part
// of the prompt only (overhead + uncached × per-token). It ignores
// cache_salt: the nonce the priming turn and its follow-ups share is what
// makes them one conversation, and what keeps cold probes cold there.
func TestWarmLLMD(t *testing.T) {
	llmd.SkipIfMissing(t)
	const overhead, perToken = 20 * time.Millisecond, 50 * time.Microsecond
	srv, target := llmdTarget(t, llmd.Options{KVCache: true, MaxModelLen: 16384,
		PrefillOverhead: overhead, PrefillPerToken: perToken, ITL: time.Millisecond}, nil)
	p := prober.New(nil, prober.SystemClock{})
	warm := prober.Scenario{Name: "warm", InputTokens: 4096, OutputTokens: 8, Timeout: time.Minute,
		Conversation: prober.Conversation{Turns: 3, NewTokens: 512}}

	res := p.Probe(context.Background(), target, "", warm)
	if res.Kind != prober.KindSuccess || res.Turn != 3 || len(res.Earlier) != 2 {
		t.Fatalf("warm probe: kind %s reason %s turn %d earlier %d: %v\n%s", res.Kind, res.Reason, res.Turn, len(res.Earlier), res.Err, srv.Logs())
	}
	prime := res.Earlier[0]
	if !prime.CachedReported || prime.CachedTokens != 0 {
		t.Errorf("priming turn: cached %d (reported %v), want 0", prime.CachedTokens, prime.CachedReported)
	}
	model := func(r *prober.Result) time.Duration {
		return overhead + time.Duration(r.PromptTokens-r.CachedTokens)*perToken
	}
	for _, f := range []prober.Result{res.Earlier[1], res} {
		share, ok := f.CachedShare()
		// Everything the turn before sent hits, in whole 16-token blocks.
		prev := warm.TurnInputTokens(f.Turn - 1)
		if !ok || f.CachedTokens < prev-2*16 || f.CachedTokens > f.PromptTokens {
			t.Errorf("turn %d: cached %d of %d (share %.3f, reported %v), want about the %d tokens of the turn before",
				f.Turn, f.CachedTokens, f.PromptTokens, share, ok, prev)
		}
		if !f.PromptLengthOK {
			t.Errorf("turn %d: prompt %d tokens, want %d", f.Turn, f.PromptTokens, warm.TurnInputTokens(f.Turn))
		}
		// The simulator only sleeps: TTFT is never below its model.
		if f.TTFT() < model(&f) {
			t.Errorf("turn %d: TTFT %s below the simulator's %s", f.Turn, f.TTFT(), model(&f))
		}
		if saved, ok := f.TTFTSaved(); !ok || saved <= 0 || f.PrimeTTFT != prime.TTFT() {
			t.Errorf("turn %d: TTFT %s saved %s against the priming turn's %s", f.Turn, f.TTFT(), saved, prime.TTFT())
		}
		t.Logf("turn %d: %d of %d prompt tokens cached, TTFT %s (priming turn %s; simulator model %s vs %s)",
			f.Turn, f.CachedTokens, f.PromptTokens, f.TTFT(), prime.TTFT(), model(&f), model(&prime))
	}

	// Cold probes of the same sizes right after: a fresh nonce in the first
	// block, so not one cached token.
	for _, in := range []int{warm.TurnInputTokens(1), warm.TurnInputTokens(3)} {
		cold := prober.Scenario{Name: "cold", InputTokens: in, OutputTokens: 8, Timeout: time.Minute}
		r := p.Probe(context.Background(), target, "", cold)
		if r.Kind != prober.KindSuccess || !r.CachedReported || r.CachedTokens != 0 {
			t.Errorf("cold probe of %d tokens after warm ones: kind %s cached %d (reported %v) %v", in, r.Kind, r.CachedTokens, r.CachedReported, r.Err)
		}
	}
}

// TestConversationLLMD: four-turn conversations that replay the answers
// against the third-party simulator, on the APIs where it serves them. It
// counts the replayed history as the prober derives it (every follow-up's
// prompt length checks), and its prefix cache holds the earlier prompts, so
// every follow-up hits where it reports cached tokens (chat, completions;
// its Responses usage has no cached_tokens, so those turns are unknown). Not
// covered, as it stands (v0.10.2): Responses with tools (it refuses a
// function_call input item, HTTP 400) and Messages (its answers stop before
// the forced length: no min_tokens there).
func TestConversationLLMD(t *testing.T) {
	llmd.SkipIfMissing(t)
	for _, tc := range []struct {
		api   prober.API
		tools bool
		want  prober.ConversationCache
	}{
		{prober.APIChat, false, prober.CacheHitTurn},
		{prober.APIChat, true, prober.CacheHitTurn},
		{prober.APICompletions, false, prober.CacheHitTurn},
		// No cached tokens on Responses: the class is inferred from TTFT
		// (ConversationCache), which this simulator, set to no prefill
		// time, cannot inform; only that nothing was reported is checked.
		{prober.APIResponses, false, prober.CacheUnknownTurn},
	} {
		t.Run(fmt.Sprintf("%s/tools=%v", tc.api, tc.tools), func(t *testing.T) {
			srv, target := llmdTarget(t, llmd.Options{KVCache: true, MaxModelLen: 16384, ITL: time.Millisecond}, nil)
			target.API = tc.api
			p := prober.New(nil, prober.SystemClock{})
			s := prober.Scenario{Name: "agent", InputTokens: 2048, OutputTokens: 8, Timeout: time.Minute,
				Conversation: prober.Conversation{Turns: 4, NewTokens: 256, Tools: tc.tools}}
			res := p.Probe(context.Background(), target, "", s)
			if res.Kind != prober.KindSuccess || res.Turn != 4 {
				t.Fatalf("conversation: kind %s reason %s turn %d: %v\n%s", res.Kind, res.Reason, res.Turn, res.Err, srv.Logs())
			}
			for _, r := range append(slices.Clone(res.Earlier), res) {
				if !r.PromptLengthOK {
					t.Errorf("turn %d: prompt %d tokens, derived %d", r.Turn, r.PromptTokens, r.WantPromptTokens)
				}
				if _, m := r.SeenCached(); r.Turn > 1 && tc.want == prober.CacheUnknownTurn && (r.CachedReported || m == prober.CachedReportedMethod) {
					t.Errorf("turn %d: cached tokens reported (%d), want none on %s", r.Turn, r.CachedTokens, tc.api)
				} else if r.Turn > 1 && tc.want != prober.CacheUnknownTurn && r.ConversationCache() != tc.want {
					t.Errorf("turn %d: %s (%d of %d seen cached, reported %v), want %s", r.Turn, r.ConversationCache(), r.CachedTokens, r.SeenTokens, r.CachedReported, tc.want)
				}
				t.Logf("turn %d: prompt %d (derived %d), %d of %d seen cached: %s", r.Turn, r.PromptTokens, r.WantPromptTokens, r.CachedTokens, r.SeenTokens, r.ConversationCache())
			}
		})
	}
}
