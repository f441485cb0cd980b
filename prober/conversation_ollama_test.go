package prober_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/ollama"
)

// TestOllamaConversation: conversations on the real engine, which reports
// no cached tokens (its OpenAI usage has prompt_tokens, the whole prompt
// even on a cache hit, and no details), so every follow-up's share is
// inferred from its TTFT (method ttft). One engine slot
// (OLLAMA_NUM_PARALLEL=1), which keeps the KV cache of its last request; the
// engine's debug log says how many of each prompt's tokens it took from
// there, the truth the inference is held to.
//
//   - One conversation at a time, four turns: the engine takes all it had
//     seen from its cache, the inferred share reads at most 0.2 below the
//     engine's own (the median of them) and never above it, the
//     follow-ups' median TTFT is far below a cold prompt of the last
//     turn's length, and slaprobe's TTFT of every turn agrees with the
//     independent client's on the same requests (ollamaAgree, within
//     ollamaTTFTRel, as for single probes).
//   - Two conversations at once on the one slot: each turn finds the other
//     conversation's prompt in the slot; the engine's log and the inferred
//     share both say miss.
func TestOllamaConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time conversations against a real engine")
	}
	ollama.SkipIfMissing(t)
	const (
		in, newTokens, out, turns = 2048, 256, 16, 4
		rounds, concurrent        = 2, 2
	)
	// One slot: one request at a time, its KV cache kept for the next. The
	// engine's debug log says how much of each prompt it took from there.
	srv := ollama.Start(t, ollama.Options{Layers: 4, Embedding: 512, Parallel: 1, Debug: true})
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	ic := &indepClient{upstream: srv.URL, client: &http.Client{Transport: tr}}
	proxy := httptest.NewServer(ic)
	t.Cleanup(proxy.Close)
	target := prober.Target{Name: "ollama", API: prober.APIChat, BaseURL: proxy.URL, Client: proxy.Client()}
	p := prober.New(nil, prober.SystemClock{})

	s := accScenario(in, out)
	s.Name = "agent"
	s.Conversation = prober.Conversation{Turns: turns, NewTokens: newTokens}
	prep := accPrepare(t, p, target, s)
	cold := accPrepare(t, p, target, accScenario(s.TurnInputTokens(turns), out))
	if res := p.Run(context.Background(), target, cold); res.Kind != prober.KindSuccess {
		t.Fatalf("warm-up probe: %s/%s: %v", res.Kind, res.Reason, res.Err)
	}

	// One conversation at a time, each followed by a cold prompt of its last
	// turn's length.
	var probeTTFT, clientTTFT, followTTFT, coldTTFT []time.Duration
	var inferErr, inferred []float64 // the inferred share, and it less the engine's, per follow-up
	byTurn := make([][]time.Duration, turns)
	for c := range rounds {
		k := ic.settled(t)
		res := p.Run(context.Background(), target, prep)
		all := conversationTurns(t, s, res)
		loads := lastLoads(t, srv, turns)
		for i, r := range all {
			ict := ic.timing(t, k+i)
			probeTTFT, clientTTFT = append(probeTTFT, r.TTFT()), append(clientTTFT, ict.ttft)
			byTurn[i] = append(byTurn[i], r.TTFT())
			line := fmt.Sprintf("conversation %d turn %d: %d prompt tokens, TTFT slaprobe %v client %v", c+1, r.Turn, r.PromptTokens,
				r.TTFT().Round(10*time.Microsecond), ict.ttft.Round(10*time.Microsecond))
			if r.FollowUp() {
				followTTFT = append(followTTFT, r.TTFT())
				_, m := r.SeenCached()
				// The raw inference, kept or not: its error is what is measured.
				share, bound, ok := r.InferSeenCachedShareBound()
				line += fmt.Sprintf(", %d of them seen before, inferred share %.3f (stated error %.3f) by %q: %s", r.SeenTokens, share, bound, m, r.ConversationCache())
				if !ok || r.CachedReported || (m == prober.CachedTTFTMethod) != (bound <= prober.InferMaxError) {
					t.Errorf("conversation %d turn %d: share by %q (reported %v, stated error %.3f); Ollama reports no cached tokens, so it is inferred where the stated error is at most %.2f, else unknown",
						c+1, r.Turn, m, r.CachedReported, bound, prober.InferMaxError)
				}
				truth := loadShare(loads, i)
				inferErr, inferred = append(inferErr, share-truth), append(inferred, share)
				line += fmt.Sprintf(" (the engine's log: %d of %d taken from the cache, share %.3f)", loads[i].Used, loads[i].Prompt, truth)
				if truth < prober.HitShare {
					t.Errorf("conversation %d turn %d: the engine took %d of %d prompt tokens from its cache; want all it had seen", c+1, r.Turn, loads[i].Used, loads[i].Prompt)
				}
			}
			t.Log(line)
		}
		cr := p.Run(context.Background(), target, cold)
		if cr.Kind != prober.KindSuccess || cr.CacheHit() {
			t.Fatalf("cold probe: %s/%s: %v", cr.Kind, cr.Reason, cr.Err)
		}
		coldTTFT = append(coldTTFT, cr.TTFT())
		cl := lastLoads(t, srv, 1)[0]
		t.Logf("cold prompt of %d tokens: TTFT %v (the engine's log: %d of %d from the cache)", cr.PromptTokens, cr.TTFT().Round(10*time.Microsecond), cl.Used, cl.Prompt)
	}
	ollamaAgree(t, "conversation turns' TTFT", probeTTFT, clientTTFT, ollamaTTFTRel)
	t.Logf("inferred share − the engine's own: median %+.3f, each %v", medianF(inferErr), roundF(inferErr))
	// The inference reads low, never high (docs/conversations.md): the round trip,
	// tokenization and the new tokens' cost deep in the context count as
	// prefilled. On this tiny model they are a tenth of the share, and a
	// shared CPU slows one request in a few by half, so a hit's median read
	// 0.896 (partial) once: what is promised, and held here, is the median
	// within inferTolerance below the engine's own share, and none above it
	// by more than the rounding of a share.
	const inferTolerance = 0.2
	if m := medianF(inferErr); m < -inferTolerance || slices.Max(inferErr) > 0.02 {
		t.Errorf("inferred share − the engine's own %v: median %+.3f, want within %.1f below it and never above it: the engine took all it had seen from its cache",
			roundF(inferErr), m, inferTolerance)
	}
	t.Logf("inferred shares %v: median %.3f (hit from %.1f)", roundF(inferred), medianF(inferred), prober.HitShare)
	for i, ts := range byTurn {
		t.Logf("turn %d: median TTFT %v of %v", i+1, medianD(ts).Round(time.Millisecond), ts)
	}
	// "Far below": a follow-up prefills 256 new tokens of 2,816, a cold
	// prompt all of them. Medians, as the shared CPU slows single requests
	// by half and more: under a third (measured: a sixth to a tenth).
	if f, c := medianD(followTTFT), medianD(coldTTFT); 3*f >= c {
		t.Errorf("follow-ups' median TTFT %v, a cold prompt of the last turn's length %v: want under a third", f, c)
	}
	t.Logf("follow-ups: median TTFT %v (slowest %v); cold prompt of %d tokens: median %v (fastest %v)",
		medianD(followTTFT).Round(time.Millisecond), slices.Max(followTTFT).Round(time.Millisecond), s.TurnInputTokens(turns),
		medianD(coldTTFT).Round(time.Millisecond), slices.Min(coldTTFT).Round(time.Millisecond))

	// More conversations at once than the engine has slots.
	results := make([]prober.Result, concurrent)
	var wg sync.WaitGroup
	for c := range concurrent {
		wg.Go(func() { results[c] = p.Run(context.Background(), target, prep) })
	}
	wg.Wait()
	// The engine's own account of the last 2×4 requests: the follow-ups'
	// prompts are the longer ones; a miss took under a tenth from the cache.
	engineMiss := 0
	for _, l := range lastLoads(t, srv, concurrent*turns) {
		if l.Prompt > in+newTokens/2 && l.Used*10 < l.Prompt {
			engineMiss++
		}
	}
	classes := map[prober.ConversationCache]int{}
	for c, res := range results {
		for _, r := range conversationTurns(t, s, res)[1:] {
			share, m := r.SeenCached()
			classes[r.ConversationCache()]++
			t.Logf("concurrent conversation %d turn %d: TTFT %v (priming %v), cached share %.3f by %s: %s",
				c+1, r.Turn, r.TTFT().Round(time.Millisecond), r.PrimeTTFT.Round(time.Millisecond), share, m, r.ConversationCache())
		}
	}
	t.Logf("%d conversations at once on 1 slot: follow-ups by inferred class %v; the engine took under a tenth of %d of the %d follow-ups' prompts from its cache",
		concurrent, classes, engineMiss, concurrent*(turns-1))
	if classes[prober.CacheMissTurn] == 0 || engineMiss == 0 {
		t.Errorf("%d conversations on 1 slot: follow-ups by inferred class %v, %d missed by the engine's log; want misses in both", concurrent, classes, engineMiss)
	}
}

