package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/alertgen"
	"github.com/slaprobe/slaprobe/test/alerting"
	"github.com/slaprobe/slaprobe/test/llmd"
	"github.com/slaprobe/slaprobe/test/testproc"
	"gopkg.in/yaml.v3"
)

const (
	// pagingBudget bounds the whole paging test after the build.
	pagingBudget = 4 * time.Minute
	// pagingScrape is the scrape and rule evaluation interval of the paging test.
	pagingScrape = time.Second
	pageAlert    = "SlaprobeTTFTAboveMaxSafe"
)

// pagingParams are the operators' rules with windows short enough for a test (test/alerting).
func pagingParams() alertgen.Params { return alerting.PagingParams() }

// The scenario the test probes every second: 256 prompt tokens, 8 output tokens, TTFT limit 500 ms
// (a bucket bound). Healthy, the simulator prefills it in about 45 ms; degraded, in about 1.3 s.
var (
	fastPrefill = llmd.Options{PrefillOverhead: 20 * time.Millisecond, PrefillPerToken: 100 * time.Microsecond, ITL: time.Millisecond}
	slowPrefill = llmd.Options{PrefillOverhead: 20 * time.Millisecond, PrefillPerToken: 5 * time.Millisecond, ITL: time.Millisecond}
)

const pagingSlaprobeConfig = `global:
  scenarios: [paging]
targets:
  - name: sim
    url: %s
scenarios:
  - name: paging
    description: paging end-to-end test
    input_tokens: 256
    output_tokens: 8
    interval: 1s
    timeout: 20s
    thresholds: {ttft: 500ms}
`

// TestPaging proves that a page reaches the on-call engineer through the real stack: slaprobe probes
// llm-d-inference-sim, Prometheus scrapes both with the generated rules (short windows) and sends to
// Alertmanager, which routes to a webhook in this test. The simulator is restarted with a much slower
// prefill: the TTFT page must arrive with its labels and annotations. It is restarted healthy: the
// resolved notification must arrive.
func TestPaging(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llm-d-inference-sim, slaprobe, Prometheus and Alertmanager for up to 4 minutes")
	}
	t.Parallel() // mostly waiting on Prometheus and the probes: the package runs its long tests at once
	promBin := requireTool(t, "prometheus")
	amBin := alerting.AlertmanagerBinary(t)
	llmd.SkipIfMissing(t)
	root := repoRoot(t)
	bin := buildSlaprobe(t, root)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), pagingBudget)
	t.Cleanup(cancel)
	dir := t.TempDir()

	// The simulator, healthy.
	sim := llmd.Start(t, fastPrefill)
	port := sim.Port
	t.Logf("%5.1fs llm-d-inference-sim at %s", since(start), sim.URL)

	// slaprobe probing it.
	cfg := filepath.Join(dir, "slaprobe.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(pagingSlaprobeConfig, sim.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	sp := startProcess(t, "slaprobe run", bin, "run", "--config.file="+cfg, "--web.listen-address=127.0.0.1:0")
	spAddr := alerting.WaitListening(t, ctx, sp)
	t.Logf("%5.1fs slaprobe at %s", since(start), spAddr)

	// The webhook receiver: every notification Alertmanager sends.
	hook := &alerting.Webhook{}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)

	// Alertmanager routing to it.
	am := alerting.StartAlertmanager(t, ctx, amBin, dir, hookSrv.URL)
	t.Logf("%5.1fs alertmanager at %s", since(start), am)

	// Prometheus with the generated rules.
	rules, err := alertgen.RuleFileYAML(pagingParams())
	if err != nil {
		t.Fatal(err)
	}
	ruleFile := filepath.Join(dir, "slaprobe.rules.yml")
	if err := os.WriteFile(ruleFile, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	p := startPrometheusWith(t, ctx, promBin, t.TempDir(), pagingPrometheusConfig(t, spAddr, sim.URL, am, ruleFile),
		"--rules.alert.resend-delay=1s")
	t.Logf("%5.1fs prometheus at %s", since(start), p.base)

	// Healthy first: probes succeed within the threshold, and nothing pages.
	waitFor(t, ctx, "healthy probes counted by the SLO rules", func() error {
		return p.wantNonEmpty(ctx, `target_scenario:slaprobe_sla_probes:increase10s{scenario="paging",metric="ttft_seconds"} > 3`)
	}, p, sp)
	if err := p.wantEmpty(ctx, `target_scenario:slaprobe_sla_bad_probes:increase40s{scenario="paging"} > 0`); err != nil {
		t.Fatalf("the healthy simulator already breaks the threshold: %v", err)
	}
	t.Logf("%5.1fs healthy: probes within 500 ms", since(start))

	// Degrade: restart the simulator on the same port with a much slower prefill.
	sim.Stop()
	slow := slowPrefill
	slow.Port = port
	sim = llmd.Start(t, slow)
	degraded := time.Now()
	t.Logf("%5.1fs simulator restarted with a slow prefill (5 ms/token)", since(start))

	firing := waitPage(t, ctx, hook, "firing", p, sp)
	pageAfter := time.Since(degraded)
	t.Logf("%5.1fs page delivered %.1fs after the degradation: %s", since(start), pageAfter.Seconds(), firing.Annotations["summary"])
	checkPage(t, firing, spAddr)

	// Restore.
	sim.Stop()
	fast := fastPrefill
	fast.Port = port
	llmd.Start(t, fast)
	restored := time.Now()
	t.Logf("%5.1fs simulator restarted healthy", since(start))
	resolved := waitPage(t, ctx, hook, "resolved", p, sp)
	t.Logf("%5.1fs resolved notification %.1fs after the restore (page took %.1fs end to end)",
		since(start), time.Since(restored).Seconds(), pageAfter.Seconds())
	if resolved.Labels["scenario"] != "paging" {
		t.Errorf("resolved notification for %v, want the paging scenario's", resolved.Labels)
	}
}

