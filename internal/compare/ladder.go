package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// LadderConcurrency is the Concurrency of a StepChange that holds the burst
// ladder figures: one per scenario and metric, judged on the rounds of
// every burst step both runs measured (see ladderTest). No step has N = 0.
const LadderConcurrency = 0

// unitLadder: a ladder figure is judged on the rounds of each step.
const unitLadder = "burst rounds, per step of the ladder"

// stratum is one burst step's rounds in both runs, for a ladder figure.
type stratum struct {
	n         int
	base, new []float64
}

// ladderKey names a scenario's burst ladder figure of a metric.
func ladderKey(scenario, metric string) string {
	return figureKey(scenario, sweep.ModeBurst, LadderConcurrency, metric)
}

// addLadderRounds records a burst step's rounds of a metric for its
// scenario's ladder figure. Only steps with rounds in both runs, not busy,
// with positive values count: which do depends on the steps, never on how
// the values compare.
func (k comparer) addLadderRounds(scenario, metric string, n int, base, new []float64) {
	if len(base) == 0 || len(new) == 0 || slices.Min(base) <= 0 || slices.Min(new) <= 0 {
		return
	}
	key := ladderKey(scenario, metric)
	k.ladders[key] = append(k.ladders[key], stratum{n: n, base: base, new: new})
}

// ladderSteps returns one StepChange per scenario whose burst ladder has at
// least two steps with rounds in both runs, with a figure per metric, and
// files each figure's strata in tests for judge. The figure is the
// geometric mean, over the steps, of each step's median of its rounds'
// medians; its change is the ratio of NEW's to the base's.
//
// Why: a burst is judged on its rounds, and a step's few rounds cannot
// reach a report's level alone (3 against 3: p = 0.1 at best; 8 against 8
// reach 321 figures). Pooled over the ladder's steps, with the rounds of
// each step compared only with each other (a stratified rank test), 3
// rounds per step over 5 steps reach p = 2/20⁵ = 2.5·10⁻⁷: the level of a
// report of 200,000 figures. The verdict is about the ladder as a whole:
// a common relative shift of every step.
func (k comparer) ladderSteps(order []string) []report.StepChange {
	var out []report.StepChange
	for _, scenario := range order {
		sc := report.StepChange{Scenario: scenario, Mode: sweep.ModeBurst, Concurrency: LadderConcurrency, Presence: report.InBoth}
		for _, m := range stepMetrics {
			key := ladderKey(scenario, m.name)
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
			mc.Note = fmt.Sprintf("the burst ladder N=%s as one figure: the geometric mean of its steps' medians, judged on %d and %d rounds, each step's rounds against each other's",
				strings.Join(ns, ","), nb, nn)
			k.tests[key] = figureTest{strata: strata, unit: unitLadder}
			sc.Metrics = append(sc.Metrics, mc)
		}
		if len(sc.Metrics) > 0 {
			out = append(out, sc)
		}
	}
	return out
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
	if ladderMinP(strata)/2 > tail {
		return interval{}, false
	}
	dist := []float64{1}
	var d []float64
	for _, s := range strata {
		n1, n2 := len(s.base), len(s.new)
		f := rankPMF(min(n1, n2), max(n1, n2), n1*n2+1)
		next := make([]float64, len(dist)+len(f)-1)
		for i, p := range dist {
			for j, q := range f {
				next[i+j] += p * q
			}
		}
		dist = next
		for _, b := range s.base {
			for _, v := range s.new {
				d = append(d, math.Log(v/b))
			}
		}
	}
	kc, cum := 0, 0.0
	for u, p := range dist {
		if cum+p > tail {
			kc = u
			break
		}
		cum += p
	}
	if kc < 1 {
		return interval{}, false
	}
	slices.Sort(d)
	return interval{Lo: math.Expm1(d[kc-1]), Hi: math.Expm1(d[len(d)-kc])}, true
}
