package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/test/alerting"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// rolloutsBudget bounds the rollout gate test after the build.
const rolloutsBudget = 3 * time.Minute

// renderedRolloutQuery is one entry of test/deploy/testdata/rollouts-rendered.json: a rollout
// template's query as Argo Rollouts or Flagger renders it for one canary of this test (test/deploy's
// TestRolloutQueriesRendered keeps the file equal to what their own code renders), and the range
// of values its analysis passes.
type renderedRolloutQuery struct {
	Engine string   `json:"engine"`
	Check  string   `json:"check"`
	Canary string   `json:"canary"`
	Query  string   `json:"query"`
	Min    *float64 `json:"min"`
	Max    *float64 `json:"max"`
}

func (r renderedRolloutQuery) passes(v float64) bool {
	return !math.IsNaN(v) && (r.Min == nil || v >= *r.Min) && (r.Max == nil || v <= *r.Max)
}

// rolloutSims are the engines of the rollout test: `slaprobe sim` config by target. time_scale
// multiplies every modelled duration, so 6.5 against 5 is a canary 30 % slower on TTFT and ITL.
var rolloutSims = []struct{ target, config string }{
	{"stable", "time_scale: 5\n"},
	{"canary-same", "time_scale: 5\n"},
	{"canary-slow", "time_scale: 6.5\n"},
	{"canary-errors", "time_scale: 5\nfaults: {rate: 0.3, error_status: 503}\n"},
}

// rolloutWant is whether each check passes, by canary: the identical canary passes all three; the
// 30 % slower one fails goodput (its TTFT and ITL miss the scenario's thresholds, which the stable
// engine meets) and the TTFT ratio, and passes probe success (it is slow, not failing); the one that
// answers 30 % of its requests with a 503 fails success and goodput. Its TTFT is not judged.
var rolloutWant = map[string]map[string]bool{
	"canary-same":   {"goodput-share-drop": true, "ttft-p95-ratio": true, "success-share-drop": true},
	"canary-slow":   {"goodput-share-drop": false, "ttft-p95-ratio": false, "success-share-drop": true},
	"canary-errors": {"goodput-share-drop": false, "success-share-drop": false},
}

// EnvRolloutsLong runs the long rollout measurements: TestRolloutGatesOnOllama over 10 windows
// instead of 1, and TestRolloutGatesOnPrometheus (the simulated engines), which the Ollama test
// supersedes in make test.
const EnvRolloutsLong = "SLAPROBE_ROLLOUTS_LONG"

// rolloutTarget is one target slaprobe probes: its name (the canary's, in the rendered queries)
// and base URL.
type rolloutTarget struct{ name, url string }

// rolloutValue is one rendered query evaluated on one Prometheus at the end of one window.
type rolloutValue struct {
	mode   string
	q      renderedRolloutQuery
	window int
	v      float64
	err    error
}

// rolloutGates probes the targets with slaprobe (scenario chat: 256 prompt tokens, 16 out, the
// given thresholds, a probe a second), scrapes it every second into Prometheus, once with the
// classic buckets and, where it can (2.40 to 2.x), once with native histograms, and returns the
// rendered queries of the targets' canaries evaluated at the end of each of `windows` consecutive
// 30 s windows, the first ending once 35 probes of each target are scraped.
func rolloutGates(t *testing.T, ctx context.Context, bin string, targets []rolloutTarget, global, thresholds string, windows int) []rolloutValue {
	t.Helper()
	promBin := requireTool(t, "prometheus")
	major, minor := prometheusVersion(t, promBin)
	var queries []renderedRolloutQuery
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "test", "deploy", "testdata", "rollouts-rendered.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &queries); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tg := range targets {
		names[tg.name] = true
	}
	checked := map[string]bool{}
	var mine []renderedRolloutQuery
	for _, q := range queries {
		if names[q.Canary] {
			mine = append(mine, q)
			checked[q.Engine+" "+q.Check] = true
		}
	}
	if len(checked) != 6 {
		t.Fatalf("rendered queries for %v cover %v, want the 3 checks of both engines", names, checked)
	}
	start := time.Now()
	dir := t.TempDir()
	var tl strings.Builder
	for _, tg := range targets {
		fmt.Fprintf(&tl, "  - {name: %s, url: %q, scenarios: [chat]}\n", tg.name, tg.url)
	}
	webAddr := testproc.FreeAddr(t)
	cfg := writeFile(t, dir, "slaprobe.yml", `
global: `+global+`
targets:
`+tl.String()+`scenarios:
  - name: chat
    input_tokens: 256
    output_tokens: 16
    interval: 1s
    timeout: 10s
    thresholds: `+thresholds+`
`)
	sp := startRun(t, ctx, bin, cfg, webAddr)
	t.Logf("%5.1fs slaprobe at %s probing %d targets", since(start), webAddr, len(targets))

	iv := time.Second.String()
	promCfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]string{"scrape_interval": iv, "scrape_timeout": iv, "evaluation_interval": iv},
		"scrape_configs": []map[string]any{{"job_name": "slaprobe", "static_configs": []map[string][]string{{"targets": {webAddr}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	modes := []histogramMode{classic}
	if major == 2 && minor >= 40 {
		modes = append(modes, native)
	} else {
		t.Logf("prometheus %d.%d: native histograms not checked (2.40 to 2.x only: 3.x configures them differently)", major, minor)
	}
	proms := map[string]*prometheus{}
	for _, m := range modes {
		proms[m.name] = startPrometheusWith(t, ctx, promBin, t.TempDir(), promCfg, m.flags...)
	}
	enough := fmt.Sprintf(`count(sum by (target) (slaprobe_probes_total{scenario="chat"}) >= 35) == %d`, len(targets))
	for _, m := range modes {
		p := proms[m.name]
		waitFor(t, ctx, m.name+": 35 probes of each target", func() error { return p.wantNonEmpty(ctx, enough) }, p, sp)
	}
	first := time.Now()
	t.Logf("%5.1fs 35 probes of each target scraped", since(start))
	last := first.Add(time.Duration(windows-1) * 30 * time.Second)
	if d := time.Until(last.Add(2 * time.Second)); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			t.Fatalf("%d windows of 30 s: %v", windows, ctx.Err())
		}
	}
	var out []rolloutValue
	for w := range windows {
		at := first.Add(time.Duration(w) * 30 * time.Second)
		for _, m := range modes {
			for _, q := range mine {
				r := rolloutValue{mode: m.name, q: q, window: w, v: math.NaN()}
				r.v, r.err = proms[m.name].queryOne(ctx, q.Query, at)
				out = append(out, r)
			}
		}
	}
	return out
}

// queryOne runs an instant query at a time and returns its one float sample.
func (p *prometheus) queryOne(ctx context.Context, q string, at time.Time) (float64, error) {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []alerting.Sample `json:"result"`
	}
	params := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}
	if err := p.apiGet(ctx, "/api/v1/query", params, &data); err != nil {
		return math.NaN(), err
	}
	if data.ResultType != "vector" || len(data.Result) != 1 {
		return math.NaN(), fmt.Errorf("%s %d samples, want a vector of 1: %v", data.ResultType, len(data.Result), data.Result)
	}
	return data.Result[0].Float()
}

