package prober_test

import (
	"context"
	"testing"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// TestPerRequestMetricsSpecDecodeSim: against the simulated engine with
// --enable-per-request-metrics, gated on include_metrics as PR #46768's
// description proposed, and multi-token decode steps (MTP), a
// target with PerRequestMetrics gets the engine's timing and each probe's
// speculative decoding, equal to what the engine counted for that request;
// a target without it sends no include_metrics and gets neither.
func TestPerRequestMetricsSpecDecodeSim(t *testing.T) {
	sim := accStartSim(t, func(c *vllmsim.Config) {
		c.EnablePerRequestMetrics = true
		c.RequireIncludeMetrics = true
		c.TokensPerStep = 4
		c.TimeScale = 0.05
	})
	p := prober.New(nil, nil)
	s := accScenario(200, 30)
	for _, opt := range []bool{true, false} {
		target := sim.target
		target.PerRequestMetrics = opt
		prep := accPrepare(t, p, target, s)
		for range 3 {
			res := p.Run(context.Background(), target, prep)
			if res.Kind != prober.KindSuccess {
				t.Fatalf("per_request_metrics %v: probe %s/%s: %v", opt, res.Kind, res.Reason, res.Err)
			}
			tr := accTrace(t, sim.e, &res)
			if tr.SpecDraftTokens == 0 {
				t.Fatalf("the engine drafted no token: the test checks nothing")
			}
			a, has := res.SpecDecode.Acceptance()
			if !opt {
				if has || res.Engine.Source == prober.TimingResponse {
					t.Errorf("without per_request_metrics: SpecDecode %+v, engine timing %q; want none (the engine was not asked)", res.SpecDecode, res.Engine.Source)
				}
				continue
			}
			if res.Engine.Source != prober.TimingResponse || !res.Engine.HasQueue {
				t.Errorf("engine timing %+v; want it from the response", res.Engine)
			}
			// 30 tokens: 1 from prefill, then steps of 4 with 3 drafts each: 29 = 7×4 + 1,
			// so 8 steps, 24 drafts, 7×3 + 0 accepted.
			if !res.SpecDecode.HasCounts || res.SpecDecode.Draft != tr.SpecDraftTokens || res.SpecDecode.Accepted != tr.SpecAcceptedTokens {
				t.Errorf("SpecDecode %+v; the engine counted %d drafted, %d accepted", res.SpecDecode, tr.SpecDraftTokens, tr.SpecAcceptedTokens)
			}
			if want := float64(tr.SpecAcceptedTokens) / float64(tr.SpecDraftTokens); !has || a != want {
				t.Errorf("acceptance %v (%v); want %v", a, has, want)
			}
			if tr.SpecDraftTokens != 24 || tr.SpecAcceptedTokens != 21 {
				t.Errorf("the engine counted %d drafted, %d accepted; want 24 and 21 for 30 tokens at 4 a step", tr.SpecDraftTokens, tr.SpecAcceptedTokens)
			}
		}
	}
}
