package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/compare"
	"github.com/slaprobe/slaprobe/internal/gate"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// gateStep is the closed-loop step of gateBench: about 55 requests at N=1
// on the simulated engine, enough for 10 slices of 5.
const gateStep = 11 * time.Second

// gateBench runs a small bench (short_chat, closed loop N=1 for 11 s, a
// burst of 8 repeated rounds times) against a fresh simulated engine at
// the given time scale, compared with baseline through the gate when
// rules is not empty, and returns its exit code, what it printed and the
// verdict file it wrote.
func gateBench(t *testing.T, scale float64, out, baseline, rules string, unknown gate.Policy, rounds int) (int, string, *gate.Result) {
	t.Helper()
	o := benchOptions(t, writeCompareConfig(t, startScaledSim(t, scale)), []int{1}, []int{8},
		gateStep, 300*time.Millisecond, 3*time.Second, out)
	o.Sweep.Burst.Repeat = rounds
	o.Baseline = baseline
	// As TestCompareAgainstSim: the rerun is judged at a family level of
	// 99.9 %, so chance flags an unchanged engine less than once in 1,000.
	// The goodput share is judged on slices of a step's requests (5 at
	// least): at that level 12 figures need 9 slices a run, so the step is
	// cut into 10 and lasts long enough for 50 requests at N=1.
	o.Compare = compare.Options{Level: 0.999, Slices: 10}
	verdict := out + "-verdict.json"
	if rules != "" {
		if err := o.Gate.Rules.Set(rules); err != nil {
			t.Fatal(err)
		}
		o.Gate.Unknown, o.Gate.VerdictFile = unknown, verdict
	}
	var stdout, stderr bytes.Buffer
	o.Stdout, o.Stderr = &stdout, &stderr
	code := Run(context.Background(), o)
	t.Logf("scale %g, --fail-on=%s --fail-on-unknown=%s, %d rounds: exit %d\n%s%s", scale, rules, unknown, rounds, code, stdout.String(), stderr.String())
	if rules == "" {
		return code, stdout.String(), nil
	}
	b, err := os.ReadFile(verdict)
	if err != nil {
		t.Fatalf("no verdict file: %v", err)
	}
	var res gate.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("SLAPROBE_GATE_DIR"); d != "" {
		os.WriteFile(filepath.Join(d, filepath.Base(out)+"-verdict.json"), b, 0o644)
	}
	if res.ExitCode != code {
		t.Errorf("verdict file says exit %d; bench exited %d", res.ExitCode, code)
	}
	return code, stdout.String(), &res
}

// TestGateAgainstSim is the CI gate's proof: bench --baseline --fail-on
// against the simulated engine exits 0 for an unchanged rerun and
// ExitRegression for an engine 20 % slower (every prefill and decode step),
// naming the regressions in the verdict file; a rerun with too few burst
// rounds for a verdict lists those figures and exits 0 when told to pass
// open, ExitNoVerdict when failing closed.
func TestGateAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four small sweeps against the simulated engine")
	}
	testproc.QuietLight(t) // a rerun must match the base
	t.Parallel()           // beside TestCompareAgainstSim, another light check
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	if code, _, _ := gateBench(t, 1, base, "", "", "", simRounds); code != ExitOK {
		t.Fatalf("base run exited %d", code)
	}

	t.Run("unchanged rerun passes", func(t *testing.T) {
		code, stdout, res := gateBench(t, 1, filepath.Join(dir, "rerun"), base, "any", gate.UnknownFail, simRounds)
		if code != ExitOK || res.Result != "pass" {
			t.Errorf("exit %d, result %q; want 0, pass: %+v", code, res.Result, res.Reasons)
		}
		if len(res.Reasons) != 0 || len(res.NoVerdict) != 0 {
			t.Errorf("reasons %+v, no verdict %+v; want none (every figure judged)", res.Reasons, res.NoVerdict)
		}
		if !strings.Contains(stdout, "gate passed: no significant regression named by --fail-on=any") {
			t.Errorf("stdout lacks the verdict:\n%s", stdout)
		}
	})

	t.Run("20% slower fails", func(t *testing.T) {
		code, stdout, res := gateBench(t, 1.2, filepath.Join(dir, "slower"), base, "metric:ttft,capacity", gate.UnknownFail, simRounds)
		if code != ExitRegression || res.Result != "fail" {
			t.Errorf("exit %d, result %q; want %d, fail", code, res.Result, ExitRegression)
		}
		// Each prefill is 20 % longer, so N=1's median TTFT (each request
		// alone on the engine) must be a reason, with its interval above
		// zero; TestCompareAgainstSim asserts the same figure worse.
		var n1 *gate.Figure
		for i, r := range res.Reasons {
			if r.Metric != report.MetricTTFT && r.Metric != report.CapacityMaxSafeQueue && r.Metric != report.CapacityUseCase {
				t.Errorf("reason %s is not of a kind --fail-on names", r.Figure)
			}
			if r.Figure == "short_chat closed_loop N=1 ttft" {
				n1 = &res.Reasons[i]
			}
		}
		if n1 == nil {
			t.Fatalf("closed loop N=1 ttft is not a reason: %+v", res.Reasons)
		}
		if *n1.Change < 0.1 || *n1.Low <= 0 || n1.Base == nil || n1.New == nil || *n1.New <= *n1.Base || n1.FigureLevel < 0.999 ||
			!strings.Contains(n1.Why, "significantly worse") {
			t.Errorf("N=1 ttft reason = %+v", *n1)
		}
		if !strings.Contains(stdout, "gate failed: ") || !strings.Contains(stdout, "short_chat closed_loop N=1 ttft [metric:ttft]: significantly worse") {
			t.Errorf("stdout lacks the regression:\n%s", stdout)
		}
	})

	// The small-sample rules: 2 rounds against 9 cannot reach the family's
	// level, so the burst figures get no verdict, and the gate says so.
	t.Run("too few rounds: listed, passes open", func(t *testing.T) {
		out := filepath.Join(dir, "few")
		code, stdout, res := gateBench(t, 1, out, base, "any", gate.UnknownPass, 2)
		if code != ExitOK || res.Result != "pass" || len(res.Reasons) != 0 {
			t.Errorf("exit %d, result %q, reasons %+v; want 0, pass, none", code, res.Result, res.Reasons)
		}
		bursts := 0
		for _, f := range res.NoVerdict {
			if f.Mode == "burst" && f.NeededPerRun > 2 && strings.Contains(f.Why, "too few burst rounds") {
				bursts++
			}
		}
		if bursts < 4 { // ttft, itl, decode, e2e (and prefill) of the burst of 8
			t.Errorf("%d burst figures listed without a verdict; want every one: %+v", bursts, res.NoVerdict)
		}
		if !strings.Contains(stdout, "gate passed open: no regression found, but ") || !strings.Contains(stdout, "figures without a verdict (") {
			t.Errorf("stdout does not list the figures without a verdict:\n%s", stdout)
		}
		// The same comparison failing closed (the default).
		rep, err := report.Load(filepath.Join(out, report.JSONFile))
		if err != nil {
			t.Fatal(err)
		}
		closed := gate.Evaluate(rep.Comparison, gate.Rules{{Kind: gate.KindAny}}, gate.UnknownFail)
		if closed.ExitCode != ExitNoVerdict || len(closed.NoVerdict) != len(res.NoVerdict) {
			t.Errorf("failing closed: exit %d with %d figures without a verdict; want %d with %d", closed.ExitCode, len(closed.NoVerdict), ExitNoVerdict, len(res.NoVerdict))
		}
	})
}
