package prober

// This file holds the scheduler that probes every target's scenarios on their
// intervals, and the hooks that see each probe.

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// ProbeFunc runs one probe; (*Prober).ProbePaced is one. An empty model
// means "auto-detect". think waits out a conversation's think time between
// its turns: the scheduler passes its pacer (schedPacer), which frees the
// target's in-flight slot meanwhile; nil waits on the prober's own timer.
type ProbeFunc func(ctx context.Context, t Target, model string, s Scenario, think ThinkFunc) Result

// ProbeHook sees every scheduled probe (engine metrics, live signals).
type ProbeHook interface {
	// BeforeProbe runs just before the probe is sent; keep it fast.
	BeforeProbe(ctx context.Context, t Target, s Scenario)
	// AfterProbe runs after every probe that BeforeProbe saw, also when the
	// scheduler stopped it (then res.Err is a context error).
	AfterProbe(res *Result)
}

// ProbeObserver receives the scheduler's results and state: the probe
// metrics (collector.ProbeMetrics) implement it.
type ProbeObserver interface {
	Observe(res *Result)
	// SetScenarioEnabled says whether scenario is probed on target, on api.
	SetScenarioEnabled(target, model, scenario, api string, enabled bool)
	SetPlannedTokensPerHour(target string, tokens float64)
	// ForgetTarget drops every series of the target (its model changed).
	ForgetTarget(target string)
	// ForgetModel drops the series of one target and model (those recorded
	// with model="" before the model was known).
	ForgetModel(target, model string)
}

// ScheduledTarget is one target and the scenarios to probe on it.
type ScheduledTarget struct {
	Target    Target
	Scenarios []Scenario
}

// SchedulerOptions are the scheduler's settings and dependencies. Only
// Probe is required.
type SchedulerOptions struct {
	Probe ProbeFunc
	// ListModels reads /v1/models; default ListModels.
	ListModels func(ctx context.Context, t Target) ([]ModelInfo, error)
	// Invalidate drops cached calibrations when a target's model changes;
	// pass (*Prober).Invalidate. Optional.
	Invalidate func(t Target, model string)
	Observer   ProbeObserver // optional
	Hooks      []ProbeHook
	// Holds, when set, pauses a target's probes while it is held (a sweep
	// runs on it): a probe due then waits and is sent when the hold ends.
	Holds  *Holds
	Logger *slog.Logger

	// Jitter spreads each interval uniformly over interval·(1±Jitter).
	Jitter float64
	// MaxInFlightPerTarget caps concurrent probes per target; default 1.
	MaxInFlightPerTarget int
	// ModelRefreshInterval is how often /v1/models is read again; default 5m.
	ModelRefreshInterval time.Duration
	// FirstProbeMaxDelay bounds the random delay of each loop's first
	// probe (further bounded by the interval); default 10s.
	FirstProbeMaxDelay time.Duration
	// KnownModels are the models detected by a previous scheduler, by
	// target name, so a restart (config reload) does not take the first
	// detection for a model change.
	KnownModels map[string]string

	// Sleep waits for d or until ctx is done, reporting whether the full
	// time passed; tests replace it. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) bool
	// Rand returns a uniform number in [0, 1); default math/rand/v2.
	Rand func() float64

	// BackoffMax caps the wait between probes of a target that is down
	// (connection refused, DNS, TLS, other transport failures); default
	// 10m, and never less than the probing scenario's interval.
	BackoffMax time.Duration
}

// Scheduler runs one loop per target and scenario.
type Scheduler struct {
	opts    SchedulerOptions
	targets []*schedTarget

	nextMu sync.Mutex
	next   map[[2]string]time.Time // target, scenario -> when its loop wakes next
}

// Retry pace of /v1/models: while the model is unknown, and at most this
// often when probes ask for a refresh (404s).
const (
	schedUnknownModelRetry = 15 * time.Second
	schedMinModelRefresh   = 5 * time.Second
)

