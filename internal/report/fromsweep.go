package report

import (
	"fmt"

	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// FromSweep maps a sweep onto the report schema. It is the one mapping:
// bench writes its result and the daemon keeps and exports it. pricePerKWh
// turns power into cost when power was measured.
func FromSweep(res *sweep.Result, meta Meta, pricePerKWh float64, power bool) *Report {
	meta.StartedAt, meta.FinishedAt, meta.Interrupted = res.Started, res.Finished, res.Interrupted
	th := DefaultThresholds()
	th.MaxSafeQueueTTFTSeconds = res.Settings.MaxSafeTTFTSeconds
	th.MaxSafeQueueStat = res.Settings.CapacityStat
	rep := &Report{
		Meta: meta,
		Config: Config{
			ClosedLoopLadder:    res.Settings.ClosedLoop,
			BurstLadder:         res.Settings.Burst,
			StepDurationSeconds: res.Settings.StepSeconds,
			WarmupSeconds:       res.Settings.WarmupSeconds,
			EarlyStop:           res.Settings.EarlyStopFactor > 0,
			Thresholds:          th,
			CapacityOn:          res.Settings.CapacityOn,
		},
	}
	if power {
		rep.Config.PricePerKWh = pricePerKWh
	}
	if res.Interrupted {
		done := 0
		for _, s := range res.Scenarios {
			done += len(s.ClosedLoop) + len(s.Burst)
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("Interrupted before the end: the report holds the %d steps that finished.", done))
	}
	stat := res.Settings.CapacityStat
	for _, s := range res.Scenarios {
		rep.Config.Scenarios = append(rep.Config.Scenarios, s.Name)
		if s.Error != "" {
			rep.Notes = append(rep.Notes, fmt.Sprintf("Scenario %s was skipped: %s.", s.Name, s.Error))
			continue
		}
		rs := Scenario{ScenarioSpec: s.ScenarioSpec, StoppedEarly: s.StoppedEarly}
		for _, st := range s.ClosedLoop {
			rs.ClosedLoop = append(rs.ClosedLoop, fromStep(st, pricePerKWh))
		}
		for _, st := range s.Burst {
			rs.Burst = append(rs.Burst, fromStep(st, pricePerKWh))
		}
		rep.Scenarios = append(rep.Scenarios, rs)

		if c := s.MaxSafeQueue; c != nil && c.Bound != sweep.BoundUnknown {
			rep.Capacity.MaxSafeQueue = append(rep.Capacity.MaxSafeQueue, QueueCapacity{
				Scenario: s.Name, Bound: c.Reported(), ThresholdSeconds: res.Settings.MaxSafeTTFTSeconds,
				Stat: stat, MaxTested: c.MaxTested,
			})
		}
		if c := s.Capacity; c != nil && c.Bound != sweep.BoundUnknown && s.Thresholds.Any() {
			uc := UseCaseCapacity{Scenario: s.Name, Mode: sweep.ModeClosedLoop, Bound: c.Reported(),
				LimitedBy: c.LimitedBy, MaxTested: c.MaxTested}
			for _, l := range c.Limits {
				if l.Kind == "success" { // not a threshold of the scenario; LimitedBy still names it when it binds
					continue
				}
				uc.Limits = append(uc.Limits, Limit{Kind: l.Kind, Threshold: l.Threshold, Stat: l.Stat, Bound: l.Reported()})
			}
			rep.Capacity.UseCases = append(rep.Capacity.UseCases, uc)
		}
		if c := s.ConversationCapacity; c != nil && c.Bound != sweep.BoundUnknown {
			cc := ConversationCapacity{Scenario: s.Name, Mode: sweep.ModeClosedLoop, Bound: c.Reported(), LimitedBy: c.LimitedBy,
				HitShare: res.Settings.ConversationHitShare, MaxTested: c.MaxTested}
			if c.Bound == sweep.BoundWithin {
				cc.Estimate, cc.Between = c.Estimate, c.Between
			}
			for _, l := range c.Limits {
				if l.Kind == "success" || l.Bound == sweep.BoundUnknown {
					continue
				}
				cc.Limits = append(cc.Limits, Limit{Kind: l.Kind, Threshold: l.Threshold, Stat: l.Stat, Bound: l.Reported()})
			}
			rep.Capacity.Conversations = append(rep.Capacity.Conversations, cc)
		}
		rep.Capacity.On = append(rep.Capacity.On, s.CapacityOn...)
	}
	return rep
}

func fromStep(st sweep.StepResult, pricePerKWh float64) Step {
	out := Step{
		Concurrency: st.Concurrency, DurationSeconds: st.WindowSeconds,
		RequestsSent: st.Requests, RequestsOK: st.Succeeded, SuccessRate: st.SuccessRatio,
		Good: st.Good, GoodPerSecond: st.GoodPerSecond,
		Decode: st.Decode.Dist(), ITL: st.ITL.Dist(), TTFT: st.TTFT.Dist(), E2E: st.E2E.Dist(),
		PrefillTokensPerSecond: st.Prefill.Mean,
		SystemTokensPerSecond:  st.SystemThroughput, TokensPerHour: st.TokensPerHour,
		QueueWaitSeconds: st.QueueWaitSeconds,
		Drain:            st.Drain,
		Samples:          NewSamples(st.Samples),
		NotMeasured:      st.NotMeasured,
		Conversation:     st.Conversation,
	}
	if st.Measured() {
		out.GoodShare = Float(st.GoodShare)
	}
	if st.PrefillExclQueue > 0 {
		out.PrefillTokensPerSecond = st.PrefillExclQueue
	}
	if len(st.Errors) > 0 {
		out.Errors = make(map[string]int, len(st.Errors))
		for r, n := range st.Errors {
			out.Errors[string(r)] = n
		}
	}
	if st.Mode == sweep.ModeClosedLoop && st.ScalingEfficiency > 0 {
		out.ScalingEfficiency = Float(st.ScalingEfficiency)
	}
	if p := st.Power; p != nil {
		out.Power = &Power{AvgWatts: p.AvgWatts, PeakWatts: p.PeakWatts, JoulesPerToken: p.JoulesPerOutputToken,
			CostPerHourUSD: slo.CostPerHour(p.AvgWatts, pricePerKWh)}
	}
	return out
}
