package sweep

// This file holds one sweep from start to end: its Options, Run, which walks
// each scenario's closed-loop and burst ladders step by step, and Result.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

// Default ladders, as in the reports.
var (
	DefaultClosedLoopLadder = []int{1, 2, 4, 8, 16, 32}
	DefaultBurstLadder      = []int{1, 2, 4, 8, 16, 32, 64, 128, 256}
)

// Options configure Sweep. The zero value of an optional field turns
// its feature off; DefaultOptions holds the documented defaults.
type Options struct {
	Scenarios  []prober.Scenario
	ClosedLoop []int // closed-loop ladder; empty: no closed-loop steps
	Burst      []int // burst ladder; empty: no burst steps

	Warmup       time.Duration // closed loop: ramp-up excluded from each step
	StepDuration time.Duration // closed loop: steady window per step
	BurstRepeat  int           // burst: rounds per step (>= 1)
	Cooldown     time.Duration // idle time between steps, so the engine settles

	// MaxConcurrency drops ladder rungs above it (0: no ceiling).
	MaxConcurrency int

	// EarlyStopFactor stops a scenario's ladder once a step misses every
	// threshold the scenario sets by this factor (0: never stop early).
	EarlyStopFactor float64
	// EarlyStopMinSuccess stops a ladder once a step's success ratio falls
	// below it (0: never).
	EarlyStopMinSuccess float64

	Capacity CapacityOptions
	// Drain waits for an empty engine before each step and burst round
	// when Scrape reads running and waiting counts; otherwise Cooldown.
	Drain DrainOptions

	Scrape     EngineScraper // optional: queue wait and drain from the engine's /metrics
	Power      PowerSampler  // optional: power per step
	BeforeStep func(ctx context.Context, s StepInfo) error
	Progress   func(ProgressEvent)
	// CheckStepDuration sends one request of each scenario before its
	// closed-loop ladder (not part of any step) and warns, with a
	// ProgressWarning event and the log, when StepDuration holds fewer than
	// two such requests: such a step may end with no request finished and
	// measure nothing. `slaprobe bench` sets it.
	CheckStepDuration bool

	Clock  prober.Clock
	Logger *slog.Logger
}

// DefaultBurstRepeat is how many rounds a burst step sends by default:
// a comparison judges a scenario's burst ladder as one figure per metric,
// on every step's rounds (a stratified rank test), and 3 rounds over 5
// steps reach p = 2/20⁵, the level of a report of any practical size. One
// step alone needs 8 rounds for a report of up to 321 figures (2/C(16, 8)
// ≤ 5 %/321). Each round costs the time of one burst and the drain before
// it: 3 rounds and 20 s closed-loop windows keep the default sweep under 30
// minutes on the simulated H100 (docs/sweeps.md has the measurement).
const DefaultBurstRepeat = 3

// DefaultOptions returns the report's settings for the given
// scenarios: the one set of sweep defaults (config.DefaultSweepConfig is
// built from it). N is capped at 256, the largest burst of the reports.
func DefaultOptions(scenarios []prober.Scenario) Options {
	return Options{
		Scenarios:           scenarios,
		ClosedLoop:          append([]int(nil), DefaultClosedLoopLadder...),
		Burst:               append([]int(nil), DefaultBurstLadder...),
		Warmup:              10 * time.Second,
		StepDuration:        20 * time.Second,
		BurstRepeat:         DefaultBurstRepeat,
		Cooldown:            2 * time.Second,
		MaxConcurrency:      256,
		EarlyStopFactor:     3,
		EarlyStopMinSuccess: 0.5,
		Capacity:            DefaultCapacityOptions(),
		Drain:               DrainOptions{Timeout: 2 * time.Minute, PollInterval: 250 * time.Millisecond},
	}
}

const (
	ProgressStepStarted    ProgressKind = "step_started"
	ProgressStepFinished   ProgressKind = "step_finished"
	ProgressStepSkipped    ProgressKind = "step_skipped"    // a ladder stopped early; Message says why
	ProgressScenarioFailed ProgressKind = "scenario_failed" // Prepare failed; Message says why
	ProgressWarning        ProgressKind = "warning"         // a setting may spoil the steps ahead; Message says what to set
)