// NewScheduler returns a scheduler for targets; Run starts it.
func NewScheduler(targets []ScheduledTarget, opts SchedulerOptions) *Scheduler {
	if opts.ListModels == nil {
		opts.ListModels = ListModels
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxInFlightPerTarget < 1 {
		opts.MaxInFlightPerTarget = 1
	}
	if opts.ModelRefreshInterval <= 0 {
		opts.ModelRefreshInterval = 5 * time.Minute
	}
	if opts.FirstProbeMaxDelay <= 0 {
		opts.FirstProbeMaxDelay = 10 * time.Second
	}
	if opts.Sleep == nil {
		opts.Sleep = schedSleep
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = 10 * time.Minute
	}
	s := &Scheduler{opts: opts, next: map[[2]string]time.Time{}}
	for _, st := range targets {
		ts := &schedTarget{
			t:         st.Target,
			scenarios: append([]Scenario(nil), st.Scenarios...),
			sem:       make(chan struct{}, opts.MaxInFlightPerTarget),
			refresh:   make(chan struct{}, 1),
			ready:     make(chan struct{}),
			log:       opts.Logger.With("target", st.Target.Name),
			model:     st.Target.Model,
		}
		if ts.model == "" {
			ts.model = opts.KnownModels[st.Target.Name]
		}
		ts.lastModel = ts.model
		for _, sc := range ts.scenarios {
			if sc.Interval > 0 && (ts.minInterval == 0 || sc.Interval < ts.minInterval) {
				ts.minInterval = sc.Interval
			}
		}
		s.targets = append(s.targets, ts)
	}
	return s
}

// PlannedTokensPerHour is the prompt plus output tokens that probing
// scenarios at their intervals spends per hour. A scenario's loop waits its
// interval after each probe ends, so a conversation with think time comes
// round every Cycle (interval plus its mean think time); the turns' own
// latencies are left out, so the figure is an upper bound.
func PlannedTokensPerHour(scenarios []Scenario) float64 {
	var sum float64
	for _, s := range scenarios {
		if s.Interval > 0 {
			sum += float64(s.TokensPerProbe()) * float64(time.Hour) / float64(s.Cycle())
		}
	}
	return sum
}

// Models returns the model each target was last known to serve.
func (s *Scheduler) Models() map[string]string {
	out := make(map[string]string, len(s.targets))
	for _, ts := range s.targets {
		if m, _, _ := ts.snapshot(); m != "" {
			out[ts.t.Name] = m
		}
	}
	return out
}

// NextProbe reports when the loop of scenario on target wakes to send its
// next probe (a held target or a busy in-flight slot can delay the send);
// false when there is no such loop or it has not started. While a probe
// runs the time is that probe's, in the past.
func (s *Scheduler) NextProbe(target, scenario string) (time.Time, bool) {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	t, ok := s.next[[2]string{target, scenario}]
	return t, ok
}

// ScenarioDisabled reports whether scenario is disabled on target because
// it does not fit the model's max_model_len, and that length.
func (s *Scheduler) ScenarioDisabled(target, scenario string) (disabled bool, maxModelLen int) {
	for _, ts := range s.targets {
		if ts.t.Name == target {
			_, maxLen, d := ts.snapshot()
			return d[scenario], maxLen
		}
	}
	return false, 0
}

// sleepUntilNext records when the loop wakes, then sleeps d.
func (s *Scheduler) sleepUntilNext(ctx context.Context, ts *schedTarget, sc Scenario, d time.Duration) bool {
	s.nextMu.Lock()
	s.next[[2]string{ts.t.Name, sc.Name}] = time.Now().Add(d)
	s.nextMu.Unlock()
	return s.opts.Sleep(ctx, d)
}

// Run probes until ctx is done, then cancels the probes in flight and
// returns once every loop has stopped.
func (s *Scheduler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, ts := range s.targets {
		wg.Go(func() { s.refreshLoop(ctx, ts) })
		for _, sc := range ts.scenarios {
			wg.Go(func() { s.probeLoop(ctx, ts, sc) })
		}
	}
	wg.Wait()
}

// schedTarget is what the loops of one target share.
type schedTarget struct {
	t         Target
	scenarios []Scenario
	sem       chan struct{} // in-flight slots
	refresh   chan struct{} // asks refreshLoop for a /v1/models read now
	ready     chan struct{} // closed after the first /v1/models attempt
	log       *slog.Logger

	mu          sync.Mutex
	model       string // "" until detected (auto-detect)
	maxModelLen int    // 0 when unknown
	applied     bool   // the state above has been published to the observer
	lastModel   string // the last model published, to tell a change
	disabled    map[string]bool

	gate        gate          // closed while the target is down or asked to wait (Retry-After)
	minInterval time.Duration // the shortest interval of its scenarios: the backoff's base
}

func (ts *schedTarget) snapshot() (model string, maxModelLen int, disabled map[string]bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.model, ts.maxModelLen, ts.disabled
}

func (ts *schedTarget) autoDetect() bool { return ts.t.Model == "" }

// requestRefresh asks for a /v1/models read without waiting for it.
func (ts *schedTarget) requestRefresh() {
	select {
	case ts.refresh <- struct{}{}:
	default:
	}
}

// refreshLoop reads /v1/models at start, every ModelRefreshInterval (every
// 15 s while the model is unknown) and when a probe asks for it.
func (s *Scheduler) refreshLoop(ctx context.Context, ts *schedTarget) {
	s.refreshModel(ctx, ts)
	close(ts.ready)
	last := time.Now()
	for {
		wait := s.opts.ModelRefreshInterval
		if m, _, _ := ts.snapshot(); m == "" {
			wait = min(wait, schedUnknownModelRetry)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-ts.refresh:
			timer.Stop()
			// Repeated 404s must not turn into a /v1/models storm.
			if d := schedMinModelRefresh - time.Since(last); d > 0 && !s.opts.Sleep(ctx, d) {
				return
			}
		}
		s.refreshModel(ctx, ts)
		last = time.Now()
	}
}

// refreshModel reads /v1/models and publishes what changed: on a new model
// it forgets the old model's series and calibrations; scenarios that do not
// fit max_model_len are disabled.
func (s *Scheduler) refreshModel(ctx context.Context, ts *schedTarget) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	models, err := s.opts.ListModels(rctx, ts.t)
	cancel()
	if ctx.Err() != nil {
		return
	}

	ts.mu.Lock()
	defer ts.mu.Unlock()
	model, maxLen := ts.model, ts.maxModelLen
	if err != nil {
		ts.log.Warn("cannot list models", "url", ts.t.BaseURL+"/v1/models", "reason", ClassifyError(err), "err", err)
		if !ts.applied {
			s.publish(ts, model, 0)
		}
		return
	}
	if ts.autoDetect() {
		m, _, err := ChooseModel(models, "")
		if err != nil {
			ts.log.Warn("/v1/models lists no model", "url", ts.t.BaseURL+"/v1/models")
			if !ts.applied {
				s.publish(ts, model, 0)
			}
			return
		}
		if len(models) > 1 && m.ID != model {
			ids := make([]string, len(models))
			for i, x := range models {
				ids[i] = x.ID
			}
			ts.log.Info("the server lists several models; probing one (set the target's model to choose)", "model", m.ID, "models", ids)
		}
		model, maxLen = m.ID, m.MaxModelLen
	} else {
		m, found, _ := ChooseModel(models, model)
		maxLen = m.MaxModelLen
		if !found && !ts.applied {
			ts.log.Warn("the configured model is not listed by /v1/models; probing it anyway", "model", model)
		}
	}
	if !ts.applied || model != ts.model || maxLen != ts.maxModelLen {
		s.publish(ts, model, maxLen)
	}
}

