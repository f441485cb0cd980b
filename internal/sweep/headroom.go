package sweep

// This file holds the result of a replay sweep (slaprobe headroom): a
// trace replayed open-loop at speed-ups, each step judged by goodput. The
// replay itself is internal/workload's; the result lives here so that the
// report, its renderer and the comparison use this one type.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// ReplayStep is one speed-up replayed.
type ReplayStep struct {
	Speedup     float64       `json:"speedup"`
	Requests    int           `json:"requests"`
	Succeeded   int           `json:"succeeded"`
	Good        int           `json:"good"`
	GoodShare   float64       `json:"good_share"`
	Dropped     int           `json:"dropped,omitempty"` // not sent: too many in flight
	OfferedRate float64       `json:"offered_rate"`      // requests per second the trace asked for at this speed-up
	Duration    time.Duration `json:"duration_ns"`       // first send to last answer
	// Late is the 99th percentile of how far behind its timestamp a request
	// was sent: a replay that cannot keep its schedule says so here.
	Late time.Duration `json:"late_p99_ns"`
	// TTFT of the requests that succeeded, seconds.
	TTFT Summary `json:"ttft_seconds"`
}

// Headroom is a replay sweep's result: the capacity of a target as a
// multiple of a trace's traffic.
type Headroom struct {
	// Workload names the trace's traffic (the workload label); Trace is the
	// file, Format its format, Requests how many of its requests each step
	// replayed.
	Workload string `json:"workload"`
	Trace    string `json:"trace,omitempty"`
	Format   string `json:"format,omitempty"`
	Requests int    `json:"requests"`
	Rule     string `json:"rule"`
	// Multiple is the largest speed-up at which the rule holds, interpolated
	// between the steps that bracket the crossing as capacity is; with
	// Bound at_least the largest tested, with below 0.
	Multiple float64       `json:"multiple"`
	Bound    CapacityBound `json:"bound"`
	// BaseRate is the trace's own request rate (speed-up 1), per second.
	BaseRate float64      `json:"base_rate"`
	Steps    []ReplayStep `json:"steps"`
}

// String is "3.05×", "≥4×" (every step held), "<0.5×" (none did) or "?".
func (h Headroom) String() string {
	switch h.Bound {
	case BoundAtLeast:
		return fmt.Sprintf("≥%s×", FormatSpeedup(h.Multiple))
	case BoundBelow:
		if len(h.Steps) == 0 {
			return "?"
		}
		return fmt.Sprintf("<%s×", FormatSpeedup(h.Steps[0].Speedup))
	case BoundWithin:
		return fmt.Sprintf("%s×", FormatSpeedup(h.Multiple))
	}
	return "?"
}

// FormatSpeedup writes a speed-up to two decimals at most: 0.5, 2, 3.05.
func FormatSpeedup(x float64) string {
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64)
}

// speedKey turns a speed-up into the integer N capacity is computed on.
func speedKey(f float64) int { return int(math.Round(f * 1000)) }

// points are the steps as capacity points, N the speed-up in thousandths.
func (h *Headroom) points() []CapacityPoint {
	pts := make([]CapacityPoint, 0, len(h.Steps))
	for _, s := range h.Steps {
		v := s.GoodShare
		if s.Requests == 0 {
			v = math.NaN()
		}
		pts = append(pts, CapacityPoint{N: speedKey(s.Speedup), Value: v})
	}
	return pts
}

// Crossing is the last speed-up that held and the first that did not, as
// measured so far (ok false unless the rule's limit was crossed inside the
// steps): where a replay bisects next.
func (h *Headroom) Crossing(limit float64) (lo, hi float64, ok bool) {
	c := MaxWithin(h.points(), limit, HigherIsBetter)
	if c.Bound != BoundWithin || len(c.Between) != 2 {
		return 0, 0, false
	}
	return float64(c.Between[0]) / 1000, float64(c.Between[1]) / 1000, true
}

// Judge sorts the steps by speed-up and sets Multiple and Bound against
// the rule's limit (a good share).
func (h *Headroom) Judge(limit float64) {
	sort.SliceStable(h.Steps, func(i, j int) bool { return h.Steps[i].Speedup < h.Steps[j].Speedup })
	c := MaxWithin(h.points(), limit, HigherIsBetter)
	h.Bound, h.Multiple = c.Bound, 0
	switch c.Bound {
	case BoundWithin:
		h.Multiple = c.Estimate / 1000
	case BoundAtLeast:
		h.Multiple = float64(c.MaxTested) / 1000
	}
}

// Bracket is the pair of measured speed-ups around the headroom: the last
// that held and the first that did not. Every step held: lo is the largest
// tested and hi +Inf; none did: lo 0 and hi the smallest tested; nothing
// measured: ok false. The true headroom lies in [lo, hi] as far as the
// steps can tell: this is the headroom's resolution.
func (h Headroom) Bracket() (lo, hi float64, ok bool) {
	if len(h.Steps) == 0 || h.Bound == BoundUnknown || h.Bound == "" {
		return 0, 0, false
	}
	switch h.Bound {
	case BoundAtLeast:
		return h.Steps[len(h.Steps)-1].Speedup, math.Inf(1), true
	case BoundBelow:
		return 0, h.Steps[0].Speedup, true
	}
	for i, s := range h.Steps {
		if s.Speedup > h.Multiple {
			if i == 0 {
				return 0, s.Speedup, true
			}
			return h.Steps[i-1].Speedup, s.Speedup, true
		}
	}
	return h.Steps[len(h.Steps)-1].Speedup, math.Inf(1), true
}
