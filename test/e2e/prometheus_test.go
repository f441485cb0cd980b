package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/test/alerting"
	"github.com/slaprobe/slaprobe/test/testproc"
	"gopkg.in/yaml.v3"
)

const (
	// envRequire turns a missing tool into a failure instead of a skip (set by `make test`).
	envRequire = "SLAPROBE_REQUIRE_DEPS"
	// readyBudget bounds starting the programs a test runs (slaprobe, Prometheus, Alertmanager):
	// make test runs its stages side by side, and on a loaded 2-core machine a Prometheus took
	// 75 s to answer ready. waitBudget bounds the checks once they are up.
	readyBudget = 3 * time.Minute
	waitBudget  = 90 * time.Second
	// scrapeInterval is also the rule evaluation interval.
	scrapeInterval = 2 * time.Second
)

// The demo's default scenarios.
var scenarios = []string{"agentic", "chatbot", "rag", "tool_calling"}

// histogramMode is how Prometheus ingests slaprobe's histograms, which carry classic buckets and
// native ones: classic scrapes the text format (_bucket series), native turns on native histograms,
// which Prometheus 2.x then ingests instead of the classic buckets.
type histogramMode struct {
	name     string
	flags    []string
	quantile string // p50 TTFT by scenario over 1m, in this mode's series
}

var (
	classic = histogramMode{
		name:     "classic",
		quantile: `histogram_quantile(0.5, sum by (le, scenario) (rate(slaprobe_ttft_seconds_bucket[1m])))`,
	}
	native = histogramMode{
		name:     "native",
		flags:    []string{"--enable-feature=native-histograms"},
		quantile: `histogram_quantile(0.5, sum by (scenario) (rate(slaprobe_ttft_seconds[1m])))`,
	}
)

// TestPrometheus runs `slaprobe demo`, has a real Prometheus scrape it (and the demo's simulated
// engine) with alerts/*.yml loaded, and checks through the HTTP API what a dashboard and the alerts
// read: successful probes of every default scenario, a finite TTFT quantile, the SLA thresholds, the
// recording rules, every rule loaded and healthy, and no alert firing on the healthy demo.
//
// With native histograms available (Prometheus 2.40 to 2.x) a second Prometheus runs with them on:
// 2.x then ingests the native histograms only, which exercises the rules' native-histogram branch.
func TestPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs slaprobe demo and Prometheus for up to 90 s")
	}
	t.Parallel() // mostly waiting on Prometheus and the probes: the package runs its long tests at once
	promBin := requireTool(t, "prometheus")
	major, minor := prometheusVersion(t, promBin)
	root := repoRoot(t)
	ruleFiles := ruleFiles(t, root)
	bin := buildSlaprobe(t, root)

	start := time.Now()
	// The demo and Prometheus get readyBudget to come up (on a loaded 2-core machine Prometheus
	// took 75 s to be ready), and the checks waitBudget from when their Prometheus is ready: a
	// slow start must not eat the time the probes need to fill a rate's window.
	ctx, cancel := context.WithTimeout(context.Background(), readyBudget+waitBudget)
	t.Cleanup(cancel)

	demo := startDemo(t, ctx, bin)
	t.Logf("%5.1fs demo up: metrics %s, engine %s", since(start), demo.metrics, demo.engine)

	modes := []histogramMode{classic}
	if major == 2 && minor >= 40 {
		modes = append(modes, native)
	} else {
		t.Logf("prometheus %d.%d: native histograms not checked (2.40 to 2.x only: 3.x configures them differently)", major, minor)
	}
	// A group, so that the demo outlives its parallel subtests.
	t.Run("histograms", func(t *testing.T) {
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				p := startPrometheus(t, ctx, promBin, m, demo, ruleFiles)
				t.Logf("%5.1fs prometheus (%s histograms) ready at %s", since(start), m.name, p.base)
				cctx, ccancel := context.WithTimeout(ctx, waitBudget)
				defer ccancel()
				checkPrometheus(t, cctx, p, m, demo, ruleFiles, start)
				checkDashboards(t, ctx, p) // dashboards_test.go: every dashboard query, now that there is data
			})
		}
	})
	demo.stop(t)
	t.Logf("%5.1fs demo stopped", since(start))
}