// EarlyStop records why a ladder ended before its last rung; report.json
// keeps it as is (Scenario.StoppedEarly).
type EarlyStop struct {
	Mode           Mode   `json:"mode"`
	AfterN         int    `json:"after_concurrency"` // last N measured, the step that triggered the stop
	SkippedLadderN []int  `json:"skipped"`           // rungs not run
	Reason         string `json:"reason"`            // e.g. "TTFT p50 41.2 s > 4x 3.0 s"
}

// ScenarioSpec is what a scenario was: its name, shape and thresholds.
// report.json keeps it as is (report.Scenario).
type ScenarioSpec struct {
	Name         string        `json:"name"`
	Family       prober.Family `json:"family"`
	Description  string        `json:"description,omitempty"`
	InputTokens  int           `json:"input_tokens"`
	OutputTokens int           `json:"output_tokens"`
	// Thresholds are the scenario's SLA in seconds and tokens/s; unset
	// ones are omitted.
	Thresholds prober.Thresholds `json:"thresholds"`
	// Turns and NewTokens describe a conversation scenario
	// (prober.Conversation): each of its conversations sends Turns
	// requests, the first (priming) of InputTokens, each follow-up
	// NewTokens more; its steps hold N conversations in flight. Both are 0
	// for a cold scenario.
	Turns     int `json:"turns,omitempty"`
	NewTokens int `json:"new_tokens,omitempty"`
}

// SpecOf is s as a sweep records it.
func SpecOf(s prober.Scenario) ScenarioSpec {
	sp := ScenarioSpec{Name: s.Name, Family: s.Family, Description: s.Description,
		InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, Thresholds: s.Thresholds}
	if s.IsConversation() {
		sp.Turns, sp.NewTokens = s.Conversation.Turns, s.Conversation.NewTokens
	}
	return sp
}

// ScenarioResult holds one scenario's ladders and the capacity derived
// from them.
type ScenarioResult struct {
	ScenarioSpec
	Error string `json:"error,omitempty"` // the scenario could not be prepared

	ClosedLoop []StepResult `json:"closed_loop,omitempty"`
	Burst      []StepResult `json:"burst,omitempty"`
	// StoppedEarly lists the ladders cut short, in the order they ran.
	StoppedEarly []EarlyStop `json:"stopped_early,omitempty"`

	// MaxSafeQueue is the largest burst N with TTFT within the max-safe limit.
	MaxSafeQueue *Capacity `json:"max_safe_queue,omitempty"`
	// CapacityOn is the capacity of the closed loop on each rule of
	// Options.Capacity.On (sweep.capacity_on; goodput >= 95 % by default)
	// that its steps measured.
	CapacityOn []RuleCapacity `json:"capacity_on,omitempty"`
	// Capacity is the largest closed-loop N within every scenario threshold.
	Capacity *Capacity `json:"capacity,omitempty"`
	// ConversationCapacity is, for a conversation scenario, the largest
	// closed-loop N of conversations in flight whose follow-ups keep within
	// the scenario's TTFT threshold and keep hitting the cache
	// (ConversationCapacityOf).
	ConversationCapacity *Capacity `json:"conversation_capacity,omitempty"`
}

// Steps returns the ladder for mode.
func (r *ScenarioResult) Steps(m Mode) []StepResult {
	if m == ModeBurst {
		return r.Burst
	}
	return r.ClosedLoop
}

// Settings records how a sweep was run.
type Settings struct {
	ClosedLoop          []int   `json:"closed_loop"`
	Burst               []int   `json:"burst"`
	WarmupSeconds       float64 `json:"warmup_seconds"`
	StepSeconds         float64 `json:"step_seconds"`
	BurstRepeat         int     `json:"burst_repeat"`
	MaxConcurrency      int     `json:"max_concurrency,omitempty"`
	EarlyStopFactor     float64 `json:"early_stop_factor,omitempty"`
	EarlyStopMinSuccess float64 `json:"early_stop_min_success,omitempty"`
	MaxSafeTTFTSeconds  float64 `json:"max_safe_ttft_seconds"`
	CapacityStat        Stat    `json:"capacity_stat"`
	CapacityMinSuccess  float64 `json:"capacity_min_success"`
	// ConversationHitShare is the share of follow-ups that must hit the
	// cache for a step to be within the capacity in conversations.
	ConversationHitShare float64 `json:"conversation_hit_share,omitempty"`
	// CapacityOn are the rules of Options.Capacity.On, normalized.
	CapacityOn []string `json:"capacity_on,omitempty"`
}

