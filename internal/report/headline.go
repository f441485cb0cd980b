package report

import (
	"strings"

	"github.com/slaprobe/slaprobe/internal/sweep"
)

// ComputeHeadline derives the headline tiles from the steps and the capacity
// results. Peak decode, max system throughput and best TTFT come from
// sustained closed-loop steps; only a report without any is read from its
// bursts (the Figure's Mode says so). Steps with no successful request, and
// steps that started on a busy engine, are left out. Ties keep the first
// step in scenario order, ascending N.
func ComputeHeadline(r *Report) Headline {
	var h Headline
	peaks := func(mode sweep.Mode) {
		for _, s := range r.Scenarios {
			for _, st := range s.Steps(mode) {
				if st.RequestsOK == 0 || st.StartedBusy() {
					continue
				}
				at := func(v float64, unit string) *Figure {
					return &Figure{Value: v, Unit: unit, Scenario: s.Name, Mode: mode, Concurrency: st.Concurrency}
				}
				if v := st.Decode.Mean; v > 0 && (h.PeakDecode == nil || v > h.PeakDecode.Value) {
					h.PeakDecode = at(v, "tok/s")
				}
				if v := st.SystemTokensPerSecond; v > 0 && (h.MaxSystemThroughput == nil || v > h.MaxSystemThroughput.Value) {
					h.MaxSystemThroughput = at(v, "tok/s")
				}
				// A conversation's follow-ups hit the prefix cache: their
				// TTFT is not a cold prompt's.
				if v := st.TTFT.Mean; v > 0 && st.Conversation == nil && (h.BestTTFT == nil || v < h.BestTTFT.Value) {
					h.BestTTFT = at(v, "s")
				}
			}
		}
	}
	peaks(sweep.ModeClosedLoop)
	if h.PeakDecode == nil && h.MaxSystemThroughput == nil && h.BestTTFT == nil {
		peaks(sweep.ModeBurst)
	}
	for _, s := range r.Scenarios {
		for _, m := range s.Modes() {
			for _, st := range m.Steps {
				h.RequestsSent += st.RequestsSent
				h.RequestsOK += st.RequestsOK
			}
		}
	}
	if h.RequestsSent > 0 {
		h.SuccessRate = float64(h.RequestsOK) / float64(h.RequestsSent)
	}
	for _, q := range r.Capacity.MaxSafeQueue {
		h.MaxSafeQueue = append(h.MaxSafeQueue, Figure{
			Value: float64(q.Value), Unit: "requests", Scenario: q.Scenario, Mode: sweep.ModeBurst,
			Approximate: q.Approximate, AtLeast: q.AtLeast,
		})
	}
	seen := map[string]bool{}
	for _, c := range r.Capacity.On {
		if !strings.HasPrefix(c.Rule, "goodput") || seen[c.Scenario] {
			continue
		}
		seen[c.Scenario] = true
		h.GoodputCapacity = append(h.GoodputCapacity, Figure{
			Value: float64(c.Value), Unit: "requests", Scenario: c.Scenario, Mode: c.Mode,
			Approximate: c.Approximate, AtLeast: c.AtLeast,
		})
	}
	for _, c := range r.Capacity.Conversations {
		h.Conversations = append(h.Conversations, Figure{
			Value: float64(c.Value), Unit: "conversations", Scenario: c.Scenario, Mode: c.Mode,
			Approximate: c.Approximate, AtLeast: c.AtLeast,
		})
	}
	h.UsersAt32K = usersAt32K(r)
	return h
}

// is32K accepts 32,768 tokens and the round 32,000 some configs use.
func is32K(tokens int) bool { return tokens >= 32000 && tokens <= 32768 }

func usersAt32K(r *Report) *Figure {
	for _, u := range r.Capacity.UseCases {
		if s := r.ScenarioNamed(u.Scenario); s != nil && is32K(s.InputTokens) {
			return &Figure{Value: float64(u.Value), Unit: "users", Scenario: u.Scenario, Mode: u.Mode,
				Approximate: u.Approximate, AtLeast: u.AtLeast}
		}
	}
	for _, q := range r.Capacity.MaxSafeQueue {
		if s := r.ScenarioNamed(q.Scenario); s != nil && is32K(s.InputTokens) {
			return &Figure{Value: float64(q.Value), Unit: "users", Scenario: q.Scenario, Mode: sweep.ModeBurst,
				Approximate: q.Approximate, AtLeast: q.AtLeast}
		}
	}
	return nil
}

// Empty reports whether no headline figure was computed.
func (h Headline) Empty() bool {
	return h.PeakDecode == nil && h.MaxSystemThroughput == nil && h.BestTTFT == nil &&
		h.MaxSafeQueue == nil && h.GoodputCapacity == nil && h.RequestsSent == 0 && h.UsersAt32K == nil && h.Conversations == nil
}

// ScenarioNamed returns the scenario called name, or nil.
func (r *Report) ScenarioNamed(name string) *Scenario {
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == name {
			return &r.Scenarios[i]
		}
	}
	return nil
}

// ModeSteps are the steps of one mode of a scenario.
type ModeSteps struct {
	Mode  sweep.Mode
	Steps []Step
}

// Modes returns the scenario's steps per mode, closed loop first.
func (s *Scenario) Modes() []ModeSteps {
	return []ModeSteps{{sweep.ModeClosedLoop, s.ClosedLoop}, {sweep.ModeBurst, s.Burst}}
}

// Steps returns the scenario's steps for a mode.
func (s *Scenario) Steps(m sweep.Mode) []Step {
	if m == sweep.ModeBurst {
		return s.Burst
	}
	return s.ClosedLoop
}
