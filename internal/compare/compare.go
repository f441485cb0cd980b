// Package compare puts two benchmark reports side by side: `slaprobe
// compare`, `slaprobe bench --baseline` and the daemon against its previous
// sweep. It matches scenarios, modes and N, tests each per-request metric's
// difference of medians with a seeded bootstrap of the raw samples, compares
// capacity as numbers at the ladders' resolution, and returns NEW's report
// with its Comparison filled in; package report draws it.
package compare

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// Options set how changes are judged. The zero value of a field takes its
// default (DefaultOptions).
type Options struct {
	// BaseLabel names the baseline in the report ("base.json", "previous
	// sweep").
	BaseLabel string
	// Level is the family's confidence (0.95): the chance that comparing two
	// runs of an unchanged server flags no figure at all, whatever the
	// number of figures (see judge). Resamples is the fewest bootstrap
	// resamples per figure (4000; more when the family's level needs them),
	// Seed that of the generator (1).
	Resamples int
	Level     float64
	Seed      uint64
	// PracticalFloor is the smallest relative change called significant
	// (0.05): below it a change is "no detectable change" even when the
	// interval excludes zero.
	PracticalFloor float64
	// MinSamples is the fewest requests per run a verdict needs (5).
	MinSamples int
	// MinRounds is the fewest burst rounds per run a burst's verdict
	// needs (3): a burst step is judged on its rounds' medians, and only
	// when both runs repeated it (burst.repeat).
	MinRounds int
	// Slices is how many consecutive slices a closed-loop step at N > 1 is
	// cut into (8), each of at least MinSamples requests in the order they
	// ended: such a step is judged on its slices' medians. At least
	// MinRounds slices per run are needed for a verdict.
	Slices int
}

// DefaultOptions are the settings every slaprobe comparison uses.
func DefaultOptions() Options {
	return Options{Resamples: 4000, Level: 0.95, Seed: 1, PracticalFloor: 0.05, MinSamples: 5, MinRounds: 3, Slices: 8}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Resamples <= 0 {
		o.Resamples = d.Resamples
	}
	if o.Level <= 0 || o.Level >= 1 {
		o.Level = d.Level
	}
	if o.Seed == 0 {
		o.Seed = d.Seed
	}
	if o.PracticalFloor <= 0 {
		o.PracticalFloor = d.PracticalFloor
	}
	if o.MinSamples <= 0 {
		o.MinSamples = d.MinSamples
	}
	if o.MinRounds <= 0 {
		o.MinRounds = d.MinRounds
	}
	if o.Slices <= 0 {
		o.Slices = d.Slices
	}
	if o.BaseLabel == "" {
		o.BaseLabel = "base"
	}
	return o
}

// Compare returns a copy of cur (NEW) with its Comparison against base
// filled in. Neither argument is modified. The result is the same for the
// same inputs and options.
func Compare(base, cur *report.Report, o Options) *report.Report {
	o = o.withDefaults()
	out := *cur
	c := &report.Comparison{
		Base:      report.StripSamples(base),
		BaseLabel: o.BaseLabel,
		Method: report.CompareMethod{Statistic: "median", Level: o.Level, Resamples: o.Resamples, Seed: o.Seed,
			PracticalFloor: o.PracticalFloor, MinSamples: o.MinSamples, MinRounds: o.MinRounds, Slices: o.Slices},
		Confidence: base.HasSamples() && cur.HasSamples(),
	}
	c.Differences = differences(base, cur)
	k := comparer{o: o, confidence: c.Confidence, tests: map[string]figureTest{}, short: map[string]shortFigure{}, ladders: map[string][]stratum{}}
	c.Steps = k.steps(base, cur, &c.Differences)
	var order []string
	for _, s := range cur.Scenarios {
		if !slices.Contains(order, s.Name) {
			order = append(order, s.Name)
		}
	}
	c.Steps = append(c.Steps, k.ladderSteps(order)...)
	k.judge(c)
	c.Capacity = k.capacity(base, cur)
	c.Headroom = Headroom(base.Headroom, cur.Headroom)
	if (base.Headroom == nil) != (cur.Headroom == nil) {
		c.Differences = append(c.Differences, "only one run is a headroom report (slaprobe headroom): its headroom is not compared")
	}
	out.Comparison = c
	return &out
}

