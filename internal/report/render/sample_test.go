package render

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// Sample returns a complete, realistic report: the four report scenarios
// (closed loop N=1..32, burst N=1..256) and the five use cases (burst),
// shaped like the reference figures for a 30B MoE model on one H100. It is
// synthetic: the numbers come from a small load model, not a server. Tests
// use it for the golden files; `go test ./internal/report/render -run
// TestWriteAndLoad -keep DIR` writes it out for a visual review.
func Sample() *report.Report {
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	closed := []int{1, 2, 4, 8, 16, 32}
	burst := []int{1, 2, 4, 8, 16, 32, 64, 128, 256}
	const price = 0.10
	r := &report.Report{
		SchemaVersion: report.SchemaVersion,
		Meta: report.Meta{
			ToolVersion:   "0.1.0",
			StartedAt:     start,
			TargetURL:     "http://127.0.0.1:8000",
			Model:         "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8",
			MaxModelLen:   131072,
			Engine:        "vllm",
			EngineVersion: "0.11.0",
			Host:          report.Host{Hostname: "bench-01", OS: "linux", Arch: "amd64", CPUs: 16, GoVersion: "go1.26"},
			GPU:           &report.GPU{Name: "NVIDIA H100 80GB HBM3", Count: 1, MemoryBytes: 80 << 30, Driver: "570.133.20"},
		},
		Config: report.Config{
			ClosedLoopLadder:    closed,
			BurstLadder:         burst,
			StepDurationSeconds: 60,
			WarmupSeconds:       10,
			EarlyStop:           true,
			Thresholds:          report.DefaultThresholds(),
			PricePerKWh:         price,
		},
	}
	elapsed := 0.0
	for _, m := range sampleModels {
		s := report.Scenario{ScenarioSpec: sweep.ScenarioSpec{Name: m.name, Family: prober.Family(m.family), Description: m.desc, InputTokens: m.in, OutputTokens: m.out, Thresholds: m.th}}
		if m.family == report.FamilyReport {
			for _, n := range closed {
				st := m.closedStep(n, price)
				s.ClosedLoop = append(s.ClosedLoop, st)
				elapsed += st.DurationSeconds + r.Config.WarmupSeconds
			}
			base := s.ClosedLoop[0].SystemTokensPerSecond
			for i := range s.ClosedLoop {
				st := &s.ClosedLoop[i]
				st.ScalingEfficiency = report.Float(round(st.SystemTokensPerSecond/(base*float64(st.Concurrency)), 4))
			}
		}
		for _, n := range burst {
			if m.burstStop > 0 && n > m.burstStop {
				break
			}
			st := m.burstStep(n, price)
			s.Burst = append(s.Burst, st)
			elapsed += st.DurationSeconds + 5
		}
		if m.burstStop > 0 {
			var skipped []int
			for _, n := range burst {
				if n > m.burstStop {
					skipped = append(skipped, n)
				}
			}
			last := s.Burst[len(s.Burst)-1]
			limit := m.th.TTFT.Seconds()
			s.StoppedEarly = append(s.StoppedEarly, sweep.EarlyStop{Mode: sweep.ModeBurst, AfterN: m.burstStop, SkippedLadderN: skipped,
				Reason: fmt.Sprintf("TTFT mean %s is more than 4× the %s limit", fmtSeconds(last.TTFT.Mean), fmtSecondsShort(limit))})
		}
		r.Config.Scenarios = append(r.Config.Scenarios, s.Name)
		r.Scenarios = append(r.Scenarios, s)
	}
	// Two steps started before the engine had emptied (the drain timed
	// out): leftovers of the step before inflated their TTFT.
	for _, b := range []struct {
		scenario         string
		mode             sweep.Mode
		n                int
		running, waiting float64
	}{{"agentic", sweep.ModeClosedLoop, 16, 2, 0}, {"rag", sweep.ModeBurst, 8, 3, 1}} {
		for i := range r.Scenarios {
			if r.Scenarios[i].Name != b.scenario {
				continue
			}
			steps := r.Scenarios[i].Steps(b.mode)
			for j := range steps {
				if st := &steps[j]; st.Concurrency == b.n {
					st.Drain = &sweep.DrainResult{Method: sweep.DrainEngine, WaitedSeconds: 120, Busy: true, Running: b.running, Waiting: b.waiting}
					st.TTFT = latency(st.TTFT.Mean*1.6, 0.9)
					elapsed += 120
				}
			}
		}
	}
	r.Meta.FinishedAt = start.Add(time.Duration(math.Round(elapsed)) * time.Second)

	for _, s := range r.Scenarios {
		switch s.Family {
		case report.FamilyReport:
			b := sampleBound(s.Burst, func(st report.Step) float64 { return st.TTFT.Mean }, 3.0, false)
			r.Capacity.MaxSafeQueue = append(r.Capacity.MaxSafeQueue, report.QueueCapacity{Scenario: s.Name, Bound: b,
				ThresholdSeconds: 3.0, Stat: sweep.StatMean, MaxTested: s.Burst[len(s.Burst)-1].Concurrency})
		case report.FamilyUseCase:
			r.Capacity.UseCases = append(r.Capacity.UseCases, sampleUseCase(s))
		}
	}
	// Capacity on goodput for every closed loop, and on the p99 of TTFT
	// for the first.
	r.Config.CapacityOn = []string{"goodput >= 95%", "p99 ttft <= 2s"}
	for i, s := range r.Scenarios {
		if len(s.ClosedLoop) == 0 {
			continue
		}
		r.Capacity.On = append(r.Capacity.On, sampleRule(s, "goodput >= 95%", 0.95, sweep.HigherIsBetter, func(st report.Step) float64 { return *st.GoodShare }))
		if i == 0 {
			r.Capacity.On = append(r.Capacity.On, sampleRule(s, "p99 ttft <= 2s", 2, sweep.LowerIsBetter, func(st report.Step) float64 { return st.TTFT.P99 }))
		}
	}
	r.Headline = report.ComputeHeadline(r)
	return r
}

