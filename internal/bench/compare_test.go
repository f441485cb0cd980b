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
	"github.com/slaprobe/slaprobe/internal/report/render"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/test/browser"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// startScaledSim serves the simulated engine with every modelled duration
// (prefill and decode steps) multiplied by scale: 1.2 is an engine made
// 20 % slower.
func startScaledSim(t testing.TB, scale float64) string {
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

func writeCompareConfig(t testing.TB, url string) string {
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
// report it wrote. Closed-loop steps of 5 s give about 55 requests at N=4,
// enough for 10 slices of 5; each burst step runs 9 rounds. Both are one
// more than the defaults (8 slices, sweep.DefaultBurstRepeat rounds), which
// reach the 95 % of a report of up to 321 figures: TestCompareAgainstSim
// judges its rerun at 99.9 %, which for its 20 figures needs 9 per run
// (2/C(18, 9) ≤ 0.1 %/20).
func benchSim(t *testing.T, scale float64, out, baseline string) *report.Report {
	t.Helper()
	stdout := runBenchSim(t, scale, out, baseline)
	if baseline != "" && !strings.Contains(stdout, "significant regression") {
		t.Errorf("bench --baseline printed no verdict:\n%s", stdout)
	}
	rep, err := report.Load(filepath.Join(out, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scale %g:\n%s", scale, stdout)
	return rep
}

// runBenchSim is benchSim's run: the bench, on a fresh simulated engine,
// writing its report to out; it returns what the bench printed.
func runBenchSim(t testing.TB, scale float64, out, baseline string) string {
	t.Helper()
	o := benchOptions(t, writeCompareConfig(t, startScaledSim(t, scale)), []int{1, 4}, []int{8, 16},
		5*time.Second, 300*time.Millisecond, 3*time.Second, out)
	o.Baseline = baseline
	o.Sweep.Burst.Repeat = simRounds
	var stdout, stderr bytes.Buffer
	o.Stdout, o.Stderr = &stdout, &stderr
	if code := Run(context.Background(), o); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// simRounds and simSlices are the rounds per burst and the slices per
// closed-loop step of the runs against the simulated engine (benchSim).
const simRounds, simSlices = 9, 10

// BenchmarkCompareFalseAlarms measures what a comparison promises, with the
// runs of TestCompareAgainstSim (short_chat, closed loop N=1 and 4 for 5 s
// each, bursts of 8 and 16 repeated 9 times) against the simulated engine:
//   - false alarms: 21 runs of the same engine, each compared with the one
//     before (20 rerun pairs); a report with any significant figure is a
//     false alarm. Goal: at most 5 % of reports.
//   - detection: 10 runs of an engine 20 % slower (every prefill and
//     decode step), each compared with one of the first 10 runs; a report
//     with at least one regression and no improvement detects it. Goal: at
//     least 95 %.
//
// Both are also given at the 99.9 % family level TestCompareAgainstSim
// judges its rerun at. About 10 minutes on 2 cores:
//
//	go test -run '^$' -bench CompareFalseAlarms -benchtime 1x -timeout 30m ./internal/bench
func BenchmarkCompareFalseAlarms(b *testing.B) {
	const reruns, slowers = 20, 10
	for range b.N {
		dir := b.TempDir()
		load := func(name string, scale float64) *report.Report {
			out := filepath.Join(dir, name)
			runBenchSim(b, scale, out, "")
			r, err := report.Load(filepath.Join(out, report.JSONFile))
			if err != nil {
				b.Fatal(err)
			}
			return r
		}
		same := make([]*report.Report, reruns+1)
		for i := range same {
			same[i] = load(fmt.Sprintf("same-%02d", i), 1)
		}
		slow := make([]*report.Report, slowers)
		for i := range slow {
			slow[i] = load(fmt.Sprintf("slow-%02d", i), 1.2)
		}
		for _, level := range []float64{0.95, 0.999} {
			alarms, detected, figures := 0, 0, 0
			var examples, regressions []string
			for i := 1; i <= reruns; i++ {
				c := compare.Compare(same[i-1], same[i], compare.Options{Level: level, Slices: simSlices}).Comparison
				figures = c.Method.Figures
				if f := c.Findings(); len(f) > 0 {
					alarms++
					examples = append(examples, fmt.Sprintf("pair %d: %d significant, e.g. %s", i, len(f), render.FindingText(f[0])))
				}
			}
			for i, r := range slow {
				c := compare.Compare(same[i], r, compare.Options{Level: level, Slices: simSlices}).Comparison
				worse, better := 0, 0
				for _, f := range c.Findings() {
					if f.Worse {
						worse++
					} else {
						better++
					}
				}
				if worse > 0 && better == 0 {
					detected++
				}
				regressions = append(regressions, fmt.Sprintf("%d/%d", worse, better))
			}
			suffix := ""
			if level != 0.95 {
				suffix = "@99.9%"
			}
			// One log line per level: a benchmark's log is cut after ten.
			b.Logf("level %g, %d figures a report: false alarms in %d of %d rerun reports%s; %d of %d slower runs detected (regressions/improvements per run: %s)",
				level, figures, alarms, reruns, strings.Join(append([]string{""}, examples...), "; "), detected, slowers, strings.Join(regressions, " "))
			b.ReportMetric(100*float64(alarms)/reruns, "false-alarm-%"+suffix)
			b.ReportMetric(100*float64(detected)/slowers, "detected-%"+suffix)
		}
	}
}

// The three acceptance cases of a comparison, each against the simulated
// engine: a run against itself and against a rerun of the same
// configuration report no significant change; a run against an engine 20 %
// slower reports the regressions of every latency and speed.
//
// Live runs vary, so each assertion is one that chance breaks less than
// once in 1,000 runs. The rerun is judged at a family level of 99.9 %
// (compare.Options.Level): two runs of an unchanged server get any figure
// flagged with a probability of at most 0.1 %. The slower engine must be
// flagged where its 20 % is far outside the noise: every latency and speed
// of the closed loop at N=1 (each request alone on the engine), and nothing
// may be called better. N=4 (judged on 8 slices) and the bursts (9 rounds)
// are logged: BenchmarkCompareFalseAlarms measures how often a slower run
// is flagged as a whole.
func TestCompareAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three small sweeps against the simulated engine")
	}
	testproc.QuietLight(t) // a rerun must match the base: not beside a browser, a real engine or promtool
	t.Parallel()           // beside TestGateAgainstSim, another light check (each under 0.35 of a core)
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
	rerun = compare.Compare(base, rerun, compare.Options{BaseLabel: baseDir, Level: 0.999, Slices: simSlices})

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
				t.Errorf("significant change: %s", render.FindingText(f))
			}
			tested := 0
			for _, s := range c.Steps {
				for _, m := range s.Metrics {
					if m.Low != nil {
						tested++
					}
				}
			}
			if tested < 15 { // N=1 and both bursts at least; N=4 too when its 5 s held 50 requests
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
				t.Errorf("an improvement on a slower engine: %s", render.FindingText(f))
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
			if s.Mode == sweep.ModeBurst {
				// Judged on nine rounds each, against the family's
				// level. A round's queue can split into prefill batches
				// another way than its neighbours', so a figure may stay
				// "no detectable change": logged, not asserted.
				for _, metric := range []string{report.MetricTTFT, report.MetricE2E} {
					m := s.Metric(metric)
					switch {
					case m == nil || m.Low == nil:
						t.Errorf("burst N=%d %s: no interval (%+v)", s.Concurrency, metric, m)
					default:
						t.Logf("burst N=%d %s: %s, change %+.1f%% [%+.1f%%, %+.1f%%] over %d and %d rounds", s.Concurrency, metric,
							m.Verdict, 100*m.Change, 100**m.Low, 100**m.High, m.BaseSamples, m.NewSamples)
					}
				}
				continue
			}
			for _, metric := range []string{report.MetricTTFT, report.MetricITL, report.MetricE2E, report.MetricDecode} {
				m := s.Metric(metric)
				if m == nil || m.Low == nil {
					t.Errorf("closed loop N=%d %s: no interval", s.Concurrency, metric)
					continue
				}
				if m.Verdict == report.VerdictWorse {
					continue
				}
				msg := fmt.Sprintf("closed loop N=%d %s: %s, change %+.1f%% [%+.1f%%, %+.1f%%]", s.Concurrency, metric, m.Verdict,
					100*m.Change, 100**m.Low, 100**m.High)
				// At N > 1 a loaded machine can spread the slices' medians
				// past 20 %: one fresh make test saw N=4 ITL's interval
				// run from −67 % to +77 %. Logged, not asserted.
				if s.Concurrency == 1 {
					t.Error(msg + "; want worse")
				} else {
					t.Log(msg)
				}
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
			for _, c := range append([]string{"comparison"}, slo.Charts...) {
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
