package sweep

// This file holds what a sweep's steps say about capacity: scaling
// efficiency, and the largest N whose statistic stays within a threshold.

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// ScalingEfficiency is system / (baseline × n): the share of ideal linear
// scaling that n concurrent streams reach, where baseline is the system
// throughput of one stream (N=1). 1.0 means no per-user loss. It returns 0
// when the inputs cannot give a ratio.
func ScalingEfficiency(system, baseline float64, n int) float64 {
	if baseline <= 0 || n < 1 || system < 0 {
		return 0
	}
	return system / (baseline * float64(n))
}

// Direction says which side of a limit is good.
type Direction int

const (
	// LowerIsBetter: the value must stay <= the limit (TTFT, E2E, ITL).
	LowerIsBetter Direction = iota
	// HigherIsBetter: the value must stay >= the limit (decode speed, success ratio).
	HigherIsBetter
)

// CapacityPoint is one measured step: concurrency N and the value of the
// metric being judged.
type CapacityPoint struct {
	N     int
	Value float64
}

// CapacityBound says how a Capacity relates to the measured range.
type CapacityBound string

const (
	// BoundWithin: the limit was crossed inside the measured range.
	BoundWithin CapacityBound = "within"
	// BoundAtLeast: every measured N was within the limit; capacity is at
	// least the largest N tested.
	BoundAtLeast CapacityBound = "at_least"
	// BoundBelow: even the smallest N tested missed the limit.
	BoundBelow CapacityBound = "below"
	// BoundUnknown: nothing was measured.
	BoundUnknown CapacityBound = "unknown"
)

// Capacity is the largest concurrency that keeps a metric (or several)
// within its limit.
type Capacity struct {
	// N is the largest whole concurrency judged within the limits.
	N int `json:"n"`
	// Estimate is the unrounded crossing point of the interpolated curve
	// (equal to N when N is a measured point that the next one fails).
	Estimate float64 `json:"estimate"`
	// Approximate is true when N lies strictly between measured points, so
	// it comes from interpolation; reports show it as "~N".
	Approximate bool          `json:"approximate"`
	Bound       CapacityBound `json:"bound"`
	// LimitedBy names the metric whose limit sets N ("ttft", "e2e", "itl",
	// "decode", "success"); empty when no limit was reached.
	LimitedBy string `json:"limited_by,omitempty"`
	// MinTested and MaxTested are the ends of the measured range.
	MinTested int `json:"min_tested"`
	MaxTested int `json:"max_tested"`
	// NonMonotonic is true when a larger N measured better than a smaller
	// one that had already missed the limit; such recoveries are ignored.
	NonMonotonic bool `json:"non_monotonic,omitempty"`
	// Between holds the measured N that bracket the crossing, the last
	// within the limit and the first beyond it, when Bound is within: the
	// steps the interpolation ran between.
	Between []int `json:"between,omitempty"`
	// Limits holds the capacity against each limit on its own, when the
	// capacity combines several (the smallest of them is the result).
	Limits []CapacityLimit `json:"limits,omitempty"`
}

// Bound is how a capacity relates to the measured ladder, as report.json
// keeps it (Capacity.Reported).
type Bound struct {
	// Value is the largest N within the threshold (interpolated N rounded
	// down). 0 means even the smallest N measured exceeded it.
	Value int `json:"value"`
	// Approximate is true when Value lies between two measured N and was
	// interpolated ("~" in the report).
	Approximate bool `json:"approximate,omitempty"`
	// AtLeast is true when every measured N stayed within the threshold, so
	// the true capacity is Value or more ("256+" in the report).
	AtLeast bool `json:"at_least,omitempty"`
}

// Reported is c as report.json keeps it: a capacity below the ladder is 0,
// one at least the largest N tested is that N; c must not be BoundUnknown.
func (c Capacity) Reported() Bound {
	switch c.Bound {
	case BoundAtLeast:
		return Bound{Value: c.N, AtLeast: true}
	case BoundBelow:
		return Bound{}
	}
	return Bound{Value: c.N, Approximate: c.Approximate}
}

// CapacityLimit is the capacity against one limit.
type CapacityLimit struct {
	Kind      string  `json:"kind"`      // "ttft", "e2e", "itl", "decode", "success"
	Threshold float64 `json:"threshold"` // seconds; tokens/s for decode; ratio for success
	Stat      Stat    `json:"stat,omitempty"`
	Capacity
}

// String renders the capacity the way the reports print it: "8", "~131",
// "≥256", "<2", "?".
func (c Capacity) String() string {
	switch c.Bound {
	case BoundAtLeast:
		return fmt.Sprintf("≥%d", c.N)
	case BoundBelow:
		return fmt.Sprintf("<%d", c.MinTested)
	case BoundUnknown, "":
		return "?"
	}
	if c.Approximate {
		return fmt.Sprintf("~%d", c.N)
	}
	return fmt.Sprintf("%d", c.N)
}