// publish makes model and maxLen current and tells the observer. ts.mu is held.
func (s *Scheduler) publish(ts *schedTarget, model string, maxLen int) {
	obs := s.opts.Observer
	name := ts.t.Name
	switch {
	case ts.lastModel != "" && model != ts.lastModel:
		ts.log.Info("model changed; dropping the old model's series and calibrations", "old", ts.lastModel, "new", model)
		if obs != nil {
			obs.ForgetTarget(name)
		}
		if s.opts.Invalidate != nil {
			s.opts.Invalidate(ts.t, "")
		}
	case ts.lastModel == "" && model != "":
		if obs != nil {
			obs.ForgetModel(name, "") // errors recorded before the model was known
		}
	}
	if model == "" {
		// Nothing to label scenario_enabled with yet; plan for everything.
		ts.model, ts.maxModelLen, ts.applied = model, maxLen, true
		if obs != nil {
			obs.SetPlannedTokensPerHour(name, PlannedTokensPerHour(ts.scenarios))
		}
		return
	}
	disabled := make(map[string]bool)
	var enabled []Scenario
	for _, sc := range ts.scenarios {
		if !Fits(sc, maxLen) {
			disabled[sc.Name] = true
			if !ts.disabled[sc.Name] || model != ts.lastModel {
				ts.log.Warn("scenario disabled: input_tokens + output_tokens exceed the model's max_model_len",
					"scenario", sc.Name, "model", model, "input_tokens", sc.InputTokens, "output_tokens", sc.OutputTokens, "max_model_len", maxLen)
			}
		} else {
			enabled = append(enabled, sc)
			if ts.disabled[sc.Name] && model == ts.lastModel {
				ts.log.Info("scenario enabled again: it fits the model's max_model_len", "scenario", sc.Name, "model", model, "max_model_len", maxLen)
			}
		}
		if obs != nil {
			obs.SetScenarioEnabled(name, model, sc.Name, string(sc.APIOn(ts.t)), !disabled[sc.Name])
		}
	}
	if obs != nil {
		obs.SetPlannedTokensPerHour(name, PlannedTokensPerHour(enabled))
	}
	ts.model, ts.maxModelLen, ts.disabled, ts.applied, ts.lastModel = model, maxLen, disabled, true, model
}