// sampleModel is a toy load model: per-user decode falls as 1/(1+a(N-1)),
// closed-loop TTFT grows linearly with N, burst TTFT as (N-1)^p.
type sampleModel struct {
	name, family, desc string
	in, out            int
	th                 prober.Thresholds
	d1, a              float64 // single-user decode tok/s, contention
	slots              float64 // requests the KV cache holds at once
	ttft1, b           float64 // single-user TTFT, closed-loop growth per extra user
	k, p               float64 // burst TTFT growth
	burstStop          int     // last burst N run (early stop); 0 = whole ladder
}

var reportTh = prober.Thresholds{TTFT: 3 * time.Second, ITL: 70 * time.Millisecond}

var sampleModels = []sampleModel{
	{name: "chatbot", family: report.FamilyReport, desc: "short chat turn", in: 1024, out: 256, th: reportTh,
		d1: 172.5, a: 0.0466, slots: 128, ttft1: 0.189, b: 0.074, k: 0.00502, p: 1.3},
	{name: "rag", family: report.FamilyReport, desc: "question plus retrieved chunks", in: 4096, out: 256, th: reportTh,
		d1: 166, a: 0.0867, slots: 96, ttft1: 0.30, b: 0.129, k: 0.0083, p: 1.3},
	{name: "agentic", family: report.FamilyReport, desc: "agent step with a long scratchpad", in: 16384, out: 256, th: reportTh,
		d1: 158, a: 0.1758, slots: 40, ttft1: 0.62, b: 0.145, k: 0.0532, p: 1.3},
	{name: "tool_calling", family: report.FamilyReport, desc: "multi-step agent with tool schemas and results", in: 32768, out: 256, th: reportTh,
		d1: 150, a: 0.3311, slots: 20, ttft1: 1.45, b: 0.105, k: 0.124, p: 1.3, burstStop: 64},

	{name: "code_completion", family: report.FamilyUseCase, desc: "inline code completion", in: 1024, out: 128, th: prober.Thresholds{E2E: 2 * time.Second},
		d1: 171.8, a: 0.045, slots: 96, ttft1: 0.185, k: 0.0048, p: 1.3},
	{name: "short_chat", family: report.FamilyUseCase, desc: "chat with a short history", in: 8192, out: 1024, th: prober.Thresholds{TTFT: 10 * time.Second, MinDecode: 10},
		d1: 165, a: 0.05, slots: 96, ttft1: 0.26, k: 0.0069, p: 1.3},
	{name: "general_chat", family: report.FamilyUseCase, desc: "chat with a long history", in: 32768, out: 1024, th: prober.Thresholds{TTFT: 8 * time.Second, MinDecode: 15},
		d1: 150, a: 0.09, slots: 48, ttft1: 1.1, k: 0.061, p: 1.3},
	{name: "long_document", family: report.FamilyUseCase, desc: "question over a long document", in: 65536, out: 1024, th: prober.Thresholds{TTFT: 12 * time.Second, MinDecode: 15},
		d1: 135, a: 0.12, slots: 24, ttft1: 2.7, k: 0.301, p: 1.3, burstStop: 64},
	{name: "coding_assistant", family: report.FamilyUseCase, desc: "coding agent over a large repository context", in: 98304, out: 1024, th: prober.Thresholds{TTFT: 12 * time.Second, MinDecode: 20},
		d1: 122, a: 0.2, slots: 12, ttft1: 5.0, k: 1.63, p: 1.3, burstStop: 16},
}

