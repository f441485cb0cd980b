// Package sweeper runs concurrency and burst sweeps inside the daemon: on a
// schedule (an interval, a daily time window, or both) or on demand with
// POST /-/sweep. Production comes first: one sweep at a time, a ceiling on
// N, and a pause before every step while the engine has requests waiting
// or its KV cache is nearly full. Results are kept in a state file written
// atomically and loaded at start, and exported by collector.SweepCollector.
// The sweep itself (its steps, loads and numbers) is package sweep's Run;
// this package decides when it runs and keeps what it found.
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// Pause reasons, the `reason` label of slaprobe_sweep_paused.
const (
	PauseWaiting     = "requests_waiting"           // the engine has requests in its queue
	PauseKVCache     = "kv_cache_usage"             // KV-cache usage above the bound
	PauseUnavailable = "engine_metrics_unavailable" // the engine's /metrics could not be read
)

// PauseReasons lists every pause reason, so gauges can be initialised.
var PauseReasons = []string{PauseWaiting, PauseKVCache, PauseUnavailable}

// Triggers, recorded in Attempt.Trigger.
const (
	TriggerSchedule = "schedule"
	TriggerRequest  = "request"
)

var (
	// ErrBusy means a sweep is already running.
	ErrBusy = errors.New("a sweep is already running")
	// ErrDisabled refuses every sweep while sweep.enabled is false: sweeps
	// load production on purpose, so they are opt-in, on demand too.
	ErrDisabled = errors.New("sweeps are disabled: set sweep.enabled: true in the config file and reload")
	// ErrPausedTooLong ends a sweep that stayed paused longer than
	// pause.max_pause.
	ErrPausedTooLong = errors.New("paused too long: the target stayed busy")
	// errWindowClosed ends a scheduled sweep at the end of its window.
	errWindowClosed = errors.New("the schedule window closed")
)

// Options configure a Sweeper.
type Options struct {
	Config config.SweepConfig
	Runner sweep.Runner
	// Plans sets up the sweep of the named targets (the request's, else
	// sc.Targets; none: every target) with settings sc when a sweep starts,
	// so a config reload takes effect at the next sweep; the daemon passes
	// PlansFor bound to its current config.
	Plans func(ctx context.Context, sc config.SweepConfig, names []string) ([]*Plan, error)
	// Hold, optional, pauses the scheduled probes of a target for the whole
	// of its sweep: it stops new ones and waits for those in flight
	// (pass (*prober.Holds).Hold). Release is called once the target's
	// sweep ends, also when err is not nil.
	Hold func(ctx context.Context, target string) (release func(), err error)
	// OnResult, optional, sees every sweep of a target as it ends, complete
	// or not (e.g. to feed closed-loop N=1 decode speeds to the live
	// efficiency signal). It must not modify the result.
	OnResult func(*sweep.Result)
	Logger   *slog.Logger
	// Now and Tick are for tests: the clock, and how often the schedule is
	// checked (default 15 s).
	Now  func() time.Time
	Tick time.Duration
}

// Sweeper is the daemon's sweep job.
type Sweeper struct {
	opts   Options
	logger *slog.Logger
	now    func() time.Time

	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	cfg     config.SweepConfig
	window  *config.Window
	st      *state
	running bool
	current string            // target being swept
	holding string            // target whose scheduled probes are held
	step    sweep.StepInfo    // step in progress
	paused  map[string]string // target -> pause reason
	stopRun context.CancelFunc
	// missed is the earliest time the schedule was due that no sweep has started for yet: a start
	// that failed, a window that closed while an earlier sweep still ran. Zero when none.
	missed time.Time
}