// probeLoop probes one scenario on one target at its interval.
func (s *Scheduler) probeLoop(ctx context.Context, ts *schedTarget, sc Scenario) {
	select {
	case <-ctx.Done():
		return
	case <-ts.ready:
	}
	// Spread the first probes so that a (re)start does not send them all
	// at once, yet shows metrics quickly.
	if !s.sleepUntilNext(ctx, ts, sc, s.spread(sc)) {
		return
	}
	for {
		if !s.awaitGate(ctx, ts, sc) {
			return
		}
		probed, act := s.probeOnce(ctx, ts, sc)
		if probed == probeGated {
			continue // the gate closed while this loop waited for a slot
		}
		delay := s.nextDelay(sc.Interval)
		if probed == probeSkipped {
			ts.gate.release(sc.Name) // a gate's owner that cannot probe must not block the others
		} else {
			switch act.kind {
			case gateBackoff:
				// From the target's shortest interval: whichever scenario
				// found it down, recovery is seen as soon as its most
				// frequent scenario would have seen it.
				delay = s.backoff(ts.minInterval, act.fails)
			case gateRetryAfter:
				// No probe of this target until the server's Retry-After
				// (at most one interval) has passed; then the others may go.
				if !s.opts.Sleep(ctx, act.wait) {
					return
				}
				ts.gate.release(sc.Name)
				delay = max(delay-act.wait, 0)
			}
		}
		if !s.sleepUntilNext(ctx, ts, sc, delay) {
			return
		}
	}
}

// spread is a random delay within min(interval, FirstProbeMaxDelay): it
// keeps the loops of a target from probing at once after a (re)start or a
// recovery.
func (s *Scheduler) spread(sc Scenario) time.Duration {
	return time.Duration(s.opts.Rand() * float64(min(sc.Interval, s.opts.FirstProbeMaxDelay)))
}