// wobble is a deterministic ±1 noise so lines do not look machine-made.
func wobble(name string, n int, salt string) float64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d/%s", name, n, salt)
	return float64(h.Sum32()%2001)/1000 - 1
}

// round keeps the given number of decimals, exactly as printed.
func round(v float64, decimals int) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', decimals, 64), 64)
	return r
}

func latency(mean, spread float64) sweep.Dist {
	return sweep.Dist{
		Mean: round(mean, 4),
		P50:  round(mean*(1-0.03*spread), 4),
		P90:  round(mean*(1+0.25*spread), 4),
		P95:  round(mean*(1+0.38*spread), 4),
		P99:  round(mean*(1+0.6*spread), 4),
	}
}

// speed has a slow tail: a few requests share their decode with a prefill.
func speed(mean float64) sweep.Dist {
	return sweep.Dist{Mean: round(mean, 1), P1: round(mean*0.81, 1), P10: round(mean*0.93, 1), P50: round(mean*1.004, 1), P90: round(mean*1.05, 1),
		P95: round(mean*1.07, 1), P99: round(mean*1.1, 1)}
}

func (m sampleModel) power(n int, system, price float64) *report.Power {
	ctx := math.Log2(float64(m.in)/1024) / 5
	avg := 170 + 430*(1-math.Exp(-float64(n)/6))*(0.82+0.18*ctx)
	avg = round(avg*(1+0.01*wobble(m.name, n, "w")), 1)
	return &report.Power{AvgWatts: avg, PeakWatts: round(avg*1.09+12, 1),
		JoulesPerToken: round(avg/system, 3), CostPerHourUSD: round(avg/1000*price, 4)}
}

func (m sampleModel) closedStep(n int, price float64) report.Step {
	N := float64(n)
	dec := m.d1 / (1 + m.a*(N-1)) * (1 + 0.01*wobble(m.name, n, "d"))
	ttft := m.ttft1 * (1 + m.b*(N-1)) * (1 + 0.01*wobble(m.name, n, "t"))
	prefillTime := m.ttft1 * 0.92 * (1 + 0.045*(N-1))
	queue := math.Max(0, ttft-prefillTime-0.08*m.ttft1)
	e2e := ttft + float64(m.out)/dec
	system := N * float64(m.out) / e2e
	sent := max(n, int(math.Round(N*60/e2e)))
	st := report.Step{
		Concurrency: n, DurationSeconds: 60, RequestsSent: sent, RequestsOK: sent, SuccessRate: 1,
		Decode: speed(dec), ITL: latency(1/dec, 0.4), TTFT: latency(ttft, 0.5), E2E: latency(e2e, 0.3),
		PrefillTokensPerSecond: round(float64(m.in)/(ttft-queue), 1),
		SystemTokensPerSecond:  round(system, 1),
		QueueWaitSeconds:       report.Float(round(queue, 4)),
	}
	st.TokensPerHour = math.Round(st.SystemTokensPerSecond * 3600)
	st.Power = m.power(n, st.SystemTokensPerSecond, price)
	st.Drain = m.drain(n, "cd")
	// The share of good requests falls as the queue grows: 1/(1+(N/N½)³),
	// half at N½, N½ set by the scenario's TTFT growth.
	half := 3 / (m.b + 0.05)
	st.Good = int(math.Round(float64(sent) / (1 + math.Pow(N/half, 3))))
	st.GoodShare = report.Float(round(float64(st.Good)/float64(sent), 4))
	st.GoodPerSecond = round(float64(st.Good)/st.DurationSeconds, 3)
	return st
}

// sampleRule is the capacity of a closed loop on one rule, by the sweep's
// own interpolation.
func sampleRule(s report.Scenario, rule string, limit float64, dir sweep.Direction, val func(report.Step) float64) sweep.RuleCapacity {
	var pts []sweep.CapacityPoint
	for _, st := range s.ClosedLoop {
		pts = append(pts, sweep.CapacityPoint{N: st.Concurrency, Value: val(st)})
	}
	c := sweep.MaxWithin(pts, limit, dir)
	rc := sweep.RuleCapacity{Scenario: s.Name, Mode: sweep.ModeClosedLoop, Rule: rule, MaxTested: c.MaxTested}
	switch c.Bound {
	case sweep.BoundAtLeast:
		rc.Bound = sweep.Bound{Value: c.N, AtLeast: true}
	case sweep.BoundWithin:
		rc.Bound = sweep.Bound{Value: c.N, Approximate: c.Approximate}
		rc.Estimate, rc.Between = round(c.Estimate, 4), c.Between
	}
	return rc
}