// MaxWithin returns the largest N whose value stays within limit.
//
// Points are sorted by N. Measurements are noisy and load curves are
// expected to be monotonic, so the curve is first made monotonic with a
// running worst value (for LowerIsBetter, the running maximum): once a
// step has missed the limit, a later, larger step that happens to pass
// does not raise the capacity. The capacity is where the line between the
// last passing point and the first failing one crosses the limit, rounded
// down. It is approximate when that N was not itself measured.
func MaxWithin(points []CapacityPoint, limit float64, dir Direction) Capacity {
	pts := make([]CapacityPoint, 0, len(points))
	for _, p := range points {
		if p.N > 0 && !math.IsNaN(p.Value) {
			pts = append(pts, p)
		}
	}
	if len(pts) == 0 {
		return Capacity{Bound: BoundUnknown}
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].N < pts[j].N })
	c := Capacity{MinTested: pts[0].N, MaxTested: pts[len(pts)-1].N}

	// "badness" turns both directions into lower-is-better.
	bad := func(v float64) float64 {
		if dir == HigherIsBetter {
			return -v
		}
		return v
	}
	lim := bad(limit)
	env := make([]float64, len(pts))
	failed := -1
	for i, p := range pts {
		env[i] = bad(p.Value)
		if i > 0 && env[i-1] > env[i] {
			if env[i-1] > lim && env[i] <= lim {
				c.NonMonotonic = true
			}
			env[i] = env[i-1]
		}
		if failed < 0 && env[i] > lim {
			failed = i
		}
	}
	switch {
	case failed < 0:
		c.N, c.Estimate, c.Bound = c.MaxTested, float64(c.MaxTested), BoundAtLeast
		return c
	case failed == 0:
		c.Bound = BoundBelow
		return c
	}
	lo, hi := pts[failed-1], pts[failed]
	vlo, vhi := env[failed-1], env[failed]
	x := float64(lo.N)
	if vhi > vlo {
		x += (lim - vlo) / (vhi - vlo) * float64(hi.N-lo.N)
	}
	n := int(math.Floor(x))
	if n >= hi.N { // the failing point itself is never within
		n = hi.N - 1
	}
	if n < lo.N {
		n = lo.N
	}
	c.N, c.Estimate, c.Bound = n, x, BoundWithin
	c.Approximate = n != lo.N
	c.Between = []int{lo.N, hi.N}
	return c
}

// minCapacity combines per-limit capacities: the tightest one wins.
func minCapacity(limits []CapacityLimit) Capacity {
	var best Capacity
	have, nonMono := false, false
	for _, l := range limits {
		c := l.Capacity
		if c.Bound == BoundUnknown {
			continue
		}
		nonMono = nonMono || c.NonMonotonic
		if c.Bound != BoundAtLeast {
			c.LimitedBy = l.Kind
		}
		if !have || capacityLess(c, best) {
			best, have = c, true
		}
	}
	if !have {
		return Capacity{Bound: BoundUnknown, Limits: limits}
	}
	best.NonMonotonic = nonMono
	best.Limits = limits
	return best
}

func capacityLess(a, b Capacity) bool {
	rank := func(c Capacity) float64 {
		if c.Bound == BoundBelow {
			return -1
		}
		return c.Estimate
	}
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra < rb
	}
	// At equal estimates, a limit that was actually reached is the better explanation.
	return a.Bound == BoundWithin && b.Bound != BoundWithin
}

// CapacityOptions set how capacity is judged.
type CapacityOptions struct {
	// MaxSafeTTFT is the TTFT limit for the max safe queue depth (reports: 3 s).
	MaxSafeTTFT time.Duration
	// Stat is the statistic judged against each limit. The default, mean,
	// is what the reports judge and plot ("average TTFT", "average per-user
	// speed"); p90 is the stricter SLA reading. See docs/sweeps.md.
	Stat Stat
	// On are the rules capacity is also asked on (sweep.capacity_on),
	// each on its own; nil asks it on DefaultCapacityOn.
	On []CapacityRule
	// MinSuccess is the success ratio a step needs to count as within
	// capacity, whatever its latencies (failed requests have none).
	MinSuccess float64
	// HitShare is the share of a conversation step's follow-ups (of those
	// whose cache is known) that must hit the cache for the step to be
	// within the capacity in conversations; 0 takes
	// DefaultConversationHitShare.
	HitShare float64
}

// DefaultConversationHitShare is the share of follow-ups that must hit the
// cache (StepResult.Conversation.HitShare) for a step to count within the
// capacity in conversations: 90 %, so a few evicted conversations are
// tolerated but a cache that no longer holds the load is not.
const DefaultConversationHitShare = 0.9

// DefaultCapacityOptions returns the reports' settings.
func DefaultCapacityOptions() CapacityOptions {
	on, _ := ParseCapacityRules(nil)
	return CapacityOptions{MaxSafeTTFT: 3 * time.Second, Stat: StatMean, MinSuccess: 0.95, On: on, HitShare: DefaultConversationHitShare}
}