// backoff is the wait after the fails-th failed probe of a target that is
// down: interval·2^fails, capped at max(BackoffMax, interval), with equal
// jitter (a uniform draw in the upper half), so it is never shorter than
// the interval and probers of many replicas do not line up. interval is
// the target's shortest scenario interval.
func (s *Scheduler) backoff(interval time.Duration, fails int) time.Duration {
	limit := max(s.opts.BackoffMax, interval)
	d := interval
	for i := 0; i < fails && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + time.Duration(s.opts.Rand()*float64(d/2))
}

// awaitGate returns once sc may probe ts: at once when the target's gate
// is open or sc owns it, otherwise when the gate opens, after a random
// spread so that the scenarios of a recovered target do not all probe at
// the same moment. It reports false when ctx ended.
func (s *Scheduler) awaitGate(ctx context.Context, ts *schedTarget, sc Scenario) bool {
	for {
		wait := ts.gate.wait(sc.Name)
		if wait == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-wait:
		}
		if !s.opts.Sleep(ctx, s.spread(sc)) {
			return false
		}
	}
}

// nextDelay is interval·(1 + Jitter·u), u uniform in [-1, 1).
func (s *Scheduler) nextDelay(interval time.Duration) time.Duration {
	f := 1 + s.opts.Jitter*(2*s.opts.Rand()-1)
	return max(time.Duration(float64(interval)*f), time.Millisecond)
}

// probeOutcome is what probeOnce did.
type probeOutcome int

const (
	probeSkipped probeOutcome = iota // disabled scenario, or stopped
	probeGated                       // the target's gate closed meanwhile
	probeDone                        // probed and recorded
)

// probeOnce probes sc on ts unless the scenario is disabled, the target's
// gate closed while it waited for a slot, or ctx ends first. The gate
// learns the result before the slot is freed, so a probe waiting for the
// slot sees a Retry-After or a down target before it is sent.
func (s *Scheduler) probeOnce(ctx context.Context, ts *schedTarget, sc Scenario) (probeOutcome, gateStep) {
	model, _, disabled := ts.snapshot()
	if disabled[sc.Name] {
		return probeSkipped, gateStep{}
	}
	if s.opts.Holds != nil {
		// Counted until its result is recorded: a hold that waits for it
		// sees the probe's metrics complete.
		leave, ok := s.opts.Holds.Enter(ctx, ts.t.Name)
		if !ok {
			return probeSkipped, gateStep{}
		}
		defer leave()
	}
	// Wait for a free slot: probes of one target never queue behind each
	// other on the server.
	select {
	case <-ctx.Done():
		return probeSkipped, gateStep{}
	case ts.sem <- struct{}{}:
	}
	if ts.gate.wait(sc.Name) != nil {
		<-ts.sem
		return probeGated, gateStep{}
	}
	// The prober enforces the scenario's timeout on every turn; this guard
	// only keeps a hung probe from holding the slot forever. It runs while
	// the probe holds the slot: a conversation's think time and its wait
	// for a slot afterwards do not count.
	pctx, cancel := context.WithCancelCause(ctx)
	pacer := &schedPacer{s: s, ts: ts, held: true, bound: 2*sc.Timeout*time.Duration(sc.Turns()) + time.Minute}
	pacer.guard = time.AfterFunc(pacer.bound, func() { cancel(context.DeadlineExceeded) })
	for _, h := range s.opts.Hooks {
		h.BeforeProbe(pctx, ts.t, sc)
	}
	res := s.opts.Probe(pctx, ts.t, model, sc, pacer.think)
	pacer.guard.Stop()
	cancel(nil)
	var step gateStep
	if ctx.Err() == nil {
		step = ts.gate.note(&res, sc, ts.log)
	}
	if pacer.held {
		<-ts.sem
	}
	for _, h := range s.opts.Hooks {
		h.AfterProbe(&res)
	}
	if ctx.Err() != nil {
		return probeSkipped, step // stopped: a cancelled probe measured nothing
	}
	if res.Target == "" {
		res.Target = ts.t.Name
	}
	if res.Scenario == "" {
		res.Scenario = sc.Name
	}
	if res.Model == "" {
		res.Model = model
	}
	if res.API == "" {
		res.API = sc.APIOn(ts.t)
	}
	if s.opts.Observer != nil {
		s.opts.Observer.Observe(&res)
	}
	s.logResult(ts, &res)

	if ts.autoDetect() {
		var he *HTTPError
		if model == "" || (res.Model != model) || (errors.As(res.Err, &he) && he.StatusCode == 404) {
			ts.requestRefresh() // the model may have changed under us
		}
	}
	return probeDone, step
}