type comparer struct {
	o          Options
	confidence bool
	// tests holds, by figureKey, the samples of every figure that may get
	// an interval; judge computes them all at once, at the family's level.
	tests map[string]figureTest
	// short holds, by figureKey, the figures with samples too few to be
	// judged at all (a burst of fewer than MinRounds rounds, a closed loop
	// with too few requests for MinRounds slices, fewer than MinSamples
	// requests): judge says in their note how many would give a verdict.
	short map[string]shortFigure
	// ladders holds, by ladderKey, the rounds of each burst step of a
	// scenario and metric, for its ladder figure (see ladderSteps).
	ladders map[string][]stratum
}

// Kinds of value a figure is judged on.
const (
	unitRequests = "requests"
	unitRounds   = "burst rounds"
	unitSlices   = "slices of the step's requests, in the order they ended"
)

// figureTest is one figure's samples: per request, or per group (burst
// rounds, closed-loop slices), and which.
type figureTest struct {
	base, new []float64
	unit      string
	// strata, for a burst ladder figure instead of base and new: each
	// step's rounds.
	strata []stratum
}

// shortFigure is a figure with too few values for any verdict: what it
// has, for judge to complete its note.
type shortFigure struct {
	unit   string
	nb, nn int
}

func figureKey(scenario string, mode sweep.Mode, n int, metric string) string {
	return fmt.Sprintf("%s/%s/%d/%s", scenario, mode, n, metric)
}

