package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/test/testproc"
)

// envShotDir names the folder where TestTailRowSignalsFollowTheirCauses saves screenshots of
// Prometheus's graph page for the row's queries (headless chromium); unset, it takes none.
const envShotDir = "SLAPROBE_SHOT_DIR"

// tailRowTitle starts the title of the live dashboard's "Why the tail" row (internal/dashgen/tail.go).
const tailRowTitle = "Why the tail"

// tailVars put Grafana's variables in place for the row's queries: a 10 s rate window fits the
// test's 1 s scrapes (Grafana's $__rate_interval is at least four scrape intervals) and phases of
// 20-30 s.
var tailVars = strings.NewReplacer(
	"$__rate_interval", "10s",
	"$__interval", "1s",
	"$__range", "5m",
	"${datasource}", "",
	"$target", ".*",
	"$model", ".*",
	"$scenario", ".*",
)

// The simulated engine's KV cache: 4096 tokens (256 blocks). Eight clients sending 900-token
// prompts for 700 tokens each fill it at admission (four fit, the rest wait for capacity), and the
// four running outgrow it as they decode (preemptions). The prefix phase repeats one 2000-token
// prefix: nearly all its prompt tokens come from the prefix cache.
const (
	tailKVTokens       = 4096
	tailPressureConns  = 8
	tailPressurePrompt = 900
	tailPressureOut    = 700
	tailPrefixConns    = 2
	tailPrefixLen      = 2000
	tailModel          = "tailsim"
)