// schedPacer paces the turns of one conversation the scheduler runs (its
// think method is the ThinkFunc probeOnce passes to the probe): during a think time the conversation gives its in-flight slot
// back, so the target's other probes run while a tool would; it takes a
// slot again before its next turn, so it never sends two turns at once and
// never exceeds the target's limit. Its methods run on the probe's
// goroutine, between turns.
type schedPacer struct {
	s     *Scheduler
	ts    *schedTarget
	held  bool          // the conversation holds one of ts.sem's slots
	guard *time.Timer   // cancels a probe that holds the slot past bound
	bound time.Duration // the hang guard's time
}

// think gives the slot back, sleeps d (the scheduler's Sleep), then waits
// for a slot. It returns the context's cause when ctx ends first; the
// conversation then ends without its slot, and probeOnce frees none.
func (p *schedPacer) think(ctx context.Context, d time.Duration) error {
	p.guard.Stop()
	<-p.ts.sem
	p.held = false
	if !p.s.opts.Sleep(ctx, d) {
		return thinkCause(ctx)
	}
	select {
	case <-ctx.Done():
		return thinkCause(ctx)
	case p.ts.sem <- struct{}{}:
	}
	p.held = true
	p.guard.Reset(p.bound)
	return nil
}

// thinkCause is why a think time ended early: ctx's cause.
func thinkCause(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return context.Canceled
}

func (s *Scheduler) logResult(ts *schedTarget, r *Result) {
	log := ts.log.With("model", r.Model, "scenario", r.Scenario)
	switch r.Kind {
	case KindSuccess:
		if r.FollowUp() {
			share, _ := r.CachedShare()
			log.Debug("warm follow-up succeeded", "conversation", r.ConversationID, "turn", r.Turn, "think_time", r.ThinkTime,
				"ttft", r.TTFT(), "prime_ttft", r.PrimeTTFT,
				"cached_tokens", r.CachedTokens, "prompt_tokens", r.PromptTokens, "cached_share", share, "id", r.ResponseID)
		} else if r.CacheHit() {
			log.Warn("the prompt hit the prefix cache; TTFT, E2E and prefill not recorded",
				"cached_tokens", r.CachedTokens, "prompt_tokens", r.PromptTokens, "id", r.ResponseID)
		} else {
			log.Debug("probe succeeded", "ttft", r.TTFT(), "itl", r.ITL(), "e2e", r.E2E(),
				"prompt_tokens", r.PromptTokens, "output_tokens", r.OutputTokens, "id", r.ResponseID)
		}
	case KindShortOutput:
		// Debug, not Warn: a server without ignore_eos ends most answers
		// early, and its TTFT and E2E are still recorded.
		log.Debug("the server ended the answer before the tokens asked for", "output_tokens", r.OutputTokens,
			"requested_tokens", r.RequestedTokens, "finish_reason", r.FinishReason, "decode_measured", r.DecodeMeasured(),
			"ttft", r.TTFT(), "id", r.ResponseID)
	default:
		log.Warn("probe failed", "reason", r.Reason, "err", r.Err, "id", r.ResponseID)
	}
	if r.PromptTokens > 0 && !r.PromptLengthOK && r.Reason != ReasonPromptTruncated { // that error says it all
		log.Warn("prompt length outside tolerance", "prompt_tokens", r.PromptTokens)
	}
}

// schedSleep waits for d or until ctx is done.
func schedSleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
