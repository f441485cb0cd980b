package report

import (
	"cmp"
	"slices"

	"github.com/slaprobe/slaprobe/internal/sweep"
)

// Verdicts of one compared figure.
const (
	// VerdictBetter and VerdictWorse are significant changes: the
	// confidence interval of the difference excludes zero and the change
	// is at least the practical floor (CompareMethod).
	VerdictBetter = "better"
	VerdictWorse  = "worse"
	// VerdictNoChange: no detectable change.
	VerdictNoChange = "no_change"
	// VerdictUnknown: no confidence is available (summaries only, too few
	// requests, or a step that started on a busy engine); the change is
	// shown as a number.
	VerdictUnknown = "no_confidence"
)

// Presence of a scenario, step or capacity figure in the two runs.
const (
	InBoth     = "both"
	OnlyInBase = "base_only"
	OnlyInNew  = "new_only"
)

// Compared step metrics: the per-request metrics tested with samples, and
// system throughput, one number per step, compared as a number.
const (
	MetricTTFT             = "ttft"
	MetricITL              = "itl"
	MetricDecode           = "decode"
	MetricE2E              = "e2e"
	MetricPrefill          = "prefill"
	MetricSystemThroughput = "system_throughput"
	// MetricGoodShare is the share of a step's requests that were good
	// (Step.GoodShare), judged on the shares of slices of the closed loop
	// and of burst rounds.
	MetricGoodShare = "good_share"
	// MetricPrimingTTFT is a conversation step's priming (cold) turns'
	// TTFT; its follow-ups' TTFT is MetricTTFT.
	MetricPrimingTTFT = "priming_ttft"
	// MetricCachedShare is a conversation step's mean cached share of its
	// follow-ups (Step.Conversation.CachedShare), judged as
	// MetricGoodShare is, on the means of slices and burst rounds.
	MetricCachedShare = "cached_share"
)

// Capacity figures compared.
const (
	CapacityMaxSafeQueue = "max_safe_queue"
	CapacityUseCase      = "use_case"
	// CapacityOn is the capacity on a rule (Capacity.On); the change's
	// Rule names it.
	CapacityOn = "capacity_on"
	// CapacityConversations is the capacity in concurrent conversations
	// (Capacity.Conversations).
	CapacityConversations = "conversations"
	// CapacityHeadroom is a headroom report's multiple of its trace's
	// traffic (Report.Headroom, Comparison.Headroom).
	CapacityHeadroom = "headroom"
)

// HigherIsBetter says which way a compared metric improves.
func HigherIsBetter(metric string) bool {
	switch metric {
	case MetricDecode, MetricPrefill, MetricSystemThroughput, MetricGoodShare, MetricCachedShare,
		CapacityMaxSafeQueue, CapacityUseCase, CapacityOn, CapacityConversations, CapacityHeadroom:
		return true
	}
	return false
}

// Comparison is a report drawn against a baseline: every matching step's
// change with a verdict, capacity compared as numbers at the ladder's
// resolution, and what differs between the two runs.
type Comparison struct {
	// Base is the baseline report without its samples: its summaries draw
	// the base series and the change columns.
	Base *Report `json:"base"`
	// BaseLabel names the baseline in the page: a path, "previous sweep".
	BaseLabel string        `json:"base_label"`
	Method    CompareMethod `json:"method"`
	// Differences say how the two runs differ in what they measured:
	// model, engine, GPU, thresholds, ladders, and scenarios or steps
	// present in one run only. Shown at the top of the report.
	Differences []string `json:"differences,omitempty"`
	// Steps has one entry per (scenario, mode, N) of either run, in NEW's
	// order, then the base-only ones.
	Steps    []StepChange     `json:"steps,omitempty"`
	Capacity []CapacityChange `json:"capacity,omitempty"`
	// Confidence is false when either report has no samples (a v1 report):
	// every step metric is then VerdictUnknown.
	Confidence bool `json:"confidence"`
	// Headroom compares two headroom reports (Report.Headroom).
	Headroom *HeadroomChange `json:"headroom,omitempty"`
}

// HeadroomChange compares the headrooms of two replay sweeps of one
// workload. Each headroom is known only to its bracket (sweep.Headroom
// Bracket: the last speed-up that held, the first that did not): a change
// is significant when the brackets do not overlap, that is when one run
// failed at a speed-up the other held at. Within the brackets the
// interpolated multiples are shown, never judged.
type HeadroomChange struct {
	Workload string `json:"workload"`
	// Base and New are the multiples (sweep.Headroom.Multiple), BaseText
	// and NewText as shown: "3.05×", "≥4×", "<0.5×".
	Base     float64 `json:"base"`
	New      float64 `json:"new"`
	BaseText string  `json:"base_text"`
	NewText  string  `json:"new_text"`
	// Change is New / Base − 1; 0 when Base is 0.
	Change  float64 `json:"change_ratio"`
	Verdict string  `json:"verdict"`
	// Resolution names both brackets.
	Resolution string `json:"resolution,omitempty"`
	Note       string `json:"note,omitempty"`
}

