package render

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// A sweep's goodput and its capacity on rules reach the report, with the
// steps that bracket an interpolated capacity.
func TestFromSweepGoodput(t *testing.T) {
	st := sweep.StepResult{Mode: sweep.ModeClosedLoop, Concurrency: 4, Requests: 10, Succeeded: 10, SuccessRatio: 1, Good: 7, GoodShare: 0.7, GoodPerSecond: 0.35,
		Samples: sweep.Samples{Good: []float64{1, 1, 0, 1, 1, 0, 1, 1, 0, 1}}}
	want := []sweep.RuleCapacity{
		{Scenario: "chat", Mode: sweep.ModeClosedLoop, Rule: "goodput >= 95%", Bound: sweep.Bound{Value: 5, Approximate: true}, Estimate: 5.5, Between: []int{4, 8}, MaxTested: 8},
		{Scenario: "chat", Mode: sweep.ModeClosedLoop, Rule: "p99 ttft <= 2s", Bound: sweep.Bound{Value: 8, AtLeast: true}, MaxTested: 8},
	}
	res := &sweep.Result{
		Settings:  sweep.Settings{CapacityOn: []string{"goodput >= 95%", "p99 ttft <= 2s"}},
		Scenarios: []sweep.ScenarioResult{{ScenarioSpec: sweep.ScenarioSpec{Name: "chat"}, ClosedLoop: []sweep.StepResult{st}, CapacityOn: want}},
	}
	rep := report.FromSweep(res, report.Meta{}, 0, false)
	s := rep.Scenarios[0].ClosedLoop[0]
	if s.Good != 7 || s.GoodShare == nil || *s.GoodShare != 0.7 || s.GoodPerSecond != 0.35 || s.Samples == nil || len(s.Samples.Good) != 10 {
		t.Errorf("step goodput: %d good, share %v, %v/s, samples %+v", s.Good, s.GoodShare, s.GoodPerSecond, s.Samples)
	}
	if !reflect.DeepEqual(rep.Capacity.On, want) || !reflect.DeepEqual(rep.Config.CapacityOn, res.Settings.CapacityOn) {
		t.Errorf("capacity on %+v (config %v); want %+v", rep.Capacity.On, rep.Config.CapacityOn, want)
	}
	h := report.ComputeHeadline(rep)
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

// FromSweep's report.json of a sweep with every part a report keeps: three
// scenarios (one a conversation), early stops on both ladders, capacity on
// three rules, a busy step, a scenario that failed. The golden file was
// written by the FromSweep of before the sweep's and the report's types
// were merged; it reads back into the same bytes.
func TestFromSweepJSON(t *testing.T) {
	rep := report.FromSweep(richSweep(t), report.Meta{Model: "m", TargetURL: "http://u:p@127.0.0.1:1/x?q", ToolVersion: "v"}, 0.12, true)
	var j bytes.Buffer
	if err := report.RenderJSON(&j, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "fromsweep.golden.json", j.Bytes())
	path := filepath.Join(t.TempDir(), report.JSONFile)
	if err := os.WriteFile(path, j.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := report.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := report.RenderJSON(&again, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), j.Bytes()) {
		t.Error("report.json read back renders other bytes")
	}
}

func richSweep(t *testing.T) *sweep.Result {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	qw := 0.25
	step := func(mode sweep.Mode, n int, conv bool) sweep.StepResult {
		f := float64(n)
		ttft := []float64{0.1 * f, 0.12 * f, 0.2 * f, 0.15 * f, 0.11 * f}
		dec := []float64{50 / f, 48 / f, 40 / f, 45 / f, 47 / f}
		s := sweep.Samples{TTFT: ttft, ITL: []float64{0.02 * f, 0.021 * f}, Decode: dec, E2E: []float64{1 * f, 1.2 * f},
			Prefill: []float64{9000, 8000}, Good: []float64{1, 1, 0, 1, 1}}
		st := sweep.StepResult{Scenario: "x", Mode: mode, Concurrency: n, Started: t0, Finished: t0.Add(time.Minute),
			WindowSeconds: 20, Requests: 5, Succeeded: 4, SuccessRatio: 0.8, Errors: map[prober.Reason]int{prober.ReasonTimeout: 1},
			Good: 4, GoodShare: 0.8, GoodPerSecond: 0.2,
			Decode: sweep.Summarize(dec), ITL: sweep.Summarize(s.ITL), TTFT: sweep.Summarize(ttft), E2E: sweep.Summarize(s.E2E),
			Prefill: sweep.Summarize(s.Prefill), Samples: s, PrefillExclQueue: 12345, OutputTokens: 1000,
			SystemThroughput: 100 * f, TokensPerHour: 360000 * f, ScalingEfficiency: 0.9,
			Drain: &sweep.DrainResult{Method: "engine_metrics", WaitedSeconds: 1.5}, QueueWaitSeconds: &qw,
			Power: &sweep.PowerReading{AvgWatts: 500, PeakWatts: 600, Joules: 30000, JoulesPerOutputToken: 0.5}}
		if n == 8 {
			st.Drain = &sweep.DrainResult{Method: "cooldown", Busy: true, Running: 2}
		}
		if conv {
			hs := 0.75
			st.Samples.CachedShare = []float64{0.9, 0.95, 0.5}
			st.Samples.PrimingTTFT = []float64{0.3, 0.31}
			st.Conversation = &sweep.ConversationStep{Conversations: 3 * n, FollowUps: 9 * n, Hit: 5, Partial: 2, Miss: 1, Unknown: 1, HitShare: &hs,
				CachedShare: sweep.Summarize(st.Samples.CachedShare).Mean, PrimingTTFT: sweep.Summarize(st.Samples.PrimingTTFT).Dist(),
				Seconds: sweep.Summarize([]float64{3, 4, 5}).Dist()}
		}
		return st
	}
	opts := sweep.DefaultCapacityOptions()
	rules, err := sweep.ParseCapacityRules([]string{"goodput >= 95%", "p99 ttft <= 0.5s", "p90 decode >= 20"})
	if err != nil {
		t.Fatal(err)
	}
	scenario := func(name string, fam prober.Family, th prober.Thresholds, conv bool) sweep.ScenarioResult {
		sr := sweep.ScenarioResult{ScenarioSpec: sweep.ScenarioSpec{Name: name, Family: fam, Description: "d " + name,
			InputTokens: 1024, OutputTokens: 128, Thresholds: th}}
		if conv {
			sr.Turns, sr.NewTokens = 4, 64
		}
		for _, n := range []int{1, 2, 4, 8} {
			sr.ClosedLoop = append(sr.ClosedLoop, step(sweep.ModeClosedLoop, n, conv))
		}
		for _, n := range []int{1, 4} {
			sr.Burst = append(sr.Burst, step(sweep.ModeBurst, n, conv))
		}
		mq := sweep.MaxSafeQueue(sr.Burst, opts)
		uc := sweep.UseCaseCapacityOf(sr.ClosedLoop, sr.Thresholds, opts)
		sr.MaxSafeQueue, sr.Capacity = &mq, &uc
		sr.CapacityOn = sweep.CapacityOn(sr.Name, sr.ClosedLoop, rules)
		return sr
	}
	a := scenario("chat", prober.FamilyUseCase, prober.Thresholds{TTFT: 500 * time.Millisecond, MinDecode: 20}, false)
	a.StoppedEarly = []sweep.EarlyStop{{Mode: sweep.ModeBurst, AfterN: 4, SkippedLadderN: []int{16}, Reason: "every threshold far exceeded"}}
	b := scenario("conv", prober.FamilyCustom, prober.Thresholds{TTFT: 2 * time.Second}, true)
	cc := sweep.ConversationCapacityOf(b.ClosedLoop, b.Thresholds, opts)
	b.ConversationCapacity = &cc
	c := scenario("rep", prober.FamilyReport, prober.Thresholds{}, false)
	c.StoppedEarly = []sweep.EarlyStop{{Mode: sweep.ModeClosedLoop, AfterN: 8, SkippedLadderN: []int{16}, Reason: "r1"},
		{Mode: sweep.ModeBurst, AfterN: 4, SkippedLadderN: []int{16}, Reason: "r2"}}
	return &sweep.Result{Target: "t", Model: "m", Started: t0, Finished: t0.Add(time.Hour),
		Settings: sweep.Settings{ClosedLoop: []int{1, 2, 4, 8, 16}, Burst: []int{1, 4, 16}, StepSeconds: 20, WarmupSeconds: 10,
			EarlyStopFactor: 3, MaxSafeTTFTSeconds: 3, CapacityStat: sweep.StatP90, ConversationHitShare: 0.8,
			CapacityOn: []string{"goodput >= 95%", "p99 ttft <= 500ms", "p90 decode >= 20 tok/s"}},
		Scenarios: []sweep.ScenarioResult{a, b, c, {ScenarioSpec: sweep.ScenarioSpec{Name: "broken"}, Error: "calibrate: too long"}},
	}
}
