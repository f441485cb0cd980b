package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/compare"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/browser"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// startScaledSim serves the simulated engine with every modelled duration
// (prefill and decode steps) multiplied by scale: 1.2 is an engine made
// 20 % slower.
func startScaledSim(t *testing.T, scale float64) string {
	t.Helper()
	cfg := vllmsim.DefaultConfig()
	cfg.TimeScale = scale
	e, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(func() { srv.Close(); e.Close() })
	return srv.URL
}

func writeCompareConfig(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slaprobe.yml")
	cfg := `targets:
  - name: sim
    url: ` + url + `
scenarios:
  - name: short_chat
    input_tokens: 1024
    output_tokens: 16
    thresholds: {ttft: 2s, itl: 100ms}
power:
  nvml: false
sweep:
  scenarios: [short_chat]
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// benchSim runs a short bench against a simulated engine at the given time
// scale, compared with baseline when it is not empty, and returns the
// report it wrote. Closed-loop steps of 4 s give about 44 requests at N=4,
// enough for the 8 slices of 5 that step is judged on; each burst step runs
// five rounds, so that bursts get a verdict too.
func benchSim(t *testing.T, scale float64, out, baseline string) *report.Report {
	t.Helper()
	o := benchOptions(t, writeCompareConfig(t, startScaledSim(t, scale)), []int{1, 4}, []int{8, 16},
		4*time.Second, 300*time.Millisecond, 3*time.Second, out)
	o.Baseline = baseline
	o.Sweep.Burst.Repeat = 5 // a burst's verdict needs 3 rounds; 5 keep one odd round from hiding a change
	var stdout, stderr bytes.Buffer
	o.Stdout, o.Stderr = &stdout, &stderr
	if code := Run(context.Background(), o); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if baseline != "" && !strings.Contains(stdout.String(), "significant regression") {
		t.Errorf("bench --baseline printed no verdict:\n%s", stdout.String())
	}
	rep, err := report.Load(filepath.Join(out, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scale %g:\n%s", scale, stdout.String())
	return rep
}

// The three acceptance cases of a comparison, each against the simulated
// engine: a run against itself and against a rerun of the same
// configuration report no significant change; a run against an engine 20 %
// slower reports the regressions of every latency and speed.
func TestCompareAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three small sweeps against the simulated engine")
	}
	testproc.Quiet(t) // a rerun must match the base: not beside a browser, a real engine or promtool
	dir := t.TempDir()
	if d := os.Getenv("SLAPROBE_COMPARE_DIR"); d != "" {
		dir = d // keep the reports to look at
	}
	baseDir := filepath.Join(dir, "base")
	base := benchSim(t, 1, baseDir, "")
	if !base.HasSamples() {
		t.Fatal("the base report kept no samples")
	}
	itself := compare.Compare(base, base, compare.Options{BaseLabel: "itself"})
	if _, err := compare.WriteReport(filepath.Join(dir, "itself"), itself); err != nil {
		t.Fatal(err)
	}
	rerun := benchSim(t, 1, filepath.Join(dir, "rerun"), baseDir)
	slower := benchSim(t, 1.2, filepath.Join(dir, "slower"), baseDir)

	for _, tc := range []struct {
		name string
		rep  *report.Report
	}{{"itself", itself}, {"rerun", rerun}} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.rep.Comparison
			if c == nil || !c.Confidence {
				t.Fatalf("comparison = %+v; want one with confidence", c)
			}
			for _, f := range c.Findings() {
				t.Errorf("significant change: %s", report.FindingText(f))
			}
			tested := 0
			for _, s := range c.Steps {
				for _, m := range s.Metrics {
					if m.Low != nil {
						tested++
					}
				}
			}
			if tested < 8 {
				t.Errorf("only %d figures had an interval; the test proves nothing", tested)
			}
		})
	}
	t.Run("itself: zero change, intervals around zero", func(t *testing.T) {
		for _, s := range itself.Comparison.Steps {
			for _, m := range s.Metrics {
				if m.Change != 0 || (m.Low != nil && (*m.Low > 0 || *m.High < 0)) {
					t.Errorf("%s %s N=%d %s: change %g [%v, %v]; want 0", s.Scenario, s.Mode, s.Concurrency, m.Metric, m.Change, *m.Low, *m.High)
				}
			}
		}
	})
	t.Run("20% slower", func(t *testing.T) {
		c := slower.Comparison
		for _, f := range c.Findings() {
			if !f.Worse {
				t.Errorf("an improvement on a slower engine: %s", report.FindingText(f))
			}
		}
		// Every closed-loop step must show the slowdown, and N=1 in every
		// latency and speed. At N=4 requests overlap 0, 1 or 2 other
		// prefills, so TTFT and ITL have several sharp modes; with a few
		// dozen requests the interval of such a median can be wide and the
		// figure stay "no detectable change" (the docs' caveat). Nothing
		// may be called better.
		for _, s := range c.Steps {
			if s.Presence != report.InBoth {
				t.Errorf("%s N=%d is in one run only", s.Mode, s.Concurrency)
				continue
			}
			if s.Mode == prober.ModeBurst {
				// Judged on five rounds each. A round's queue can split
				// into prefill batches another way than its neighbours',
				// so one figure may stay "no detectable change"; TTFT or
				// E2E must show the slowdown.
				worse := 0
				for _, metric := range []string{report.MetricTTFT, report.MetricE2E} {
					m := s.Metric(metric)
					switch {
					case m == nil || m.Low == nil:
						t.Errorf("burst N=%d %s: no interval (%+v)", s.Concurrency, metric, m)
					case m.Verdict == report.VerdictWorse:
						worse++
					default:
						t.Logf("burst N=%d %s: %s, change %+.1f%% [%+.1f%%, %+.1f%%] over %d and %d rounds", s.Concurrency, metric,
							m.Verdict, 100*m.Change, 100**m.Low, 100**m.High, m.BaseSamples, m.NewSamples)
					}
				}
				if worse == 0 {
					t.Errorf("burst N=%d: neither TTFT nor E2E flagged worse", s.Concurrency)
				}
				continue
			}
			worse := 0
			for _, metric := range []string{report.MetricTTFT, report.MetricITL, report.MetricE2E, report.MetricDecode} {
				m := s.Metric(metric)
				if m == nil || m.Low == nil {
					t.Errorf("closed loop N=%d %s: no interval", s.Concurrency, metric)
					continue
				}
				if m.Verdict == report.VerdictWorse {
					worse++
					continue
				}
				msg := fmt.Sprintf("closed loop N=%d %s: %s, change %+.1f%% [%+.1f%%, %+.1f%%]", s.Concurrency, metric, m.Verdict,
					100*m.Change, 100**m.Low, 100**m.High)
				if s.Concurrency == 1 {
					t.Error(msg + "; want worse")
				} else {
					t.Log(msg)
				}
			}
			if worse == 0 {
				t.Errorf("closed loop N=%d: no regression flagged", s.Concurrency)
			}
		}
	})
	// The comparison pages as a reader opens them: every chart, the
	// summary at the top, the baseline in the legends, nothing on the
	// console (the page runs no script), and a screenshot with content
	// ($SLAPROBE_SHOT_DIR keeps compare-itself.png and compare-slower.png).
	t.Run("in Chromium", func(t *testing.T) {
		if testing.Short() {
			t.Skip("opens headless Chromium")
		}
		bin := browser.Chromium(t)
		for _, name := range []string{"itself", "slower"} {
			page := filepath.Join(dir, name, report.HTMLFile)
			dom := browser.DOM(t, bin, "file://"+page)
			for _, c := range append([]string{"comparison"}, report.Charts...) {
				if !strings.Contains(dom, `data-chart="`+c+`"`) {
					t.Errorf("%s: chart %q missing from the rendered DOM", name, c)
				}
			}
			if n := strings.Count(dom, "short_chat (base)"); n < 5 {
				t.Errorf("%s: the baseline is named in %d legends; want one per chart", name, n)
			}
			if name == "slower" && !strings.Contains(dom, "Significant regressions</h3>\n<ul") {
				t.Errorf("%s: no list of regressions at the top", name)
			}
			browser.Screenshot(t, bin, "file://"+page, "compare-"+name+".png", 1400, 2600)
		}
	})
}