// judge gives every figure in tests its interval and verdict. The report
// compares many figures (about twenty per scenario), and at 95 % each,
// chance alone would flag some in most comparisons of two runs of an
// unchanged server. So the level is the family's: each figure's interval is
// at 1 − (1 − Level)/m for the m figures judged (Bonferroni), and a
// comparison of two runs of an unchanged server flags any figure with
// probability at most 1 − Level.
//
// That holds only if each figure's interval keeps its own level at its
// size. A figure of fewer than rankBelow values in either run (burst
// rounds, slices, few requests) is judged with the exact rank interval
// (rankInterval); a larger one with the bootstrap, which draws enough
// resamples for about ten beyond each tail of the level. A rank figure
// whose sizes cannot reach the level at all (even full separation has a
// larger p-value) gets no verdict, and its note says how many values per
// run would give one; it is then not one of the m, which is found once for
// all: the largest set of figures that can each reach 1 − (1 − Level)/m.
// Which figures are judged depends on their sizes only, never on their
// values, so the family's promise holds.
//
// A figure with no detectable change gets the smallest shift of NEW's
// values, relative to the base, that it would have called significant in
// either direction (see detectable).
func (k comparer) judge(c *report.Comparison) {
	alpha := 1 - k.o.Level
	all := len(k.tests) + len(k.short)
	if all == 0 {
		return
	}
	keys := make([]string, 0, len(k.tests))
	for key := range k.tests {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	minP := func(key string) float64 {
		ft := k.tests[key]
		if ft.strata != nil {
			return ladderMinP(ft.strata)
		}
		if !useRank(len(ft.base), len(ft.new)) {
			return 0
		}
		return minRankP(len(ft.base), len(ft.new))
	}
	// The judged set: T(m) = the figures that can reach α/m; the largest
	// T(m) with no more than m members (T shrinks as m grows).
	m, try := 0, 1
	for ; try <= len(keys); try++ {
		n := 0
		for _, key := range keys {
			if minP(key) <= alpha/float64(try) {
				n++
			}
		}
		if n <= try {
			m = n
			break
		}
	}
	judged := func(key string) bool { return minP(key) <= alpha/float64(max(try, 1)) }
	level := 1.0
	if m > 0 {
		level = 1 - alpha/float64(m)
	}
	// need is how many values per run would let every figure of the report
	// be judged, at the level of all of them.
	need := rankSizeFor(1 - alpha/float64(all))
	resamples := max(k.o.Resamples, min(maxResamples, int(math.Ceil(20*float64(max(m, 1))/alpha))))
	c.Method.Figures, c.Method.FigureLevel, c.Method.Resamples, c.Method.RankBelow = m, level, resamples, rankBelow
	if m == 0 {
		c.Method.FigureLevel = 0
	}
	type job struct {
		mc  *report.MetricChange
		key string
	}
	// Each figure draws from its own generator, seeded with its key, so
	// they are computed at once, one per core, with the same result in any
	// order.
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range jobs {
				ft := k.tests[j.key]
				mc := j.mc
				var iv interval
				if ft.strata != nil {
					var ok bool
					if iv, ok = ladderInterval(ft.strata, level); !ok || !judged(j.key) {
						mc.Note = appendNote(mc.Note, fmt.Sprintf("too few burst steps or rounds for a verdict: they can show a change with p = %.2g at best, and a verdict needs p ≤ %.2g",
							ladderMinP(ft.strata), alpha/float64(all)))
						continue
					}
					lo, hi := iv.Lo, iv.Hi
					mc.Low, mc.High = &lo, &hi
					mc.Verdict = verdict(mc.Metric, mc.Change, lo, hi, k.o.PracticalFloor)
					if mc.Verdict == report.VerdictNoChange {
						d := detectable(mc.Change, lo, hi, k.o.PracticalFloor)
						mc.Detectable = &d
					}
					continue
				}
				if useRank(len(ft.base), len(ft.new)) {
					var ok bool
					if iv, ok = rankInterval(ft.base, ft.new, level); !ok || !judged(j.key) {
						mc.Note = appendNote(mc.Note, tooFewNote(ft.unit, len(ft.base), len(ft.new), all, need, k.o))
						mc.NeededPerRun = neededPerRun(ft.unit, need, k.o)
						continue
					}
					mc.Note = appendNote(mc.Note, fmt.Sprintf("exact rank interval (%d and %d %s)", len(ft.base), len(ft.new), shortUnit(ft.unit)))
				} else {
					iv = medianDiffInterval(ft.base, ft.new, resamples, level, k.o.Seed, j.key)
				}
				lo, hi := iv.Lo/mc.Base, iv.Hi/mc.Base
				mc.Low, mc.High = &lo, &hi
				mc.Verdict = verdict(mc.Metric, mc.Change, lo, hi, k.o.PracticalFloor)
				if mc.Verdict == report.VerdictNoChange {
					d := detectable(mc.Change, lo, hi, k.o.PracticalFloor)
					mc.Detectable = &d
				}
			}
		})
	}
	for i := range c.Steps {
		s := &c.Steps[i]
		for j := range s.Metrics {
			mc := &s.Metrics[j]
			key := figureKey(s.Scenario, s.Mode, s.Concurrency, mc.Metric)
			if _, ok := k.tests[key]; ok {
				jobs <- job{mc, key}
			} else if sf, ok := k.short[key]; ok {
				mc.Note = appendNote(mc.Note, tooFewNote(sf.unit, sf.nb, sf.nn, all, need, k.o))
				mc.NeededPerRun = neededPerRun(sf.unit, need, k.o)
			}
		}
	}
	close(jobs)
	wg.Wait()
}

// tooFewNote says why a figure of nb and nn values got no verdict, and how
// many per run would give one: need, with which each of the all figures of
// the report could be judged.
func tooFewNote(unit string, nb, nn, all, need int, o Options) string {
	best := ""
	if nb > 0 && nn > 0 {
		best = fmt.Sprintf(": %d and %d %s can show a change with p = %.2g at best, and a verdict needs p ≤ %.2g (the report's %s shared by its %d figures)",
			nb, nn, shortUnit(unit), minRankP(nb, nn), (1-o.Level)/float64(all), levelText(1-o.Level), all)
	}
	switch unit {
	case unitRounds:
		return fmt.Sprintf("too few burst rounds for a verdict%s; %d rounds in each run would give one (burst.repeat ≥ %d)", best, need, need)
	case unitSlices:
		if need > o.Slices {
			return fmt.Sprintf("too few slices for a verdict%s; %d slices of at least %d requests in each run would give one, more than the %d a step is cut into", best, need, o.MinSamples, o.Slices)
		}
		return fmt.Sprintf("too few requests for a verdict at N > 1%s; %d slices of at least %d requests in each run would give one (%d requests)", best, need, o.MinSamples, need*o.MinSamples)
	}
	return fmt.Sprintf("too few requests for a verdict%s; %d requests in each run would give one", best, max(need, o.MinSamples))
}