// Result is everything one sweep of one target measured.
type Result struct {
	Target   string    `json:"target"`
	Model    string    `json:"model"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Interrupted is true when the sweep was cancelled; the steps that
	// completed are kept, the one in progress is dropped.
	Interrupted bool             `json:"interrupted,omitempty"`
	Settings    Settings         `json:"settings"`
	Scenarios   []ScenarioResult `json:"scenarios"`
}

// Sweep runs, for each scenario in turn, the closed-loop ladder and then
// the burst ladder against t, and derives efficiency and capacity. When
// ctx is cancelled it stops at once and returns what was measured so far
// together with ctx's error; the result is never nil.
func Run(ctx context.Context, r Runner, t prober.Target, model string, opts Options) (*Result, error) {
	// Its requests' spans say they are a sweep's: they wait for no engine
	// span, and are exported at tracing.sweep_export_ratio.
	ctx = prober.WithRequestKind(ctx, prober.RequestSweep)
	clock := opts.Clock
	if clock == nil {
		clock = prober.SystemClock{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.BurstRepeat < 1 {
		opts.BurstRepeat = 1
	}
	if opts.Capacity.Stat == "" {
		opts.Capacity.Stat = StatMean
	}
	if opts.Capacity.MaxSafeTTFT <= 0 {
		opts.Capacity.MaxSafeTTFT = DefaultCapacityOptions().MaxSafeTTFT
	}
	if opts.Capacity.On == nil {
		opts.Capacity.On = DefaultCapacityOptions().On
	}
	if opts.Capacity.HitShare <= 0 {
		opts.Capacity.HitShare = DefaultConversationHitShare
	}
	closed := ladder(opts.ClosedLoop, opts.MaxConcurrency)
	burst := ladder(opts.Burst, opts.MaxConcurrency)
	if len(closed) > 0 && opts.StepDuration <= 0 {
		return &Result{Target: t.Name, Model: model}, errors.New("sweep: step duration must be positive for the closed loop")
	}

	sw := &sweepRun{
		r: r, t: t, model: model, opts: opts, clock: clock, logger: logger,
		start: clock.Now(),
	}
	sw.steps = len(opts.Scenarios) * (len(closed) + len(burst))
	res := &Result{
		Target: t.Name, Model: model, Started: sw.start,
		Settings: Settings{
			ClosedLoop: closed, Burst: burst,
			WarmupSeconds: opts.Warmup.Seconds(), StepSeconds: opts.StepDuration.Seconds(),
			BurstRepeat: opts.BurstRepeat, MaxConcurrency: opts.MaxConcurrency,
			EarlyStopFactor: opts.EarlyStopFactor, EarlyStopMinSuccess: opts.EarlyStopMinSuccess,
			MaxSafeTTFTSeconds: opts.Capacity.MaxSafeTTFT.Seconds(), CapacityStat: opts.Capacity.Stat,
			CapacityMinSuccess: opts.Capacity.MinSuccess, ConversationHitShare: opts.Capacity.HitShare,
		},
	}
	for _, r := range opts.Capacity.On {
		res.Settings.CapacityOn = append(res.Settings.CapacityOn, r.Text)
	}
	sw.plan = make([]StepInfo, 0, sw.steps)
	for _, s := range opts.Scenarios {
		for _, n := range closed {
			sw.plan = append(sw.plan, StepInfo{s.Name, ModeClosedLoop, n})
		}
		for _, n := range burst {
			sw.plan = append(sw.plan, StepInfo{s.Name, ModeBurst, n})
		}
	}

	var err error
	for _, s := range opts.Scenarios {
		sr := ScenarioResult{ScenarioSpec: SpecOf(s)}
		err = sw.scenario(ctx, s, closed, burst, &sr)
		finishScenario(&sr, s, opts)
		res.Scenarios = append(res.Scenarios, sr)
		if err != nil {
			break
		}
	}
	res.Finished = clock.Now()
	if err != nil {
		res.Interrupted = true
	}
	return res, err
}

// ladder sorts and de-duplicates rungs and drops those above ceiling.
func ladder(rungs []int, ceiling int) []int {
	out := make([]int, 0, len(rungs))
	for _, n := range rungs {
		if n >= 1 && (ceiling <= 0 || n <= ceiling) {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	j := 0
	for i, n := range out {
		if i == 0 || n != out[j-1] {
			out[j] = n
			j++
		}
	}
	return out[:j]
}

type sweepRun struct {
	r      Runner
	t      prober.Target
	model  string
	opts   Options
	clock  prober.Clock
	logger *slog.Logger
	start  time.Time

	plan  []StepInfo // remaining plan, for ETA
	done  int        // steps finished or skipped
	steps int        // steps planned in all (shrinks on early stop)
	// observed durations for the estimator
	bursts  map[string][]StepResult
	lastE2E map[string]float64
	// requestSeconds is the longest request E2E seen per scenario (the
	// sizing request, the steps' slowest), for NotMeasured's advice.
	requestSeconds map[string]float64
}

// scenario runs both ladders of one scenario. It returns a non-nil error
// only when the sweep must stop (ctx cancelled, BeforeStep refused).
func (sw *sweepRun) scenario(ctx context.Context, s prober.Scenario, closed, burst []int, sr *ScenarioResult) error {
	prep, err := sw.r.Prepare(ctx, sw.t, sw.model, s)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sr.Error = err.Error()
		skipped := len(closed) + len(burst)
		sw.dropPlanned(s.Name, "", 0)
		sw.steps -= skipped
		sw.emit(ProgressEvent{Kind: ProgressScenarioFailed, StepInfo: StepInfo{Scenario: s.Name}, Message: fmt.Sprintf("prepare: %v", err)})
		sw.logger.Warn("sweep scenario skipped", "scenario", s.Name, "err", err)
		return nil
	}
	if sw.opts.CheckStepDuration && len(closed) > 0 {
		sw.sizeRequest(ctx, s, prep)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	for _, mode := range []Mode{ModeClosedLoop, ModeBurst} {
		rungs := closed
		if mode == ModeBurst {
			rungs = burst
		}
		for i, n := range rungs {
			info := StepInfo{Scenario: s.Name, Mode: mode, Concurrency: n}
			step, err := sw.step(ctx, s, prep, info)
			if err != nil {
				return err
			}
			if mode == ModeBurst {
				sr.Burst = append(sr.Burst, step)
			} else {
				sr.ClosedLoop = append(sr.ClosedLoop, step)
			}
			if reason := earlyStop(step, s.Thresholds, mode, sw.opts); reason != "" && i < len(rungs)-1 {
				sr.StoppedEarly = append(sr.StoppedEarly, EarlyStop{Mode: mode, AfterN: n,
					SkippedLadderN: append([]int(nil), rungs[i+1:]...), Reason: reason})
				left := len(rungs) - i - 1
				sw.dropPlanned(s.Name, mode, n)
				sw.steps -= left
				sw.emit(ProgressEvent{Kind: ProgressStepSkipped, StepInfo: StepInfo{s.Name, mode, rungs[i+1]},
					Message: fmt.Sprintf("%d larger steps skipped: %s", left, reason)})
				sw.logger.Info("sweep ladder stopped early", "scenario", s.Name, "mode", mode, "concurrency", n, "reason", reason)
				break
			}
		}
	}
	return nil
}

func (sw *sweepRun) step(ctx context.Context, s prober.Scenario, prep *prober.Prepared, info StepInfo) (StepResult, error) {
	if sw.opts.BeforeStep != nil {
		if err := sw.opts.BeforeStep(ctx, info); err != nil {
			return StepResult{}, err
		}
	}
	// Start on an empty engine: the previous step's requests (clients
	// gone, maybe never aborted) must not queue ahead of this one's.
	drain, err := sw.drain(ctx, sw.done > 0)
	if err != nil {
		return StepResult{}, err
	}
	sw.emit(ProgressEvent{Kind: ProgressStepStarted, StepInfo: info, Step: sw.done + 1})
	sw.removePlanned(info)

	before, haveBefore := sw.scrape(ctx)
	var (
		power              PowerReading
		powerOn, havePower bool
	)
	startPower := func() {
		if sw.opts.Power == nil {
			return
		}
		if err := sw.opts.Power.Start(ctx); err != nil {
			sw.logger.Debug("power sampler start", "err", err)
			return
		}
		powerOn = true
	}
	stopPower := func() {
		if !powerOn {
			return
		}
		powerOn = false
		p, err := sw.opts.Power.Stop()
		if err != nil {
			sw.logger.Debug("power sampler stop", "err", err)
			return
		}
		power, havePower = p, true
	}

	var out loadOutcome
	if info.Mode == ModeClosedLoop {
		out = runClosedLoop(ctx, sw.r, sw.t, prep, closedLoopPlan{
			N: info.Concurrency, Warmup: sw.opts.Warmup, Window: sw.opts.StepDuration, Clock: sw.clock,
			OnWindowStart: startPower, OnWindowEnd: stopPower,
		})
	} else {
		out = sw.burst(ctx, prep, info.Concurrency, startPower, stopPower, &drain)
	}
	if out.Interrupted || ctx.Err() != nil {
		stopPower()
		return StepResult{}, ctx.Err()
	}
	step := summarizeStep(info, s.Thresholds, s.IsConversation(), out)
	step.Drain = &drain
	switch {
	case step.Conversation != nil && step.Conversation.longest > 0:
		sw.noteRequest(info.Scenario, step.Conversation.longest) // a closed-loop step's unit is a whole conversation
	case step.E2E.Count > 0:
		sw.noteRequest(info.Scenario, step.E2E.Max)
	}
	if !step.Measured() {
		step.NotMeasured = sw.notMeasured(info)
		sw.warn("sweep step measured nothing", "scenario", info.Scenario, "mode", info.Mode,
			"concurrency", info.Concurrency, "why", step.NotMeasured)
	}
	if drain.Busy {
		sw.logger.Warn("sweep step started on a busy engine; left out of capacity", "scenario", info.Scenario, "mode", info.Mode,
			"concurrency", info.Concurrency, "running", drain.Running, "waiting", drain.Waiting)
	}
	if havePower {
		if step.OutputTokens > 0 && power.Joules > 0 {
			power.JoulesPerOutputToken = power.Joules / step.OutputTokens
		}
		step.Power = &power
	}
	if haveBefore {
		if after, ok := sw.scrape(ctx); ok {
			step.QueueWaitSeconds = queueWait(before, after)
		}
		if q := step.QueueWaitSeconds; q != nil && step.TTFT.Mean-*q > 0 {
			step.PrefillExclQueue = step.promptTokens / (step.TTFT.Mean - *q)
		}
	}
	sw.done++
	sw.observe(step)
	sw.emit(ProgressEvent{Kind: ProgressStepFinished, StepInfo: info, Step: sw.done, Result: &step})
	return step, nil
}

// burst runs BurstRepeat rounds back to back and merges them; each round
// starts once the previous one has fully finished.
func (sw *sweepRun) burst(ctx context.Context, prep *prober.Prepared, n int, startPower, stopPower func(), drain *DrainResult) loadOutcome {
	var merged loadOutcome
	var span time.Duration
	for round := range sw.opts.BurstRepeat {
		if round > 0 {
			d, err := sw.drain(ctx, true)
			if err != nil {
				merged.Interrupted = true
				return merged
			}
			drain.merge(d)
		}
		onRelease := func() {}
		if round == 0 {
			onRelease = startPower
		}
		out := runBurst(ctx, sw.r, sw.t, prep, n, sw.clock, onRelease)
		if round == 0 {
			merged.Started, merged.SpanStart = out.Started, out.SpanStart
		}
		merged.Sampled = append(merged.Sampled, out.Sampled...)
		if sw.opts.BurstRepeat > 1 {
			merged.RoundEnds = append(merged.RoundEnds, len(merged.Sampled))
		}
		merged.Tokens += out.Tokens
		merged.MaxInFlight = max(merged.MaxInFlight, out.MaxInFlight)
		merged.Finished = out.Finished
		span += out.SpanEnd.Sub(out.SpanStart)
		if out.Interrupted {
			merged.Interrupted = true
			return merged
		}
	}
	stopPower()
	// Rounds are back to back; throughput is over the time spent serving.
	merged.SpanEnd = merged.SpanStart.Add(span)
	return merged
}

// notMeasured explains a step in which no measured request ended, with the
// step duration to set when a request's length is known.
func (sw *sweepRun) notMeasured(info StepInfo) string {
	unit := "request" // a conversation scenario's unit of load is a whole conversation
	for _, s := range sw.opts.Scenarios {
		if s.Name == info.Scenario && s.IsConversation() {
			unit = "conversation"
		}
	}
	if info.Mode == ModeBurst {
		return "no " + unit + " of the burst ended"
	}
	msg := fmt.Sprintf("no %s ended inside the %s window", unit, sw.opts.StepDuration)
	if e2e := sw.requestSeconds[info.Scenario]; e2e > 0 {
		msg += fmt.Sprintf(": a %s of %s takes about %.1fs here; %s", unit, info.Scenario, e2e, stepDurationAdvice(e2e))
	} else {
		msg += fmt.Sprintf(": a %s takes longer than that; set step.duration (bench: --step.duration) to at least twice a %s's length", unit, unit)
	}
	return msg
}

// stepDurationAdvice names the closed-loop window that holds two requests of
// e2eSeconds each, in whole seconds.
func stepDurationAdvice(e2eSeconds float64) string {
	return fmt.Sprintf("set step.duration (bench: --step.duration) to %s or more", time.Duration(math.Ceil(2*e2eSeconds))*time.Second)
}

// sizeRequest sends one request of s before its closed-loop ladder and
// warns when the step window holds fewer than two of them
// (CheckStepDuration).
func (sw *sweepRun) sizeRequest(ctx context.Context, s prober.Scenario, prep *prober.Prepared) {
	res := sw.r.Run(ctx, sw.t, prep)
	if ctx.Err() != nil || !res.Timed() || res.LastToken.IsZero() {
		return
	}
	e2e := res.E2E().Seconds()
	if at, ok := res.E2EAtRequested(); ok {
		e2e = at.Seconds() // a short answer: as long as the steps' requests will be
	}
	if s.IsConversation() {
		// One Run is a whole conversation: a closed-loop step's window
		// must hold two of them.
		e2e = res.LastToken.Sub(firstStart(&res)).Seconds()
	}
	sw.noteRequest(s.Name, e2e)
	if window := sw.opts.StepDuration.Seconds(); 2*e2e > window {
		msg := fmt.Sprintf("one request takes %.1fs here (a first request, alone on the server), so the %s window of a closed-loop step holds fewer than two, and fewer still at higher N: a step may end with no request finished and measure nothing; %s",
			e2e, sw.opts.StepDuration, stepDurationAdvice(e2e))
		if s.IsConversation() {
			msg = fmt.Sprintf("one conversation of %d turns takes %.1fs here (a first one, alone on the server), so the %s window of a closed-loop step holds fewer than two, and fewer still at higher N: a step may end with no conversation finished and measure nothing; %s",
				s.Turns(), e2e, sw.opts.StepDuration, stepDurationAdvice(e2e))
		}
		sw.warn("sweep step duration shorter than two requests", "scenario", s.Name, "request_seconds", e2e, "step_duration", sw.opts.StepDuration)
		sw.emit(ProgressEvent{Kind: ProgressWarning, StepInfo: StepInfo{Scenario: s.Name, Mode: ModeClosedLoop}, Message: msg})
	}
}

// warn logs what the progress events also say: at warning level when
// nothing reads them (the daemon), else at debug level (bench prints them).
func (sw *sweepRun) warn(msg string, args ...any) {
	if sw.opts.Progress == nil {
		sw.logger.Warn(msg, args...)
		return
	}
	sw.logger.Debug(msg, args...)
}

// noteRequest keeps the longest request seen of a scenario, for the advice
// on an unmeasured step.
func (sw *sweepRun) noteRequest(scenario string, e2eSeconds float64) {
	if sw.requestSeconds == nil {
		sw.requestSeconds = map[string]float64{}
	}
	sw.requestSeconds[scenario] = max(sw.requestSeconds[scenario], e2eSeconds)
}

// earlyStop returns why a ladder should stop after step, or "".
//
// A step is far out of bounds when it misses every threshold the scenario
// sets by opts.EarlyStopFactor (F): TTFT and E2E above F × their limit,
// ITL above F × its limit, decode speed below limit / F, each judged on
// the capacity statistic. In burst mode the ITL limit is left out of this
// test: under queueing ITL plateaus while TTFT keeps growing, so waiting
// for ITL would never stop a burst ladder. A step whose success ratio
// falls below opts.EarlyStopMinSuccess also stops the ladder.
func earlyStop(s StepResult, th prober.Thresholds, mode Mode, opts Options) string {
	if opts.EarlyStopMinSuccess > 0 && s.Requests > 0 && s.SuccessRatio < opts.EarlyStopMinSuccess {
		return fmt.Sprintf("success ratio %.2f below %.2f", s.SuccessRatio, opts.EarlyStopMinSuccess)
	}
	f := opts.EarlyStopFactor
	if f <= 0 || s.Succeeded == 0 {
		return ""
	}
	st := opts.Capacity.Stat
	var missed []string
	checked := 0
	check := func(name string, far bool) {
		checked++
		if far {
			missed = append(missed, name)
		}
	}
	if th.TTFT > 0 {
		v := s.TTFT.Worse(st)
		check(fmt.Sprintf("ttft %.3gs > %g×%gs", v, f, th.TTFT.Seconds()), v > f*th.TTFT.Seconds())
	}
	if th.E2E > 0 {
		v := s.E2E.Worse(st)
		check(fmt.Sprintf("e2e %.3gs > %g×%gs", v, f, th.E2E.Seconds()), v > f*th.E2E.Seconds())
	}
	if th.ITL > 0 && mode != ModeBurst {
		v := s.ITL.Worse(st)
		check(fmt.Sprintf("itl %.3gs > %g×%gs", v, f, th.ITL.Seconds()), v > f*th.ITL.Seconds())
	}
	if th.MinDecode > 0 {
		v := s.Decode.WorseLow(st)
		check(fmt.Sprintf("decode %.3g tok/s < %g/%g", v, th.MinDecode, f), v < th.MinDecode/f)
	}
	if checked == 0 || len(missed) < checked {
		return ""
	}
	out := "every threshold far exceeded:"
	for i, m := range missed {
		if i > 0 {
			out += ","
		}
		out += " " + m
	}
	return out
}

// finishScenario fills efficiency and capacity once the ladders are done.
func finishScenario(sr *ScenarioResult, s prober.Scenario, opts Options) {
	for _, steps := range [][]StepResult{sr.ClosedLoop, sr.Burst} {
		// Efficiency is relative to N=1; an N=1 step that started busy
		// measured other traffic too, so no efficiency is derived from it.
		// Nor from a step that measured nothing, and none is given to one.
		var base float64
		for _, st := range steps {
			if st.Concurrency == 1 && !st.StartedBusy() && st.Measured() {
				base = st.SystemThroughput
			}
		}
		for i := range steps {
			if steps[i].Measured() {
				steps[i].ScalingEfficiency = ScalingEfficiency(steps[i].SystemThroughput, base, steps[i].Concurrency)
			}
		}
	}
	// Steps that started on a busy engine measured leftovers or other
	// traffic: they stay in the results, marked, but capacity is read from
	// the drained ones only. Steps that measured nothing neither pass nor
	// fail a limit: capacity is read from the others, and is unknown
	// (nil) when there are none.
	if burst := drained(sr.Burst); len(burst) > 0 {
		c := MaxSafeQueue(burst, opts.Capacity)
		sr.MaxSafeQueue = &c
	}
	if closed := drained(sr.ClosedLoop); len(closed) > 0 {
		c := UseCaseCapacityOf(closed, s.Thresholds, opts.Capacity)
		sr.Capacity = &c
		sr.CapacityOn = CapacityOn(s.Name, closed, opts.Capacity.On)
		if s.IsConversation() {
			c := ConversationCapacityOf(closed, s.Thresholds, opts.Capacity)
			sr.ConversationCapacity = &c
		}
	}
}

// dropPlanned removes from the remaining plan the steps of scenario (and
// mode, when set) with concurrency above minN.
func (sw *sweepRun) dropPlanned(scenario string, mode Mode, minN int) {
	kept := sw.plan[:0]
	for _, p := range sw.plan {
		if p.Scenario == scenario && (mode == "" || p.Mode == mode) && p.Concurrency > minN {
			continue
		}
		kept = append(kept, p)
	}
	sw.plan = kept
}

// removePlanned takes one step out of the remaining plan.
func (sw *sweepRun) removePlanned(info StepInfo) {
	for i, p := range sw.plan {
		if p == info {
			sw.plan = append(sw.plan[:i], sw.plan[i+1:]...)
			return
		}
	}
}

func (sw *sweepRun) observe(st StepResult) {
	if sw.bursts == nil {
		sw.bursts = map[string][]StepResult{}
		sw.lastE2E = map[string]float64{}
	}
	if st.Mode == ModeBurst {
		sw.bursts[st.Scenario] = append(sw.bursts[st.Scenario], st)
	}
	if st.E2E.Count > 0 {
		sw.lastE2E[st.Scenario] = st.E2E.P99
	}
}

// remaining estimates the time left. A closed-loop step takes warm-up +
// window + one slow request. A burst step's duration grows about linearly
// with N (queued prefills) from a floor (one request's decode), so it is
// extrapolated along the line through the scenario's last two bursts, or
// taken as one request's E2E before there are two.
func (sw *sweepRun) remaining() time.Duration {
	var total float64
	for _, p := range sw.plan {
		e2e := sw.lastE2E[p.Scenario]
		if p.Mode == ModeClosedLoop {
			total += (sw.opts.Warmup + sw.opts.StepDuration + sw.opts.Cooldown).Seconds() + e2e
			continue
		}
		est := e2e
		if b := sw.bursts[p.Scenario]; len(b) > 0 {
			last := b[len(b)-1]
			d1 := last.Finished.Sub(last.Started).Seconds() / float64(sw.opts.BurstRepeat)
			est = d1
			if len(b) > 1 {
				prev := b[len(b)-2]
				d0 := prev.Finished.Sub(prev.Started).Seconds() / float64(sw.opts.BurstRepeat)
				if dn := last.Concurrency - prev.Concurrency; dn > 0 && d1 > d0 {
					est = d1 + (d1-d0)/float64(dn)*float64(p.Concurrency-last.Concurrency)
				}
			}
		}
		total += float64(sw.opts.BurstRepeat)*est + sw.opts.Cooldown.Seconds()
	}
	return time.Duration(total * float64(time.Second))
}

// drain waits until the engine reports nothing running (above
// Drain.MaxRunning) and nothing waiting, for at most Drain.Timeout. Without
// engine counts it sleeps Cooldown instead (when cool is set: not before
// the first step). It returns ctx's error when ctx ends.
func (sw *sweepRun) drain(ctx context.Context, cool bool) (DrainResult, error) {
	start := sw.clock.Now()
	d := sw.opts.Drain
	if d.PollInterval <= 0 {
		d.PollInterval = 250 * time.Millisecond
	}
	c, ok := sw.scrape(ctx)
	if !ok || !c.HasQueue {
		if cool && sw.opts.Cooldown > 0 && !sleepUntil(ctx, sw.clock, start.Add(sw.opts.Cooldown)) {
			return DrainResult{}, ctx.Err()
		}
		return DrainResult{Method: DrainCooldown, WaitedSeconds: sw.clock.Now().Sub(start).Seconds()}, ctx.Err()
	}
	for {
		if c.Running <= d.MaxRunning && c.Waiting <= 0 {
			return DrainResult{Method: DrainEngine, WaitedSeconds: sw.clock.Now().Sub(start).Seconds()}, nil
		}
		if sw.clock.Now().Sub(start) >= d.Timeout {
			return DrainResult{Method: DrainEngine, WaitedSeconds: sw.clock.Now().Sub(start).Seconds(),
				Busy: true, Running: c.Running, Waiting: c.Waiting}, nil
		}
		if !sleepUntil(ctx, sw.clock, sw.clock.Now().Add(d.PollInterval)) {
			return DrainResult{}, ctx.Err()
		}
		next, ok := sw.scrape(ctx)
		if ok && next.HasQueue {
			c = next
		}
	}
}

func (sw *sweepRun) scrape(ctx context.Context) (EngineCounters, bool) {
	if sw.opts.Scrape == nil {
		return EngineCounters{}, false
	}
	snap, err := sw.opts.Scrape(ctx)
	if err != nil {
		sw.logger.Debug("sweep engine scrape", "err", err)
		return EngineCounters{}, false
	}
	return snap, true
}

// drained returns the steps that did not start busy and measured something.
func drained(steps []StepResult) []StepResult {
	out := make([]StepResult, 0, len(steps))
	for i := range steps {
		if !steps[i].StartedBusy() && steps[i].Measured() {
			out = append(out, steps[i])
		}
	}
	return out
}

func (sw *sweepRun) emit(ev ProgressEvent) {
	if sw.opts.Progress == nil {
		return
	}
	ev.Steps = sw.steps
	if ev.Step == 0 {
		ev.Step = sw.done
	}
	ev.Elapsed = sw.clock.Now().Sub(sw.start)
	ev.Remaining = sw.remaining()
	sw.opts.Progress(ev)
}
