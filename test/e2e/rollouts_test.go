package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

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

// TestRolloutGatesOnPrometheus runs the Argo Rollouts and Flagger templates of deploy/rollouts, as
// their controllers render them, on a real Prometheus: `slaprobe run` probes four `slaprobe sim`
// engines (stable, an identical canary, a 30 % slower one, one with 30 % errors) every second;
// Prometheus scrapes it every second, once with the classic buckets and, where it can (2.40 to 2.x),
// once with native histograms; after 35 probes per target each query is evaluated over a 30 s window
// and judged with the analysis' bounds.
func TestRolloutGatesOnPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four simulated engines, slaprobe and Prometheus for up to 3 minutes")
	}
	// The p95 of ~15 probes a window cannot tell 30 % apart on cores that
	// other tests keep busy (under make test's busy phase the slower
	// canary's ratio once read 1.07 and the identical one's 1.10): it runs
	// in the quiet pass.
	testproc.Quiet(t)
	t.Parallel()
	promBin := requireTool(t, "prometheus")
	major, minor := prometheusVersion(t, promBin)
	root := repoRoot(t)

	var queries []renderedRolloutQuery
	b, err := os.ReadFile(filepath.Join(root, "test", "deploy", "testdata", "rollouts-rendered.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &queries); err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, q := range queries {
		if _, ok := rolloutWant[q.Canary]; !ok {
			t.Fatalf("rendered query for canary %q, which this test does not run", q.Canary)
		}
		checked[q.Engine+" "+q.Check] = true
	}
	if len(checked) != 6 {
		t.Fatalf("rendered queries cover %v, want the 3 checks of both engines", checked)
	}

	bin := buildSlaprobe(t, root)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), rolloutsBudget)
	t.Cleanup(cancel)
	dir := t.TempDir()

	var targets strings.Builder
	for _, s := range rolloutSims {
		addr := testproc.FreeAddr(t)
		cfg := writeFile(t, dir, s.target+".yml", s.config)
		startProcess(t, "slaprobe sim "+s.target, bin, "sim", "--sim.listen-address="+addr, "--sim.config.file="+cfg)
		fmt.Fprintf(&targets, "  - {name: %s, url: \"http://%s\", scenarios: [chat]}\n", s.target, addr)
	}
	// At time_scale 5 the engine's TTFT is about 390 ms and its ITL 30 ms; at 6.5, 510 ms and 39 ms.
	webAddr := testproc.FreeAddr(t)
	cfg := writeFile(t, dir, "slaprobe.yml", `
global: {jitter: 0}
targets:
`+targets.String()+`scenarios:
  - name: chat
    input_tokens: 256
    output_tokens: 16
    interval: 1s
    timeout: 10s
    thresholds: {ttft: 450ms, itl: 35ms}
`)
	sp := startRun(t, ctx, bin, cfg, webAddr)
	t.Logf("%5.1fs slaprobe at %s probing %d simulated engines", since(start), webAddr, len(rolloutSims))

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
	const enough = `count(sum by (target) (slaprobe_probes_total{scenario="chat"}) >= 35) == 4`
	for _, m := range modes {
		p := proms[m.name]
		waitFor(t, ctx, m.name+": 35 probes of each target", func() error { return p.wantNonEmpty(ctx, enough) }, p, sp)
	}
	t.Logf("%5.1fs 35 probes of each target scraped", since(start))

	for _, m := range modes {
		p := proms[m.name]
		for _, q := range queries {
			want, judged := rolloutWant[q.Canary][q.Check]
			res, err := p.query(ctx, q.Query)
			if err != nil {
				t.Errorf("%s %s %s %s: %v", m.name, q.Engine, q.Check, q.Canary, err)
				continue
			}
			if len(res) != 1 {
				t.Errorf("%s %s %s %s: %d samples, want 1: %v\n%s", m.name, q.Engine, q.Check, q.Canary, len(res), res, q.Query)
				continue
			}
			v, err := res[0].float()
			if err != nil {
				t.Errorf("%s %s %s %s: %v", m.name, q.Engine, q.Check, q.Canary, err)
				continue
			}
			got := q.passes(v)
			t.Logf("%-7s %-7s %-18s %-13s %8.4f  passes %v", m.name, q.Engine, q.Check, q.Canary, v, got)
			if judged && got != want {
				t.Errorf("%s %s %s on %s: %.4f passes %v, want %v", m.name, q.Engine, q.Check, q.Canary, v, got, want)
			}
		}
	}
}
