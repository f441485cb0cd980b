package report

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

func TestFromSweep(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	qw := 0.5
	step := func(mode sweep.Mode, n int) sweep.StepResult {
		return sweep.StepResult{Mode: mode, Concurrency: n, Requests: n, Succeeded: n, SuccessRatio: 1, WindowSeconds: 60,
			TTFT: sweep.Summary{Mean: 1, P50: 0.9, P90: 1.5, P95: 1.7, P99: 2}, SystemThroughput: 100 * float64(n),
			Decode:        sweep.Summary{Mean: 50, P1: 31, P5: 35, P10: 40, P50: 51, P90: 58, P95: 60, P99: 63},
			Drain:         &sweep.DrainResult{Method: sweep.DrainEngine, WaitedSeconds: 120, Busy: n == 2, Running: 3},
			TokensPerHour: 360000 * float64(n), ScalingEfficiency: 0.9, QueueWaitSeconds: &qw, PrefillExclQueue: 12345,
			Prefill: sweep.Summary{Mean: 9000}, Errors: map[prober.Reason]int{prober.ReasonTimeout: 1},
			Power: &sweep.PowerReading{AvgWatts: 500, PeakWatts: 600, Joules: 30000, JoulesPerOutputToken: 0.5}}
	}
	res := &sweep.Result{
		Target: "t", Model: "m", Started: t0, Finished: t0.Add(time.Hour), Interrupted: true,
		Settings: sweep.Settings{ClosedLoop: []int{1, 2}, Burst: []int{4}, StepSeconds: 60, WarmupSeconds: 10,
			EarlyStopFactor: 3, MaxSafeTTFTSeconds: 3, CapacityStat: sweep.StatP90},
		Scenarios: []sweep.ScenarioResult{
			{Name: "general_chat", Family: prober.FamilyUseCase, InputTokens: 32768, OutputTokens: 1024,
				Thresholds:     prober.Thresholds{TTFT: 8 * time.Second, MinDecode: 15},
				ClosedLoop:     []sweep.StepResult{step(sweep.ModeClosedLoop, 1), step(sweep.ModeClosedLoop, 2)},
				Burst:          []sweep.StepResult{step(sweep.ModeBurst, 4)},
				BurstStop:      &sweep.EarlyStop{Concurrency: 4, Skipped: []int{8, 16}, Reason: "every threshold far exceeded"},
				MaxSafeQueue:   &sweep.Capacity{N: 3, Approximate: true, Bound: sweep.BoundWithin, MaxTested: 4},
				Capacity:       &sweep.Capacity{N: 2, Bound: sweep.BoundAtLeast, MaxTested: 2, Limits: []sweep.CapacityLimit{{Kind: "ttft", Threshold: 8, Stat: sweep.StatP90, Capacity: sweep.Capacity{N: 2, Bound: sweep.BoundAtLeast}}}},
				ClosedLoopStop: nil},
			{Name: "broken", Error: "calibrate broken: prompt too long"},
		},
	}
	rep := FromSweep(res, Meta{Model: "m"}, 0.1, true)
	if err := rep.Validate(); err != nil {
		t.Fatal(err)
	}
	if !rep.Meta.Interrupted || rep.Config.Thresholds.MaxSafeQueueStat != "p90" || rep.Config.PricePerKWh != 0.1 || !rep.Config.EarlyStop {
		t.Errorf("meta/config: %+v %+v", rep.Meta, rep.Config)
	}
	if len(rep.Scenarios) != 1 || len(rep.Notes) != 2 {
		t.Fatalf("scenarios %d, notes %v", len(rep.Scenarios), rep.Notes)
	}
	s := rep.Scenarios[0]
	cl := s.ClosedLoop[0]
	if cl.PrefillTokensPerSecond != 12345 || cl.Errors["timeout"] != 1 || cl.ScalingEfficiency == nil || cl.TTFT.P90 != 1.5 ||
		cl.Power == nil || cl.Power.CostPerHourUSD != 0.05 || cl.Power.JoulesPerToken != 0.5 {
		t.Errorf("closed-loop step = %+v", cl)
	}
	// The slow tail of decode speed and how each step started come through.
	if d := cl.Decode; d.P1 != 31 || d.P10 != 40 || d.P50 != 51 || d.P99 != 63 {
		t.Errorf("decode = %+v; want p1 31, p10 40", d)
	}
	if cl.Drain == nil || cl.StartedBusy() || !s.ClosedLoop[1].StartedBusy() || s.ClosedLoop[1].Drain.Running != 3 {
		t.Errorf("drain = %+v, %+v; want N=2 busy with 3 running", cl.Drain, s.ClosedLoop[1].Drain)
	}
	if s.Burst[0].ScalingEfficiency != nil {
		t.Error("burst steps carry no scaling efficiency in the report")
	}
	if len(s.StoppedEarly) != 1 || s.StoppedEarly[0].Mode != sweep.ModeBurst || !reflect.DeepEqual(s.StoppedEarly[0].SkippedLadderN, []int{8, 16}) {
		t.Errorf("stopped early = %+v", s.StoppedEarly)
	}
	q := rep.Capacity.MaxSafeQueue
	if len(q) != 1 || q[0].Value != 3 || !q[0].Approximate || q[0].Stat != "p90" || q[0].MaxTested != 4 {
		t.Errorf("max safe queue = %+v", q)
	}
	u := rep.Capacity.UseCases
	if len(u) != 1 || !u[0].AtLeast || u[0].Value != 2 || len(u[0].Limits) != 1 || !u[0].Limits[0].AtLeast {
		t.Errorf("use cases = %+v", u)
	}
}

