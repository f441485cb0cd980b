package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/testproc"
)

type swFakePower struct {
	mu      sync.Mutex
	started int
	stopped int
}

func (p *swFakePower) Start(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started++
	return nil
}

func (p *swFakePower) Stop() (PowerReading, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped++
	return PowerReading{AvgWatts: 300, PeakWatts: 450, Joules: 60}, nil
}

func swFastOptions(s ...prober.Scenario) Options {
	o := DefaultOptions(s)
	o.ClosedLoop = []int{1, 2, 4}
	o.Burst = []int{1, 2, 4, 8}
	o.BurstRepeat = 1 // one burst per step: the tests count its requests and its power readings
	o.Warmup = 20 * time.Millisecond
	o.StepDuration = 150 * time.Millisecond
	o.Cooldown = 0
	return o
}

func TestSweep(t *testing.T) {
	f := newSwFakeEngine()
	power := &swFakePower{}
	var events []ProgressEvent
	opts := swFastOptions(swScenario())
	opts.Scrape = f.counters
	opts.Power = power
	opts.Progress = func(ev ProgressEvent) { events = append(events, ev) }

	res, err := Run(context.Background(), f, prober.Target{Name: "t"}, "m", opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted || len(res.Scenarios) != 1 {
		t.Fatalf("result: interrupted=%v scenarios=%d", res.Interrupted, len(res.Scenarios))
	}
	sr := res.Scenarios[0]
	if len(sr.ClosedLoop) != 3 || len(sr.Burst) != 4 {
		t.Fatalf("steps: closed loop %d, burst %d; want 3 and 4", len(sr.ClosedLoop), len(sr.Burst))
	}
	for _, st := range append(append([]StepResult(nil), sr.ClosedLoop...), sr.Burst...) {
		if st.SuccessRatio != 1 || st.Succeeded == 0 {
			t.Errorf("%s N=%d: success %d/%d", st.Mode, st.Concurrency, st.Succeeded, st.Requests)
		}
		if st.MaxInFlight != st.Concurrency {
			t.Errorf("%s N=%d: max in flight %d", st.Mode, st.Concurrency, st.MaxInFlight)
		}
		if st.SystemThroughput <= 0 || st.TokensPerHour != st.SystemThroughput*3600 {
			t.Errorf("%s N=%d: throughput %g tok/s, %g tok/h", st.Mode, st.Concurrency, st.SystemThroughput, st.TokensPerHour)
		}
		if st.Decode.Mean <= 0 || st.ITL.Mean <= 0 || st.TTFT.P50 <= 0 || st.E2E.P99 <= 0 || st.Prefill.Mean <= 0 {
			t.Errorf("%s N=%d: empty distributions: %+v", st.Mode, st.Concurrency, st)
		}
		if st.Power == nil || st.Power.AvgWatts != 300 || math.Abs(st.Power.JoulesPerOutputToken-60/st.OutputTokens) > 1e-9 {
			t.Errorf("%s N=%d: power %+v", st.Mode, st.Concurrency, st.Power)
		}
		if st.QueueWaitSeconds == nil {
			t.Errorf("%s N=%d: no queue wait though the engine reports it", st.Mode, st.Concurrency)
		}
		if st.Mode == ModeBurst && st.Concurrency == 8 && *st.QueueWaitSeconds < 2*f.prefill.Seconds() {
			t.Errorf("burst N=8: queue wait %gs; prefills are serialised, want ≥ %gs", *st.QueueWaitSeconds, 2*f.prefill.Seconds())
		}
	}
	if power.started != 7 || power.stopped != 7 {
		t.Errorf("power sampler started %d, stopped %d times; want 7 each", power.started, power.stopped)
	}
	// Efficiency is relative to the N=1 step of the same ladder.
	if e := sr.ClosedLoop[0].ScalingEfficiency; e != 1 {
		t.Errorf("efficiency at N=1 = %g; want 1", e)
	}
	want := sr.ClosedLoop[2].SystemThroughput / (sr.ClosedLoop[0].SystemThroughput * 4)
	// The bounds catch a ratio not divided by N (about 4 here); a loaded machine
	// that starves the short N=1 window can push a right one well above 1.
	if e := sr.ClosedLoop[2].ScalingEfficiency; math.Abs(e-want) > 1e-12 || e <= 0.3 || e > 2 {
		t.Errorf("efficiency at N=4 = %g; want %g, a plausible ratio", e, want)
	}
	if sr.MaxSafeQueue == nil || sr.Capacity == nil {
		t.Fatal("capacity not computed")
	}
	if sr.MaxSafeQueue.Bound != BoundAtLeast || sr.MaxSafeQueue.N != 8 {
		t.Errorf("max safe queue = %s; want ≥8 (TTFT far below 3 s)", sr.MaxSafeQueue)
	}

	// Progress: a start and a finish per step, numbered, with a shrinking ETA.
	var started, finished int
	for _, ev := range events {
		switch ev.Kind {
		case ProgressStepStarted:
			started++
			if ev.Step != started || ev.Steps != 7 {
				t.Errorf("start event %d: step %d of %d", started, ev.Step, ev.Steps)
			}
		case ProgressStepFinished:
			finished++
			if ev.Result == nil || ev.Step != finished {
				t.Errorf("finish event %d: step %d, result %v", finished, ev.Step, ev.Result)
			}
		}
	}
	if started != 7 || finished != 7 {
		t.Errorf("progress: %d started, %d finished; want 7 each", started, finished)
	}
	if last := events[len(events)-1]; last.Remaining != 0 {
		t.Errorf("remaining after the last step = %v; want 0", last.Remaining)
	}
	if first := events[0]; first.Remaining < 3*(opts.Warmup+opts.StepDuration) {
		t.Errorf("first ETA %v; want at least the closed-loop windows", first.Remaining)
	}

	// The result survives a JSON round trip (the daemon's state file).
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Scenarios[0].Burst[3].TTFT != sr.Burst[3].TTFT || back.Scenarios[0].MaxSafeQueue.String() != sr.MaxSafeQueue.String() {
		t.Error("JSON round trip changed the result")
	}
}

func TestSweepEarlyStop(t *testing.T) {
	testproc.QuietLight(t) // a TTFT threshold of a few prefills of 4 ms
	f := newSwFakeEngine()
	f.prefill = 4 * time.Millisecond
	s := swScenario()
	// Burst TTFT mean ≈ (N+1)/2 × 4 ms: N=8 ≈ 18 ms, N=16 ≈ 34 ms > 3 × 10 ms.
	s.Thresholds = prober.Thresholds{TTFT: 10 * time.Millisecond, ITL: 70 * time.Millisecond}
	opts := swFastOptions(s)
	opts.ClosedLoop = nil
	opts.Burst = []int{1, 2, 4, 8, 16, 32, 64}
	opts.Capacity.MaxSafeTTFT = 10 * time.Millisecond
	var skipped []ProgressEvent
	opts.Progress = func(ev ProgressEvent) {
		if ev.Kind == ProgressStepSkipped {
			skipped = append(skipped, ev)
		}
	}
	res, err := Run(context.Background(), f, prober.Target{Name: "t"}, "m", opts)
	if err != nil {
		t.Fatal(err)
	}
	sr := res.Scenarios[0]
	if len(sr.StoppedEarly) != 1 || sr.StoppedEarly[0].Mode != ModeBurst {
		t.Fatalf("burst ladder ran to the end: %d steps, stopped %+v", len(sr.Burst), sr.StoppedEarly)
	}
	stop := sr.StoppedEarly[0]
	// Timing on a loaded machine only makes TTFT worse (a timer never fires
	// early), so the ladder stops at 16 (34 ms) or earlier, never later. How
	// much earlier is the machine's (8 here; 4 where it adds 20 ms to a
	// 10 ms TTFT), so instead of a floor: it stopped at the first step the
	// rule (TestEarlyStopRule) calls far off, as measured, and not before.
	if stop.AfterN > 16 || len(sr.Burst) != len(opts.Burst)-len(stop.SkippedLadderN) || sr.Burst[len(sr.Burst)-1].Concurrency != stop.AfterN {
		t.Errorf("stopped after N=%d with %d steps, skipped %v", stop.AfterN, len(sr.Burst), stop.SkippedLadderN)
	}
	for i, st := range sr.Burst {
		if far, last := earlyStop(st, s.Thresholds, ModeBurst, opts) != "", i == len(sr.Burst)-1; far != last {
			t.Errorf("N=%d (mean TTFT %.1f ms): the rule says far off %v, but the ladder stopped after N=%d", st.Concurrency, st.TTFT.Mean*1e3, far, stop.AfterN)
		}
	}
	if len(skipped) != 1 || skipped[0].Steps != len(sr.Burst) {
		t.Errorf("skip events %+v; want one, with the plan shrunk to %d steps", skipped, len(sr.Burst))
	}
	if sr.MaxSafeQueue.Bound != BoundWithin {
		t.Errorf("max safe queue %s; want a crossing inside the ladder", sr.MaxSafeQueue)
	}

	// Failures stop a ladder too.
	f = newSwFakeEngine()
	f.failWhen = func(n int) bool { return n > 2 }
	opts = swFastOptions(swScenario())
	opts.ClosedLoop = nil
	opts.EarlyStopMinSuccess = 0.6
	res, err = Run(context.Background(), f, prober.Target{Name: "t"}, "m", opts)
	if err != nil {
		t.Fatal(err)
	}
	if st := res.Scenarios[0].StoppedEarly; len(st) != 1 || st[0].Mode != ModeBurst || st[0].AfterN != 4 {
		t.Errorf("early stop on failures = %+v; want after N=4", st)
	}
	if c := res.Scenarios[0].MaxSafeQueue; c.N != 2 || c.LimitedBy != "success" {
		t.Errorf("max safe queue with failures = %s by %q; want 2 by success", c, c.LimitedBy)
	}
}

func TestEarlyStopRule(t *testing.T) {
	opts := DefaultOptions(nil)
	use := prober.Thresholds{TTFT: 10 * time.Second, MinDecode: 10} // short_chat
	for _, tc := range []struct {
		name      string
		ttft, dec float64
		mode      Mode
		th        prober.Thresholds
		wantStop  bool
	}{
		{"both far", 31, 3, ModeClosedLoop, use, true},
		{"only ttft far", 31, 9, ModeClosedLoop, use, false},
		{"only decode far", 29, 3, ModeClosedLoop, use, false},
		{"report family burst: itl ignored", 10, 50, ModeBurst, prober.ReportThresholds, true},
		{"report family closed loop: itl counts", 10, 50, ModeClosedLoop, prober.ReportThresholds, false},
		{"no thresholds", 1e6, 0.001, ModeBurst, prober.Thresholds{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := swStep(8, tc.ttft, 0.02, tc.ttft+10, tc.dec, 1)
			got := earlyStop(s, tc.th, tc.mode, opts)
			if (got != "") != tc.wantStop {
				t.Errorf("earlyStop = %q; want stop=%v", got, tc.wantStop)
			}
		})
	}
	if got := earlyStop(swStep(8, 0.1, 0.01, 1, 100, 0.4), use, ModeBurst, opts); got == "" {
		t.Error("success ratio 0.4 did not stop the ladder")
	}
}

func TestSweepCancel(t *testing.T) {
	f := newSwFakeEngine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := swFastOptions(swScenario(), swScenario())
	opts.Scenarios[1].Name = "second"
	opts.Progress = func(ev ProgressEvent) {
		if ev.Kind == ProgressStepStarted && ev.Step == 3 {
			go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		}
	}
	start := time.Now()
	res, err := Run(ctx, f, prober.Target{Name: "t"}, "m", opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("cancel took %v", time.Since(start))
	}
	if !res.Interrupted || len(res.Scenarios) != 1 || len(res.Scenarios[0].ClosedLoop) != 2 {
		t.Fatalf("partial result: interrupted=%v scenarios=%d steps=%d; want the 2 finished steps",
			res.Interrupted, len(res.Scenarios), len(res.Scenarios[0].ClosedLoop))
	}
	if res.Scenarios[0].Capacity == nil {
		t.Error("capacity not computed on the partial result")
	}
}

type swFailingPrepare struct{ *swFakeEngine }

func (swFailingPrepare) Prepare(context.Context, prober.Target, string, prober.Scenario) (*prober.Prepared, error) {
	return nil, errors.New("calibration failed: prompt too long")
}

func TestSweepPrepareFails(t *testing.T) {
	var failed int
	opts := swFastOptions(swScenario())
	opts.Progress = func(ev ProgressEvent) {
		if ev.Kind == ProgressScenarioFailed {
			failed++
		}
	}
	res, err := Run(context.Background(), swFailingPrepare{newSwFakeEngine()}, prober.Target{Name: "t"}, "m", opts)
	if err != nil {
		t.Fatal(err)
	}
	if failed != 1 || res.Scenarios[0].Error == "" || len(res.Scenarios[0].Burst) != 0 {
		t.Errorf("failed=%d scenario=%+v", failed, res.Scenarios[0])
	}
}

func TestSweepBeforeStep(t *testing.T) {
	var seen []StepInfo
	opts := swFastOptions(swScenario())
	opts.ClosedLoop = nil
	opts.MaxConcurrency = 4
	stopErr := errors.New("engine busy for too long")
	opts.BeforeStep = func(_ context.Context, s StepInfo) error {
		seen = append(seen, s)
		if s.Concurrency == 4 {
			return stopErr
		}
		return nil
	}
	res, err := Run(context.Background(), newSwFakeEngine(), prober.Target{Name: "t"}, "m", opts)
	if !errors.Is(err, stopErr) {
		t.Fatalf("err = %v; want the gate's error", err)
	}
	if len(seen) != 3 || len(res.Scenarios[0].Burst) != 2 || res.Settings.Burst[len(res.Settings.Burst)-1] != 4 {
		t.Errorf("gate saw %v; steps %d; ladder %v (ceiling 4)", seen, len(res.Scenarios[0].Burst), res.Settings.Burst)
	}
}

func TestLadder(t *testing.T) {
	got := ladder([]int{32, 1, 4, 4, 0, 256, 2}, 32)
	want := []int{1, 2, 4, 32}
	if len(got) != len(want) {
		t.Fatalf("ladder = %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ladder = %v; want %v", got, want)
		}
	}
}