// judgeRollouts logs each value and fails the test where a check the want table judges does not
// pass or fail as it says.
func judgeRollouts(t *testing.T, vals []rolloutValue, want map[string]map[string]bool) {
	t.Helper()
	for _, r := range vals {
		if r.err != nil {
			t.Errorf("%s %s %s %s window %d: %v\n%s", r.mode, r.q.Engine, r.q.Check, r.q.Canary, r.window, r.err, r.q.Query)
			continue
		}
		got := r.q.passes(r.v)
		t.Logf("%-7s %-7s %-18s %-14s w%-2d %8.4f  passes %v", r.mode, r.q.Engine, r.q.Check, r.q.Canary, r.window, r.v, got)
		if w, judged := want[r.q.Canary][r.q.Check]; judged && got != w {
			t.Errorf("%s %s %s on %s, window %d: %.4f passes %v, want %v", r.mode, r.q.Engine, r.q.Check, r.q.Canary, r.window, r.v, got, w)
		}
	}
}

// TestRolloutGatesOnPrometheus runs the Argo Rollouts and Flagger templates of deploy/rollouts, as
// their controllers render them, on a real Prometheus: `slaprobe run` probes four `slaprobe sim`
// engines (stable, an identical canary, a 30 % slower one, one with 30 % errors) every second;
// after 35 probes per target each query is evaluated over a 30 s window and judged with the
// analysis' bounds. TestRolloutGatesOnOllama, on a real engine, supersedes it in make test; it
// runs with SLAPROBE_ROLLOUTS_LONG=1.
func TestRolloutGatesOnPrometheus(t *testing.T) {
	if testing.Short() || os.Getenv(EnvRolloutsLong) != "1" {
		t.Skip("runs four simulated engines, slaprobe and Prometheus for up to 3 minutes; set " + EnvRolloutsLong + "=1")
	}
	// The p95 of ~15 probes a window cannot tell 30 % apart on cores that
	// other tests keep busy (under make test's busy phase the slower
	// canary's ratio once read 1.07 and the identical one's 1.10): it runs
	// in the quiet pass.
	testproc.Quiet(t)
	t.Parallel()
	bin := buildSlaprobe(t, repoRoot(t))
	ctx, cancel := context.WithTimeout(context.Background(), rolloutsBudget)
	t.Cleanup(cancel)
	dir := t.TempDir()
	var targets []rolloutTarget
	for _, s := range rolloutSims {
		addr := testproc.FreeAddr(t)
		cfg := writeFile(t, dir, s.target+".yml", s.config)
		startProcess(t, "slaprobe sim "+s.target, bin, "sim", "--sim.listen-address="+addr, "--sim.config.file="+cfg)
		targets = append(targets, rolloutTarget{s.target, "http://" + addr})
	}
	// At time_scale 5 the engine's TTFT is about 390 ms and its ITL 30 ms; at 6.5, 510 ms and 39 ms.
	judgeRollouts(t, rolloutGates(t, ctx, bin, targets, "{jitter: 0}", "{ttft: 450ms, itl: 35ms}", 1), rolloutWant)
}