// MaxSafeQueue is the largest burst N whose TTFT statistic stays within
// opts.MaxSafeTTFT (and whose success ratio stays above opts.MinSuccess).
func MaxSafeQueue(burst []StepResult, opts CapacityOptions) Capacity {
	limit := opts.MaxSafeTTFT
	if limit <= 0 {
		limit = DefaultCapacityOptions().MaxSafeTTFT
	}
	return capacityFor(burst, prober.Thresholds{TTFT: limit}, opts)
}

// UseCaseCapacityOf is the largest N that keeps every threshold the scenario
// sets (TTFT, E2E, ITL, minimum decode speed), judged on steps of one mode
// (the closed loop, in the reports).
func UseCaseCapacityOf(steps []StepResult, th prober.Thresholds, opts CapacityOptions) Capacity {
	return capacityFor(steps, th, opts)
}

func capacityFor(steps []StepResult, th prober.Thresholds, opts CapacityOptions) Capacity {
	if len(steps) == 0 {
		return Capacity{Bound: BoundUnknown}
	}
	st := opts.Stat
	if st == "" {
		st = StatMean
	}
	series := func(f func(s *StepResult) float64) []CapacityPoint {
		pts := make([]CapacityPoint, 0, len(steps))
		for i := range steps {
			s := &steps[i]
			v := f(s)
			if s.Succeeded == 0 { // no latency was measured: count as failing
				v = math.NaN()
			}
			pts = append(pts, CapacityPoint{N: s.Concurrency, Value: v})
		}
		return pts
	}
	// A step where nothing succeeded has no latency: it fails every limit.
	fill := func(pts []CapacityPoint, dir Direction) []CapacityPoint {
		for i := range pts {
			if math.IsNaN(pts[i].Value) {
				pts[i].Value = math.Inf(1)
				if dir == HigherIsBetter {
					pts[i].Value = math.Inf(-1)
				}
			}
		}
		return pts
	}
	var limits []CapacityLimit
	add := func(kind string, limit float64, stat Stat, dir Direction, f func(s *StepResult) float64) {
		c := MaxWithin(fill(series(f), dir), limit, dir)
		limits = append(limits, CapacityLimit{Kind: kind, Threshold: limit, Stat: stat, Capacity: c})
	}
	if th.TTFT > 0 {
		add("ttft", th.TTFT.Seconds(), st, LowerIsBetter, func(s *StepResult) float64 { return s.TTFT.Worse(st) })
	}
	if th.E2E > 0 {
		add("e2e", th.E2E.Seconds(), st, LowerIsBetter, func(s *StepResult) float64 { return s.E2E.Worse(st) })
	}
	if th.ITL > 0 {
		add("itl", th.ITL.Seconds(), st, LowerIsBetter, func(s *StepResult) float64 { return s.ITL.Worse(st) })
	}
	if th.MinDecode > 0 {
		add("decode", th.MinDecode, st, HigherIsBetter, func(s *StepResult) float64 { return s.Decode.WorseLow(st) })
	}
	if opts.MinSuccess > 0 {
		pts := make([]CapacityPoint, 0, len(steps))
		for i := range steps {
			pts = append(pts, CapacityPoint{N: steps[i].Concurrency, Value: steps[i].SuccessRatio})
		}
		limits = append(limits, CapacityLimit{Kind: "success", Threshold: opts.MinSuccess,
			Capacity: MaxWithin(pts, opts.MinSuccess, HigherIsBetter)})
	}
	return minCapacity(limits)
}

// LimitCache names the limit of the capacity in conversations on the share
// of follow-ups that hit the cache.
const LimitCache = "cache"

// ConversationCapacityOf is the capacity in concurrent conversations of a
// conversation scenario's steps (one mode, drained): the largest N whose
// follow-up TTFT statistic (opts.Stat) stays within th.TTFT and whose
// follow-ups keep hitting the cache (Conversation.HitShare >=
// opts.HitShare), at the success ratio opts.MinSuccess, each limit
// interpolated as MaxWithin does and the tightest one binding. A scenario
// without a TTFT threshold is judged on the cache and success alone; steps
// whose server reported no cached tokens give no point on the cache limit.
func ConversationCapacityOf(steps []StepResult, th prober.Thresholds, opts CapacityOptions) Capacity {
	if len(steps) == 0 {
		return Capacity{Bound: BoundUnknown}
	}
	hit := opts.HitShare
	if hit <= 0 {
		hit = DefaultConversationHitShare
	}
	c := capacityFor(steps, prober.Thresholds{TTFT: th.TTFT}, opts)
	pts := make([]CapacityPoint, 0, len(steps))
	for i := range steps {
		v := math.NaN()
		if cs := steps[i].Conversation; cs != nil && cs.HitShare != nil {
			v = *cs.HitShare
		}
		pts = append(pts, CapacityPoint{N: steps[i].Concurrency, Value: v})
	}
	limits := append(c.Limits, CapacityLimit{Kind: LimitCache, Threshold: hit, Capacity: MaxWithin(pts, hit, HigherIsBetter)})
	return minCapacity(limits)
}
