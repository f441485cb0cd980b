package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/test/alerting"
)

// noData lists the dashboard queries that return nothing here, each with its reason: most need NVML
// (a GPU and its driver), which no test machine here has. Every other query must return data after a
// sweep and a live run. TestDashboardQueriesAfterSweep fails on an entry that returns data after all,
// so the list stays exact.
var noData = map[string]string{
	// Not GPU: states the test does not provoke.
	`slaprobe-capacity.json: panel "Paused" query A`:                          "only while a sweep waits for a busy engine; the test's engine is never busy enough",
	`slaprobe-capacity.json: panel "Next scheduled sweep" query A`:            "the test's sweeper has no sweep.schedule: it sweeps on demand (POST /-/sweep)",
	`slaprobe-live.json: panel "Live max safe queue depth over time" query A`: "only once probe TTFT crosses its threshold under production load (query B, the estimate, has data)",
	// Warm-context scenarios are opt-in (a 32K conversation every 5 min is 1.6 M prompt tokens an
	// hour); the demo probes none. Their metrics are checked against vllmsim and llm-d in collector
	// and prober tests, and their alert in alerts/slaprobe.conversation_test.yml.
	`slaprobe-live.json: panel "Cache-hit share and TTFT saved" query A`:           "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Cache-hit share and TTFT saved" query B`:           "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Follow-up vs priming TTFT" query A`:                "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Follow-up vs priming TTFT" query B`:                "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Follow-up vs priming TTFT" query C`:                "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Follow-ups by cache class" query A`:                "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Cached share of what the engine had seen" query A`: "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Cached share of what the engine had seen" query B`: "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Conversation waiting time" query A`:                "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Conversation waiting time" query B`:                "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Follow-ups that missed (range)" query A`:           "no warm scenario probed (opt-in)",
	`slaprobe-live.json: panel "Conversation cache alerts" query A`:                "ALERTS of SlaprobeConversationCacheLost and SlaprobePrefixCachingNotWorking: only while they fire",
	// Trace-shaped and live scenarios (workload:) are opt-in; the demo probes none. Their series are
	// checked against vllmsim in collector and internal/status tests.
	`slaprobe-overview.json: panel "TTFT by length class: p50 and p99" query A`:   "no workload: scenario probed (opt-in)",
	`slaprobe-overview.json: panel "TTFT by length class: p50 and p99" query B`:   "no workload: scenario probed (opt-in)",
	`slaprobe-overview.json: panel "TTFT by length class: p50 and p99" query C`:   "no workload: scenario probed (opt-in)",
	`slaprobe-overview.json: panel "Good share by length class" query A`:          "no workload: scenario probed (opt-in)",
	`slaprobe-live.json: panel "Probes by length class vs live requests" query B`: "no workload: scenario probed (opt-in)",
	// The "Why the tail" row: engine families the demo's simulated engine has no cause for. Each is
	// read from fixtures of the engines' own expositions in internal/engine, and the row's other
	// panels are checked moving with their causes in TestTailRowSignalsFollowTheirCauses.
	`slaprobe-live.json: panel "KV transfer (disaggregated prefill)" query A`:  "NIXL KV transfer: only with disaggregated prefill (a KV connector)",
	`slaprobe-live.json: panel "KV transfer (disaggregated prefill)" query B`:  "NIXL KV transfer failures: only with disaggregated prefill",
	`slaprobe-live.json: panel "Sleep state and admission rejections" query B`: "vllm:admission_rejections_total: pending upstream, and the simulated engine admits every request",
	`slaprobe-live.json: panel "Speculative decoding acceptance" query A`:      "the demo's engine runs no speculative decoding",
	`slaprobe-live.json: panel "Speculative decoding acceptance" query B`:      "the demo's engine runs no speculative decoding",
	// slaprobe_gpu_* series come from NVML only.
	`slaprobe-live.json: panel "GPU power and limit" query A`:        "NVML power readings",
	`slaprobe-live.json: panel "GPU power and limit" query B`:        "NVML power limit",
	`slaprobe-live.json: panel "GPU temperature" query A`:            "NVML temperature",
	`slaprobe-live.json: panel "GPU utilisation and memory" query A`: "NVML utilisation",
	`slaprobe-live.json: panel "GPU utilisation and memory" query B`: "NVML memory",
	// Power, energy and cost of a target come from the GPUs' NVML energy counters.
	`slaprobe-live.json: panel "Power per target" query A`:                            "NVML energy counter",
	`slaprobe-live.json: panel "Power per target" query B`:                            "NVML power samples",
	`slaprobe-live.json: panel "Energy per output token" query A`:                     "NVML energy counter",
	`slaprobe-live.json: panel "Cost per hour and per million output tokens" query A`: "NVML energy counter",
	`slaprobe-live.json: panel "Cost per hour and per million output tokens" query B`: "NVML energy counter",
	// A sweep step's power and energy: absent without power readings.
	`slaprobe-capacity.json: panel "GPU power vs context" query A`:              "NVML power during the step",
	`slaprobe-capacity.json: panel "Peak GPU power" query A`:                    "NVML power during the step",
	`slaprobe-capacity.json: panel "Cost per hour at the busiest step" query A`: "NVML power during the step",
	`slaprobe-capacity.json: panel "Best energy per output token" query A`:      "NVML energy during the step",
}

