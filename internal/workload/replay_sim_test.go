package workload

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/compare"
	"github.com/slaprobe/slaprobe/internal/gate"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/report/render"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// replayEngine: two sequences at once, 5 ms decode steps whatever the batch, a short prefill:
// its request capacity follows from the settings (trueCapacity).
func replayEngine(c *vllmsim.Config) {
	c.MaxNumSeqs = 2
	c.MaxModelLen = 4096
	c.PrefillOverhead = time.Millisecond
	c.PrefillTokensPerSecond = 1e6
	c.PrefillQuadratic = 0
	c.DecodeBase = 5 * time.Millisecond
	c.DecodePerSeq = 0
	c.DecodePerKVToken = 0
	c.TokensPerStep = 1
	c.EnablePrefixCaching = false
}

const (
	replayIn, replayOut = 500, 16
	replayRate          = 8.0 // the trace's requests per second
	replayRequests      = 60
)

// trueCapacity is the engine's request rate at saturation: each request needs one prefill step,
// during which nobody decodes, and out−1 decode steps in one of c slots, so at λ requests/s the
// slots decode for 1 − λ·P of each second and λ = c·(1 − λ·P) / ((out−1)·D), that is
// λ = c / ((out−1)·D + c·P).
func trueCapacity(c vllmsim.Config) float64 {
	p := c.PrefillTime(replayIn).Seconds()
	d := c.DecodeStep(1, 0).Seconds()
	return float64(c.MaxNumSeqs) / (float64(replayOut-1)*d + float64(c.MaxNumSeqs)*p)
}

func replayTrace() []Request {
	reqs := make([]Request, replayRequests)
	for i := range reqs {
		reqs[i] = Request{At: time.Duration(float64(i) / replayRate * float64(time.Second)), Input: replayIn, Output: replayOut, Line: i + 1}
	}
	return reqs
}

func replaySweep(t *testing.T, target prober.Target) sweep.Headroom {
	t.Helper()
	p := prober.New(slog.New(slog.DiscardHandler), prober.SystemClock{})
	rp := &Replayer{Prompts: prober.NewPrefixPrompts(p), Prober: p, Target: target,
		Scenario: prober.Scenario{Name: "replay", Family: prober.FamilyCustom, Timeout: 30 * time.Second}, Reqs: replayTrace()}
	good := Judge(prober.Thresholds{TTFT: 100 * time.Millisecond}, nil)
	h, err := Replay(context.Background(), rp.Reqs, rp.Send, good, ReplayOptions{
		Speedups: []float64{1, 2, 4}, Prepare: rp.Prepare,
		Step: func(s sweep.ReplayStep) {
			t.Logf("×%-5s %5.1f req/s: good %3.0f %% (%d/%d), TTFT p50 %.0f ms p99 %.0f ms, late p99 %s",
				sweep.FormatSpeedup(s.Speedup), s.OfferedRate, 100*s.GoodShare, s.Good, s.Requests, 1000*s.TTFT.P50, 1000*s.TTFT.P99, s.Late.Round(time.Millisecond))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestReplayHeadroom: replaying a trace open-loop at speed-ups on the simulated engine finds the
// largest multiple of the trace's traffic that keeps goodput, within one speed-up step (the
// refined bracket) of the multiple computed from the engine's settings; an engine made 30 %
// slower finds a headroom that much smaller.
func TestReplayHeadroom(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace at five speed-ups on two engines (about 40 s)")
	}
	// A timing check against a simulated engine: quiet cores, up to three attempts (a loaded
	// machine sends late and slows the engine; the step lines log how late).
	testproc.TimingAttempts(t, func(errorf func(string, ...any)) {
		var found [2]float64
		var reports [2]string
		for i, scale := range []float64{1, 1.3} {
			target, e := simTarget(t, func(c *vllmsim.Config) { replayEngine(c); c.TimeScale = scale })
			want := trueCapacity(e.Config()) / replayRate
			h := replaySweep(t, target)
			found[i] = h.Multiple
			reports[i] = writeHeadroomReport(t, target, h)
			lo, hi, _ := h.Bracket()
			t.Logf("time scale %.1f: true multiple %.2f× (capacity %.1f req/s over the trace's %.0f), headroom found %s (steps ×%s … ×%s)",
				scale, want, trueCapacity(e.Config()), replayRate, h, sweep.FormatSpeedup(lo), sweep.FormatSpeedup(hi))
			step := hi - lo
			if h.Bound != sweep.BoundWithin || math.Abs(h.Multiple-want) > step {
				errorf("time scale %.1f: headroom %s (%s); want within one step (%.2f) of %.2f×", scale, h, h.Bound, step, want)
			}
		}
		if r := found[1] / found[0]; r < 0.65 || r > 0.9 {
			errorf("the 30 %% slower engine's headroom is %.2f of the other's; want about 1/1.3 = 0.77", r)
		}
		compareHeadroomReports(t, reports, errorf)
	})
}

// writeHeadroomReport writes h as slaprobe headroom --out does and returns
// the directory.
func writeHeadroomReport(t *testing.T, target prober.Target, h sweep.Headroom) string {
	t.Helper()
	h.Workload, h.Requests = "steady", replayRequests
	dir := t.TempDir()
	rep := &report.Report{Meta: report.Meta{TargetURL: target.BaseURL, FinishedAt: time.Now()}, Headroom: &h}
	if _, err := render.Write(dir, rep); err != nil {
		t.Fatal(err)
	}
	return dir
}

// compareHeadroomReports is slaprobe compare on the two reports of
// TestReplayHeadroom, as files: the slower engine's headroom is about
// 1/1.3 of the other's (within the new run's step), called significantly
// worse, and --fail-on=headroom:10 trips; the faster engine's report
// against itself (unchanged) does not.
func compareHeadroomReports(t *testing.T, dirs [2]string, errorf func(string, ...any)) {
	var reps [2]*report.Report
	for i, d := range dirs {
		r, err := compare.LoadReport(d)
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = r
	}
	rules := gate.Rules{{Kind: gate.KindHeadroom, Points: 10}}
	c := compare.Compare(reps[0], reps[1], compare.Options{BaseLabel: "base"}).Comparison
	var summary strings.Builder
	compare.WriteSummary(&summary, c)
	t.Logf("compare base slower:\n%s", summary.String())
	h := c.Headroom
	lo, hi, _ := reps[1].Headroom.Bracket()
	if want := h.Base / 1.3; h.Verdict != report.VerdictWorse || math.Abs(h.New-want) > hi-lo || !strings.Contains(summary.String(), "% less (significant") {
		errorf("compare: headroom %s → %s (%s); want worse, %s within one step (%.2f) of %.2f× (the base's over 1.3)", h.BaseText, h.NewText, h.Verdict,
			h.NewText, hi-lo, want)
	}
	if res := gate.Evaluate(c, rules, gate.UnknownFail); res.ExitCode != gate.ExitRegression {
		errorf("--fail-on=headroom:10 against the 30 %% slower engine: exit %d (%s); want %d", res.ExitCode, res.Summary, gate.ExitRegression)
	}
	same := compare.Compare(reps[0], reps[0], compare.Options{BaseLabel: "base"}).Comparison
	if res := gate.Evaluate(same, rules, gate.UnknownFail); res.ExitCode != 0 || same.Headroom.Verdict != report.VerdictNoChange {
		errorf("the unchanged engine against itself: %s, exit %d (%s); want no change, 0", same.Headroom.Verdict, res.ExitCode, res.Summary)
	}
}