// New loads the state file and returns a Sweeper. A state file that cannot
// be read is logged and replaced by an empty state on the next save.
func New(opts Options) (*Sweeper, error) {
	if opts.Runner == nil || opts.Plans == nil {
		return nil, errors.New("sweeper: Runner and Plans are required")
	}
	cfg := opts.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Tick <= 0 {
		opts.Tick = 15 * time.Second
	}
	s := &Sweeper{opts: opts, logger: opts.Logger, now: opts.Now, paused: map[string]string{}}
	s.base, s.cancel = context.WithCancel(context.Background())
	if err := s.setConfig(cfg); err != nil {
		return nil, err
	}
	st, err := loadState(cfg.StateFile)
	if err != nil {
		s.logger.Warn("sweep state not loaded; starting empty", "err", err)
	}
	s.st = st
	return s, nil
}

// SetConfig applies a reloaded sweep config; a sweep in progress keeps the
// settings it started with.
func (s *Sweeper) SetConfig(cfg config.SweepConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	return s.setConfig(cfg)
}

func (s *Sweeper) setConfig(cfg config.SweepConfig) error {
	var w *config.Window
	if cfg.Schedule.Window != "" {
		win, err := config.ParseWindow(cfg.Schedule.Window)
		if err != nil {
			return fmt.Errorf("sweep.schedule.window: %w", err)
		}
		w = &win
	}
	s.mu.Lock()
	s.cfg, s.window = cfg, w
	s.mu.Unlock()
	return nil
}

// Run checks the schedule until ctx ends, then stops any sweep in progress
// and waits for it (its partial results are saved).
func (s *Sweeper) Run(ctx context.Context) {
	tick := time.NewTicker(s.opts.Tick)
	defer tick.Stop()
	for {
		s.tick(s.now())
		select {
		case <-ctx.Done():
			s.Close()
			return
		case <-tick.C:
		}
	}
}

// tick is one look at the schedule: it notes a due time no sweep has started for, and starts the
// scheduled sweep when one is due.
func (s *Sweeper) tick(now time.Time) {
	s.mu.Lock()
	switch next := s.nextDue(now); {
	case next.IsZero():
		s.missed = time.Time{} // sweeps off, or on demand only
	case !next.After(now) && s.missed.IsZero():
		s.missed = next
	}
	s.mu.Unlock()
	if due, deadline := s.due(now); due {
		if err := s.start(TriggerSchedule, nil, deadline); err != nil && !errors.Is(err, ErrBusy) {
			s.logger.Warn("scheduled sweep not started", "err", err)
		}
	}
}

// nextScheduled is what slaprobe_sweep_next_scheduled_timestamp_seconds exports: the earliest due
// time no sweep has started for, when there is one (it stays in the past until a sweep starts, so an
// overdue schedule is seen even after its window closed), else when the schedule starts the next
// sweep. s.mu must be held.
func (s *Sweeper) nextScheduled(now time.Time) time.Time {
	next := s.nextDue(now)
	if !next.IsZero() && !s.missed.IsZero() && s.missed.Before(next) {
		return s.missed
	}
	return next
}

// Close stops a sweep in progress and waits until its results are saved.
func (s *Sweeper) Close() {
	s.cancel()
	s.wg.Wait()
}

// Wait blocks until no sweep is running.
func (s *Sweeper) Wait() { s.wg.Wait() }

// Trigger starts a sweep of the named targets (all when none) now,
// whatever the schedule. It returns ErrDisabled unless sweep.enabled, and
// ErrBusy when a sweep is running.
func (s *Sweeper) Trigger(targets ...string) error {
	return s.start(TriggerRequest, targets, time.Time{})
}

// due reports whether a scheduled sweep should start at now, and the
// deadline it must stop by (the window's end; zero for none).
func (s *Sweeper) due(now time.Time) (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cfg.Enabled || s.running {
		return false, time.Time{}
	}
	interval := time.Duration(s.cfg.Schedule.Interval)
	last := s.st.LastScheduled
	if s.window == nil {
		return interval > 0 && (last.IsZero() || !now.Before(last.Add(interval))), time.Time{}
	}
	if !s.window.Contains(now) {
		return false, time.Time{}
	}
	deadline := s.window.ClosesAt(now)
	if interval > 0 {
		return last.IsZero() || !now.Before(last.Add(interval)), deadline
	}
	// One sweep per window occurrence.
	return last.Before(s.window.OpenedAt(now)), deadline
}

