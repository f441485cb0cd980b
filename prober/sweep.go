package prober

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"
)

// Mode is how a sweep step loads the target.
type Mode string

const (
	// ModeClosedLoop holds exactly N requests in flight ("when am I the fastest?").
	ModeClosedLoop Mode = "closed_loop"
	// ModeBurst sends N requests at once ("when to scale up").
	ModeBurst Mode = "burst"
)

// Default ladders, as in the reports.
var (
	DefaultClosedLoopLadder = []int{1, 2, 4, 8, 16, 32}
	DefaultBurstLadder      = []int{1, 2, 4, 8, 16, 32, 64, 128, 256}
)

// PowerSampler measures accelerator power over an interval. The NVML
// implementation lives in internal/gpu; a sweep without one reports no power.
type PowerSampler interface {
	// Start begins an interval. The sampler polls on its own goroutine.
	Start(ctx context.Context) error
	// Stop ends the interval and returns what was drawn during it.
	Stop() (PowerReading, error)
}

// PowerReading is the power drawn over one interval, summed over the GPUs
// the sampler watches.
type PowerReading struct {
	AvgWatts  float64 `json:"avg_watts"`
	PeakWatts float64 `json:"peak_watts"`
	Joules    float64 `json:"joules"` // energy-counter delta when the GPU has one
	// JoulesPerOutputToken is Joules over the output tokens counted in the
	// same interval; filled in by the sweep.
	JoulesPerOutputToken float64 `json:"joules_per_output_token,omitempty"`
}

// EngineCounters is what a sweep reads from the target engine's own
// /metrics: the queue-time histogram's sum and count (vLLM
// vllm:request_queue_time_seconds, SGLang queue_time_seconds), and the
// requests running and waiting now (vllm:num_requests_running and
// vllm:num_requests_waiting), which tell when the engine has drained.
type EngineCounters struct {
	QueueTimeSum, QueueTimeCount float64
	HasQueueTime                 bool
	Running, Waiting             float64
	HasQueue                     bool
}

// Drain methods, in DrainResult.Method.
const (
	// DrainEngine: the step waited until the engine's /metrics showed
	// nothing running and nothing waiting (or DrainOptions.Timeout passed).
	DrainEngine = "engine_metrics"
	// DrainCooldown: no engine metrics; the step waited Cooldown and
	// cannot know whether the engine was empty.
	DrainCooldown = "cooldown"
)

// DrainOptions make every step (and every burst round) start on an empty
// engine. Engines differ in whether and how fast they abort the requests of
// a client that went away, and some never do: a fixed cooldown cannot know
// when the leftovers of the previous step are gone, the engine's own
// running and waiting counts can.
type DrainOptions struct {
	// Timeout bounds the wait; a step that starts after it ran out is
	// marked busy (DrainResult.Busy) and left out of capacity.
	Timeout time.Duration
	// MaxRunning is how many running requests still count as drained
	// (0: none). Set it to the background level on a server that always
	// has some traffic.
	MaxRunning float64
	// PollInterval is how often /metrics is read while waiting.
	PollInterval time.Duration
}

// DrainResult is how a step started: after how long a wait, and whether
// the engine was still busy.
type DrainResult struct {
	Method        string  `json:"method"`
	WaitedSeconds float64 `json:"waited_seconds"`
	// Busy is true when the engine still had requests running (above
	// MaxRunning) or waiting when the step or one of its burst rounds
	// started; Running and Waiting are the most seen then.
	Busy    bool    `json:"busy,omitempty"`
	Running float64 `json:"running,omitempty"`
	Waiting float64 `json:"waiting,omitempty"`
}

// EngineScraper reads EngineCounters; callers bind engine.Scrape to the
// target's client and metrics URL. (prober cannot import internal/engine,
// which imports prober.)
type EngineScraper func(ctx context.Context) (EngineCounters, error)

// SweepOptions configure Sweep. The zero value of an optional field turns
// its feature off; DefaultSweepOptions holds the documented defaults.
type SweepOptions struct {
	Scenarios  []Scenario
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

	Clock  Clock
	Logger *slog.Logger
}