// A sweep's goodput and its capacity on rules reach the report, with the
// steps that bracket an interpolated capacity.
func TestFromSweepGoodput(t *testing.T) {
	st := sweep.StepResult{Mode: sweep.ModeClosedLoop, Concurrency: 4, Requests: 10, Succeeded: 10, SuccessRatio: 1, Good: 7, GoodShare: 0.7, GoodPerSecond: 0.35,
		Samples: sweep.Samples{Good: []float64{1, 1, 0, 1, 1, 0, 1, 1, 0, 1}}}
	res := &sweep.Result{
		Settings: sweep.Settings{CapacityOn: []string{"goodput >= 95%", "p99 ttft <= 2s"}},
		Scenarios: []sweep.ScenarioResult{{Name: "chat", ClosedLoop: []sweep.StepResult{st},
			CapacityOn: []sweep.RuleCapacity{
				{Rule: "goodput >= 95%", Capacity: sweep.Capacity{N: 5, Estimate: 5.5, Approximate: true, Bound: sweep.BoundWithin, Between: []int{4, 8}, MaxTested: 8}},
				{Rule: "p99 ttft <= 2s", Capacity: sweep.Capacity{N: 8, Estimate: 8, Bound: sweep.BoundAtLeast, MaxTested: 8}},
			}}},
	}
	rep := FromSweep(res, Meta{}, 0, false)
	s := rep.Scenarios[0].ClosedLoop[0]
	if s.Good != 7 || s.GoodShare == nil || *s.GoodShare != 0.7 || s.GoodPerSecond != 0.35 || s.Samples == nil || len(s.Samples.Good) != 10 {
		t.Errorf("step goodput: %d good, share %v, %v/s, samples %+v", s.Good, s.GoodShare, s.GoodPerSecond, s.Samples)
	}
	want := []RuleCapacity{
		{Scenario: "chat", Mode: sweep.ModeClosedLoop, Rule: "goodput >= 95%", Bound: Bound{Value: 5, Approximate: true}, Estimate: 5.5, Between: []int{4, 8}, MaxTested: 8},
		{Scenario: "chat", Mode: sweep.ModeClosedLoop, Rule: "p99 ttft <= 2s", Bound: Bound{Value: 8, AtLeast: true}, MaxTested: 8},
	}
	if !reflect.DeepEqual(rep.Capacity.On, want) || !reflect.DeepEqual(rep.Config.CapacityOn, res.Settings.CapacityOn) {
		t.Errorf("capacity on %+v (config %v); want %+v", rep.Capacity.On, rep.Config.CapacityOn, want)
	}
	h := ComputeHeadline(rep)
	if len(h.GoodputCapacity) != 1 || h.GoodputCapacity[0].Value != 5 || !h.GoodputCapacity[0].Approximate {
		t.Errorf("headline goodput capacity %+v; want ~5", h.GoodputCapacity)
	}
	rep.Headline = h
	var md strings.Builder
	if err := RenderMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"| Capacity on goodput | ~5 requests | chat, goodput ≥ 95%; interpolated between N=4 and N=8 (crossing at 5.50) |",
		"| chat | p99 ttft ≤ 2s | 8+ | every N tested meets it |", "| 4 | 10 / 10 | 100% | 70% | 0.35 |"} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("markdown lacks %q:\n%s", w, md.String())
		}
	}
	html := renderHTML(t, rep)
	for _, w := range []string{`data-chart="capacity-on"`, "Capacity on goodput", "interpolated between N=4 and N=8 (crossing at 5.50)", "p99 ttft ≤ 2s", ">good/s</th>"} {
		if !strings.Contains(html, w) {
			t.Errorf("report.html lacks %q", w)
		}
	}
}
