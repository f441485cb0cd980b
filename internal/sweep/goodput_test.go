package sweep

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// A step counts its good requests, those within every threshold at once, and their rate over the
// window.
func TestSummarizeStepGoodput(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := time.Millisecond
	req := func(ttft, itl time.Duration) prober.Result {
		return prober.Result{Kind: prober.KindSuccess, Start: t0, FirstToken: t0.Add(ttft),
			LastToken: t0.Add(ttft + 99*itl), OutputTokens: 100, RequestedTokens: 100, FirstChunkTokens: 1}
	}
	th := prober.Thresholds{TTFT: 500 * ms, ITL: 30 * ms}
	out := loadOutcome{
		Sampled: []prober.Result{
			req(100*ms, 10*ms), req(100*ms, 10*ms), // good
			req(800*ms, 10*ms), // slow first token
			req(100*ms, 60*ms), // slow stream
			{Kind: prober.KindError, Reason: prober.ReasonTimeout, Err: errors.New("timeout")},
		},
		SpanStart: t0, SpanEnd: t0.Add(4 * time.Second),
	}
	st := summarizeStep(StepInfo{Scenario: "s", Mode: ModeClosedLoop, Concurrency: 4}, th, false, out)
	if st.Good != 2 || st.GoodShare != 0.4 || st.GoodPerSecond != 0.5 {
		t.Errorf("good %d, share %v, per second %v; want 2 of 5 requests (0.4), 0.5 a second over 4 s", st.Good, st.GoodShare, st.GoodPerSecond)
	}
	// Each metric's mean is within its threshold all the same.
	if st.TTFT.Mean > th.TTFT.Seconds() || st.ITL.Mean > th.ITL.Seconds() {
		t.Errorf("mean TTFT %v s, mean ITL %v s: the case needs both within their thresholds", st.TTFT.Mean, st.ITL.Mean)
	}
	if st := summarizeStep(StepInfo{Scenario: "s", Mode: ModeClosedLoop, Concurrency: 4}, prober.Thresholds{}, false, out); st.Good != 4 {
		t.Errorf("no threshold: %d good, want the 4 answered", st.Good)
	}
}

// Each request's good flag is kept in order, and each burst round's share.
func TestStepGoodSamples(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := time.Millisecond
	req := func(ttft time.Duration) prober.Result {
		return prober.Result{Kind: prober.KindSuccess, Start: t0, FirstToken: t0.Add(ttft),
			LastToken: t0.Add(ttft + 99*ms), OutputTokens: 100, RequestedTokens: 100, FirstChunkTokens: 1}
	}
	out := loadOutcome{
		Sampled:   []prober.Result{req(100 * ms), req(900 * ms), req(100 * ms), req(100 * ms), {Kind: prober.KindError, Reason: prober.ReasonTimeout}},
		RoundEnds: []int{2, 5},
		SpanStart: t0, SpanEnd: t0.Add(time.Second),
	}
	st := summarizeStep(StepInfo{Scenario: "s", Mode: ModeBurst, Concurrency: 2}, prober.Thresholds{TTFT: 500 * ms}, false, out)
	if want := []float64{1, 0, 1, 1, 0}; !slices.Equal(st.Samples.Good, want) {
		t.Errorf("good flags %v, want %v", st.Samples.Good, want)
	}
	if want := []float64{0.5, 2.0 / 3}; st.Samples.RoundMedians == nil || !slices.Equal(st.Samples.RoundMedians.Good, want) {
		t.Errorf("rounds' good shares %+v, want %v", st.Samples.RoundMedians, want)
	}
	if st.Good != 3 || st.GoodShare != 0.6 {
		t.Errorf("%d good, share %v; want 3, 0.6", st.Good, st.GoodShare)
	}
}