// checkPrometheus polls Prometheus until every check passes, then asserts that no alert fires.
func checkPrometheus(t *testing.T, ctx context.Context, p *prometheus, m histogramMode, demo *demoProcess, ruleFiles []string, start time.Time) {
	wantRules := ruleNames(t, ruleFiles)
	checks := []struct {
		name  string
		check func(ctx context.Context) error
	}{
		{"successful probes of every scenario", func(ctx context.Context) error {
			return p.wantScenarios(ctx, `sum by (scenario) (slaprobe_probes_total{result="success"}) >= 1`, scenarios)
		}},
		{"slaprobe_sla_threshold", func(ctx context.Context) error {
			return p.wantScenarios(ctx, `slaprobe_sla_threshold{metric="ttft_seconds"} > 0`, scenarios)
		}},
		{"engine scraped", func(ctx context.Context) error {
			return p.wantNonEmpty(ctx, `up{job="vllm-sim"} == 1 and on (instance) count by (instance) ({job="vllm-sim", __name__=~"vllm:.+"}) > 0`)
		}},
		{"finite p50 TTFT (" + m.name + " histograms)", func(ctx context.Context) error {
			return p.wantFinite(ctx, m.quantile)
		}},
		{"rules loaded and healthy", func(ctx context.Context) error {
			return p.rulesHealthy(ctx, wantRules)
		}},
		{"recording rule target_scenario:slaprobe_ttft_seconds:p95_15m", func(ctx context.Context) error {
			return p.wantFinite(ctx, `target_scenario:slaprobe_ttft_seconds:p95_15m`)
		}},
		// NaN for a scenario whose only probe ran before the first scrape: the counter did not move.
		{"recording rule target_scenario:slaprobe_probe_success:ratio_1h", func(ctx context.Context) error {
			if err := p.wantEmpty(ctx, `target_scenario:slaprobe_probe_success:ratio_1h < 1`); err != nil {
				return err
			}
			return p.wantNonEmpty(ctx, `target_scenario:slaprobe_probe_success:ratio_1h == 1`)
		}},
	}
	if m.name == native.name {
		// Prometheus 2.x keeps only the native histogram then, so the rules' native branch answered.
		checks = append(checks, struct {
			name  string
			check func(ctx context.Context) error
		}{"no classic buckets ingested", func(ctx context.Context) error {
			if err := p.wantNonEmpty(ctx, `slaprobe_ttft_seconds`); err != nil {
				return err
			}
			return p.wantEmpty(ctx, `slaprobe_ttft_seconds_bucket`)
		}})
	}
	done := make([]bool, len(checks))
	errs := make([]error, len(checks))
	for {
		pending := 0
		for i, c := range checks {
			if done[i] {
				continue
			}
			if errs[i] = c.check(ctx); errs[i] == nil {
				done[i] = true
				t.Logf("%5.1fs ok: %s", since(start), c.name)
			} else {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			var msg strings.Builder
			for i, c := range checks {
				if !done[i] {
					fmt.Fprintf(&msg, "\n  %s: %v", c.name, errs[i])
				}
			}
			t.Fatalf("after %.0fs, still failing:%s\n--- prometheus log (tail) ---\n%s\n%s",
				since(start), msg.String(), tail(p.logs.Stderr(), 30), demo.proc.Output())
		case <-time.After(time.Second):
		}
	}

	// Now that every rule has seen real series, none may fail (e.g. a join turned many-to-many).
	if err := p.rulesHealthy(ctx, wantRules); err != nil {
		t.Error(err)
	}
	// The demo is healthy: an alert firing on it is a false positive.
	firing, err := p.query(ctx, `ALERTS{alertstate="firing"}`)
	if err != nil {
		t.Fatalf("query ALERTS: %v", err)
	}
	for _, s := range firing {
		t.Errorf("alert firing on the healthy demo: %s", s.Metric)
	}
}

// ---------------------------------------------------------------------------------------------------
// slaprobe demo

type demoProcess struct {
	metrics, engine string // scrape URLs
	proc            *testproc.Process
}

var (
	demoMetricsRE = regexp.MustCompile(`(?m)^\s*metrics:\s+(http://\S+)`)
	demoEngineRE  = regexp.MustCompile(`(?m)^\s*engine metrics:\s+(http://\S+)`)
)

// startDemo runs `slaprobe demo` on a free loopback port and reads the URLs it prints.
func startDemo(t *testing.T, ctx context.Context, bin string) *demoProcess {
	t.Helper()
	proc := startProcess(t, "slaprobe demo", bin, "demo", "--web.listen-address=127.0.0.1:0")
	for {
		out := proc.Stdout()
		m, e := demoMetricsRE.FindStringSubmatch(out), demoEngineRE.FindStringSubmatch(out)
		if m != nil && e != nil {
			return &demoProcess{metrics: m[1], engine: e[1], proc: proc}
		}
		select {
		case <-proc.Exited():
			t.Fatalf("slaprobe demo exited before printing its URLs: %v\n%s", proc.Err(), proc.Output())
		case <-ctx.Done():
			t.Fatalf("slaprobe demo printed no URLs\n%s", proc.Output())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (d *demoProcess) stop(t *testing.T) { stopProcess(t, d.proc) }

// ---------------------------------------------------------------------------------------------------
// Prometheus

type prometheus struct {
	base string            // http://127.0.0.1:port
	logs *testproc.Process // its stderr is the log
	hc   *http.Client
}

// startPrometheus writes a config that scrapes the demo and its engine every scrapeInterval with the
// rule files loaded, and starts Prometheus on a free loopback port. It is stopped, and must exit 0,
// when the test ends.
func startPrometheus(t *testing.T, ctx context.Context, bin string, m histogramMode, demo *demoProcess, ruleFiles []string) *prometheus {
	t.Helper()
	return startPrometheusWith(t, ctx, bin, t.TempDir(), prometheusConfig(t, demo, ruleFiles), m.flags...)
}

// startPrometheusWith writes config to dir/prometheus.yml and starts Prometheus with it (and flags)
// on a free loopback port, its data under dir.
func startPrometheusWith(t *testing.T, ctx context.Context, bin, dir string, config []byte, flags ...string) *prometheus {
	t.Helper()
	ap := alerting.StartPrometheus(t, ctx, bin, dir, config, flags...)
	return &prometheus{base: ap.URL, logs: ap.Proc, hc: &http.Client{Timeout: 5 * time.Second}}
}

func prometheusConfig(t *testing.T, demo *demoProcess, ruleFiles []string) []byte {
	t.Helper()
	type staticConfig struct {
		Targets []string `yaml:"targets"`
	}
	type scrapeConfig struct {
		JobName       string         `yaml:"job_name"`
		MetricsPath   string         `yaml:"metrics_path"`
		StaticConfigs []staticConfig `yaml:"static_configs"`
	}
	job := func(name, rawURL string) scrapeConfig {
		u, err := url.Parse(rawURL)
		if err != nil {
			t.Fatalf("%s URL %q: %v", name, rawURL, err)
		}
		return scrapeConfig{JobName: name, MetricsPath: u.Path, StaticConfigs: []staticConfig{{Targets: []string{u.Host}}}}
	}
	interval := scrapeInterval.String()
	cfg := map[string]any{
		"global": map[string]string{
			"scrape_interval":     interval,
			"scrape_timeout":      interval,
			"evaluation_interval": interval,
		},
		"rule_files": ruleFiles,
		// job="slaprobe" is what SlaprobeDown selects, as in deploy/prometheus.yml.
		"scrape_configs": []scrapeConfig{job("slaprobe", demo.metrics), job("vllm-sim", demo.engine)},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// apiGet calls a Prometheus HTTP API endpoint and decodes its data field into data.
func (p *prometheus) apiGet(ctx context.Context, path string, params url.Values, data any) error {
	u := p.base + path
	if params != nil {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: HTTP %d, decode: %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", path, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// query runs an instant query that must return a vector.
func (p *prometheus) query(ctx context.Context, q string) ([]alerting.Sample, error) {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []alerting.Sample `json:"result"`
	}
	if err := p.apiGet(ctx, "/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: result type %s, want vector", q, data.ResultType)
	}
	return data.Result, nil
}

// wantScenarios checks that q returns a sample for each of want (by the scenario label).
func (p *prometheus) wantScenarios(ctx context.Context, q string, want []string) error {
	res, err := p.query(ctx, q)
	if err != nil {
		return err
	}
	var got []string
	for _, s := range res {
		got = append(got, s.Metric["scenario"])
	}
	sort.Strings(got)
	got = slices.Compact(got)
	for _, w := range want {
		if !slices.Contains(got, w) {
			return fmt.Errorf("%s: scenarios %v, want %v", q, got, want)
		}
	}
	return nil
}

func (p *prometheus) wantNonEmpty(ctx context.Context, q string) error {
	res, err := p.query(ctx, q)
	if err != nil {
		return err
	}
	if len(res) == 0 {
		return fmt.Errorf("%s: empty", q)
	}
	return nil
}

func (p *prometheus) wantEmpty(ctx context.Context, q string) error {
	res, err := p.query(ctx, q)
	if err != nil {
		return err
	}
	for _, s := range res {
		return fmt.Errorf("%s: got %s %v", q, s.Metric, s.Value[1])
	}
	return nil
}

// wantFinite checks that q returns at least one finite value, and only numbers: a quantile is NaN
// until a scenario has two observations in the window (the first one only creates the series).
func (p *prometheus) wantFinite(ctx context.Context, q string) error {
	res, err := p.query(ctx, q)
	if err != nil {
		return err
	}
	var finite []string
	for _, s := range res {
		v, err := s.Float()
		if err != nil {
			return fmt.Errorf("%s: %s: %v", q, s.Metric, err)
		}
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			finite = append(finite, fmt.Sprintf("%s=%.3g", s.Metric["scenario"], v))
		}
	}
	if len(finite) == 0 {
		return fmt.Errorf("%s: no finite value among %d series", q, len(res))
	}
	return nil
}

// rulesHealthy checks /api/v1/rules: exactly the rules of the rule files are loaded, and every one
// has been evaluated without error.
func (p *prometheus) rulesHealthy(ctx context.Context, want []string) error {
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			File  string `json:"file"`
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.apiGet(ctx, "/api/v1/rules", nil, &data); err != nil {
		return err
	}
	var got, bad []string
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			got = append(got, r.Name)
			if r.Health != "ok" || r.LastError != "" {
				bad = append(bad, fmt.Sprintf("%s/%s: health %q %s", filepath.Base(g.File), r.Name, r.Health, r.LastError))
			}
		}
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("loaded rules %v, want %v", got, want)
	}
	if len(bad) > 0 {
		return fmt.Errorf("rules not healthy: %s", strings.Join(bad, "; "))
	}
	return nil
}

// ---------------------------------------------------------------------------------------------------
// Rule files

// ruleFiles lists alerts/*.yml and *.yaml without the promtool tests, as the Makefile does.
func ruleFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.yml", "*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, "alerts", pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !strings.HasSuffix(f, "_test.yml") && !strings.HasSuffix(f, "_test.yaml") {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		t.Fatalf("no rule files in %s", filepath.Join(root, "alerts"))
	}
	sort.Strings(files)
	return files
}

// ruleNames reads the record and alert names of the rule files, sorted.
func ruleNames(t *testing.T, files []string) []string {
	t.Helper()
	var names []string
	for _, r := range readRules(t, files) {
		names = append(names, r.Record+r.Alert)
	}
	sort.Strings(names)
	return names
}

// rule is one recording or alerting rule of a rule file.
type rule struct {
	Record string `yaml:"record"`
	Alert  string `yaml:"alert"`
}

// readRules reads every rule of the rule files, in file order.
func readRules(t *testing.T, files []string) []rule {
	t.Helper()
	var out []rule
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Groups []struct {
				Rules []rule `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range doc.Groups {
			out = append(out, g.Rules...)
		}
	}
	return out
}

// ---------------------------------------------------------------------------------------------------
// Processes and tools

// requireTool finds a program on PATH; without it the test skips, or fails under SLAPROBE_REQUIRE_DEPS=1.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	pkg := map[string]string{"alertmanager": "prometheus-alertmanager", "amtool": "prometheus-alertmanager"}[name]
	if pkg == "" {
		pkg = "prometheus"
	}
	missingTool(t, fmt.Sprintf("%s not found: run `make test-deps` (Debian package %s)", name, pkg))
	return ""
}

// missingTool skips the test, saying msg (how to get what is missing), or fails it under `make test`
// (SLAPROBE_REQUIRE_DEPS=1), where nothing may be missing.
func missingTool(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv(envRequire) == "1" {
		t.Fatalf("%s (%s=1)", msg, envRequire)
	}
	t.Skip(msg)
}

var versionRE = regexp.MustCompile(`version (\d+)\.(\d+)\.\d+`)

func prometheusVersion(t *testing.T, bin string) (major, minor int) {
	t.Helper()
	testproc.SeesTree()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("prometheus --version: %v\n%s", err, out)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("prometheus --version: no version in %q", out)
	}
	major, _ = strconv.Atoi(string(m[1]))
	minor, _ = strconv.Atoi(string(m[2]))
	t.Logf("%s", bytes.TrimSpace(bytes.SplitN(out, []byte("\n"), 2)[0]))
	return major, minor
}

// repoRoot is two levels up from this package, where go.mod is.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

// buildSlaprobe builds ./cmd/slaprobe once for the package, into a temporary directory TestMain
// removes, and returns its path: the tests only run it, and a link of a cgo binary per test was
// minutes of CPU on 2 cores.
func buildSlaprobe(t *testing.T, root string) string {
	t.Helper()
	slaprobeBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "slaprobe-e2e-")
		if err != nil {
			slaprobeBuild.err = err
			return
		}
		slaprobeBuild.dir = dir
		bin := filepath.Join(dir, "slaprobe")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		// -buildvcs=false: the build must not depend on git being usable (see the Makefile). -trimpath
		// as the image's build (Dockerfile).
		testproc.SeesTree()
		cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-trimpath", "-o", bin, "./cmd/slaprobe")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			slaprobeBuild.err = fmt.Errorf("go build ./cmd/slaprobe: %v\n%s", err, out)
			return
		}
		slaprobeBuild.took = since(start)
		slaprobeBuild.path = bin
	})
	if slaprobeBuild.err != nil {
		t.Fatal(slaprobeBuild.err)
	}
	t.Logf("slaprobe built once for the package in %.1fs", slaprobeBuild.took)
	return slaprobeBuild.path
}

var slaprobeBuild struct {
	once      sync.Once
	dir, path string
	took      float64
	err       error
}

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startRun starts `slaprobe run` on the config file cfg, listening on webAddr, and waits until it is
// ready; it is stopped, and must exit 0, when the test ends.
func startRun(t *testing.T, ctx context.Context, bin, cfg, webAddr string) *testproc.Process {
	t.Helper()
	sp := startProcess(t, "slaprobe run", bin, "run", "--config.file="+cfg, "--web.listen-address="+webAddr)
	waitHTTP(t, ctx, sp, "http://"+webAddr+"/-/ready", http.StatusOK, false)
	return sp
}

// startProcess starts a program; it is stopped when the test ends, if the test did not stop it, and
// must then exit 0 within 15 s of SIGINT.
func startProcess(t *testing.T, name, bin string, args ...string) *testproc.Process {
	t.Helper()
	testproc.SeesTree()
	p, err := testproc.StartNamed(name, exec.Command(bin, args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(t, p) })
	return p
}

// stopProcess stops p, which must exit 0 within 15 s of SIGINT.
func stopProcess(t *testing.T, p *testproc.Process) {
	t.Helper()
	if err := p.StopClean(15 * time.Second); err != nil {
		t.Error(err)
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func since(t time.Time) float64 { return time.Since(t).Seconds() }
