package collector

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/slaprobe/slaprobe/internal/compare"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/sweeper"
	"github.com/slaprobe/slaprobe/prober"
)

type staticSweeps sweeper.Snapshot

func (s staticSweeps) Snapshot() sweeper.Snapshot { return sweeper.Snapshot(s) }

func sweepStep(mode sweep.Mode, n int, ttft, itl, system float64) sweep.StepResult {
	sum := func(v float64) sweep.Summary {
		return sweep.Summary{Count: n, Mean: v, Min: v * 0.8, P1: v * 0.8, P5: v * 0.85, P10: v * 0.9,
			P50: v, P90: v * 1.1, P95: v * 1.15, P99: v * 1.2, Max: v * 1.25}
	}
	st := sweep.StepResult{
		Scenario: "chatbot", Mode: mode, Concurrency: n, Requests: n, Succeeded: n, SuccessRatio: 1,
		Decode: sum(1 / itl), ITL: sum(itl), TTFT: sum(ttft), E2E: sum(ttft + 255*itl), Prefill: sum(1024 / ttft),
		SystemThroughput: system, TokensPerHour: system * 3600,
	}
	return st
}

func sweepFixture() staticSweeps {
	t0 := time.Date(2025, 6, 1, 3, 0, 0, 0, time.UTC)
	qw := 0.25
	cl := []sweep.StepResult{sweepStep(sweep.ModeClosedLoop, 1, 0.1, 0.006, 160), sweepStep(sweep.ModeClosedLoop, 2, 0.11, 0.0065, 300)}
	cl[0].ScalingEfficiency, cl[1].ScalingEfficiency = 1, 300.0/320
	cl[1].Power = &sweep.PowerReading{AvgWatts: 420, PeakWatts: 510, Joules: 25200, JoulesPerOutputToken: 1.4}
	burst := []sweep.StepResult{sweepStep(sweep.ModeBurst, 1, 0.1, 0.006, 150), sweepStep(sweep.ModeBurst, 4, 0.4, 0.007, 520)}
	burst[1].QueueWaitSeconds = &qw
	cl[0].Drain = &sweep.DrainResult{Method: sweep.DrainEngine, WaitedSeconds: 0.5}
	burst[1].Drain = &sweep.DrainResult{Method: sweep.DrainEngine, WaitedSeconds: 120, Busy: true, Running: 3, Waiting: 1}
	burst[1].Requests, burst[1].Succeeded, burst[1].SuccessRatio = 4, 3, 0.75
	burst[1].Errors = map[prober.Reason]int{prober.ReasonHTTP5xx: 1}
	res := &sweep.Result{
		Target: "gpu-a", Model: "qwen", Started: t0, Finished: t0.Add(7 * time.Minute),
		Settings: sweep.Settings{MaxSafeTTFTSeconds: 3, CapacityStat: sweep.StatMean},
		Scenarios: []sweep.ScenarioResult{{
			ScenarioSpec: sweep.ScenarioSpec{Name: "chatbot", Family: prober.FamilyReport, InputTokens: 1024, OutputTokens: 256, Thresholds: prober.Thresholds{TTFT: 3 * time.Second, ITL: 70 * time.Millisecond}}, ClosedLoop: cl, Burst: burst,
			Capacity:     &sweep.Capacity{N: 2, Estimate: 2, Bound: sweep.BoundAtLeast, MinTested: 1, MaxTested: 2},
			MaxSafeQueue: &sweep.Capacity{N: 3, Estimate: 3.4, Approximate: true, Bound: sweep.BoundWithin, LimitedBy: "success", MinTested: 1, MaxTested: 4},
		}},
	}
	return staticSweeps{
		Enabled: true, Running: true, Current: "gpu-b", Holding: "gpu-b", NextScheduled: t0.Add(24 * time.Hour),
		Paused: map[string]string{"gpu-b": sweeper.PauseWaiting},
		Targets: []sweeper.TargetSnapshot{{
			Target: "gpu-a", Result: report.FromSweep(res, report.Meta{Model: res.Model}, 0, false),
			LastAttempt: sweeper.Attempt{Started: t0, Finished: t0.Add(7 * time.Minute), Trigger: sweeper.TriggerSchedule, Complete: true},
		}, {
			Target: "gpu-c", Result: changedFixture(t0),
			LastAttempt: sweeper.Attempt{Started: t0, Finished: t0.Add(7 * time.Minute), Trigger: sweeper.TriggerSchedule, Complete: true},
		}},
	}
}