// neededPerRun is what tooFewNote asks for, in the figure's own values:
// rounds, slices, or requests.
func neededPerRun(unit string, need int, o Options) int {
	if unit == unitRequests {
		return max(need, o.MinSamples)
	}
	return need
}

func shortUnit(unit string) string {
	if unit == unitSlices {
		return "slices"
	}
	return unit
}

func levelText(v float64) string { return strconv.FormatFloat(100*v, 'g', 4, 64) + " %" }

func appendNote(note, more string) string {
	if note == "" {
		return more
	}
	return note + "; " + more
}

// detectable is, for a figure with no detectable change, the smallest
// shift of NEW's values (relative to the base) that the comparison would
// have called significant in either direction: moving every value of NEW
// by d·base moves the change and both ends of the interval by d (the
// bootstrap draws the same resamples, the rank interval the same pairs), so
// a shift up is called when it passes −lo and brings the change to the
// floor, a shift down when it passes hi and brings the change to −floor.
// It is the larger of the two: both directions would have been seen.
func detectable(change, lo, hi, floor float64) float64 {
	up := max(-lo, floor-change)
	down := max(hi, floor+change)
	return max(up, down)
}

// maxResamples bounds the bootstrap of one figure (a report of hundreds of
// figures at a family level of 0.999).
const maxResamples = 400_000

// scenarioKey matches scenarios: the same name and the same prompt and
// output lengths. A scenario renamed or reshaped is not the same workload.
func sameScenario(a, b *report.Scenario) bool {
	return a.Name == b.Name && a.InputTokens == b.InputTokens && a.OutputTokens == b.OutputTokens
}

func findScenario(r *report.Report, s *report.Scenario) *report.Scenario {
	for i := range r.Scenarios {
		if sameScenario(&r.Scenarios[i], s) {
			return &r.Scenarios[i]
		}
	}
	return nil
}

func hasName(r *report.Report, name string) bool {
	for _, s := range r.Scenarios {
		if s.Name == name {
			return true
		}
	}
	return false
}

var modes = []sweep.Mode{sweep.ModeClosedLoop, sweep.ModeBurst}