// nextDue is the first time the schedule's rule (the one due applies) says a sweep is due: in the
// future, or in the past when one is due now (the time it became due: last+interval, or the window's
// opening; now when no scheduled sweep ever ran). Zero when sweeps are off or run only on demand.
// It does not know whether an earlier due time was missed; nextScheduled does. s.mu must be held.
func (s *Sweeper) nextDue(now time.Time) time.Time {
	if !s.cfg.Enabled {
		return time.Time{}
	}
	interval := time.Duration(s.cfg.Schedule.Interval)
	last := s.st.LastScheduled
	if s.window == nil {
		switch {
		case interval <= 0:
			return time.Time{}
		case last.IsZero():
			return now
		}
		return last.Add(interval)
	}
	w := *s.window
	if interval > 0 {
		at := now
		if !last.IsZero() {
			at = last.Add(interval)
		}
		switch {
		case at.Before(now) && w.Contains(now):
			// Due since the later of the two: the interval ran out, the window opened.
			if opened := w.OpenedAt(now); opened.After(at) {
				return opened
			}
			return at
		case at.Before(now):
			return w.NextOpen(now)
		case w.Contains(at):
			return at
		}
		return w.NextOpen(at)
	}
	// One sweep per window occurrence.
	if w.Contains(now) && last.Before(w.OpenedAt(now)) {
		return w.OpenedAt(now)
	}
	return w.NextOpen(now)
}

func (s *Sweeper) start(trigger string, names []string, deadline time.Time) error {
	s.mu.Lock()
	if !s.cfg.Enabled {
		s.mu.Unlock()
		return ErrDisabled
	}
	if s.running {
		s.mu.Unlock()
		return ErrBusy
	}
	if err := s.base.Err(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("sweeper stopped: %w", err)
	}
	cfg := s.cfg
	ctx, cancel := context.WithCancelCause(s.base)
	if !deadline.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, deadline, errWindowClosed)
		prev := cancel
		cancel = func(cause error) { stop(); prev(cause) }
	}
	s.running = true
	s.stopRun = func() { cancel(context.Canceled) }
	if trigger == TriggerSchedule {
		s.st.LastScheduled = s.now()
	}
	s.wg.Add(1)
	s.mu.Unlock()

	// Resolve targets before answering, so a request naming an unknown
	// target gets an error rather than a silent no-op.
	want := names
	if len(want) == 0 {
		want = cfg.Targets
	}
	targets, err := s.opts.Plans(ctx, cfg, want)
	if err == nil {
		targets, err = pick(targets, names, cfg.Targets)
	}
	if err != nil {
		s.finish()
		cancel(nil)
		return err
	}
	s.mu.Lock()
	s.missed = time.Time{} // a sweep starts: the capacity is being refreshed
	s.mu.Unlock()
	go func() {
		defer cancel(nil)
		defer s.finish()
		s.sweepAll(ctx, cfg, targets, trigger)
	}()
	return nil
}

func (s *Sweeper) finish() {
	s.mu.Lock()
	s.running, s.current, s.step, s.stopRun = false, "", sweep.StepInfo{}, nil
	clear(s.paused)
	s.mu.Unlock()
	s.wg.Done()
}

