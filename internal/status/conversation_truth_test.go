package status

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/browser"
	"github.com/slaprobe/slaprobe/test/gateway"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// TestConversationStatusAndMetricsAgree checks the status page and the
// exported series against a truth the test controls: two simulated engines
// behind the test gateway, three 4-turn conversations of 4,096 tokens plus
// 1,024 a turn. Cookie affinity keeps each conversation on one engine: all
// nine follow-ups hit. Round-robin sends the first follow-up to the engine
// that never saw the conversation (miss) and each later one to the engine
// that saw it two turns before (4,096 of 5,120 and 5,120 of 6,144 tokens:
// partial). The page's counts and slaprobe_conversation_turns_total must
// both say so, class by class, and the page's TTFT by turn must draw the
// measured turns. (The TTFTs are logged, not judged: wall-clock timings on a
// shared machine.) SLAPROBE_SHOT_DIR=dir keeps a screenshot of each page
// (status-conversation-POLICY.png).
func TestConversationStatusAndMetricsAgree(t *testing.T) {
	for _, tc := range []struct {
		policy gateway.Policy
		want   map[string]int
	}{
		{gateway.CookieAffinity, map[string]int{"hit": 9, "partial": 0, "miss": 0, "unknown": 0}},
		{gateway.RoundRobin, map[string]int{"hit": 0, "partial": 6, "miss": 3, "unknown": 0}},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			var urls []string
			for range 2 {
				cfg := vllmsim.DefaultConfig()
				cfg.TimeScale = 0.1
				e, err := vllmsim.New(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(e.Close)
				url, _ := testproc.Serve(t, e.Handler())
				urls = append(urls, url)
			}
			g, err := gateway.New(tc.policy, urls...)
			if err != nil {
				t.Fatal(err)
			}
			gwURL, client := testproc.Serve(t, g)
			page, rec, _, sc := conversationPage(t, `targets:
  - name: fleet
    url: `+gwURL+`
    scenarios: [agent]
scenarios:
  - name: agent
    input_tokens: 4096
    output_tokens: 16
    conversation: {turns: 4, new_tokens: 1024}
`, "agent")

			reg := prometheus.NewRegistry()
			metrics := collector.NewProbeMetrics(reg)
			p := prober.New(nil, nil)
			target := prober.Target{Name: "fleet", BaseURL: gwURL, API: prober.APIChat, Client: client}
			ctx := context.Background()
			prep, err := p.Prepare(ctx, target, "", sc)
			if err != nil {
				t.Fatal(err)
			}
			var firstFollowUp, priming []float64 // TTFT in seconds
			for range 3 {
				res := p.Run(ctx, target, prep)
				rec.BeforeProbe(ctx, target, sc)
				rec.AfterProbe(&res)
				metrics.Observe(&res)
				if res.Kind != prober.KindSuccess || len(res.Earlier) != 3 {
					t.Fatalf("conversation: %s %s, %d earlier turns: %v", res.Kind, res.Reason, len(res.Earlier), res.Err)
				}
				priming = append(priming, res.Earlier[0].TTFT().Seconds())
				firstFollowUp = append(firstFollowUp, res.Earlier[1].TTFT().Seconds())
			}

			html := pageHTML(t, page)
			onPage := cacheCounts(t, html, "agent")
			exported := turnsByClass(t, reg)
			for class, n := range tc.want {
				if onPage[class] != n {
					t.Errorf("status page: %d follow-ups %s, want %d (page %v)", onPage[class], class, n, onPage)
				}
				if exported[class] != n {
					t.Errorf("slaprobe_conversation_turns_total{cache=%q} = %d, want %d (exported %v)", class, exported[class], n, exported)
				}
			}
			if !strings.Contains(html, `data-conversation="3"`) {
				t.Error("the card does not say 3 conversations in the window")
			}
			// The chart's turn-2 point is the median first follow-up, its
			// turn-1 point the median priming turn, as the page prints them.
			for _, tip := range []string{
				fmt.Sprintf("turn 1: median TTFT %s over 3 conversations", formatValue(median(priming), "s")),
				fmt.Sprintf("turn 2: median TTFT %s over 3 conversations", formatValue(median(firstFollowUp), "s")),
			} {
				if !strings.Contains(html, tip) {
					t.Errorf("no point %q on the page", tip)
				}
			}
			if os.Getenv(browser.EnvShotDir) != "" { // the page as an operator sees it
				browser.Screenshot(t, browser.Chromium(t), page, "status-conversation-"+tc.policy.String()+".png", 1280, 1350)
			}
			ratio := median(firstFollowUp) / median(priming)
			t.Logf("%s: page %v, exported %v; first follow-up TTFT %.3f s, priming %.3f s (%.2f); requests per engine %v",
				tc.policy, onPage, exported, median(firstFollowUp), median(priming), ratio, g.Served())
		})
	}
}

// turnsByClass reads slaprobe_conversation_turns_total by its cache label.
func turnsByClass(t *testing.T, reg *prometheus.Registry) map[string]int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != "slaprobe_conversation_turns_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cache" {
					out[l.GetValue()] += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return out
}

func median(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}
