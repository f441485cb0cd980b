package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// LadderConcurrency is the Concurrency of a StepChange that holds a mode's
// ladder figures: one per scenario and metric, judged on the groups (burst
// rounds, closed-loop slices) of every step of the mode both runs measured
// (see ladderSteps). No step has N = 0.
const LadderConcurrency = 0

// stratum is one step's groups in both runs, for a ladder figure.
type stratum struct {
	n         int
	base, new []float64
}

// ladderKey names a scenario's ladder figure of a mode and metric.
func ladderKey(scenario string, mode sweep.Mode, metric string) string {
	return figureKey(scenario, mode, LadderConcurrency, metric)
}

// addLadderGroups records a step's groups (burst rounds, closed-loop
// slices) of a metric for its scenario's ladder figure of the mode. Only
// steps with groups in both runs, not busy, with positive values count:
// which do depends on the steps, never on how the values compare.
func (k comparer) addLadderGroups(scenario string, mode sweep.Mode, metric string, n int, base, new []float64) {
	if len(base) == 0 || len(new) == 0 || slices.Min(base) <= 0 || slices.Min(new) <= 0 {
		return
	}
	key := ladderKey(scenario, mode, metric)
	k.ladders[key] = append(k.ladders[key], stratum{n: n, base: base, new: new})
}

// ladderSteps returns, per scenario and mode whose ladder has at least two
// steps with groups in both runs, a StepChange at LadderConcurrency with a
// figure per metric, and files each figure's strata in tests for judge.
// The figure is the geometric mean, over the steps, of each step's median
// of its groups' medians; its change is the ratio of NEW's to the base's.
//
// Why: a burst is judged on its rounds and a closed loop at N > 1 on its
// slices, and a step's few groups cannot reach a report's level alone (3
// against 3: p = 0.1 at best; 8 against 8 reach 321 figures). Pooled over
// the ladder's steps, with the groups of each step compared only with each
// other (a stratified rank test), 3 per step over 5 steps reach p = 2/20⁵ =
// 6.3·10⁻⁷: the level of a report of 80,000 figures. The verdict is about
// the ladder as a whole: a common relative shift of every step.
func (k comparer) ladderSteps(order []string) []report.StepChange {
	var out []report.StepChange
	for _, scenario := range order {
		for _, mode := range modes {
			if sc, ok := k.ladderStep(scenario, mode); ok {
				out = append(out, sc)
			}
		}
	}
	return out
}

// ladderStep is a scenario's ladder figures of a mode; ok is false when
// the mode has fewer than two steps with groups in both runs.
func (k comparer) ladderStep(scenario string, mode sweep.Mode) (sc report.StepChange, ok bool) {
	sc = report.StepChange{Scenario: scenario, Mode: mode, Concurrency: LadderConcurrency, Presence: report.InBoth}
	what := "rounds"
	if mode == sweep.ModeClosedLoop {
		what = "slices"
	}
	for _, m := range stepMetrics {
		key := ladderKey(scenario, mode, m.name)
		strata := k.ladders[key]
		if len(strata) < 2 {
			continue
		}
		var lb, ln float64
		nb, nn := 0, 0
		ns := make([]string, len(strata))
		for i, s := range strata {
			lb += math.Log(sweep.Median(s.base))
			ln += math.Log(sweep.Median(s.new))
			nb, nn = nb+len(s.base), nn+len(s.new)
			ns[i] = fmt.Sprint(s.n)
		}
		mc := report.MetricChange{Metric: m.name, Base: math.Exp(lb / float64(len(strata))), New: math.Exp(ln / float64(len(strata))),
			BaseSamples: nb, NewSamples: nn, Verdict: report.VerdictUnknown}
		mc.Change = mc.New/mc.Base - 1
		mc.Note = fmt.Sprintf("the %s ladder N=%s as one figure: the geometric mean of its steps' medians, judged on %d and %d %s, each step's against each other's",
			modeText(mode), strings.Join(ns, ","), nb, nn, what)
		k.tests[key] = figureTest{strata: strata}
		sc.Metrics = append(sc.Metrics, mc)
	}
	return sc, len(sc.Metrics) > 0
}

// ladderMinP is the smallest two-sided p-value a stratified rank test of
// these strata can give: every step fully separated the same way,
// 2·Π 1/C(n₁+n₂, n₁).
func ladderMinP(strata []stratum) float64 {
	p := 2.0
	for _, s := range strata {
		p *= minRankP(len(s.base), len(s.new)) / 2
	}
	return min(p, 1)
}

// ladderInterval is the exact confidence interval at level of a common
// relative shift of every step (new = base·e^δ in each stratum), found by
// inverting the stratified Mann–Whitney test whose statistic is the sum of
// the strata's counts U: with the log-ratios log(new_j/base_i) of every
// pair within a stratum sorted (M in all), it is [d₍ₖ₎, d₍M₊₁₋ₖ₎] for the
// largest k with P(ΣU ≤ k−1) ≤ (1−level)/2 under no change, the strata's
// exact null distributions convolved. As rankInterval, it excludes zero
// with probability at most 1 − level when the rounds of each step are
// exchangeable between the runs. It is returned as relative changes
// (e^d − 1); ok is false when the strata cannot reach level.
func ladderInterval(strata []stratum, level float64) (iv interval, ok bool) {
	tail := (1 - level) / 2
	sizes := make([][2]int, len(strata))
	var d []float64
	for i, s := range strata {
		sizes[i] = [2]int{len(s.base), len(s.new)}
		for _, b := range s.base {
			for _, v := range s.new {
				d = append(d, math.Log(v/b))
			}
		}
	}
	kc := ladderCritical(sizes, tail)
	if kc < 1 || 2*kc > len(d)+1 {
		return interval{}, false
	}
	slices.Sort(d)
	return interval{Lo: math.Expm1(d[kc-1]), Hi: math.Expm1(d[len(d)-kc])}, true
}

// ladderCritical returns the largest k such that P(ΣU ≤ k−1) ≤ tail under
// no change, ΣU the sum of the Mann–Whitney counts of strata of the given
// sizes (each {n₁, n₂}), whose exact distributions are convolved.
func ladderCritical(sizes [][2]int, tail float64) int {
	dist := []float64{1}
	for _, s := range sizes {
		n1, n2 := s[0], s[1]
		f := rankPMF(min(n1, n2), max(n1, n2), n1*n2+1)
		next := make([]float64, len(dist)+len(f)-1)
		for i, p := range dist {
			for j, q := range f {
				next[i+j] += p * q
			}
		}
		dist = next
	}
	// A probability equal to tail counts as within it: the products of
	// the convolution round it up by a few ulps (1/20² = 0.0025 exactly
	// reads 0.0025000000000000005).
	limit := tail * (1 + 1e-9)
	cum := 0.0
	for u, p := range dist {
		if cum+p > limit {
			return u
		}
		cum += p
	}
	return len(dist)
}