// Significant reports a better or worse verdict.
func (h HeadroomChange) Significant() bool {
	return h.Verdict == VerdictBetter || h.Verdict == VerdictWorse
}

// CompareMethod is how changes were judged.
type CompareMethod struct {
	Statistic string `json:"statistic"` // "median" of the per-request values
	// Level is the family's confidence (0.95): comparing two runs of an
	// unchanged server flags any of the Figures with probability at most
	// 1 − Level. Each figure's interval is at FigureLevel, 1 − (1 −
	// Level) / Figures (Bonferroni); reports written before the family's
	// level have no FigureLevel, and their intervals are at Level.
	Level       float64 `json:"confidence_level"`
	Figures     int     `json:"figures,omitempty"`      // figures that got an interval
	FigureLevel float64 `json:"figure_level,omitempty"` // the level of each figure's interval
	Resamples   int     `json:"resamples"`              // bootstrap resamples per figure
	Seed        uint64  `json:"seed"`                   // of the PCG generator, mixed with each figure's name
	// PracticalFloor is the smallest relative change called significant,
	// even when the interval excludes zero.
	PracticalFloor float64 `json:"practical_floor_ratio"`
	// MinSamples is the fewest requests per run a verdict needs.
	MinSamples int `json:"min_samples"`
	// MinRounds is the fewest burst rounds per run a burst's verdict needs.
	MinRounds int `json:"min_burst_rounds,omitempty"`
	// Slices is how many slices of its requests, in the order they ended,
	// a closed-loop step at N > 1 is judged on (at most; each slice holds
	// at least MinSamples requests).
	Slices int `json:"closed_loop_slices,omitempty"`
	// RankBelow: a figure with fewer values than this in either run
	// (requests, burst rounds or slices) is judged with the exact rank
	// interval instead of the bootstrap, and gets no verdict when its
	// sizes cannot reach FigureLevel. Absent in comparisons written before.
	RankBelow int `json:"rank_below,omitempty"`
}

// StepChange is one (scenario, mode, N) in either run.
type StepChange struct {
	Scenario    string         `json:"scenario"`
	Mode        sweep.Mode     `json:"mode"`
	Concurrency int            `json:"concurrency"`
	Presence    string         `json:"presence"`
	Metrics     []MetricChange `json:"metrics,omitempty"` // when in both and measured in both
	// NotMeasured names the run(s) in which the step, present in both,
	// measured nothing (no request ended in it): "base", "new" or "both".
	// Such a step is not compared and has no Metrics.
	NotMeasured string `json:"not_measured,omitempty"`
}

// MetricChange is one metric of one step compared.
type MetricChange struct {
	Metric string `json:"metric"`
	// Base and New are the medians of the per-request values (of the
	// groups' medians for a step judged on its burst rounds or closed-loop
	// slices); without samples the summaries' p50 (the mean for prefill speed, the step's
	// number for system throughput).
	Base float64 `json:"base"`
	New  float64 `json:"new"`
	// Change is (New − Base) / Base.
	Change float64 `json:"change_ratio"`
	// Low and High bound the confidence interval of the difference of
	// medians, relative to Base; absent when no confidence is available.
	Low  *float64 `json:"low_ratio,omitempty"`
	High *float64 `json:"high_ratio,omitempty"`
	// BaseSamples and NewSamples count the values compared: requests, or
	// rounds for a burst judged on its rounds, or slices for a closed loop
	// at N > 1.
	BaseSamples int `json:"base_samples,omitempty"`
	NewSamples  int `json:"new_samples,omitempty"`
	// Detectable is, for a figure with no detectable change, the smallest
	// relative change the comparison would have called significant: the
	// larger end of the interval from zero, or the practical floor when that
	// is larger. A user who needs to see smaller changes runs longer.
	Detectable *float64 `json:"detectable_ratio,omitempty"`
	// NeededPerRun is, for a figure without a verdict because its values
	// (burst rounds, slices or requests) are too few for the report's
	// level, how many per run would give it one; Note says which.
	NeededPerRun int    `json:"needed_per_run,omitempty"`
	Verdict      string `json:"verdict"`
	Note         string `json:"note,omitempty"` // why no confidence is available, or how it was judged
}

// Significant reports a better or worse verdict.
func (m MetricChange) Significant() bool {
	return m.Verdict == VerdictBetter || m.Verdict == VerdictWorse
}

// CapacityChange compares one capacity figure.
type CapacityChange struct {
	Kind     string       `json:"kind"` // CapacityMaxSafeQueue, CapacityUseCase or CapacityOn
	Scenario string       `json:"scenario"`
	Rule     string       `json:"rule,omitempty"` // the rule of a CapacityOn
	Presence string       `json:"presence"`
	Base     *sweep.Bound `json:"base,omitempty"`
	New      *sweep.Bound `json:"new,omitempty"`
	// Change is (New − Base) / Base; 0 when Base is 0.
	Change  float64 `json:"change_ratio"`
	Verdict string  `json:"verdict"`
	// Resolution says how finely the ladders can place a capacity: it is a
	// change only when it crosses a measured N.
	Resolution string `json:"resolution,omitempty"`
	Note       string `json:"note,omitempty"`
}

