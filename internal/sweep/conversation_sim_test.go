package sweep

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// The eviction proof, against a truth the test controls: one simulated
// engine whose KV cache holds the histories of evictionK conversations at
// their longest (the last turn's prompt and its answer), and a closed-loop
// sweep of conversations over N = 1 … 2K. Up to K conversations in flight
// each find their history in the cache; beyond K the engine must evict the
// history of a conversation between two of its turns (least recently
// used first), so follow-ups start to miss and to prefill their whole
// prompt again, as the cold priming turn does.
const (
	evictionK      = 4
	evictionInput  = 384 // the priming turn's prompt
	evictionNew    = 32  // each follow-up's new tokens
	evictionTurns  = 4
	evictionOutput = 32
)

// evictionKVTokens is the sim's KV cache size: K conversations' last-turn
// context (prompt of turn evictionTurns plus its answer), each rounded up
// to whole blocks as the engine allocates them: 4 × 512 tokens.
func evictionKVTokens(s prober.Scenario) int {
	last := s.MaxInputTokens() + s.OutputTokens
	blocks := (last + vllmsim.BlockSize - 1) / vllmsim.BlockSize
	return evictionK * blocks * vllmsim.BlockSize
}

func TestSweepSimConversationEviction(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulated engine for several seconds")
	}
	testproc.TimingAttempts(t, func(errorf func(string, ...any)) { simConversationEviction(t, errorf) })
}

