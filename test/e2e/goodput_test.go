package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/internal/alertgen"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// EnvSimAlerts runs the simulator's alert tests that the Ollama fleet (test/fleet) supersedes in
// make test.
const EnvSimAlerts = "SLAPROBE_SIM_ALERTS"

// goodputBudget bounds the goodput test after the build.
const goodputBudget = 3 * time.Minute

// TestGoodputAlertOnPrometheus proves the joint SLO end to end: `slaprobe sim` alternates a slow
// first token (800 ms late, threshold 500 ms) with a slow stream (60 ms a token, threshold 30 ms),
// one request in four each; `slaprobe run` probes it every second; Prometheus scrapes slaprobe every
// second with the generated rules (the paging test's short windows). Every metric's mean stays within
// its threshold, half the probes are good, and SlaprobeGoodputBelowObjective fires.
//
// It runs with SLAPROBE_SIM_ALERTS=1 only: in make test the goodput pages come from a real cause on
// Ollama (test/fleet's TestPagesOnOllama), the counting of alternating faults is checked by
// collector's TestGoodputAlternatingFaults, and the rules by promtool (alerts/slaprobe.goodput_test.yml).
func TestGoodputAlertOnPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulated engine, slaprobe and Prometheus for up to 3 minutes")
	}
	if os.Getenv(EnvSimAlerts) != "1" {
		t.Skip("the simulator's goodput page: set " + EnvSimAlerts + "=1 (make test proves the goodput pages on Ollama, test/fleet)")
	}
	// Its probes are judged against thresholds between the fast and the
	// slow halves: timing, so the quiet pass.
	testproc.Quiet(t)
	t.Parallel()
	promBin := requireTool(t, "prometheus")
	root := repoRoot(t)
	bin := buildSlaprobe(t, root)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), goodputBudget)
	t.Cleanup(cancel)
	dir := t.TempDir()

	simAddr := testproc.FreeAddr(t)
	simCfg := writeFile(t, dir, "sim.yml", "faults:\n  alternate_slow_first_token: 800ms\n  alternate_slow_token: 60ms\n")
	startProcess(t, "slaprobe sim", bin, "sim", "--sim.listen-address="+simAddr, "--sim.config.file="+simCfg)

	webAddr := testproc.FreeAddr(t)
	cfg := writeFile(t, dir, "slaprobe.yml", fmt.Sprintf(`
global: {jitter: 0}
targets:
  - {name: sim, url: "http://%s", scenarios: [alternating]}
scenarios:
  - name: alternating
    input_tokens: 256
    output_tokens: 32
    interval: 1s
    timeout: 20s
    thresholds: {ttft: 500ms, itl: 30ms, e2e: 3s, min_decode_tokens_per_second: 25}
`, simAddr))
	sp := startRun(t, ctx, bin, cfg, webAddr)
	t.Logf("%5.1fs slaprobe at %s probing slaprobe sim at %s", since(start), webAddr, simAddr)

	rules, err := alertgen.RuleFileYAML(pagingParams())
	if err != nil {
		t.Fatal(err)
	}
	ruleFile := filepath.Join(dir, "slaprobe.rules.yml")
	if err := os.WriteFile(ruleFile, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	iv := pagingScrape.String()
	promCfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]string{"scrape_interval": iv, "scrape_timeout": iv, "evaluation_interval": iv},
		"rule_files":     []string{ruleFile},
		"scrape_configs": []map[string]any{{"job_name": "slaprobe", "static_configs": []map[string][]string{{"targets": {webAddr}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := startPrometheusWith(t, ctx, promBin, t.TempDir(), promCfg)
	t.Logf("%5.1fs prometheus at %s", since(start), p.base)

	const firing = `ALERTS{alertname="SlaprobeGoodputBelowObjective", alertstate="firing", scenario="alternating", target="sim", severity="critical"}`
	waitFor(t, ctx, "the goodput page firing", func() error { return p.wantNonEmpty(ctx, firing) }, p, sp)
	t.Logf("%5.1fs %s fires", since(start), alertgen.GoodputPageAlert)

	// The figures behind it, over every probe once 40 have run.
	sc := `{job="slaprobe", scenario="alternating"}`
	waitFor(t, ctx, "40 probes counted", func() error { return p.wantNonEmpty(ctx, `sum(slaprobe_probes_total`+sc+`) >= 40`) }, p, sp)
	value := func(q string) float64 {
		t.Helper()
		res, err := p.query(ctx, q)
		if err != nil || len(res) != 1 {
			t.Fatalf("%s: %v %v", q, res, err)
		}
		v, err := res[0].Float()
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	total := value(`sum(slaprobe_probes_total` + sc + `)`)
	good := value(`sum(slaprobe_probes_good_total` + sc + `)`)
	mean := func(h string) float64 {
		return value(fmt.Sprintf("sum(%s_sum%s) / sum(%s_count%s)", h, sc, h, sc))
	}
	ttft, itl, e2e, decode := mean("slaprobe_ttft_seconds"), mean("slaprobe_itl_seconds"), mean("slaprobe_e2e_latency_seconds"), mean("slaprobe_decode_tokens_per_second")
	window := value(`1 - target_scenario:slaprobe_goodput_bad_probes:increase40s` + sc + ` / target_scenario:slaprobe_goodput_probes:increase40s` + sc)
	t.Logf("%5.1fs %v probes, %v good (%.1f %%); good over the rules' 40 s window %.0f %%; means: TTFT %.0f ms (threshold 500 ms), ITL %.1f ms (30 ms), E2E %.0f ms (3 s), decode %.1f tokens/s (minimum 25)",
		since(start), total, good, 100*good/total, 100*window, 1000*ttft, 1000*itl, 1000*e2e, decode)
	if err := p.wantNonEmpty(ctx, firing); err != nil {
		t.Errorf("the goodput page stopped firing: %v", err)
	}
	if share := good / total; share < 0.45 || share > 0.55 {
		t.Errorf("good share %.3f, want 0.5 (± 10 %%)", share)
	}
	if ttft > 0.5 || itl > 0.03 || e2e > 3 || decode < 25 {
		t.Errorf("a mean is outside its threshold: TTFT %.3f s, ITL %.4f s, E2E %.2f s, decode %.1f tokens/s", ttft, itl, e2e, decode)
	}
}