// DefaultSweepOptions returns the report's settings for the given
// scenarios: the one set of sweep defaults (config.DefaultSweepConfig is
// built from it). N is capped at 256, the largest burst of the reports.
func DefaultSweepOptions(scenarios []Scenario) SweepOptions {
	return SweepOptions{
		Scenarios:           scenarios,
		ClosedLoop:          append([]int(nil), DefaultClosedLoopLadder...),
		Burst:               append([]int(nil), DefaultBurstLadder...),
		Warmup:              10 * time.Second,
		StepDuration:        60 * time.Second,
		BurstRepeat:         1,
		Cooldown:            2 * time.Second,
		MaxConcurrency:      256,
		EarlyStopFactor:     3,
		EarlyStopMinSuccess: 0.5,
		Capacity:            DefaultCapacityOptions(),
		Drain:               DrainOptions{Timeout: 2 * time.Minute, PollInterval: 250 * time.Millisecond},
	}
}

// StepInfo names one step of a sweep.
type StepInfo struct {
	Scenario    string
	Mode        Mode
	Concurrency int
}

// ProgressKind is the kind of a ProgressEvent.
type ProgressKind string

const (
	ProgressStepStarted    ProgressKind = "step_started"
	ProgressStepFinished   ProgressKind = "step_finished"
	ProgressStepSkipped    ProgressKind = "step_skipped"    // a ladder stopped early; Message says why
	ProgressScenarioFailed ProgressKind = "scenario_failed" // Prepare failed; Message says why
	ProgressWarning        ProgressKind = "warning"         // a setting may spoil the steps ahead; Message says what to set
)

// ProgressEvent reports where a sweep is, for progress bars and logs.
type ProgressEvent struct {
	Kind ProgressKind
	StepInfo
	Step  int // 1-based index of this step
	Steps int // steps planned in all; shrinks when a ladder stops early
	// Elapsed is the time since the sweep started; Remaining a rough
	// estimate of the time left (0 when unknown).
	Elapsed, Remaining time.Duration
	Result             *StepResult // ProgressStepFinished only
	Message            string
}

// Summary describes a distribution of per-request values in base units
// (seconds, tokens/s). Percentiles interpolate linearly between closest
// ranks.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P1    float64 `json:"p1"`
	P5    float64 `json:"p5"`
	P10   float64 `json:"p10"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Summarize sorts a copy of values and describes it.
func Summarize(values []float64) Summary {
	if len(values) == 0 {
		return Summary{}
	}
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	return Summary{
		Count: len(v), Mean: sum / float64(len(v)), Min: v[0], Max: v[len(v)-1],
		P1: Quantile(v, 0.01), P5: Quantile(v, 0.05), P10: Quantile(v, 0.10),
		P50: Quantile(v, 0.50), P90: Quantile(v, 0.90), P95: Quantile(v, 0.95), P99: Quantile(v, 0.99),
	}
}

// Samples are a step's per-request values over its successful requests,
// in base units: Decode and ITL of the requests that decoded more than one
// chunk, Prefill of those not served from the prefix cache.
type Samples struct {
	TTFT, ITL, Decode, E2E, Prefill []float64
	// RoundMedians holds, for a burst step of two or more rounds
	// (BurstRepeat), each round's median of every metric, one value per
	// round that measured it. A burst's requests share one queue, so they
	// are not independent samples; its rounds are, and a comparison
	// resamples those. Nil otherwise.
	RoundMedians *Samples
}

// StepResult is what one (scenario, mode, N) step measured.
type StepResult struct {
	Scenario    string    `json:"scenario"`
	Mode        Mode      `json:"mode"`
	Concurrency int       `json:"concurrency"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	// WindowSeconds is the span system throughput is measured over: the
	// steady window (closed loop) or release to last token (burst).
	WindowSeconds float64 `json:"window_seconds"`

	Requests     int            `json:"requests"` // measured requests sent
	Succeeded    int            `json:"succeeded"`
	Errors       map[Reason]int `json:"errors,omitempty"`
	SuccessRatio float64        `json:"success_ratio"`
	CacheHits    int            `json:"cache_hits,omitempty"` // successes served partly from the prefix cache
	// ShortOutputs counts the requests the server ended before the tokens
	// asked for (it ignores ignore_eos). They count as succeeded and in the
	// distributions below as Result.Timed and DecodeMeasured allow.
	ShortOutputs int `json:"short_outputs,omitempty"`

	// Per-request distributions over successful requests.
	Decode  Summary `json:"decode_tokens_per_second"`
	ITL     Summary `json:"itl_seconds"`
	TTFT    Summary `json:"ttft_seconds"`
	E2E     Summary `json:"e2e_seconds"`
	Prefill Summary `json:"prefill_tokens_per_second"` // prompt tokens / TTFT; cache hits left out
	// Samples are the per-request values the summaries above describe, in
	// the order the requests were sent: what a report keeps so that two
	// runs can be compared with a confidence interval.
	Samples Samples `json:"-"`
	// PrefillExclQueue is mean prompt tokens / (mean TTFT − mean queue
	// wait): the per-user prefill speed with the engine's queueing taken
	// out, as the reports define it. 0 when queue wait is unknown.
	PrefillExclQueue float64 `json:"prefill_excl_queue_tokens_per_second,omitempty"`
	promptTokens     float64 // mean prompt tokens of successes, for PrefillExclQueue

	OutputTokens     float64 `json:"output_tokens"` // output tokens inside the window
	SystemThroughput float64 `json:"system_tokens_per_second"`
	TokensPerHour    float64 `json:"tokens_per_hour"`
	// ScalingEfficiency is SystemThroughput / (N=1 throughput × N) of the
	// same scenario and mode; 0 when the ladder had no N=1 step.
	ScalingEfficiency float64 `json:"scaling_efficiency,omitempty"`

	// Drain says how the step started: on a drained engine, or busy.
	Drain *DrainResult `json:"drain,omitempty"`

	// NotMeasured says why the step has no figures, when no measured
	// request ended in it (a closed-loop window shorter than a request).
	// Its distributions are zero because nothing was measured: capacity,
	// scaling efficiency and headlines leave it out, reports show "–", and
	// a comparison calls it not measured. Empty when Measured.
	NotMeasured string `json:"not_measured,omitempty"`

	// QueueWaitSeconds is the mean engine queue time over the step, from
	// the change in vllm:request_queue_time_seconds; nil when the engine
	// does not expose it.
	QueueWaitSeconds *float64      `json:"queue_wait_seconds,omitempty"`
	Power            *PowerReading `json:"power,omitempty"`

	MaxInFlight int `json:"max_in_flight"` // client side, highest seen
	// StartSpreadSeconds is the time between the first and the last
	// request start (burst: how "at once" the burst really was).
	StartSpreadSeconds float64 `json:"start_spread_seconds"`
}