// A closed-loop window shorter than one request: no request ends in it. The
// step says so and why, with the step duration to set; no scaling efficiency,
// no capacity comes from it; the sizing request warns before the ladder; and
// a ladder whose larger steps did measure is judged on those alone.
func TestSweepStepThatMeasuredNothing(t *testing.T) {
	f := newSwFakeEngine()
	f.step = func(int) time.Duration { return 15 * time.Millisecond } // 11 tokens: about 150 ms a request
	var events []ProgressEvent
	opts := swFastOptions(swScenario())
	opts.ClosedLoop, opts.Burst = []int{1, 4}, nil
	// The requests in flight when the window opens end after it closes, so
	// none starts inside it: nothing is sampled.
	opts.Warmup, opts.StepDuration = 20*time.Millisecond, 60*time.Millisecond
	opts.CheckStepDuration = true
	opts.Progress = func(ev ProgressEvent) { events = append(events, ev) }
	res, err := Run(context.Background(), f, prober.Target{Name: "t"}, "m", opts)
	if err != nil {
		t.Fatal(err)
	}
	sr := res.Scenarios[0]
	if len(sr.ClosedLoop) != 2 {
		t.Fatalf("%d closed-loop steps, want 2", len(sr.ClosedLoop))
	}
	for _, st := range sr.ClosedLoop {
		if st.Measured() || st.Requests != 0 {
			t.Errorf("N=%d: %d requests ended in a 60 ms window of 150 ms requests", st.Concurrency, st.Requests)
		}
		if !strings.Contains(st.NotMeasured, "no request ended inside the 60ms window") || !regexp.MustCompile(`to \d+s or more`).MatchString(st.NotMeasured) {
			t.Errorf("N=%d: NotMeasured %q; want the window and the duration to set", st.Concurrency, st.NotMeasured)
		}
		if st.ScalingEfficiency != 0 {
			t.Errorf("N=%d: scaling efficiency %g from a step that measured nothing", st.Concurrency, st.ScalingEfficiency)
		}
	}
	if sr.Capacity != nil {
		t.Errorf("capacity %+v from steps that measured nothing; want none", *sr.Capacity)
	}
	var warned, finished int
	for i, ev := range events {
		switch ev.Kind {
		case ProgressWarning:
			warned++
			if i != 0 || !strings.Contains(ev.Message, "step.duration") || !strings.Contains(ev.Message, "60ms window") {
				t.Errorf("warning at event %d: %q; want it first, naming the window and what to set", i, ev.Message)
			}
		case ProgressStepFinished:
			if ev.Result.NotMeasured == "" {
				t.Errorf("step N=%d finished without saying it measured nothing", ev.Concurrency)
			}
			finished++
		}
	}
	if warned != 1 || finished != 2 {
		t.Errorf("%d warnings, %d steps finished; want 1 and 2", warned, finished)
	}

	// Long enough for N=1 to measure: a ladder judged on the measured steps.
	steps := []StepResult{
		{Concurrency: 1, Requests: 3, Succeeded: 3, SuccessRatio: 1, TTFT: Summary{Count: 3, Mean: 0.1}, SystemThroughput: 100},
		{Concurrency: 4, NotMeasured: "no request ended inside the 1s window", SystemThroughput: 390},
	}
	sr = ScenarioResult{ClosedLoop: steps}
	finishScenario(&sr, swScenario(), opts)
	if sr.ClosedLoop[0].ScalingEfficiency != 1 || sr.ClosedLoop[1].ScalingEfficiency != 0 {
		t.Errorf("efficiencies %g and %g; want 1 and none", sr.ClosedLoop[0].ScalingEfficiency, sr.ClosedLoop[1].ScalingEfficiency)
	}
	if c := sr.Capacity; c == nil || c.N != 1 || c.Bound != BoundAtLeast {
		t.Errorf("capacity %+v; want at least 1 (N=4 measured nothing, so it neither passes nor fails)", c)
	}
}