func (k comparer) steps(base, cur *report.Report, diffs *[]string) []report.StepChange {
	var out []report.StepChange
	only := func(s *report.Scenario, presence string) {
		for _, m := range modes {
			for _, st := range sortedSteps(s.Steps(m)) {
				out = append(out, report.StepChange{Scenario: s.Name, Mode: m, Concurrency: st.Concurrency, Presence: presence})
			}
		}
	}
	for i := range cur.Scenarios {
		s := &cur.Scenarios[i]
		b := findScenario(base, s)
		if b == nil {
			if hasName(base, s.Name) {
				*diffs = append(*diffs, fmt.Sprintf("Scenario %s has other prompt or output lengths in the two runs, so it is not compared: each run's steps are listed as its own.", s.Name))
			} else {
				*diffs = append(*diffs, fmt.Sprintf("Scenario %s is only in the new run.", s.Name))
			}
			only(s, report.OnlyInNew)
			continue
		}
		if th := thresholdDiff(b.Thresholds, s.Thresholds); th != "" {
			*diffs = append(*diffs, fmt.Sprintf("Scenario %s has other thresholds: %s.", s.Name, th))
		}
		for _, m := range modes {
			ns, bs := sortedSteps(s.Steps(m)), sortedSteps(b.Steps(m))
			var onlyNew, onlyBase []int
			for _, st := range ns {
				bst := stepAt(bs, st.Concurrency)
				if bst == nil {
					onlyNew = append(onlyNew, st.Concurrency)
					out = append(out, report.StepChange{Scenario: s.Name, Mode: m, Concurrency: st.Concurrency, Presence: report.OnlyInNew})
					continue
				}
				sc := report.StepChange{Scenario: s.Name, Mode: m, Concurrency: st.Concurrency, Presence: report.InBoth}
				// A step that measured nothing has zeros, not figures:
				// it is not compared.
				switch {
				case !bst.Measured() && !st.Measured():
					sc.NotMeasured = "both"
				case !bst.Measured():
					sc.NotMeasured = "base"
				case !st.Measured():
					sc.NotMeasured = "new"
				default:
					sc.Metrics = k.metrics(s.Name, m, bst, &st)
				}
				if sc.NotMeasured != "" {
					where := map[string]string{"both": "either run", "base": "the base run", "new": "the new run"}[sc.NotMeasured]
					*diffs = append(*diffs, fmt.Sprintf("Scenario %s %s N=%d measured nothing in %s (no request ended in it): not compared.",
						s.Name, modeText(m), st.Concurrency, where))
				}
				out = append(out, sc)
			}
			for _, st := range bs {
				if stepAt(ns, st.Concurrency) == nil {
					onlyBase = append(onlyBase, st.Concurrency)
					out = append(out, report.StepChange{Scenario: s.Name, Mode: m, Concurrency: st.Concurrency, Presence: report.OnlyInBase})
				}
			}
			if len(onlyNew) > 0 {
				*diffs = append(*diffs, fmt.Sprintf("Scenario %s %s: N=%s only in the new run.", s.Name, modeText(m), ints(onlyNew)))
			}
			if len(onlyBase) > 0 {
				*diffs = append(*diffs, fmt.Sprintf("Scenario %s %s: N=%s only in the base run.", s.Name, modeText(m), ints(onlyBase)))
			}
		}
	}
	for i := range base.Scenarios {
		b := &base.Scenarios[i]
		if findScenario(cur, b) == nil {
			if !hasName(cur, b.Name) {
				*diffs = append(*diffs, fmt.Sprintf("Scenario %s is only in the base run.", b.Name))
			}
			only(b, report.OnlyInBase)
		}
	}
	return out
}