// drain: the engine empties a little after the last stream of the step
// before ends, longer after a larger step.
func (m sampleModel) drain(n int, salt string) *sweep.DrainResult {
	return &sweep.DrainResult{Method: sweep.DrainEngine, WaitedSeconds: round(0.25+0.04*float64(n)*(1+0.3*wobble(m.name, n, salt)), 2)}
}

func (m sampleModel) burstStep(n int, price float64) report.Step {
	N := float64(n)
	parallel := math.Max(1, math.Min(N, m.slots)*0.6)
	dec := m.d1 / (1 + m.a*(parallel-1)) * (1 + 0.01*wobble(m.name, n, "bd"))
	ttft := (m.ttft1 + m.k*math.Pow(N-1, m.p)) * (1 + 0.01*wobble(m.name, n, "bt"))
	prefillTime := m.ttft1 * (1 + 0.04*math.Log2(N))
	queue := math.Max(0, ttft-prefillTime)
	e2e := ttft + float64(m.out)/dec
	spread := 0.4 + 1.2*(1-1/N)
	ttftD := latency(ttft, spread)
	duration := ttftD.P99 + float64(m.out)/dec
	system := math.Min(N, m.slots) * dec * (1 - 0.15*(1-1/N))
	st := report.Step{
		Concurrency: n, DurationSeconds: round(duration, 2), RequestsSent: n, RequestsOK: n, SuccessRate: 1,
		Decode: speed(dec), ITL: latency(1/dec, 0.5), TTFT: ttftD, E2E: latency(e2e, 0.6),
		PrefillTokensPerSecond: round(float64(m.in)/(ttft-queue), 1),
		SystemTokensPerSecond:  round(system, 1),
		QueueWaitSeconds:       report.Float(round(queue, 4)),
	}
	st.TokensPerHour = math.Round(st.SystemTokensPerSecond * 3600)
	st.Power = m.power(n, st.SystemTokensPerSecond, price)
	// A couple of failures, as real sweeps have.
	switch {
	case m.name == "tool_calling" && n == 64:
		st.RequestsOK, st.Errors = 62, map[string]int{"timeout": 2}
	case m.name == "chatbot" && n == 256:
		st.RequestsOK, st.Errors = 255, map[string]int{"stream_cut": 1}
	}
	st.SuccessRate = round(float64(st.RequestsOK)/float64(st.RequestsSent), 4)
	st.Drain = m.drain(n, "bd")
	return st
}

// sampleBound finds the largest N within a threshold, interpolating
// linearly between the last passing and the first failing step. (The real
// logic lives in internal/sweep/capacity.go; this keeps the sample consistent.)
func sampleBound(steps []report.Step, val func(report.Step) float64, thr float64, higherBetter bool) sweep.Bound {
	for i, st := range steps {
		v := val(st)
		bad := v > thr
		if higherBetter {
			bad = v < thr
		}
		if !bad {
			continue
		}
		if i == 0 {
			return sweep.Bound{}
		}
		prev := steps[i-1]
		pv := val(prev)
		x := float64(prev.Concurrency) + (thr-pv)/(v-pv)*float64(st.Concurrency-prev.Concurrency)
		n := int(math.Floor(x))
		return sweep.Bound{Value: n, Approximate: n != prev.Concurrency}
	}
	return sweep.Bound{Value: steps[len(steps)-1].Concurrency, AtLeast: true}
}

func sampleUseCase(s report.Scenario) report.UseCaseCapacity {
	u := report.UseCaseCapacity{Scenario: s.Name, Mode: sweep.ModeBurst, MaxTested: s.Burst[len(s.Burst)-1].Concurrency}
	add := func(kind string, thr float64, val func(report.Step) float64, higherBetter bool) {
		if thr > 0 {
			u.Limits = append(u.Limits, report.Limit{Kind: kind, Threshold: thr, Stat: sweep.StatMean, Bound: sampleBound(s.Burst, val, thr, higherBetter)})
		}
	}
	add(report.LimitTTFT, s.Thresholds.TTFT.Seconds(), func(st report.Step) float64 { return st.TTFT.Mean }, false)
	add(report.LimitE2E, s.Thresholds.E2E.Seconds(), func(st report.Step) float64 { return st.E2E.Mean }, false)
	add(report.LimitDecode, s.Thresholds.MinDecode, func(st report.Step) float64 { return st.Decode.Mean }, true)
	u.Bound = sweep.Bound{Value: u.MaxTested, AtLeast: true}
	for _, l := range u.Limits {
		if l.AtLeast {
			continue
		}
		if u.AtLeast || l.Value < u.Value {
			u.Bound, u.LimitedBy = l.Bound, l.Kind
		}
	}
	return u
}