// sweepConfig has slaprobe sweep the demo's simulated engine with short ladders: a report scenario, a
// use case and the 32K scenario the "concurrent users at 32K" stat reads.
const sweepConfig = `global:
  scenarios: [chatbot, short_chat, tool_calling]
targets:
  - name: swept
    url: %s
sweep:
  enabled: true
  scenarios: [chatbot, short_chat, tool_calling]
  closed_loop: {concurrency: [1, 2], warmup: 1s, duration: 4s}
  burst: {concurrency: [1, 2, 4], repeat: 1}
  cooldown: 0s
  pause: {max_waiting: 1000, max_kv_cache_usage: 1}
  state_file: %s
`

// TestDashboardQueriesAfterSweep runs `slaprobe demo` (live probes and engine signals), a second
// slaprobe that sweeps the demo's engine on demand, and a real Prometheus scraping both with the rules
// loaded; once the sweep has finished it runs every dashboard query and requires data from each, except
// those listed in noData. Then it runs each panel's transformations with Grafana's own code on what its
// queries return (checkPanelTransforms).
func TestDashboardQueriesAfterSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs slaprobe demo, a short sweep and Prometheus for a few minutes")
	}
	t.Parallel() // mostly waiting on Prometheus and the probes: the package runs its long tests at once
	promBin := requireTool(t, "prometheus")
	root := repoRoot(t)
	files := ruleFiles(t, root)
	bin := buildSlaprobe(t, root)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)

	demo := startDemo(t, ctx, bin)
	engine := strings.TrimSuffix(demo.engine, "/metrics")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sweep.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(sweepConfig, engine, filepath.Join(dir, "sweep-state.json"))), 0o644); err != nil {
		t.Fatal(err)
	}
	sw := startProcess(t, "slaprobe run (sweeper)", bin, "run", "--config.file="+cfg, "--web.listen-address=127.0.0.1:0")
	swAddr := alerting.WaitListening(t, ctx, sw)
	t.Logf("%5.1fs demo at %s, sweeper at %s", since(start), demo.metrics, swAddr)

	iv := scrapeInterval.String()
	static := func(addr string) []map[string][]string { return []map[string][]string{{"targets": {addr}}} }
	promCfg := map[string]any{
		"global":     map[string]string{"scrape_interval": iv, "scrape_timeout": iv, "evaluation_interval": iv},
		"rule_files": files,
		"scrape_configs": []map[string]any{
			{"job_name": "slaprobe", "static_configs": static(strings.TrimSuffix(strings.TrimPrefix(demo.metrics, "http://"), "/metrics"))},
			{"job_name": "slaprobe-sweeper", "static_configs": static(swAddr)},
			{"job_name": "vllm-sim", "static_configs": static(strings.TrimSuffix(strings.TrimPrefix(demo.engine, "http://"), "/metrics"))},
		},
	}
	p := startPrometheusWith(t, ctx, promBin, t.TempDir(), yamlBytes(t, promCfg))

	// Start the sweep once the sweeper has probed (it calibrates prompts first).
	waitFor(t, ctx, "sweeper ready", func() error {
		resp, err := http.Post("http://"+swAddr+"/-/sweep", "", nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusConflict {
			return fmt.Errorf("POST /-/sweep: %s", resp.Status)
		}
		return nil
	}, p, sw)
	t.Logf("%5.1fs sweep started", since(start))
	waitFor(t, ctx, "sweep finished", func() error {
		return p.wantNonEmpty(ctx, `slaprobe_sweep_last_attempt_success{target="swept"} == 1 and on (instance) slaprobe_sweep_running == 0 and on (instance) slaprobe_sweep_last_timestamp_seconds{target="swept"}`)
	}, p, sw)
	t.Logf("%5.1fs sweep finished", since(start))

	// Every query must have data; a few need time (rates over a minute, the live fit): poll, and
	// stop polling with time left to say which queries never had data (a query that ran into the
	// test's deadline said only "context deadline exceeded").
	deadline, _ := ctx.Deadline()
	pollEnd := deadline.Add(-45 * time.Second)
	var missing []string
	for {
		missing = missing[:0]
		for _, d := range loadDashboards(t, root) {
			for _, q := range d.queries {
				key := d.file + ": " + q.where
				// Did the panel have data at any time of the test, as a dashboard over that range shows it?
				res, err := p.queryRange(ctx, grafanaVars.Replace(q.expr), start, time.Now(), 2*time.Second)
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				_, excused := noData[key]
				switch {
				case len(res) == 0 && !excused:
					missing = append(missing, key)
				case len(res) > 0 && excused:
					t.Errorf("%s returns data: remove it from noData", key)
				}
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(pollEnd) {
			sort.Strings(missing)
			t.Fatalf("dashboard queries without data after a sweep and a live run:\n  %s\n%s",
				strings.Join(missing, "\n  "), sw.Output())
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("%5.1fs every dashboard query has data, but the %d listed in noData", since(start), len(noData))
	checkPanelTransforms(t, ctx, p, root)
}

func yamlBytes(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// queryRange runs a range query, as a dashboard panel does, and returns the series that have samples.
func (p *prometheus) queryRange(ctx context.Context, q string, from, to time.Time, step time.Duration) ([]string, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	params := url.Values{"query": {q}, "start": {strconv.FormatInt(from.Unix(), 10)},
		"end": {strconv.FormatInt(to.Unix(), 10)}, "step": {step.String()}}
	if err := p.apiGet(ctx, "/api/v1/query_range", params, &data); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range data.Result {
		if len(r.Values) > 0 {
			out = append(out, fmt.Sprint(r.Metric))
		}
	}
	return out, nil
}