// lastLoads returns the engine's last n cache loads, failing the test when
// its log does not hold them.
func lastLoads(t *testing.T, srv *ollama.Server, n int) []ollama.CacheLoad {
	t.Helper()
	loads := srv.CacheLoads()
	if len(loads) < n {
		t.Fatalf("the engine's log holds %d cache loads, want at least %d", len(loads), n)
	}
	return loads[len(loads)-n:]
}

// loadShare is the engine's own share of turn i (from 0) of what it had
// seen: the tokens it took from the cache over the turn before's prompt.
func loadShare(loads []ollama.CacheLoad, i int) float64 {
	return min(float64(loads[i].Used)/float64(loads[i-1].Prompt), 1)
}

func roundF(v []float64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%+.3f", x)
	}
	return out
}

// conversationTurns returns a conversation's turns, priming turn first,
// failing the test unless every turn succeeded with its prompt's length.
func conversationTurns(t *testing.T, s prober.Scenario, res prober.Result) []prober.Result {
	t.Helper()
	if res.Kind != prober.KindSuccess || res.Turn != s.Turns() || len(res.Earlier) != s.Turns()-1 {
		t.Fatalf("conversation: %s/%s at turn %d (%d before): %v", res.Kind, res.Reason, res.Turn, len(res.Earlier), res.Err)
	}
	all := append(slices.Clone(res.Earlier), res)
	for i, r := range all {
		if !r.PromptLengthOK {
			t.Errorf("turn %d: %d prompt tokens, want %d (derived from the turn before's counts; nominal %d)", i+1, r.PromptTokens, r.WantPromptTokens, s.TurnInputTokens(i+1))
		}
	}
	return all
}

func medianD(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