// Significant reports a better or worse verdict.
func (c CapacityChange) Significant() bool {
	return c.Verdict == VerdictBetter || c.Verdict == VerdictWorse
}

// Finding is one significant change, for the summary at the top.
type Finding struct {
	Scenario    string
	Mode        sweep.Mode // empty for capacity
	Concurrency int        // 0 for capacity
	Metric      string     // a Metric* or Capacity* name
	Worse       bool
	Step        *MetricChange   // a step metric, or
	Capacity    *CapacityChange // a capacity figure, or
	Headroom    *HeadroomChange // a headroom (Metric CapacityHeadroom)
	// Level and FigureLevel are the comparison's (CompareMethod): the
	// family's confidence and that of the step metric's interval.
	Level, FigureLevel float64
}

// magnitude is how large the finding's relative change is.
func (f Finding) magnitude() float64 {
	if f.Step != nil {
		return abs(f.Step.Change)
	}
	if f.Headroom != nil {
		return abs(f.Headroom.Change)
	}
	return abs(f.Capacity.Change)
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// Findings lists the significant changes: regressions first, capacity
// before steps, then the largest change first.
func (c *Comparison) Findings() []Finding {
	if c == nil {
		return nil
	}
	var out []Finding
	if h := c.Headroom; h != nil && h.Significant() {
		out = append(out, Finding{Scenario: h.Workload, Metric: CapacityHeadroom, Worse: h.Verdict == VerdictWorse, Headroom: h})
	}
	for i := range c.Capacity {
		cc := &c.Capacity[i]
		if cc.Significant() {
			out = append(out, Finding{Scenario: cc.Scenario, Metric: cc.Kind, Worse: cc.Verdict == VerdictWorse, Capacity: cc})
		}
	}
	for i := range c.Steps {
		s := &c.Steps[i]
		for j := range s.Metrics {
			m := &s.Metrics[j]
			if m.Significant() {
				out = append(out, Finding{Scenario: s.Scenario, Mode: s.Mode, Concurrency: s.Concurrency, Metric: m.Metric,
					Worse: m.Verdict == VerdictWorse, Step: m, Level: c.Method.Level, FigureLevel: c.Method.FigureLevel})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Finding) int {
		if a.Worse != b.Worse {
			if a.Worse {
				return -1
			}
			return 1
		}
		if (a.Step == nil) != (b.Step == nil) {
			if a.Step == nil {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.magnitude(), a.magnitude())
	})
	return out
}

// Step returns the change of one step, or nil.
func (c *Comparison) Step(scenario string, mode sweep.Mode, n int) *StepChange {
	if c == nil {
		return nil
	}
	for i := range c.Steps {
		s := &c.Steps[i]
		if s.Scenario == scenario && s.Mode == mode && s.Concurrency == n {
			return s
		}
	}
	return nil
}

// Metric returns the change of one metric of the step, or nil.
func (s *StepChange) Metric(metric string) *MetricChange {
	if s == nil {
		return nil
	}
	for i := range s.Metrics {
		if s.Metrics[i].Metric == metric {
			return &s.Metrics[i]
		}
	}
	return nil
}

// CapacityOf returns the change of one capacity figure, or nil.
func (c *Comparison) CapacityOf(kind, scenario string) *CapacityChange {
	return c.CapacityOnRule(kind, scenario, "")
}

// CapacityOnRule is CapacityOf for a kind of several rules (CapacityOn).
func (c *Comparison) CapacityOnRule(kind, scenario, rule string) *CapacityChange {
	if c == nil {
		return nil
	}
	for i := range c.Capacity {
		if c.Capacity[i].Kind == kind && c.Capacity[i].Scenario == scenario && c.Capacity[i].Rule == rule {
			return &c.Capacity[i]
		}
	}
	return nil
}

// StripSamples returns a copy of r without step samples or comparison:
// what a comparison keeps of its baseline.
func StripSamples(r *Report) *Report {
	if r == nil {
		return nil
	}
	rr := *r
	rr.Comparison = nil
	rr.Scenarios = make([]Scenario, len(r.Scenarios))
	for i, s := range r.Scenarios {
		s.ClosedLoop = stripSteps(s.ClosedLoop)
		s.Burst = stripSteps(s.Burst)
		rr.Scenarios[i] = s
	}
	return &rr
}

func stripSteps(steps []Step) []Step {
	if steps == nil {
		return nil
	}
	out := make([]Step, len(steps))
	for i, st := range steps {
		st.Samples = nil
		out[i] = st
	}
	return out
}

// HasSamples reports whether any step of r kept its per-request values, or
// whether a v2 report had none to keep (no step measured anything).
func (r *Report) HasSamples() bool {
	measured := false
	for _, s := range r.Scenarios {
		for _, st := range append(append([]Step(nil), s.ClosedLoop...), s.Burst...) {
			if st.Samples != nil {
				return true
			}
			measured = measured || st.Measured()
		}
	}
	// A report in which no step measured anything had nothing to keep: it
	// is not a v1 report.
	return !measured && r.SchemaVersion != SchemaVersionV1
}