// TestTailRowSignalsFollowTheirCauses runs `slaprobe sim` with a small KV cache, `slaprobe run`
// probing it every second with its engine metrics scraped every second, and a real Prometheus
// scraping slaprobe every second with the recording rules the row reads. It applies one cause at a
// time, a control phase (the probes alone), KV pressure (concurrent long prompts) and repeated
// prefixes, evaluates every query of the live dashboard's "Why the tail" row over each phase, and
// checks that each signal moved with its cause: capacity waits and preemptions only under
// pressure, the cache_hit share high only with repeated prefixes, the engine's queue time and TTFT
// far up under pressure. With SLAPROBE_SHOT_DIR set it saves screenshots of Prometheus's graph page for
// a few of the queries.
func TestTailRowSignalsFollowTheirCauses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulated engine under load, slaprobe and Prometheus for about 2 minutes")
	}
	t.Parallel()
	promBin := requireTool(t, "prometheus")
	shotDir := os.Getenv(envShotDir)
	var chromium string
	if shotDir != "" {
		chromium = requireTool(t, "chromium")
	}
	root := repoRoot(t)
	queries := tailRowQueries(t, root)
	bin := buildSlaprobe(t, root)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()

	simAddr := testproc.FreeAddr(t)
	startProcess(t, "slaprobe sim", bin, "sim", "--sim.listen-address="+simAddr, "--sim.model="+tailModel,
		"--sim.max-model-len="+strconv.Itoa(tailKVTokens), "--sim.kv-cache-tokens="+strconv.Itoa(tailKVTokens))
	webAddr := testproc.FreeAddr(t)
	cfg := writeFile(t, dir, "slaprobe.yml", fmt.Sprintf(`
global: {jitter: 0}
engine: {scrape_interval: 1s, scrape_timeout: 1s}
targets:
  - {name: sim, url: "http://%s", scenarios: [probe]}
scenarios:
  - {name: probe, input_tokens: 200, output_tokens: 16, interval: 1s, timeout: 30s}
`, simAddr))
	sp := startRun(t, ctx, bin, cfg, webAddr)

	ruleFile := filepath.Join(dir, "tail.rules.yml")
	if err := os.WriteFile(ruleFile, rulesFor(t, ruleFiles(t, root), queries), 0o644); err != nil {
		t.Fatal(err)
	}
	promCfg := yamlBytes(t, map[string]any{
		"global":         map[string]string{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"rule_files":     []string{ruleFile},
		"scrape_configs": []map[string]any{{"job_name": "slaprobe", "static_configs": []map[string][]string{{"targets": {webAddr}}}}},
	})
	p := startPrometheusWith(t, ctx, promBin, t.TempDir(), promCfg)
	t.Logf("%5.1fs sim at %s, slaprobe at %s, prometheus at %s", since(start), simAddr, webAddr, p.base)
	waitFor(t, ctx, "probes and engine signals scraped", func() error {
		return p.wantNonEmpty(ctx, `target_scenario:slaprobe_probe_interval_seconds:mean_1d and on (target) slaprobe_engine_preemptions_total`)
	}, p, sp)

	// Control: the probes alone, for longer than the rate window.
	control := phase{name: "control", from: time.Now()}
	sleepCtx(ctx, 20*time.Second)
	control.to = time.Now()

	// KV pressure: long distinct prompts, more than fit.
	pressure := phase{name: "pressure", from: time.Now()}
	load(ctx, t, simAddr, tailPressureConns, 30*time.Second, func(r *rand.Rand) string { return digits(r, tailPressurePrompt) }, tailPressureOut)
	pressure.to = time.Now()

	// Drain, then let the pressure leave the rate window before the prefix phase.
	sleepCtx(ctx, 15*time.Second)
	prefix := phase{name: "prefix", from: time.Now()}
	shared := digits(rand.New(rand.NewPCG(1, 2)), tailPrefixLen)
	load(ctx, t, simAddr, tailPrefixConns, 25*time.Second, func(r *rand.Rand) string { return shared + "\n" + digits(r, 8) }, 8)
	prefix.to = time.Now()
	sleepCtx(ctx, 2*time.Second) // the last scrapes and rule evaluations
	if ctx.Err() != nil {
		t.Fatalf("out of time: %v", ctx.Err())
	}

	// Every query over every phase: per series, the max and the last value.
	phases := []*phase{&control, &pressure, &prefix}
	figures := map[string]map[string]seriesFigures{} // panel/ref -> phase -> series
	var lines []string
	for _, q := range queries {
		figures[q.where] = map[string]seriesFigures{}
		for _, ph := range phases {
			f, err := p.rangeFigures(ctx, tailVars.Replace(q.expr), ph.from, ph.to)
			if err != nil {
				t.Fatalf("%s: %v", q.where, err)
			}
			figures[q.where][ph.name] = f
			lines = append(lines, fmt.Sprintf("%-70s %-8s %s", q.where, ph.name, f))
		}
	}
	t.Logf("%5.1fs the row's queries over each phase (series: max, last):\n%s", since(start), strings.Join(lines, "\n"))
	if shotDir != "" {
		if err := os.MkdirAll(shotDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shotDir, "figures.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	get := func(panel, ref, ph, series string) (float64, float64) {
		t.Helper()
		key := fmt.Sprintf("panel %q query %s", panel, ref)
		fs, ok := figures[key]
		if !ok {
			t.Fatalf("the row has no %s", key)
		}
		for name, f := range fs[ph] {
			if strings.Contains(name, series) {
				return f.max, f.last
			}
		}
		t.Errorf("%s over %s: no series matching %q (got %s)", key, ph, series, fs[ph])
		return math.NaN(), math.NaN()
	}

	// Waiting by reason: capacity waits only under pressure; the simulator never defers.
	if m, _ := get("Waiting requests by reason", "A", "control", `reason="capacity"`); !(m == 0) {
		t.Errorf("capacity waits in the control phase: max %v, want 0", m)
	}
	if m, _ := get("Waiting requests by reason", "A", "pressure", `reason="capacity"`); !(m >= tailPressureConns/2) {
		t.Errorf("capacity waits under KV pressure: max %v, want at least %d (%d clients, 4 fit)", m, tailPressureConns/2, tailPressureConns)
	}
	if m, _ := get("Waiting requests by reason", "A", "pressure", `reason="deferred"`); !(m == 0) {
		t.Errorf("deferred waits under KV pressure: max %v, want 0 (the simulator never defers)", m)
	}
	// Preemptions per probe interval: none alone, some under pressure, none once it has left the window.
	const pre = "Preemptions per probe interval"
	if m, _ := get(pre, "A", "control", `scenario="probe"`); !(m == 0) {
		t.Errorf("preemptions in the control phase: max %v per probe interval, want 0", m)
	}
	if m, _ := get(pre, "A", "pressure", `scenario="probe"`); !(m > 0) {
		t.Errorf("preemptions under KV pressure: max %v per probe interval, want > 0", m)
	}
	if m, _ := get(pre, "A", "prefix", `scenario="probe"`); !(m == 0) {
		t.Errorf("preemptions with repeated short prefixes: max %v per probe interval, want 0", m)
	}
	// Cached share by source: the probes are cold, the pressure's prompts distinct, the prefix phase hits.
	const share = "Prompt tokens by source: the fleet's cache hit rate"
	if _, last := get(share, "A", "control", `source="cache_hit"`); !(last < 0.1) {
		t.Errorf("cache_hit share at the end of the control phase %v, want < 0.1", last)
	}
	if _, last := get(share, "A", "pressure", `source="cache_hit"`); !(last < 0.1) {
		t.Errorf("cache_hit share at the end of the pressure phase %v, want < 0.1", last)
	}
	if _, last := get(share, "A", "prefix", `source="cache_hit"`); !(last > 0.9) {
		t.Errorf("cache_hit share at the end of the prefix phase %v, want > 0.9", last)
	}
	// All traffic's phase split and TTFT: the queue, and so TTFT, grow under pressure.
	_, qControl := get("Phase split of all traffic (engine)", "A", "control", `phase="queue"`)
	_, qPressure := get("Phase split of all traffic (engine)", "A", "pressure", `phase="queue"`)
	if !(qPressure > 2*qControl && qPressure > 0.1) {
		t.Errorf("mean queue time of all traffic: %v s after control, %v s after pressure; want it to more than double, above 100 ms", qControl, qPressure)
	}
	const ttft = "TTFT p95: the engine's, all traffic, vs the probes'"
	_, eControl := get(ttft, "A", "control", "sim")
	_, ePressure := get(ttft, "A", "pressure", "sim")
	// Ten times: longer prompts alone, with a cache large enough for all, raise it about six times.
	if !(ePressure > 10*eControl) {
		t.Errorf("engine TTFT p95: %v s after control, %v s after pressure; want it ten times higher", eControl, ePressure)
	}

	if shotDir != "" {
		shoot(t, ctx, chromium, p, shotDir, since(start), map[string]string{
			"waiting-by-reason": queryOf(t, queries, "Waiting requests by reason", "A"),
			"preemptions":       queryOf(t, queries, pre, "A"),
			"cached-share":      queryOf(t, queries, share, "A"),
			"phase-split":       queryOf(t, queries, "Phase split of all traffic (engine)", "A"),
		})
	}
}

type phase struct {
	name     string
	from, to time.Time
}

// tailRowQueries returns the queries of the panels of the live dashboard's "Why the tail" row, as
// generated into dashboards/slaprobe-live.json (TestDashboardsUpToDate keeps it in step with dashgen).
func tailRowQueries(t *testing.T, root string) []dashboardQuery {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "dashboards", "slaprobe-live.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []dashboardQuery
	in := false
	for _, p := range doc.Panels {
		if p.Type == "row" {
			in = strings.HasPrefix(p.Title, tailRowTitle)
			continue
		}
		if !in {
			continue
		}
		for _, tg := range p.Targets {
			out = append(out, dashboardQuery{where: fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), expr: tg.Expr})
		}
	}
	if len(out) < 10 {
		t.Fatalf("dashboards/slaprobe-live.json: %d queries under the row %q, want the whole row", len(out), tailRowTitle)
	}
	return out
}