// EarlyStop records why a ladder ended before its last rung.
type EarlyStop struct {
	Concurrency int    `json:"concurrency"` // the step that triggered the stop
	Skipped     []int  `json:"skipped"`     // rungs not run
	Reason      string `json:"reason"`
}

// ScenarioResult holds one scenario's ladders and the capacity derived
// from them.
type ScenarioResult struct {
	Name         string     `json:"name"`
	Family       Family     `json:"family"`
	Description  string     `json:"description,omitempty"`
	InputTokens  int        `json:"input_tokens"`
	OutputTokens int        `json:"output_tokens"`
	Thresholds   Thresholds `json:"thresholds"`
	Error        string     `json:"error,omitempty"` // the scenario could not be prepared

	ClosedLoop     []StepResult `json:"closed_loop,omitempty"`
	Burst          []StepResult `json:"burst,omitempty"`
	ClosedLoopStop *EarlyStop   `json:"closed_loop_early_stop,omitempty"`
	BurstStop      *EarlyStop   `json:"burst_early_stop,omitempty"`

	// MaxSafeQueue is the largest burst N with TTFT within the max-safe limit.
	MaxSafeQueue *Capacity `json:"max_safe_queue,omitempty"`
	// Capacity is the largest closed-loop N within every scenario threshold.
	Capacity *Capacity `json:"capacity,omitempty"`
}

// Steps returns the ladder for mode.
func (r *ScenarioResult) Steps(m Mode) []StepResult {
	if m == ModeBurst {
		return r.Burst
	}
	return r.ClosedLoop
}

// SweepSettings records how a sweep was run.
type SweepSettings struct {
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
}

