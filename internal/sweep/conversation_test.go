package sweep

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// A conversation step is summarised over its follow-ups: the priming turns
// that succeeded are kept apart (their TTFT), one that failed counts as a
// failed request of the step, the follow-ups are counted by cache class,
// and a burst's round ends are moved onto the follow-ups.
func TestSummarizeConversationStep(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := time.Millisecond
	turn := func(k int, start, ttft time.Duration, cached, seen int) prober.Result {
		return prober.Result{Kind: prober.KindSuccess, Turn: k, Start: t0.Add(start), FirstToken: t0.Add(start + ttft),
			LastToken: t0.Add(start + ttft + 20*ms), OutputTokens: 10, RequestedTokens: 10, PromptTokens: 400 + 32*k,
			CachedTokens: cached, CachedReported: true, SeenTokens: seen}
	}
	conversation := func(turns ...prober.Result) prober.Result {
		last := turns[len(turns)-1]
		last.Earlier = turns[:len(turns)-1]
		return last
	}
	hitA := conversation(turn(1, 0, 100*ms, 0, 0), turn(2, 200*ms, 10*ms, 432, 432), turn(3, 300*ms, 12*ms, 400, 464))
	failed := prober.Result{Kind: prober.KindError, Reason: prober.ReasonTimeout, Turn: 1, Start: t0.Add(5 * ms)}
	missB := conversation(turn(1, 10*ms, 120*ms, 0, 0), turn(2, 250*ms, 90*ms, 0, 432), turn(3, 400*ms, 60*ms, 200, 464))
	out := loadOutcome{Sampled: []prober.Result{hitA, failed, missB}, RoundEnds: []int{2, 3},
		SpanStart: t0, SpanEnd: t0.Add(time.Second)}
	st := summarizeStep(StepInfo{Scenario: "agent", Mode: ModeBurst, Concurrency: 3}, prober.Thresholds{TTFT: 50 * ms}, true, out)

	cs := st.Conversation
	if cs == nil {
		t.Fatal("no conversation figures")
	}
	// 4 follow-ups and the failed priming turn; 2 priming turns apart.
	if st.Requests != 5 || st.Succeeded != 4 || st.Errors[prober.ReasonTimeout] != 1 || cs.Conversations != 3 || cs.FollowUps != 4 {
		t.Errorf("requests %d, succeeded %d, errors %v, conversations %d, follow-ups %d; want 5, 4, 1 timeout, 3, 4",
			st.Requests, st.Succeeded, st.Errors, cs.Conversations, cs.FollowUps)
	}
	// 432/432 and 400/464 (86 %) hit and partial; 0/432 and 200/464 miss and partial.
	if cs.Hit != 1 || cs.Partial != 2 || cs.Miss != 1 || cs.Unknown != 0 || cs.HitShare == nil || *cs.HitShare != 0.25 {
		t.Errorf("hit/partial/miss/unknown %d/%d/%d/%d, share %v; want 1/2/1/0, 0.25", cs.Hit, cs.Partial, cs.Miss, cs.Unknown, cs.HitShare)
	}
	// The step's TTFT is the follow-ups' (10, 12, 90, 60 ms); the priming
	// turns' (100, 120 ms) are apart.
	if math.Abs(st.TTFT.Mean-0.043) > 1e-9 || st.TTFT.Count != 4 || math.Abs(cs.PrimingTTFT.Mean-0.110) > 1e-9 || len(st.Samples.PrimingTTFT) != 2 {
		t.Errorf("follow-up TTFT %+v, priming TTFT %+v; want mean 43 ms of 4, 110 ms of 2", st.TTFT, cs.PrimingTTFT)
	}
	wantCached := (1 + 400.0/464 + 0 + 200.0/464) / 4
	if len(st.Samples.CachedShare) != 4 || math.Abs(cs.CachedShare-wantCached) > 1e-9 {
		t.Errorf("cached shares %v (mean %v); want 4, mean %v", st.Samples.CachedShare, cs.CachedShare, wantCached)
	}
	// Good: within TTFT 50 ms are the two follow-ups of the first conversation.
	if st.Good != 2 {
		t.Errorf("good %d; want 2", st.Good)
	}
	// Round 1 (hitA, failed): 3 requests, round 2 (missB): 2; each round's mean cached share.
	rm := st.Samples.RoundMedians
	if rm == nil || len(rm.TTFT) != 2 || len(rm.CachedShare) != 2 || math.Abs(rm.CachedShare[0]-(1+400.0/464)/2) > 1e-9 {
		t.Errorf("round medians %+v; want 2 rounds, the first's mean cached share %v", rm, (1+400.0/464)/2)
	}
	// Each conversation that ended with a token, first request to last token.
	if math.Abs(cs.longest-(400+60+20-10)/1e3) > 1e-9 || !(cs.Seconds.Mean > 0 && cs.Seconds.Mean < cs.longest) {
		t.Errorf("conversation seconds %+v, longest %v; want 2 of them, the longest 470 ms", cs.Seconds, cs.longest)
	}
	// A cold step is untouched by all this.
	if cold := summarizeStep(StepInfo{Scenario: "c", Mode: ModeBurst, Concurrency: 1}, prober.Thresholds{}, false,
		loadOutcome{Sampled: []prober.Result{turn(0, 0, 100*ms, 0, 0)}}); cold.Conversation != nil || cold.Requests != 1 {
		t.Errorf("cold step: conversation %+v, requests %d", cold.Conversation, cold.Requests)
	}
}

