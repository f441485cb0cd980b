package collector

import (
	"testing"

	"github.com/slaprobe/slaprobe/prober"
)

// TestPlanEngineTiming: the one decision on a turn's engine timing. A turn
// whose TTFT is recorded waits for the engine's span when its response
// carried no timing, and is recorded now when it carried one (even one
// dropped as implausible); any other turn is skipped.
func TestPlanEngineTiming(t *testing.T) {
	response := prober.EngineTiming{Source: prober.TimingResponse, HasQueue: true}
	dropped := prober.EngineTiming{Source: prober.TimingNone,
		Dropped: prober.TimingDrop{From: prober.TimingResponse, Reason: prober.ImplausibleExceedsTTFT}}
	for _, tc := range []struct {
		name   string
		result func() prober.Result
		engine prober.EngineTiming
		want   EnginePlan
	}{
		{"cold, no timing in the response", success, prober.EngineTiming{}, EngineAwaitSpan},
		{"cold, timing in the response", success, response, EngineRecordNow},
		{"cold, timing dropped as implausible", success, dropped, EngineRecordNow},
		{"follow-up, no timing", warmConversation, prober.EngineTiming{}, EngineAwaitSpan},
		{"follow-up, timing", warmConversation, response, EngineRecordNow},
		{"priming turn", func() prober.Result { return warmConversation().Earlier[0] }, prober.EngineTiming{}, EngineSkip},
		{"cache hit", func() prober.Result { r := success(); r.CachedTokens = 1; return r }, prober.EngineTiming{}, EngineSkip},
		{"error", func() prober.Result {
			r := success()
			r.Kind, r.Reason = prober.KindError, prober.ReasonStall
			return r
		}, response, EngineSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.result()
			r.Engine = tc.engine
			if got := PlanEngineTiming(&r); got != tc.want {
				t.Errorf("PlanEngineTiming = %d, want %d", got, tc.want)
			}
		})
	}
}
