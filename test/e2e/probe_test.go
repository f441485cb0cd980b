package e2e

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// Basic auth on every web endpoint: the password is fleet-secret.
const (
	fleetUser     = "prometheus"
	fleetPassword = "fleet-secret"
	fleetWebCfg   = "basic_auth_users:\n  prometheus: $2a$10$AYPdg3wEWgWlkatFEa8JW.gBw9y25ciQhJnZy0xgzg8TKI3RahSXq\n"
)

// TestProbeFleet drives slaprobe the way a fleet does. Two simulated engines are listed in one
// file in Prometheus's file_sd format, and that file feeds both sides:
//
//   - a real Prometheus discovers them through file_sd_configs and scrapes
//     /probe?target=…&scenario=tiny for each, blackbox-exporter style, with basic auth, sharded
//     over two slaprobe instances with hashmod relabelling;
//   - slaprobe's own file_sd_configs read the same file and probe them on schedule (/metrics).
//
// The first instance knows the engines from the file; the second has no targets and reaches
// them through probe.allowed_targets (127.0.0.0/8 here, a pod CIDR on a cluster).
//
// The second engine is added to the file while both run; both sides must pick it up.
func TestProbeFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two simulated engines, slaprobe and Prometheus for up to 90 s")
	}
	t.Parallel() // mostly waiting on Prometheus and the probes: the package runs its long tests at once
	promBin := requireTool(t, "prometheus")
	root := repoRoot(t)
	bin := buildSlaprobe(t, root)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), readyBudget+waitBudget)
	t.Cleanup(cancel)

	sims := make([]string, 2)
	for i := range sims {
		sims[i] = testproc.FreeAddr(t)
		startProcess(t, fmt.Sprintf("slaprobe sim %d", i), bin, "sim", "--sim.listen-address="+sims[i], "--sim.time-scale=0.1")
	}

	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.json")
	writeTargets := func(addrs ...string) {
		t.Helper()
		// Tooling replaces the file in one step: write, then rename.
		b, _ := json.Marshal([]map[string]any{{"targets": addrs, "labels": map[string]string{"team": "inference"}}})
		tmp := targets + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, targets); err != nil {
			t.Fatal(err)
		}
	}
	writeTargets(sims[0])

	cfg := writeFile(t, dir, "slaprobe.yml", `
global: {jitter: 0}
targets: []
file_sd_configs:
  - files: [targets.json]
    refresh_interval: 1s
    scenarios: [tiny]
scenarios:
  - {name: tiny, input_tokens: 200, output_tokens: 16, interval: 3s, timeout: 10s}
`)
	// The second instance has no targets of its own: /probe reaches the engines through its
	// allow-list, as on a fleet where Prometheus alone discovers the replicas.
	cfgAllow := writeFile(t, dir, "slaprobe-allow.yml", `
global: {jitter: 0}
targets: []
probe:
  allowed_targets: [127.0.0.0/8]
  scenarios: [tiny]
scenarios:
  - {name: tiny, input_tokens: 200, output_tokens: 16, interval: 3s, timeout: 10s}
`)
	webCfg := writeFile(t, dir, "web.yml", fleetWebCfg)
	// Two slaprobe instances: Prometheus shards the engines over them with hashmod.
	addrs := []string{testproc.FreeAddr(t), testproc.FreeAddr(t)}
	procs := make([]*testproc.Process, len(addrs))
	for i, a := range addrs {
		c := cfg
		if i == 1 {
			c = cfgAllow
		}
		procs[i] = startProcess(t, fmt.Sprintf("slaprobe run %d", i), bin, "run", "--config.file="+c,
			"--web.config.file="+webCfg, "--web.listen-address="+a)
	}
	for i, a := range addrs {
		waitHTTP(t, ctx, procs[i], "http://"+a+"/-/healthy", http.StatusOK, true)
	}
	addr, sp := addrs[0], procs[0]
	// The web config covers /probe as it covers /metrics.
	waitHTTP(t, ctx, sp, "http://"+addr+"/probe?scenario=tiny&target="+sims[0], http.StatusUnauthorized, false)
	t.Logf("%5.1fs slaprobe up at %v, engines at %v", since(start), addrs, sims)
	// The image's health check: `slaprobe healthcheck`, with the credentials the web config asks for.
	hcCfg := writeFile(t, dir, "healthcheck-http.yml", fmt.Sprintf("basic_auth: {username: %s, password: %s}\n", fleetUser, fleetPassword))
	testproc.SeesTree()
	if out, err := exec.Command(bin, "healthcheck", "--healthcheck.url="+addr, "--healthcheck.http-config.file="+hcCfg).CombinedOutput(); err != nil {
		t.Errorf("slaprobe healthcheck: %v\n%s", err, out)
	}
	// /-/healthy answers without credentials (Kubernetes probes), so the check passes without them too.
	testproc.SeesTree()
	if out, err := exec.Command(bin, "healthcheck", "--healthcheck.url="+addr).CombinedOutput(); err != nil {
		t.Errorf("slaprobe healthcheck without credentials: %v\n%s", err, out)
	}

	promCfg := fmt.Sprintf(`
global: {scrape_interval: %[1]s, scrape_timeout: %[1]s, evaluation_interval: %[1]s}
scrape_configs:
  - job_name: slaprobe-probe
    metrics_path: /probe
    params: {scenario: [tiny]}
    basic_auth: {username: %[2]s, password: %[3]s}
    file_sd_configs: [{files: [%[4]q], refresh_interval: 1s}]
    relabel_configs:
      - {source_labels: [__address__], target_label: __param_target}
      - {source_labels: [__param_target], target_label: target}
      - {source_labels: [__param_target], modulus: 2, target_label: __tmp_shard, action: hashmod}
      - {source_labels: [__tmp_shard], regex: "0", target_label: __address__, replacement: %[5]q}
      - {source_labels: [__tmp_shard], regex: "1", target_label: __address__, replacement: %[6]q}
  - job_name: slaprobe
    basic_auth: {username: %[2]s, password: %[3]s}
    static_configs: [{targets: [%[5]q, %[6]q]}]
`, scrapeInterval, fleetUser, fleetPassword, targets, addrs[0], addrs[1])
	p := startPrometheusWith(t, ctx, promBin, dir, []byte(promCfg))
	t.Logf("%5.1fs prometheus ready at %s", since(start), p.base)

	wait := func(what string, check func(ctx context.Context) error) {
		t.Helper()
		var err error
		for {
			if err = check(ctx); err == nil {
				t.Logf("%5.1fs ok: %s", since(start), what)
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("after %.0fs, %s: %v\n--- prometheus log (tail) ---\n%s\n%s",
					since(start), what, err, tail(p.logs.Stderr(), 30), sp.Output())
			case <-time.After(time.Second):
			}
		}
	}
	// Each engine is probed through exactly one slaprobe: the one its hashmod shard names.
	probed := func(target string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			res, err := p.query(ctx, fmt.Sprintf(`slaprobe_probe_success{job="slaprobe-probe", target=%q, scenario="tiny"} == 1`, target))
			if err != nil {
				return err
			}
			if len(res) != 1 {
				return fmt.Errorf("target %s: %d successful /probe series, want 1", target, len(res))
			}
			if got, want := res[0].Metric["instance"], addrs[hashmod(target, 2)]; got != want {
				t.Errorf("target %s was probed through %s; its hashmod shard is %s", target, got, want)
			}
			how := map[int]string{0: "a discovered target", 1: "probe.allowed_targets"}[hashmod(target, 2)]
			t.Logf("%s probed through slaprobe %d, as %s", target, hashmod(target, 2), how)
			return nil
		}
	}
	scheduled := func(target string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			return p.wantNonEmpty(ctx, fmt.Sprintf(
				`slaprobe_probes_total{job="slaprobe", instance=%q, target=%q, scenario="tiny", result="success"} >= 1`, addr, target))
		}
	}
	wait("Prometheus drives /probe of the first engine", probed(sims[0]))
	wait("the probe's TTFT and decode speed reach Prometheus", func(ctx context.Context) error {
		return p.wantFinite(ctx, fmt.Sprintf(`slaprobe_probe_ttft_seconds{target=%q} + slaprobe_probe_decode_tokens_per_second{target=%q} * 0`, sims[0], sims[0]))
	})
	wait("slaprobe's own file_sd probes the first engine", scheduled(sims[0]))

	writeTargets(sims[0], sims[1])
	wait("Prometheus drives /probe of the engine added to the file", probed(sims[1]))
	wait("slaprobe's file_sd picked up the added engine", scheduled(sims[1]))

	// No /probe answer took longer than the scrape timeout, and none failed.
	if err := p.wantEmpty(ctx, `scrape_duration_seconds{job="slaprobe-probe"} >= 2`); err != nil {
		t.Error(err)
	}
	if err := p.wantEmpty(ctx, `slaprobe_probe_failure{job="slaprobe-probe"}`); err != nil {
		t.Error(err)
	}
	if !strings.Contains(sp.Stderr(), "file_sd target files changed") {
		t.Errorf("slaprobe did not log the target file change\n%s", sp.Output())
	}
}

// hashmod is Prometheus's relabelling action of that name: the MD5 of the value, its last eight
// bytes as a big-endian number, modulo the modulus.
func hashmod(value string, modulus uint64) int {
	sum := md5.Sum([]byte(value))
	return int(binary.BigEndian.Uint64(sum[8:]) % modulus)
}

// waitHTTP polls url until it answers want (with fleet basic auth when auth is set).
func waitHTTP(t *testing.T, ctx context.Context, proc *testproc.Process, url string, want int, auth bool) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if auth {
			req.SetBasicAuth(fleetUser, fleetPassword)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-proc.Exited():
			t.Fatalf("%s exited: %v\n%s", proc.Name(), proc.Err(), proc.Output())
		case <-ctx.Done():
			t.Fatalf("GET %s: %s, want %d\n%s", url, last, want, proc.Output())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