// pick keeps the targets named in the request (or else in the config's
// sweep.targets), in the order given.
func pick(all []*Plan, requested, configured []string) ([]*Plan, error) {
	names := requested
	if len(names) == 0 {
		names = configured
	}
	if len(names) == 0 {
		return all, nil
	}
	out := make([]*Plan, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(all, func(t *Plan) bool { return t.Target.Name == n })
		if i < 0 {
			known := make([]string, 0, len(all))
			for _, t := range all {
				known = append(known, t.Target.Name)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("unknown target %q; expected one of: %v", n, known)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// sweepAll sweeps targets one after another and saves after each.
func (s *Sweeper) sweepAll(ctx context.Context, cfg config.SweepConfig, targets []*Plan, trigger string) {
	for _, t := range targets {
		if ctx.Err() != nil {
			return
		}
		s.sweepOne(ctx, cfg, t, trigger)
	}
}

func (s *Sweeper) sweepOne(ctx context.Context, cfg config.SweepConfig, t *Plan, trigger string) {
	name := t.Target.Name
	s.mu.Lock()
	s.current = name
	s.mu.Unlock()

	t.Options.BeforeStep = func(ctx context.Context, info sweep.StepInfo) error {
		s.mu.Lock()
		s.step = info
		s.mu.Unlock()
		return s.gate(ctx, cfg.Pause, t)
	}

	// The hold ends before the result is published, so that whoever sees
	// the new result also sees the target's probes running again.
	resume := func() {}
	if s.opts.Hold != nil {
		s.logger.Info("sweep: holding the target's scheduled probes until its sweep ends; waiting for those in flight", "target", name)
		release, err := s.opts.Hold(ctx, name)
		s.mu.Lock()
		s.holding = name
		s.mu.Unlock()
		var once sync.Once
		resume = func() {
			once.Do(func() {
				release()
				s.mu.Lock()
				s.holding = ""
				s.mu.Unlock()
				s.logger.Info("sweep: scheduled probes resumed", "target", name)
			})
		}
		defer resume()
		if err != nil {
			s.logger.Warn("sweep: stopped while waiting for scheduled probes in flight", "target", name, "err", err)
		}
	}

	start := s.now()
	s.logger.Info("sweep started", "target", name, "model", t.Model.ID, "trigger", trigger, "scenarios", len(t.Scenarios))
	rep, res, err := t.Run(ctx, s.opts.Runner, t.Meta())
	resume()
	if cause := context.Cause(ctx); err != nil && cause != nil {
		err = cause
	}
	att := Attempt{Started: start, Finished: s.now(), Trigger: trigger, Complete: err == nil}
	if err != nil {
		att.Error = err.Error()
		s.logger.Warn("sweep stopped early; keeping the steps it finished", "target", name, "err", err)
	} else {
		s.logger.Info("sweep finished", "target", name, "duration", att.Finished.Sub(start).Round(time.Second))
	}

	s.mu.Lock()
	ts := s.st.Targets[name]
	if ts == nil {
		ts = &targetState{}
		s.st.Targets[name] = ts
	}
	ts.LastAttempt = att
	// A complete sweep always replaces the result shown; a partial one only
	// replaces another partial one (or nothing), so an interrupted sweep
	// never hides the last complete picture.
	switch {
	case err == nil:
		ts.setResult(rep)
	case hasSteps(res) && (ts.Result == nil || ts.Result.Meta.Interrupted):
		ts.setResult(rep)
	}
	saveErr := s.st.save(cfg.StateFile)
	s.mu.Unlock()
	if saveErr != nil {
		s.logger.Error("sweep state not saved", "err", saveErr)
	}
	if s.opts.OnResult != nil && hasSteps(res) {
		s.opts.OnResult(res)
	}
}

func hasSteps(r *sweep.Result) bool {
	if r == nil {
		return false
	}
	for _, sc := range r.Scenarios {
		if len(sc.ClosedLoop)+len(sc.Burst) > 0 {
			return true
		}
	}
	return false
}

// gate waits while the engine is busy. It returns nil when the step may
// run, ErrPausedTooLong when pause.max_pause passed, or ctx's error.
func (s *Sweeper) gate(ctx context.Context, p config.SweepPauseConfig, t *Plan) error {
	name := t.Target.Name
	var since time.Time
	for {
		reason, detail := s.busy(ctx, p, t)
		s.mu.Lock()
		prev := s.paused[name]
		if reason == "" {
			delete(s.paused, name)
		} else {
			s.paused[name] = reason
		}
		s.mu.Unlock()
		if reason == "" {
			if prev != "" {
				s.logger.Info("sweep resumed", "target", name, "paused_for", s.now().Sub(since).Round(time.Second))
			}
			return nil
		}
		if since.IsZero() {
			since = s.now()
		}
		if prev != reason {
			s.logger.Info("sweep paused", "target", name, "reason", reason, "detail", detail)
		}
		if p.MaxPause > 0 && s.now().Sub(since) >= time.Duration(p.MaxPause) {
			return fmt.Errorf("%w (%s for %s)", ErrPausedTooLong, reason, time.Duration(p.MaxPause))
		}
		timer := time.NewTimer(time.Duration(p.CheckInterval))
		select {
		case <-ctx.Done():
			timer.Stop()
			return context.Cause(ctx)
		case <-timer.C:
		}
	}
}

// busy returns why the target is too busy for a sweep step, or "".
func (s *Sweeper) busy(ctx context.Context, p config.SweepPauseConfig, t *Plan) (reason, detail string) {
	if t.Engine == nil {
		if p.RequireEngineMetrics {
			return PauseUnavailable, "the target has no engine metrics URL"
		}
		return "", ""
	}
	snap, err := t.Engine(ctx)
	if err != nil {
		if p.RequireEngineMetrics {
			return PauseUnavailable, err.Error()
		}
		return "", ""
	}
	if snap.HasQueue && snap.Waiting > p.MaxWaiting {
		return PauseWaiting, fmt.Sprintf("%g requests waiting (bound %g)", snap.Waiting, p.MaxWaiting)
	}
	if snap.HasKVCache && snap.KVCacheUsage > p.MaxKVCacheUsage {
		return PauseKVCache, fmt.Sprintf("KV cache %.0f%% used (bound %.0f%%)", snap.KVCacheUsage*100, p.MaxKVCacheUsage*100)
	}
	return "", ""
}

// Stop cancels the sweep in progress, if any; its finished steps are kept.
func (s *Sweeper) Stop() {
	s.mu.Lock()
	stop := s.stopRun
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Snapshot is the sweeper's state for metrics and the status endpoint.
type Snapshot struct {
	Enabled bool   `json:"enabled"`
	Running bool   `json:"running"`
	Current string `json:"current_target,omitempty"`
	// Holding is the target whose scheduled probes are held for its sweep.
	Holding string            `json:"probes_held_target,omitempty"`
	Step    *sweep.StepInfo   `json:"current_step,omitempty"`
	Paused  map[string]string `json:"paused,omitempty"` // target -> reason
	Targets []TargetSnapshot  `json:"targets"`
	// NextScheduled is when the schedule starts its next sweep (in the past when one is overdue);
	// zero when sweeps are off or run only on demand.
	NextScheduled time.Time `json:"next_scheduled,omitzero"`
}

// TargetSnapshot is one target's latest results.
type TargetSnapshot struct {
	Target string `json:"target"`
	// Result is the latest sweep in the report schema, as bench writes it;
	// with Result.Comparison against the previous complete sweep when the
	// state has one.
	Result      *report.Report `json:"-"`
	LastAttempt Attempt        `json:"last_attempt"`
}

// Snapshot returns a copy of the state. Results are shared, read-only.
func (s *Sweeper) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{Enabled: s.cfg.Enabled, Running: s.running, Current: s.current, Holding: s.holding,
		NextScheduled: s.nextScheduled(s.now())}
	if s.running && s.step.Scenario != "" {
		st := s.step
		snap.Step = &st
	}
	if len(s.paused) > 0 {
		snap.Paused = make(map[string]string, len(s.paused))
		for k, v := range s.paused {
			snap.Paused[k] = v
		}
	}
	names := make([]string, 0, len(s.st.Targets))
	for n := range s.st.Targets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ts := s.st.Targets[n]
		snap.Targets = append(snap.Targets, TargetSnapshot{Target: n, Result: ts.shown(), LastAttempt: ts.LastAttempt})
	}
	return snap
}
