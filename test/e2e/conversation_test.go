package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/internal/alertgen"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/alerting"
	"github.com/slaprobe/slaprobe/test/gateway"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// conversationBudget bounds the conversation alert test after Prometheus starts.
const conversationBudget = 3 * time.Minute

// conversationParams are the operators' rules with SlaprobeConversationCacheLost's window and `for`
// scaled down for a test (test/alerting).
func conversationParams() alertgen.Params { return alerting.ConversationParams() }

// conversationOldRule is SlaprobeConversationCacheLost's expression before it judged the recomputed
// share (misses only), over conversationParams' window: the round-robin fleet must escape it.
const conversationOldRule = `sum by (target) (increase(slaprobe_conversation_turns_total{cache="miss"}[20s])) / sum by (target) (increase(slaprobe_conversation_turns_total{cache!="unknown"}[20s])) > 0.25`

// TestConversationCacheAlertOnPrometheus proves SlaprobeConversationCacheLost end to end against a
// truth the test controls. Two fleets of two simulated engines (prefix caching on), each behind the
// test gateway: "sticky" routes with cookie affinity, "spread" round-robin. A 12-turn conversation
// (4K priming, 256 new tokens a turn, the shape of coding_agent scaled down) runs on each about every
// half second, its results exported by slaprobe's collector and scraped by a real Prometheus every
// second with the generated rules. Round-robin misses only the first follow-up of eleven (9 %; the
// others land on the engine that saw the conversation two turns before and read partial or hit), so
// the rule before, misses only, stays quiet, while the follow-ups recompute over 10 % of their
// history: the alert fires on spread and never on sticky. Then spread's gateway turns to cookie
// affinity and the alert resolves once the recomputed tokens leave the window.
func TestConversationCacheAlertOnPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs simulated engines, conversations and Prometheus for about a minute")
	}
	t.Parallel()
	promBin := requireTool(t, "prometheus")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), conversationBudget)
	t.Cleanup(cancel)

	// Each fleet's gateway is swappable, so that spread can be given affinity later.
	type fleet struct {
		name   string
		gw     atomic.Pointer[gateway.Gateway]
		urls   []string
		target prober.Target
	}
	newGateway := func(policy gateway.Policy, urls []string) *gateway.Gateway {
		g, err := gateway.New(policy, urls...)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	fleets := []*fleet{{name: "sticky"}, {name: "spread"}}
	for i, f := range fleets {
		for range 2 {
			cfg := vllmsim.DefaultConfig()
			cfg.TimeScale = 0.1
			e, err := vllmsim.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(e.Close)
			url, _ := testproc.Serve(t, e.Handler())
			f.urls = append(f.urls, url)
		}
		f.gw.Store(newGateway([]gateway.Policy{gateway.CookieAffinity, gateway.RoundRobin}[i], f.urls))
		url, client := testproc.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.gw.Load().ServeHTTP(w, r) }))
		f.target = prober.Target{Name: f.name, BaseURL: url, API: prober.APIChat, Client: client}
	}

	reg := prom.NewRegistry()
	metrics := collector.NewProbeMetrics(reg)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)

	s := prober.Scenario{Name: "agent", Family: prober.FamilyCustom, InputTokens: 4096, OutputTokens: 16,
		Interval: time.Second, Timeout: 20 * time.Second, Conversation: prober.Conversation{Turns: 12, NewTokens: 256, Tools: true}}
	p := prober.New(nil, nil)
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(func() { stop(); wg.Wait() })
	for _, f := range fleets {
		prep, err := p.Prepare(ctx, f.target, "", s)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				res := p.Run(runCtx, f.target, prep)
				if runCtx.Err() != nil {
					return
				}
				metrics.Observe(&res)
				select {
				case <-runCtx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		}()
	}

	dir := t.TempDir()
	rules, err := alertgen.RuleFileYAML(conversationParams())
	if err != nil {
		t.Fatal(err)
	}
	ruleFile := filepath.Join(dir, "slaprobe.rules.yml")
	if err := os.WriteFile(ruleFile, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	iv := pagingScrape.String()
	promCfg, err := yaml.Marshal(map[string]any{
		"global":     map[string]string{"scrape_interval": iv, "scrape_timeout": iv, "evaluation_interval": iv},
		"rule_files": []string{ruleFile},
		"scrape_configs": []map[string]any{{"job_name": "slaprobe",
			"static_configs": []map[string][]string{{"targets": {strings.TrimPrefix(srv.URL, "http://")}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pm := startPrometheusWith(t, ctx, promBin, t.TempDir(), promCfg)
	t.Logf("%5.1fs prometheus at %s", since(start), pm.base)

	alert := func(target string) string {
		return fmt.Sprintf(`ALERTS{alertname="SlaprobeConversationCacheLost", alertstate="firing", target=%q}`, target)
	}
	poll := func(what string, check func() error) {
		t.Helper()
		for {
			err := check()
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %v\n--- prometheus log ---\n%s", what, err, tail(pm.logs.Stderr(), 30))
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	value := func(q string) float64 {
		t.Helper()
		res, err := pm.query(ctx, q)
		if err != nil || len(res) != 1 {
			t.Fatalf("%s: %v %v", q, res, err)
		}
		v, err := res[0].Float()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	share := func(target, class string) float64 {
		t.Helper()
		return value(fmt.Sprintf(`sum(slaprobe_conversation_turns_total{target=%q, cache=%q}) / sum(slaprobe_conversation_turns_total{target=%q, cache!="unknown"})`, target, class, target))
	}
	recomputed := func(target string) float64 {
		t.Helper()
		return value(fmt.Sprintf(`sum(slaprobe_conversation_recomputed_tokens_total{target=%q, source="reported"}) / sum(slaprobe_conversation_history_tokens_total{target=%q, source="reported"})`, target, target))
	}

	poll("SlaprobeConversationCacheLost firing on spread", func() error { return pm.wantNonEmpty(ctx, alert("spread")) })
	t.Logf("%5.1fs fires on spread: recomputed %.4f of the history; misses %.3f, partial %.3f, hits %.3f of its follow-ups; sticky: recomputed %.4f, hits %.3f",
		since(start), recomputed("spread"), share("spread", "miss"), share("spread", "partial"), share("spread", "hit"), recomputed("sticky"), share("sticky", "hit"))
	if err := pm.wantEmpty(ctx, `ALERTS{alertname="SlaprobeConversationCacheLost", target="sticky"}`); err != nil {
		t.Errorf("the alert is active on sticky, whose follow-ups hit: %v", err)
	}
	if err := pm.wantEmpty(ctx, conversationOldRule); err != nil {
		t.Errorf("the rule before (misses over 25 %%) selects a series; this test is about the case it misses: %v", err)
	}
	if m := share("spread", "miss"); m < 0.08 || m > 0.1 {
		t.Errorf("spread: %.3f of the follow-ups missed; round-robin over two engines misses the first of eleven (0.091)", m)
	}
	if r := recomputed("spread"); r < 0.1 || r > 0.15 {
		t.Errorf("spread: %.4f of the history recomputed; round-robin over two engines recomputes the first follow-up's and each later one's turn before (about 0.12)", r)
	}
	if h := share("sticky", "hit"); h != 1 {
		t.Errorf("sticky: %.3f of the follow-ups hit; cookie affinity keeps every conversation on its engine", h)
	}
	if r := recomputed("sticky"); r > 0.01 {
		t.Errorf("sticky: %.4f of the history recomputed; affinity recomputes only the last partial block of each turn", r)
	}

	fleets[1].gw.Store(newGateway(gateway.CookieAffinity, fleets[1].urls))
	t.Logf("%5.1fs spread's gateway now routes with cookie affinity", since(start))
	poll("SlaprobeConversationCacheLost resolving on spread", func() error {
		return pm.wantEmpty(ctx, `ALERTS{alertname="SlaprobeConversationCacheLost", target="spread"}`)
	})
	t.Logf("%5.1fs resolved on spread", since(start))
	if err := pm.wantEmpty(ctx, `ALERTS{alertname="SlaprobeConversationCacheLost", target="sticky"}`); err != nil {
		t.Errorf("the alert is active on sticky: %v", err)
	}
}