// changedFixture is a sweep 20 % slower than the previous one, compared
// with it as the daemon does.
func changedFixture(t0 time.Time) *report.Report {
	sweep := func(scale float64, safe int) *report.Report {
		var cl []sweep.StepResult
		for _, n := range []int{1, 4} {
			st := sweepStep(sweep.ModeClosedLoop, n, 0.1*scale, 0.006*scale, 160/scale)
			for i := range 20 {
				f := scale * (1 + 0.01*float64(i%5))
				st.Samples.TTFT = append(st.Samples.TTFT, 0.1*f)
				st.Samples.ITL = append(st.Samples.ITL, 0.006*f)
				st.Samples.Decode = append(st.Samples.Decode, 1/(0.006*f))
				st.Samples.E2E = append(st.Samples.E2E, 0.1*f+255*0.006*f)
			}
			cl = append(cl, st)
		}
		res := &sweep.Result{
			Target: "gpu-c", Model: "qwen", Started: t0, Finished: t0.Add(7 * time.Minute),
			Settings: sweep.Settings{MaxSafeTTFTSeconds: 3, CapacityStat: sweep.StatMean, Burst: []int{1, 4, 16}},
			Scenarios: []sweep.ScenarioResult{{
				ScenarioSpec: sweep.ScenarioSpec{Name: "chatbot", Family: prober.FamilyReport, InputTokens: 1024, OutputTokens: 256}, ClosedLoop: cl,
				Burst:        []sweep.StepResult{sweepStep(sweep.ModeBurst, 1, 0.1, 0.006, 150), sweepStep(sweep.ModeBurst, 4, 0.4, 0.007, 520), sweepStep(sweep.ModeBurst, 16, 2, 0.008, 900)},
				MaxSafeQueue: &sweep.Capacity{N: safe, Approximate: true, Bound: sweep.BoundWithin, MinTested: 1, MaxTested: 16},
			}},
		}
		return report.FromSweep(res, report.Meta{Model: res.Model}, 0, false)
	}
	return compare.Compare(sweep(1, 20), sweep(1.2, 12), compare.Options{BaseLabel: "the previous sweep"})
}

func TestSweepCollectorGolden(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewSweepCollector(sweepFixture().Snapshot))

	golden(t, reg, "sweep.prom")

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestSweepCollectorEmpty(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewSweepCollector(staticSweeps{}.Snapshot))
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 { // slaprobe_sweep_enabled and slaprobe_sweep_running
		t.Errorf("an idle sweeper without results exports %d series; want 2", n)
	}
}

// TestSweepChangeCapacityKinds: a comparison holds, beside a scenario's max
// safe queue depth, its capacity on each capacity_on rule and in
// conversations. Only the max safe queue depth and the use-case capacity
// are slaprobe_sweep_change_ratio's; the others once went out under
// metric="max_safe_queue" too, a duplicate series that failed every gather
// after a daemon's second sweep (the default capacity_on rule is enough).
func TestSweepChangeCapacityKinds(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	r := changedFixture(t0)
	var safe *report.CapacityChange
	for i := range r.Comparison.Capacity {
		if c := &r.Comparison.Capacity[i]; c.Kind == report.CapacityMaxSafeQueue && c.Presence == report.InBoth {
			safe = c
		}
	}
	if safe == nil {
		t.Fatal("the fixture's comparison has no max safe queue depth in both runs")
	}
	for _, extra := range []report.CapacityChange{
		{Kind: report.CapacityOn, Rule: "goodput >= 95%", Change: 0.5},
		{Kind: report.CapacityOn, Rule: "p99 ttft <= 2s", Change: 0.25},
		{Kind: report.CapacityConversations, Change: 0.75},
	} {
		extra.Scenario, extra.Presence, extra.Verdict = safe.Scenario, report.InBoth, report.VerdictWorse
		r.Comparison.Capacity = append(r.Comparison.Capacity, extra)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewSweepCollector(staticSweeps{Enabled: true, Targets: []sweeper.TargetSnapshot{{Target: "gpu-c", Result: r,
		LastAttempt: sweeper.Attempt{Started: t0, Finished: t0.Add(time.Minute), Complete: true}}}}.Snapshot))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var got []string
	for _, mf := range mfs {
		if mf.GetName() != "slaprobe_sweep_change_ratio" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "metric" && (l.GetValue() == changeMaxSafeQueue || l.GetValue() == changeUseCase) {
					got = append(got, fmt.Sprintf("%s=%g", l.GetValue(), m.GetGauge().GetValue()))
				}
			}
		}
	}
	if want := fmt.Sprintf("%s=%g", changeMaxSafeQueue, safe.Change); len(got) != 1 || got[0] != want {
		t.Errorf("capacity changes exported %v, want [%s]", got, want)
	}
}
