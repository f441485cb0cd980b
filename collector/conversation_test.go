package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/prober"
)

// TestConversationCacheMetrics: the cache-hit and TTFT-saved series of
// conversation scenarios appear with the first follow-up and go with the target.
func TestConversationCacheMetrics(t *testing.T) {
	reg, m := newTestMetrics(t)
	m.SetScenarioEnabled("a", "m", "chatbot", "chat", true)
	m.SetScenarioEnabled("a", "m", "general_chat_followup", "chat", true)
	cold := success()
	m.Observe(&cold)
	if n := countLines(scrape(t, reg), "slaprobe_conversation_"); n != 0 {
		t.Fatalf("%d conversation series before any conversation probe; cold scenarios must add none", n)
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
		{"followups", followUps(m, lv), 2},
		{"misses", testutil.ToFloat64(m.conv.misses.WithLabelValues(lv...)), 1},
		{"hit ratio (last)", testutil.ToFloat64(m.conv.hitRatio.WithLabelValues(lv...)), 0},
		{"prime ttft", testutil.ToFloat64(m.conv.primeTTFT.WithLabelValues(lv...)), 1.4},
		{"saved (last)", testutil.ToFloat64(m.conv.saved.WithLabelValues(lv...)), 1.4 - 1.5},
		{"probes ok", testutil.ToFloat64(m.probes.WithLabelValues("a", "m", "general_chat_followup", "chat", "success")), 2},
		{"cold cache hits", testutil.ToFloat64(m.cacheHits.WithLabelValues(lv...)), 0},
		{"ttft observations", float64(testutil.CollectAndCount(m.ttft)), 2}, // chatbot and the conversation scenario
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
	if body := scrape(t, reg); strings.Contains(string(body), "slaprobe_conversation_") {
		t.Errorf("conversation series left after ForgetTarget:\n%s", body)
	}
}

// followUps counts the successful follow-up turns of a conversation scenario:
// slaprobe_conversation_turns_total summed over its cache classes.
func followUps(m *ProbeMetrics, lv []string) float64 {
	var n float64
	for _, c := range prober.ConversationCaches {
		n += testutil.ToFloat64(m.conv.turns.WithLabelValues(append(append([]string(nil), lv...), string(c))...))
	}
	return n
}