func queryOf(t *testing.T, qs []dashboardQuery, panel, ref string) string {
	t.Helper()
	for _, q := range qs {
		if q.where == fmt.Sprintf("panel %q query %s", panel, ref) {
			return tailVars.Replace(q.expr)
		}
	}
	t.Fatalf("the row has no panel %q query %s", panel, ref)
	return ""
}

var recordNameRE = regexp.MustCompile(`[a-zA-Z_]+:[a-zA-Z0-9_:]+`)

// rulesFor writes a rule file with the recording rules of files that the queries use, and those
// they use in turn: the generated rules themselves, without the hundreds the row does not read.
func rulesFor(t *testing.T, files []string, queries []dashboardQuery) []byte {
	t.Helper()
	byName := map[string]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Groups []struct {
				Rules []map[string]any `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				if name, ok := r["record"].(string); ok {
					byName[name] = r
				}
			}
		}
	}
	var todo []string
	for _, q := range queries {
		todo = append(todo, recordNameRE.FindAllString(q.expr, -1)...)
	}
	picked := map[string]bool{}
	var rules []map[string]any
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		r, ok := byName[name]
		if !ok || picked[name] {
			continue
		}
		picked[name] = true
		rules = append(rules, r)
		expr, _ := r["expr"].(string)
		todo = append(todo, recordNameRE.FindAllString(expr, -1)...)
	}
	if !picked["target_scenario:slaprobe_probe_interval_seconds:mean_1d"] {
		t.Fatalf("the rule files have no target_scenario:slaprobe_probe_interval_seconds:mean_1d, which the row reads")
	}
	return yamlBytes(t, map[string]any{"groups": []map[string]any{{"name": "tail-row", "rules": rules}}})
}

// load runs conns clients that send completions of prompt() for out tokens (ignore_eos) to the
// simulated engine, back to back, for d.
func load(ctx context.Context, t *testing.T, addr string, conns int, d time.Duration, prompt func(*rand.Rand) string, out int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sent, failed int
	var lastErr error
	hc := &http.Client{}
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), uint64(d)))
			for ctx.Err() == nil {
				body, _ := json.Marshal(map[string]any{"model": tailModel, "prompt": prompt(r), "max_tokens": out, "ignore_eos": true})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("HTTP %s", resp.Status)
					}
				}
				mu.Lock()
				if ctx.Err() == nil { // a request cut by the end of the phase is no failure
					sent++
					if err != nil {
						failed++
						lastErr = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("load: %d clients for %s: %d requests completed, %d failed", conns, d, sent, failed)
	if sent == 0 || failed > 0 {
		t.Errorf("load: %d of %d requests failed (last: %v)", failed, sent, lastErr)
	}
}

// digits returns n random digits: n tokens for the simulator's tokenizer, a prompt no other shares.
func digits(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.IntN(10))
	}
	return string(b)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

type seriesFigure struct{ max, last float64 }

type seriesFigures map[string]seriesFigure

func (f seriesFigures) String() string {
	var names []string
	for n := range f {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s: %.3g, %.3g", n, f[n].max, f[n].last))
	}
	if len(parts) == 0 {
		return "(no data)"
	}
	return strings.Join(parts, "; ")
}

// rangeFigures runs q over [from, to] at a 1 s step and returns, per series (its labels), the
// largest value and the last one. NaN samples (a quantile or ratio of nothing) are skipped.
func (p *prometheus) rangeFigures(ctx context.Context, q string, from, to time.Time) (seriesFigures, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	params := url.Values{"query": {q}, "start": {strconv.FormatInt(from.Unix(), 10)},
		"end": {strconv.FormatInt(to.Unix(), 10)}, "step": {"1s"}}
	if err := p.apiGet(ctx, "/api/v1/query_range", params, &data); err != nil {
		return nil, err
	}
	out := seriesFigures{}
	for _, r := range data.Result {
		f := seriesFigure{max: math.Inf(-1), last: math.NaN()}
		for _, v := range r.Values {
			s, _ := v[1].(string)
			x, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(x) {
				continue
			}
			f.max, f.last = math.Max(f.max, x), x
		}
		if !math.IsInf(f.max, -1) {
			out[labelString(r.Metric)] = f
		}
	}
	return out, nil
}

func labelString(m map[string]string) string {
	var ks []string
	for k := range m {
		if k != "job" && k != "instance" {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// shoot saves a screenshot of Prometheus's graph page for each query (name -> expr), over the
// test's whole run, into dir as NAME.png.
func shoot(t *testing.T, ctx context.Context, chromium string, p *prometheus, dir string, ranSeconds float64, queries map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := fmt.Sprintf("%ds", int(ranSeconds)+10)
	for name, q := range queries {
		u := p.base + "/graph?" + url.Values{"g0.expr": {q}, "g0.tab": {"0"}, "g0.range_input": {rng}}.Encode()
		file := filepath.Join(dir, name+".png")
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		testproc.SeesTree()
		cmd := exec.CommandContext(cctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
			"--window-size=1400,900", "--virtual-time-budget=8000", "--user-data-dir="+t.TempDir(), "--screenshot="+file, u)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("chromium %s: %v\n%s", name, err, tail(string(out), 20))
		}
		if st, err := os.Stat(file); err != nil || st.Size() == 0 {
			t.Fatalf("chromium wrote no screenshot %s: %v", file, err)
		}
		t.Logf("screenshot %s: %s", file, u)
	}
}
