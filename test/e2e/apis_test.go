package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// allAPIs are the APIs a probe can use; TestFourAPIs probes one target on each.
var allAPIs = []string{"chat", "completions", "messages", "responses"}

// TestFourAPIs runs the simulated engine and slaprobe probing it on the four APIs at once (one
// scenario each: chat, completions, the Responses API and the Messages API), and a real Prometheus.
// Every API has successful probes under its own api label, and the dashboards' per-scenario latency
// queries (the TTFT panel's p50 and p95) return a series per API, and every dashboard query answers.
func TestFourAPIs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulated engine, slaprobe and Prometheus for up to 90 s")
	}
	t.Parallel()
	promBin := requireTool(t, "prometheus")
	root := repoRoot(t)
	bin := buildSlaprobe(t, root)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), readyBudget+waitBudget)
	t.Cleanup(cancel)

	simAddr, webAddr := testproc.FreeAddr(t), testproc.FreeAddr(t)
	startProcess(t, "slaprobe sim", bin, "sim", "--sim.listen-address="+simAddr, "--sim.time-scale=0.1", "--sim.enable-per-request-metrics")
	var scen strings.Builder
	var names []string
	for _, api := range allAPIs {
		name := "tiny_" + api
		names = append(names, name)
		fmt.Fprintf(&scen, "  - {name: %s, api: %s, input_tokens: 200, output_tokens: 16, interval: 2s, timeout: 10s}\n", name, api)
	}
	cfg := writeFile(t, t.TempDir(), "slaprobe.yml", fmt.Sprintf("global: {jitter: 0}\ntargets:\n  - {name: sim, url: \"http://%s\", scenarios: [%s]}\nscenarios:\n%s",
		simAddr, strings.Join(names, ", "), scen.String()))
	sp := startRun(t, ctx, bin, cfg, webAddr)
	p := startPrometheusWith(t, ctx, promBin, t.TempDir(), []byte(fmt.Sprintf(`
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: slaprobe
    static_configs: [{targets: [%q]}]
`, webAddr)))

	// The TTFT panel's p50 and p95 queries of the overview dashboard (not its SLA line, which is
	// per scenario, nor its dashed line of an earlier time), with the variables as Grafana fills them.
	var panels []dashboardQuery
	for _, d := range loadDashboards(t, root) {
		if d.file != "slaprobe-overview.json" {
			continue
		}
		for _, q := range d.queries {
			if strings.Contains(q.where, "Time to first token") && !strings.Contains(q.expr, "offset") && !strings.Contains(q.expr, "sla_threshold") {
				panels = append(panels, q)
			}
		}
	}
	if len(panels) != 2 {
		t.Fatalf("%d p50/p95 queries in the TTFT panel of slaprobe-overview.json, want 2", len(panels))
	}
	apisOf := func(q string) ([]string, error) {
		res, err := p.query(ctx, q)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, s := range res {
			seen[s.Metric["api"]] = true
		}
		var out []string
		for a := range seen {
			out = append(out, a)
		}
		sort.Strings(out)
		return out, nil
	}
	for {
		var err error
		got, qerr := apisOf(`sum by (api) (slaprobe_probes_total{result="success"}) > 0`)
		switch {
		case qerr != nil:
			err = qerr
		case strings.Join(got, ",") != strings.Join(allAPIs, ","):
			err = fmt.Errorf("successful probes on %v, want %v", got, allAPIs)
		default:
			for _, q := range panels {
				if a, e := apisOf(grafanaVars.Replace(q.expr)); e != nil || strings.Join(a, ",") != strings.Join(allAPIs, ",") {
					err = fmt.Errorf("%s: series for APIs %v (%v), want %v", q.where, a, e, allAPIs)
					break
				}
			}
		}
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after %.0fs: %v\n%s", since(start), err, sp.Output())
		case <-time.After(time.Second):
		}
	}
	t.Logf("%5.1fs Prometheus has successful probes and the TTFT panel's series on each of %v", since(start), allAPIs)
	checkDashboards(t, ctx, p)
}