// checkPage checks what the on-call engineer reads.
func checkPage(t *testing.T, a alerting.Alert, spAddr string) {
	t.Helper()
	want := map[string]string{
		"alertname": pageAlert, "severity": "critical", "job": "slaprobe", "instance": spAddr,
		"target": "sim", "model": llmd.DefaultModel, "scenario": "paging", "metric": "ttft_seconds",
	}
	for k, v := range want {
		if a.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, a.Labels[k], v, a.Labels)
		}
	}
	if got, want := a.Annotations["summary"], "TTFT above the max-safe threshold: paging on sim."; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	desc := a.Annotations["description"]
	for _, part := range []string{"time to first token limit of 500ms", "scenario paging on target sim", "times too fast"} {
		if !strings.Contains(desc, part) {
			t.Errorf("description lacks %q: %s", part, desc)
		}
	}
	if got, want := a.Annotations["runbook_url"], alertgen.RunbookBase+"#"+strings.ToLower(pageAlert); got != want {
		t.Errorf("runbook_url %q, want %q", got, want)
	}
}

// waitFor polls check until it passes.
func waitFor(t *testing.T, ctx context.Context, what string, check func() error, p *prometheus, sp *testproc.Process) {
	t.Helper()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v\n--- prometheus log ---\n%s\n%s", what, err, tail(p.logs.Stderr(), 30), sp.Output())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func pagingPrometheusConfig(t *testing.T, slaprobeAddr, simURL, amAddr, ruleFile string) []byte {
	t.Helper()
	iv := pagingScrape.String()
	static := func(addr string) []map[string][]string { return []map[string][]string{{"targets": {addr}}} }
	cfg := map[string]any{
		"global":     map[string]string{"scrape_interval": iv, "scrape_timeout": iv, "evaluation_interval": iv},
		"rule_files": []string{ruleFile},
		"alerting": map[string]any{
			"alertmanagers": []map[string]any{{"static_configs": static(amAddr)}},
		},
		"scrape_configs": []map[string]any{
			{"job_name": "slaprobe", "static_configs": static(slaprobeAddr)},
			{"job_name": "vllm-sim", "static_configs": static(strings.TrimPrefix(simURL, "http://"))},
		},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitPage returns the first page notification with the given status.
func waitPage(t *testing.T, ctx context.Context, h *alerting.Webhook, status string, p *prometheus, sp *testproc.Process) alerting.Alert {
	t.Helper()
	for {
		if a, ok := h.First(status, map[string]string{"alertname": pageAlert}); ok {
			return a
		}
		got := h.Bodies()
		select {
		case <-ctx.Done():
			res, _ := p.query(context.Background(), `{__name__=~"ALERTS|target_scenario:slaprobe_sla_bad_probes:ratio_10s|target_scenario:slaprobe_sla_bad_probes:increase40s|target_scenario:slaprobe_sla_probes:increase40s"}`)
			t.Fatalf("no %s %s notification; webhook got %s; Prometheus: %v\n--- prometheus log ---\n%s\n%s",
				status, pageAlert, got, res, tail(p.logs.Stderr(), 30), sp.Output())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
