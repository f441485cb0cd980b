package collector

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// Conversation probes against the simulated engine, through the probe metrics: with
// prefix caching the follow-ups hit and save most of the cold TTFT; without
// it every follow-up is a counted miss, not an error, and saves nothing.
func TestConversationMetricsAgainstSim(t *testing.T) {
	testproc.QuietLight(t) // the share of TTFT saved is a ratio of two short timings
	for _, tc := range []struct {
		name  string
		cache bool
	}{{"prefix caching on", true}, {"prefix caching off", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := vllmsim.DefaultConfig()
			cfg.TimeScale = 0.1
			cfg.EnablePrefixCaching = tc.cache
			sim, err := vllmsim.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(sim.Handler())
			t.Cleanup(srv.Close)
			t.Cleanup(sim.Close)
			target := prober.Target{Name: "sim", API: prober.APIChat, BaseURL: srv.URL}

			s, _ := prober.LookupBuiltin("general_chat_followup")
			s.OutputTokens, s.Timeout = 16, time.Minute
			_, m := newTestMetrics(t)
			p := prober.New(nil, nil)
			for range 2 {
				res := p.Probe(context.Background(), target, "", s)
				if res.Kind != prober.KindSuccess {
					t.Fatalf("conversation probe: %s %s %v", res.Kind, res.Reason, res.Err)
				}
				m.Observe(&res)
			}
			lv := []string{"sim", cfg.ModelName, s.Name, "chat"}
			followUps := followUps(m, lv)
			misses := testutil.ToFloat64(m.conv.misses.WithLabelValues(lv...))
			hit := testutil.ToFloat64(m.conv.hitRatio.WithLabelValues(lv...))
			saved := testutil.ToFloat64(m.conv.savedRatio.WithLabelValues(lv...))
			t.Logf("follow-ups %v, misses %v, cache-hit share %.3f, TTFT saved %.0f %%", followUps, misses, hit, 100*saved)
			if followUps != 2 || testutil.ToFloat64(m.probes.WithLabelValues(append(lv, "error")...)) != 0 {
				t.Errorf("follow-ups %v, want 2 and no error", followUps)
			}
			if tc.cache && (misses != 0 || hit < 0.9 || saved < 0.5) {
				t.Errorf("with the cache: misses %v, share %.3f, saved %.2f; want 0, > 0.9, > 0.5", misses, hit, saved)
			}
			if !tc.cache && (misses != 2 || hit != 0 || saved > 0.2) {
				t.Errorf("without the cache: misses %v, share %.3f, saved %.2f; want 2, 0, < 0.2 (the alert's line)", misses, hit, saved)
			}
		})
	}
}