// The capacity in conversations binds on the cache when follow-ups stop
// hitting, on TTFT when they slow first, and ignores the cache when the
// server reports none.
func TestConversationCapacityOf(t *testing.T) {
	step := func(n int, ttft float64, hit *float64) StepResult {
		return StepResult{Concurrency: n, Requests: 10, Succeeded: 10, SuccessRatio: 1, TTFT: Summary{Count: 10, Mean: ttft},
			Conversation: &ConversationStep{HitShare: hit}}
	}
	f := func(v float64) *float64 { return &v }
	opts := DefaultCapacityOptions()
	th := prober.Thresholds{TTFT: time.Second}
	for _, tc := range []struct {
		name      string
		steps     []StepResult
		want      string
		limitedBy string
	}{
		{"cache binds", []StepResult{step(1, 0.1, f(1)), step(2, 0.1, f(1)), step(4, 0.2, f(0.5)), step(8, 0.5, f(0))}, "2", LimitCache},
		{"ttft binds", []StepResult{step(1, 0.1, f(1)), step(2, 2, f(1)), step(4, 3, f(0.95))}, "1", "ttft"},
		{"interpolated", []StepResult{step(2, 0.1, f(1)), step(4, 0.1, f(0.8))}, "~3", LimitCache},
		{"no cache reported", []StepResult{step(1, 0.1, nil), step(2, 0.2, nil)}, "≥2", ""},
	} {
		c := ConversationCapacityOf(tc.steps, th, opts)
		if c.String() != tc.want || c.LimitedBy != tc.limitedBy {
			t.Errorf("%s: capacity %s limited by %q; want %s by %q", tc.name, c, c.LimitedBy, tc.want, tc.limitedBy)
		}
	}
	// A stricter hit share moves it.
	opts.HitShare = 0.99
	if c := ConversationCapacityOf([]StepResult{step(1, 0.1, f(1)), step(2, 0.1, f(0.98))}, th, opts); c.String() != "1" {
		t.Errorf("hit share 0.99: capacity %s; want 1", c)
	}
}

// conversationRunner answers every Run with a conversation of three turns
// of 10 output tokens each, the last ending 30 ms after it was called.
type conversationRunner struct{}

func (conversationRunner) Prepare(context.Context, prober.Target, string, prober.Scenario) (*prober.Prepared, error) {
	return &prober.Prepared{}, nil
}

func (conversationRunner) Run(context.Context, prober.Target, *prober.Prepared) prober.Result {
	t0 := time.Now()
	turns := make([]prober.Result, 3)
	for k := range turns {
		s := t0.Add(time.Duration(10*k) * time.Millisecond)
		turns[k] = prober.Result{Kind: prober.KindSuccess, Turn: k + 1, Start: s, FirstToken: s.Add(2 * time.Millisecond),
			LastToken: s.Add(9 * time.Millisecond), OutputTokens: 10, RequestedTokens: 10, FirstChunkTokens: 1}
	}
	last := turns[2]
	last.Earlier = turns[:2]
	return last
}

// A burst of conversations counts every turn's output tokens in its
// system throughput, not only the last turn's.
func TestBurstCountsEveryTurn(t *testing.T) {
	out := runBurst(context.Background(), conversationRunner{}, prober.Target{}, &prober.Prepared{}, 2, nil, nil)
	if out.Tokens != 60 {
		t.Errorf("burst of 2 conversations of 3 turns × 10 tokens: %v tokens; want 60", out.Tokens)
	}
}