// SweepResult is everything one sweep of one target measured.
type SweepResult struct {
	Target   string    `json:"target"`
	Model    string    `json:"model"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Interrupted is true when the sweep was cancelled; the steps that
	// completed are kept, the one in progress is dropped.
	Interrupted bool             `json:"interrupted,omitempty"`
	Settings    SweepSettings    `json:"settings"`
	Scenarios   []ScenarioResult `json:"scenarios"`
}

// Sweep runs, for each scenario in turn, the closed-loop ladder and then
// the burst ladder against t, and derives efficiency and capacity. When
// ctx is cancelled it stops at once and returns what was measured so far
// together with ctx's error; the result is never nil.
func Sweep(ctx context.Context, r Runner, t Target, model string, opts SweepOptions) (*SweepResult, error) {
	clock := opts.Clock
	if clock == nil {
		clock = SystemClock{}
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
	closed := ladder(opts.ClosedLoop, opts.MaxConcurrency)
	burst := ladder(opts.Burst, opts.MaxConcurrency)
	if len(closed) > 0 && opts.StepDuration <= 0 {
		return &SweepResult{Target: t.Name, Model: model}, errors.New("sweep: step duration must be positive for the closed loop")
	}

	sw := &sweepRun{
		r: r, t: t, model: model, opts: opts, clock: clock, logger: logger,
		start: clock.Now(),
	}
	sw.steps = len(opts.Scenarios) * (len(closed) + len(burst))
	res := &SweepResult{
		Target: t.Name, Model: model, Started: sw.start,
		Settings: SweepSettings{
			ClosedLoop: closed, Burst: burst,
			WarmupSeconds: opts.Warmup.Seconds(), StepSeconds: opts.StepDuration.Seconds(),
			BurstRepeat: opts.BurstRepeat, MaxConcurrency: opts.MaxConcurrency,
			EarlyStopFactor: opts.EarlyStopFactor, EarlyStopMinSuccess: opts.EarlyStopMinSuccess,
			MaxSafeTTFTSeconds: opts.Capacity.MaxSafeTTFT.Seconds(), CapacityStat: opts.Capacity.Stat,
			CapacityMinSuccess: opts.Capacity.MinSuccess,
		},
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
		sr := ScenarioResult{
			Name: s.Name, Family: s.Family, Description: s.Description,
			InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, Thresholds: s.Thresholds,
		}
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
	t      Target
	model  string
	opts   SweepOptions
	clock  Clock
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
func (sw *sweepRun) scenario(ctx context.Context, s Scenario, closed, burst []int, sr *ScenarioResult) error {
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
				stop := &EarlyStop{Concurrency: n, Skipped: append([]int(nil), rungs[i+1:]...), Reason: reason}
				if mode == ModeBurst {
					sr.BurstStop = stop
				} else {
					sr.ClosedLoopStop = stop
				}
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

func (sw *sweepRun) step(ctx context.Context, s Scenario, prep *Prepared, info StepInfo) (StepResult, error) {
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
	step := summarizeStep(info, out)
	step.Drain = &drain
	if step.E2E.Count > 0 {
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
func (sw *sweepRun) burst(ctx context.Context, prep *Prepared, n int, startPower, stopPower func(), drain *DrainResult) loadOutcome {
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

// merge folds the drain of a later burst round into the step's.
func (d *DrainResult) merge(o DrainResult) {
	d.WaitedSeconds += o.WaitedSeconds
	if o.Busy {
		d.Busy = true
		d.Running, d.Waiting = max(d.Running, o.Running), max(d.Waiting, o.Waiting)
	}
}

// StartedBusy reports whether the step started on an engine that had not
// drained; such a step measured leftovers or other traffic.
func (s *StepResult) StartedBusy() bool { return s.Drain != nil && s.Drain.Busy }

// Measured reports whether at least one measured request ended in the step,
// so that its figures exist (see NotMeasured).
func (s *StepResult) Measured() bool { return s.Requests > 0 }

// notMeasured explains a step in which no measured request ended, with the
// step duration to set when a request's length is known.
func (sw *sweepRun) notMeasured(info StepInfo) string {
	if info.Mode == ModeBurst {
		return "no request of the burst ended"
	}
	msg := fmt.Sprintf("no request ended inside the %s window", sw.opts.StepDuration)
	if e2e := sw.requestSeconds[info.Scenario]; e2e > 0 {
		msg += fmt.Sprintf(": a request of %s takes about %.1fs here; %s", info.Scenario, e2e, stepDurationAdvice(e2e))
	} else {
		msg += ": a request takes longer than that; set step.duration (bench: --step.duration) to at least twice a request's length"
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
func (sw *sweepRun) sizeRequest(ctx context.Context, s Scenario, prep *Prepared) {
	res := sw.r.Run(ctx, sw.t, prep)
	if ctx.Err() != nil || !res.Timed() || res.LastToken.IsZero() {
		return
	}
	e2e := res.E2E().Seconds()
	if at, ok := res.E2EAtRequested(); ok {
		e2e = at.Seconds() // a short answer: as long as the steps' requests will be
	}
	sw.noteRequest(s.Name, e2e)
	if window := sw.opts.StepDuration.Seconds(); 2*e2e > window {
		msg := fmt.Sprintf("one request takes %.1fs here (a first request, alone on the server), so the %s window of a closed-loop step holds fewer than two, and fewer still at higher N: a step may end with no request finished and measure nothing; %s",
			e2e, sw.opts.StepDuration, stepDurationAdvice(e2e))
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

// queueWait is the mean queue time of the requests the engine finished
// between two scrapes.
func queueWait(before, after EngineCounters) *float64 {
	if !before.HasQueueTime || !after.HasQueueTime {
		return nil
	}
	dc := after.QueueTimeCount - before.QueueTimeCount
	ds := after.QueueTimeSum - before.QueueTimeSum
	if dc <= 0 || ds < 0 { // nothing finished, or the engine restarted
		return nil
	}
	v := ds / dc
	return &v
}

// summarizeStep turns raw results into a StepResult.
func summarizeStep(info StepInfo, out loadOutcome) StepResult {
	st := StepResult{
		Scenario: info.Scenario, Mode: info.Mode, Concurrency: info.Concurrency,
		Started: out.Started, Finished: out.Finished,
		Requests: len(out.Sampled), MaxInFlight: out.MaxInFlight, OutputTokens: out.Tokens,
	}
	var prompt float64
	var first, last time.Time
	for i := range out.Sampled {
		r := &out.Sampled[i]
		if !r.Start.IsZero() {
			if first.IsZero() || r.Start.Before(first) {
				first = r.Start
			}
			if r.Start.After(last) {
				last = r.Start
			}
		}
		if r.Kind != KindSuccess && !r.Timed() {
			if st.Errors == nil {
				st.Errors = map[Reason]int{}
			}
			reason := r.Reason
			if reason == ReasonNone {
				reason = Reason(r.Kind)
			}
			st.Errors[reason]++
			continue
		}
		st.Succeeded++
		if r.Short() {
			st.ShortOutputs++
		}
		prompt += float64(r.PromptTokens)
		if r.CacheHit() {
			st.CacheHits++
		}
	}
	if st.Requests > 0 {
		st.SuccessRatio = float64(st.Succeeded) / float64(st.Requests)
	}
	if st.Succeeded > 0 {
		st.promptTokens = prompt / float64(st.Succeeded)
	}
	st.StartSpreadSeconds = last.Sub(first).Seconds()
	sv := sampleValues(out.Sampled)
	st.Decode, st.ITL, st.TTFT, st.E2E, st.Prefill = Summarize(sv.Decode), Summarize(sv.ITL), Summarize(sv.TTFT), Summarize(sv.E2E), Summarize(sv.Prefill)
	st.Samples = sv
	if len(out.RoundEnds) > 1 {
		st.Samples.RoundMedians = roundMedians(out.Sampled, out.RoundEnds)
	}
	if w := out.SpanEnd.Sub(out.SpanStart).Seconds(); w > 0 {
		st.WindowSeconds = w
		st.SystemThroughput = out.Tokens / w
		st.TokensPerHour = st.SystemThroughput * 3600
	}
	return st
}

// sampleValues returns the per-request values of the successful (or timed)
// results among rs, in order: TTFT and E2E of each, ITL and decode speed of
// those that decoded enough tokens, prefill speed of those not served from
// the prefix cache.
func sampleValues(rs []Result) Samples {
	var s Samples
	for i := range rs {
		r := &rs[i]
		if r.Kind != KindSuccess && !r.Timed() {
			continue
		}
		s.TTFT = append(s.TTFT, r.TTFT().Seconds())
		if d, ok := r.E2EAtRequested(); ok {
			s.E2E = append(s.E2E, d.Seconds())
		}
		if r.DecodeMeasured() {
			s.Decode = append(s.Decode, r.DecodeSpeed())
			s.ITL = append(s.ITL, r.ITL().Seconds())
		}
		if !r.CacheHit() {
			if v := r.PrefillSpeed(); v > 0 {
				s.Prefill = append(s.Prefill, v)
			}
		}
	}
	return s
}

// roundMedians returns, for the results of a burst step of several rounds
// (ends: the end index of each round in rs), each round's median of every
// metric; a round that measured none of a metric adds no value for it.
func roundMedians(rs []Result, ends []int) *Samples {
	rm := &Samples{}
	add := func(dst *[]float64, v []float64) {
		if len(v) > 0 {
			*dst = append(*dst, Summarize(v).P50)
		}
	}
	start := 0
	for _, end := range ends {
		r := sampleValues(rs[start:end])
		start = end
		add(&rm.TTFT, r.TTFT)
		add(&rm.ITL, r.ITL)
		add(&rm.Decode, r.Decode)
		add(&rm.E2E, r.E2E)
		add(&rm.Prefill, r.Prefill)
	}
	return rm
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
func earlyStop(s StepResult, th Thresholds, mode Mode, opts SweepOptions) string {
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
func finishScenario(sr *ScenarioResult, s Scenario, opts SweepOptions) {
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
	}
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