func simConversationEviction(t *testing.T, errorf func(string, ...any)) {
	s := prober.Scenario{Name: "agent", Family: prober.FamilyCustom, InputTokens: evictionInput, OutputTokens: evictionOutput,
		Interval: time.Minute, Timeout: 30 * time.Second, Thresholds: prober.Thresholds{TTFT: 5 * time.Second},
		Conversation: prober.Conversation{Turns: evictionTurns, NewTokens: evictionNew}}
	cfg := vllmsim.DefaultConfig()
	cfg.KVCacheTokens = evictionKVTokens(s)
	cfg.MaxModelLen = cfg.KVCacheTokens
	// Prefill slow against decode, so that a follow-up that finds its
	// history cached (32 new tokens) answers several times sooner than one
	// that prefills the whole prompt again (≥ 384 tokens).
	cfg.PrefillOverhead = time.Millisecond
	cfg.PrefillTokensPerSecond = 4000
	cfg.PrefillQuadratic = 0
	cfg.DecodeBase = 2 * time.Millisecond
	cfg.DecodePerSeq = 0
	cfg.DecodePerKVToken = 0
	cfg.TimeScale = 0.25
	cfg.EnablePrefixCaching = true
	cfg.EnablePromptTokensDetails = true
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := simTarget(t, e)
	t.Logf("KV cache %d tokens: %d conversations of %d tokens at their last turn (K)", cfg.KVCacheTokens, evictionK, s.MaxInputTokens()+s.OutputTokens)

	opts := DefaultOptions([]prober.Scenario{s})
	opts.ClosedLoop = []int{1, 2, 3, 4, 5, 6, 8}
	opts.Burst = nil
	opts.Warmup = 400 * time.Millisecond
	opts.StepDuration = 1200 * time.Millisecond
	opts.Cooldown = 0
	opts.EarlyStopFactor = 0
	res, err := Run(context.Background(), prober.New(nil, prober.SystemClock{}), target, cfg.ModelName, opts)
	if err != nil {
		t.Fatal(err)
	}
	sr := res.Scenarios[0]
	if sr.Error != "" || len(sr.ClosedLoop) != len(opts.ClosedLoop) {
		t.Fatalf("scenario: %q, %d steps", sr.Error, len(sr.ClosedLoop))
	}
	var table strings.Builder
	fmt.Fprintf(&table, "N  convs follow-ups  hit/partial/miss/unknown  hit-share  follow-up TTFT mean/p95  priming TTFT mean\n")
	for _, st := range sr.ClosedLoop {
		cs := st.Conversation
		if cs == nil {
			t.Fatalf("N=%d: no conversation figures", st.Concurrency)
		}
		share := -1.0
		if cs.HitShare != nil {
			share = *cs.HitShare
		}
		fmt.Fprintf(&table, "%-2d %5d %10d  %4d/%d/%d/%d %16.2f  %8.1f/%.1f ms %18.1f ms\n", st.Concurrency, cs.Conversations, cs.FollowUps,
			cs.Hit, cs.Partial, cs.Miss, cs.Unknown, share, st.TTFT.Mean*1e3, st.TTFT.P95*1e3, cs.PrimingTTFT.Mean*1e3)
	}
	t.Logf("\n%s", table.String())

	for _, st := range sr.ClosedLoop {
		cs := st.Conversation
		n := st.Concurrency
		// Every follow-up of every conversation is in the step, and each
		// conversation ran all its turns.
		if st.SuccessRatio != 1 || cs.Conversations < n || cs.FollowUps != cs.Conversations*(evictionTurns-1) || st.Requests != cs.FollowUps {
			errorf("N=%d: %d conversations, %d follow-ups, %d requests, success %.2f; want every conversation's %d follow-ups, all succeeded",
				n, cs.Conversations, cs.FollowUps, st.Requests, st.SuccessRatio, evictionTurns-1)
		}
		if cs.Unknown != 0 || cs.HitShare == nil {
			errorf("N=%d: %d follow-ups of unknown cache; the engine reports cached tokens", n, cs.Unknown)
			continue
		}
		switch {
		case n <= evictionK-1 && *cs.HitShare < 0.95:
			// Below K every history fits: follow-ups hit.
			errorf("N=%d ≤ K-1=%d: hit share %.2f; want ≥ 0.95 (the cache holds every conversation)", n, evictionK-1, *cs.HitShare)
		case n >= 2*evictionK && *cs.HitShare > 0.5:
			// At 2K the cache holds half the histories at best.
			errorf("N=%d = 2K: hit share %.2f; want ≤ 0.5 (the cache holds at most K=%d histories)", n, *cs.HitShare, evictionK)
		}
	}
	low, high := sr.ClosedLoop[0], sr.ClosedLoop[len(sr.ClosedLoop)-1]
	// Follow-up TTFT: far below the cold priming turn's while the cache
	// holds the conversations, and most of the way to it once it does not
	// (a miss prefills the whole prompt, longer than the priming turn's).
	if r := low.TTFT.Mean / low.Conversation.PrimingTTFT.Mean; r > 0.5 {
		errorf("N=1: follow-up TTFT %.1f ms is %.2f of the priming turn's %.1f ms; want ≤ 0.5 (cache hits)",
			low.TTFT.Mean*1e3, r, low.Conversation.PrimingTTFT.Mean*1e3)
	}
	if r := high.TTFT.Mean / high.Conversation.PrimingTTFT.Mean; r < 0.6 {
		errorf("N=%d: follow-up TTFT %.1f ms is %.2f of the priming turn's %.1f ms; want ≥ 0.6 (evicted histories prefilled again)",
			high.Concurrency, high.TTFT.Mean*1e3, r, high.Conversation.PrimingTTFT.Mean*1e3)
	}
	c := sr.ConversationCapacity
	if c == nil {
		t.Fatal("no capacity in conversations")
	}
	t.Logf("capacity in conversations: %s (estimate %.2f, limited by %q, between %v); K = %d", c, c.Estimate, c.LimitedBy, c.Between, evictionK)
	// Within one ladder step of K (the ladder steps by 1 around K), and set
	// by the cache, not by the generous TTFT threshold.
	if c.Bound != BoundWithin || c.N < evictionK-1 || c.N > evictionK+1 || c.LimitedBy != LimitCache {
		errorf("capacity in conversations %s (bound %s, limited by %q); want %d±1, limited by the cache", c, c.Bound, c.LimitedBy, evictionK)
	}
}
