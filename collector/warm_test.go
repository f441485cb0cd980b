package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestWarmMetrics(t *testing.T) {
	reg, m := newTestMetrics(t)
	m.SetScenarioEnabled("a", "m", "chatbot", "chat", true)
	m.SetScenarioEnabled("a", "m", "general_chat_followup", "chat", true)
	cold := success()
	m.Observe(&cold)
	if n := countLines(scrape(t, reg), "slaprobe_warm_"); n != 0 {
		t.Fatalf("%d warm series before any warm probe; cold scenarios must add none", n)
	}

	hit := warmConversation()
	m.Observe(&hit)
	miss := warmConversation()
	miss.CachedTokens = 0
	miss.FirstToken = miss.Start.Add(1500 * time.Millisecond) // slower than the priming turn
	m.Observe(&miss)

	lv := []string{"a", "m", "general_chat_followup", "chat"}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"followups", testutil.ToFloat64(m.warm.followUps.WithLabelValues(lv...)), 2},
		{"misses", testutil.ToFloat64(m.warm.misses.WithLabelValues(lv...)), 1},
		{"hit ratio (last)", testutil.ToFloat64(m.warm.hitRatio.WithLabelValues(lv...)), 0},
		{"prime ttft", testutil.ToFloat64(m.warm.primeTTFT.WithLabelValues(lv...)), 1.4},
		{"saved (last)", testutil.ToFloat64(m.warm.saved.WithLabelValues(lv...)), 1.4 - 1.5},
		{"probes ok", testutil.ToFloat64(m.probes.WithLabelValues("a", "m", "general_chat_followup", "chat", "success")), 2},
		{"cold cache hits", testutil.ToFloat64(m.cacheHits.WithLabelValues(lv...)), 0},
		{"ttft observations", float64(testutil.CollectAndCount(m.ttft)), 2}, // chatbot and the warm scenario
	} {
		if d := c.got - c.want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// A miss is a result, not an error.
	if n := testutil.ToFloat64(m.probes.WithLabelValues("a", "m", "general_chat_followup", "chat", "error")); n != 0 {
		t.Errorf("probes_total{result=error} = %v after a miss", n)
	}

	m.ForgetTarget("a")
	if body := scrape(t, reg); strings.Contains(string(body), "slaprobe_warm_") {
		t.Errorf("warm series left after ForgetTarget:\n%s", body)
	}
}