func modeText(m sweep.Mode) string {
	if m == sweep.ModeBurst {
		return "burst"
	}
	return "closed loop"
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

func sortedSteps(steps []report.Step) []report.Step {
	out := slices.Clone(steps)
	slices.SortStableFunc(out, func(a, b report.Step) int { return a.Concurrency - b.Concurrency })
	return out
}

func stepAt(steps []report.Step, n int) *report.Step {
	for i := range steps {
		if steps[i].Concurrency == n {
			return &steps[i]
		}
	}
	return nil
}

// metric is one compared per-request metric: its samples and the summary
// used when there are none.
type metric struct {
	name    string
	samples func(*report.Samples) []float64
	summary func(*report.Step) float64
}

var stepMetrics = []metric{
	{report.MetricTTFT, func(s *report.Samples) []float64 { return s.TTFT }, func(s *report.Step) float64 { return s.TTFT.P50 }},
	{report.MetricITL, func(s *report.Samples) []float64 { return s.ITL }, func(s *report.Step) float64 { return s.ITL.P50 }},
	{report.MetricDecode, func(s *report.Samples) []float64 { return s.Decode }, func(s *report.Step) float64 { return s.Decode.P50 }},
	{report.MetricE2E, func(s *report.Samples) []float64 { return s.E2E }, func(s *report.Step) float64 { return s.E2E.P50 }},
	{report.MetricPrefill, func(s *report.Samples) []float64 { return s.Prefill }, func(s *report.Step) float64 { return s.PrefillTokensPerSecond }},
	// A conversation step's TTFT above is its follow-ups'; its priming
	// (cold) turns are a figure of their own.
	{report.MetricPrimingTTFT, func(s *report.Samples) []float64 { return s.PrimingTTFT }, func(s *report.Step) float64 {
		if s.Conversation == nil {
			return 0
		}
		return s.Conversation.PrimingTTFT.P50
	}},
}

func (k comparer) metrics(scenario string, mode sweep.Mode, b, n *report.Step) []report.MetricChange {
	var out []report.MetricChange
	busy := b.StartedBusy() || n.StartedBusy()
	for _, m := range stepMetrics {
		var bv, nv []float64
		if b.Samples != nil && n.Samples != nil {
			bv, nv = m.samples(b.Samples), m.samples(n.Samples)
		}
		// Some steps are judged on groups of their requests rather than on
		// the requests: a burst repeated in both runs on its rounds, a
		// closed loop at N > 1 on consecutive slices of its requests. Each
		// group's median is one sample, and the figure is the median of
		// those (see the cases below).
		var bg, ng []float64
		unit := ""
		switch {
		case mode == sweep.ModeBurst && b.Samples != nil && n.Samples != nil && b.Samples.RoundMedians != nil && n.Samples.RoundMedians != nil:
			bg, ng = m.samples(b.Samples.RoundMedians), m.samples(n.Samples.RoundMedians)
			unit = unitRounds
		case mode == sweep.ModeClosedLoop && n.Concurrency > 1:
			bg, ng = sliceMedians(bv, k.o.Slices, k.o.MinSamples), sliceMedians(nv, k.o.Slices, k.o.MinSamples)
			unit = unitSlices
		}
		grouped := len(bg) >= k.o.MinRounds && len(ng) >= k.o.MinRounds
		if unit != "" && !busy {
			k.addLadderGroups(scenario, mode, m.name, n.Concurrency, bg, ng)
		}
		mc := report.MetricChange{Metric: m.name, BaseSamples: len(bv), NewSamples: len(nv), Verdict: report.VerdictUnknown}
		switch {
		case grouped:
			mc.Base, mc.New = sweep.Median(bg), sweep.Median(ng)
			mc.BaseSamples, mc.NewSamples = len(bg), len(ng)
		case len(bv) > 0 && len(nv) > 0:
			mc.Base, mc.New = sweep.Median(bv), sweep.Median(nv)
		default:
			mc.Base, mc.New = m.summary(b), m.summary(n)
			mc.BaseSamples, mc.NewSamples = 0, 0
		}
		if mc.Base == 0 && mc.New == 0 {
			continue // measured in neither run
		}
		if mc.Base > 0 {
			mc.Change = (mc.New - mc.Base) / mc.Base
		}
		key := figureKey(scenario, mode, n.Concurrency, m.name)
		switch {
		case busy:
			mc.Note = "a step started on a busy engine"
		case grouped && mc.Base > 0:
			// A burst is one experiment: its N requests share one queue
			// and one set of prefill batches, and how a run happens to
			// split them moves TTFT (the i-th waits for the prefills
			// ahead of it) and the decode of the early ones (stalled by
			// the later prefills) for all of them at once. Its rounds are
			// the independent samples.
			//
			// A closed loop at N > 1 is the same in time: its N users
			// fall into a pattern of who waits for whose prefill, and
			// that pattern holds for seconds. On the simulated engine at
			// N=4 a quarter of the requests usually waited for no other
			// prefill, but in some runs half did, for the whole step, and
			// the requests' bootstrap called a rerun's median TTFT 14 %
			// worse. Medians of consecutive slices vary as much as that
			// pattern does.
			k.tests[key] = figureTest{base: bg, new: ng, unit: unit}
			mc.Note = fmt.Sprintf("compared on the medians of %d and %d %s", len(bg), len(ng), unit)
		case mc.BaseSamples == 0:
			mc.Note = "no raw samples: compared on summaries, no confidence available"
		case mode == sweep.ModeBurst:
			// One round (or too few): resampling the requests of one burst
			// would call a rerun's shift certain. Compared as a number;
			// the max safe queue depth judges bursts at the ladder's
			// resolution. judge says how many rounds would give a verdict.
			mc.Note = "a burst's requests share one queue, so they are not independent samples: compared as a number"
			k.short[key] = shortFigure{unit: unitRounds}
		case mode == sweep.ModeClosedLoop && n.Concurrency > 1:
			// Not enough requests for MinRounds slices: resampling the
			// requests would understate how much a rerun moves.
			k.short[key] = shortFigure{unit: unitSlices, nb: len(bg), nn: len(ng)}
		case mc.BaseSamples < k.o.MinSamples || mc.NewSamples < k.o.MinSamples:
			k.short[key] = shortFigure{unit: unitRequests, nb: mc.BaseSamples, nn: mc.NewSamples}
		case mc.Base <= 0:
			mc.Note = "the base value is zero"
		default:
			k.tests[key] = figureTest{base: bv, new: nv, unit: unitRequests}
		}
		out = append(out, mc)
	}
	if mc, ok := k.goodShare(scenario, mode, b, n, busy); ok {
		out = append(out, mc)
	}
	if mc, ok := k.cachedShare(scenario, mode, b, n, busy); ok {
		out = append(out, mc)
	}
	if b.SystemTokensPerSecond > 0 || n.SystemTokensPerSecond > 0 {
		mc := report.MetricChange{Metric: report.MetricSystemThroughput, Base: b.SystemTokensPerSecond, New: n.SystemTokensPerSecond,
			Verdict: report.VerdictUnknown, Note: "one number per step: compared as a number"}
		if mc.Base > 0 {
			mc.Change = (mc.New - mc.Base) / mc.Base
		}
		out = append(out, mc)
	}
	return out
}

// goodShare compares the share of good requests of two steps like any
// figure, on groups of requests since one request is good or not: a
// burst repeated in both runs on its rounds' shares, any closed-loop step
// on the shares of consecutive slices of its requests (as sliceMedians
// cuts them). The figure is each step's whole share; its interval comes
// from the groups' shares with the rank rules of judge, so too few rounds
// or slices give no verdict and a note saying how many would.
func (k comparer) goodShare(scenario string, mode sweep.Mode, b, n *report.Step, busy bool) (report.MetricChange, bool) {
	if b.GoodShare == nil || n.GoodShare == nil {
		return report.MetricChange{}, false // a report written before goodput was kept
	}
	bs, ns := shareSamples{whole: *b.GoodShare}, shareSamples{whole: *n.GoodShare}
	if b.Samples != nil && n.Samples != nil {
		bs.perRequest, ns.perRequest = b.Samples.Good, n.Samples.Good
		if b.Samples.RoundMedians != nil && n.Samples.RoundMedians != nil {
			bs.rounds, ns.rounds = b.Samples.RoundMedians.Good, n.Samples.RoundMedians.Good
		}
	}
	return k.share(scenario, mode, n.Concurrency, report.MetricGoodShare, "good shares", bs, ns, busy), true
}

// cachedShare compares the mean cached share of two conversation steps'
// follow-ups as goodShare compares the good share: the figure is each
// step's mean, judged on the means of consecutive slices of its follow-ups
// (closed loop) or of its rounds (a burst repeated in both runs), with the
// same rules for too few.
func (k comparer) cachedShare(scenario string, mode sweep.Mode, b, n *report.Step, busy bool) (report.MetricChange, bool) {
	if b.Conversation == nil || n.Conversation == nil || b.Conversation.HitShare == nil || n.Conversation.HitShare == nil {
		return report.MetricChange{}, false // not a conversation step, or no cached tokens reported
	}
	bs, ns := shareSamples{whole: b.Conversation.CachedShare}, shareSamples{whole: n.Conversation.CachedShare}
	if b.Samples != nil && n.Samples != nil {
		bs.perRequest, ns.perRequest = b.Samples.CachedShare, n.Samples.CachedShare
		if b.Samples.RoundMedians != nil && n.Samples.RoundMedians != nil {
			bs.rounds, ns.rounds = b.Samples.RoundMedians.CachedShare, n.Samples.RoundMedians.CachedShare
		}
	}
	return k.share(scenario, mode, n.Concurrency, report.MetricCachedShare, "mean cached shares", bs, ns, busy), true
}

// shareSamples is one step's share figure: the whole step's value, its
// per-request values (1 or 0 good, or each follow-up's cached share) and
// its rounds' (a burst).
type shareSamples struct {
	whole      float64
	perRequest []float64
	rounds     []float64
}

// share judges a share figure of two steps: on the rounds' values for a
// burst, else on the means of consecutive slices of the per-request values,
// with the rank rules of judge; too few rounds or slices give no verdict
// and a note saying how many would.
func (k comparer) share(scenario string, mode sweep.Mode, concurrency int, metric, what string, b, n shareSamples, busy bool) report.MetricChange {
	mc := report.MetricChange{Metric: metric, Base: b.whole, New: n.whole, Verdict: report.VerdictUnknown}
	if mc.Base > 0 {
		mc.Change = (mc.New - mc.Base) / mc.Base
	}
	bg, ng, unit := b.rounds, n.rounds, unitRounds
	if mode != sweep.ModeBurst {
		bg, ng, unit = sliceShares(b.perRequest, k.o.Slices, k.o.MinSamples), sliceShares(n.perRequest, k.o.Slices, k.o.MinSamples), unitSlices
	}
	key := figureKey(scenario, mode, concurrency, metric)
	switch {
	case busy:
		mc.Note = "a step started on a busy engine"
	case mc.Base <= 0:
		mc.Note = "the base value is zero"
	case len(bg) >= k.o.MinRounds && len(ng) >= k.o.MinRounds:
		k.tests[key] = figureTest{base: bg, new: ng, unit: unit}
		mc.BaseSamples, mc.NewSamples = len(bg), len(ng)
		mc.Note = fmt.Sprintf("compared on the %s of %d and %d %s", what, len(bg), len(ng), unit)
	default:
		k.short[key] = shortFigure{unit: unit, nb: len(bg), nn: len(ng)}
	}
	return mc
}

// sliceShares cuts good (1 or 0 per request, in the order they ended) as
// sliceMedians does and returns each slice's share of good requests.
func sliceShares(good []float64, max, minPer int) []float64 {
	k := min(max, len(good)/minPer)
	if k < 1 {
		return nil
	}
	out := make([]float64, k)
	for i := range k {
		sl := good[i*len(good)/k : (i+1)*len(good)/k]
		var sum float64
		for _, g := range sl {
			sum += g
		}
		out[i] = sum / float64(len(sl))
	}
	return out
}

// sliceMedians cuts v (in the order the requests ended) into at most max
// consecutive slices of at least minPer values each, as equal as they can
// be, and returns each slice's median; nil when not even one slice fits.
func sliceMedians(v []float64, max, minPer int) []float64 {
	k := min(max, len(v)/minPer)
	if k < 1 {
		return nil
	}
	out := make([]float64, k)
	for i := range k {
		out[i] = sweep.Median(v[i*len(v)/k : (i+1)*len(v)/k])
	}
	return out
}

// verdict: significant when the interval excludes zero and the change is
// at least the practical floor, on the interval's side of zero (the rank
// interval is of a shift, not of the medians' difference, so in a rare
// odd shape the two can disagree: no verdict then); its direction decides
// better or worse.
func verdict(metric string, change, lo, hi, floor float64) string {
	if (lo <= 0 && hi >= 0) || math.Abs(change) < floor || (lo > 0) != (change > 0) {
		return report.VerdictNoChange
	}
	if (change > 0) == report.HigherIsBetter(metric) {
		return report.VerdictBetter
	}
	return report.VerdictWorse
}

func thresholdDiff(a, b prober.Thresholds) string {
	at, bt := strings.Join(thresholdList(a), ", "), strings.Join(thresholdList(b), ", ")
	if at == bt {
		return ""
	}
	if at == "" {
		at = "none"
	}
	if bt == "" {
		bt = "none"
	}
	return "base " + at + "; new " + bt
}

func thresholdList(t prober.Thresholds) []string {
	var out []string
	if t.TTFT > 0 {
		out = append(out, "TTFT ≤ "+t.TTFT.String())
	}
	if t.E2E > 0 {
		out = append(out, "E2E ≤ "+t.E2E.String())
	}
	if t.ITL > 0 {
		out = append(out, "ITL ≤ "+t.ITL.String())
	}
	if t.MinDecode > 0 {
		out = append(out, fmt.Sprintf("decode ≥ %g tok/s", t.MinDecode))
	}
	return out
}
