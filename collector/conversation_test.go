package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/prober"
)

// TestConversationCacheMetrics: the cache-hit and TTFT-saved series of
// conversation scenarios appear with the first follow-up and go with the target;
// the history and recomputed token counters add a follow-up's seen tokens and
// what of them was not cached, by source, and nothing for an unknown share.
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

	inferred := warmConversation() // no count reported: the share is inferred from TTFT
	inferred.CachedReported, inferred.CachedTokens, inferred.PrimePromptTokens = false, 0, 32768
	infShare, ok := inferred.SeenCachedShare()
	if !ok {
		t.Fatal("the inferred follow-up has no share")
	}
	m.Observe(&inferred)
	unknown := inferred // no priming length: not inferable, counts in neither
	unknown.PrimePromptTokens = 0
	m.Observe(&unknown)

	lv := []string{"a", "m", "general_chat_followup", "chat"}
	tok := func(v interface {
		WithLabelValues(...string) prometheus.Counter
	}, source string) float64 {
		return testutil.ToFloat64(v.WithLabelValues(append(append([]string(nil), lv...), source)...))
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"followups", followUps(m, lv), 4},
		// hit: 32,752 of 32,768 cached; miss: none.
		{"history reported", tok(m.conv.history, "reported"), 2 * 32768},
		{"recomputed reported", tok(m.conv.recomputed, "reported"), 16 + 32768},
		{"history inferred", tok(m.conv.history, "inferred"), 32768},
		{"recomputed inferred", tok(m.conv.recomputed, "inferred"), 32768 * (1 - infShare)},
		{"misses", testutil.ToFloat64(m.conv.misses.WithLabelValues(lv...)), 1},
		{"hit ratio (last)", testutil.ToFloat64(m.conv.hitRatio.WithLabelValues(lv...)), 0},
		{"prime ttft", testutil.ToFloat64(m.conv.primeTTFT.WithLabelValues(lv...)), 1.4},
		{"saved (last)", testutil.ToFloat64(m.conv.saved.WithLabelValues(lv...)), 1.4 - 0.2}, // the unknown one
		{"probes ok", testutil.ToFloat64(m.probes.WithLabelValues("a", "m", "general_chat_followup", "chat", "success")), 4},
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
