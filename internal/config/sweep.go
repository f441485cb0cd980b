package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// SweepConfig configures concurrency and burst sweeps: the ladders and
// capacity rules used by `slaprobe bench`, and the daemon's opt-in sweep
// job (schedule, safety, state file). docs/sweeps.md explains each field.
type SweepConfig struct {
	// Enabled turns the daemon's sweep job on. `slaprobe bench` ignores it.
	Enabled bool `yaml:"enabled"`
	// Targets are the target names the daemon sweeps; empty means all.
	Targets []string `yaml:"targets,omitempty"`
	// Scenarios are swept in this order. Empty means the four report
	// scenarios (chatbot, rag, agentic, tool_calling).
	Scenarios []string `yaml:"scenarios,omitempty"`

	ClosedLoop SweepClosedLoopConfig `yaml:"closed_loop"`
	Burst      SweepBurstConfig      `yaml:"burst"`

	// MaxConcurrency is a ceiling on N for both ladders: larger rungs are
	// dropped. Keep it low on a production server.
	MaxConcurrency int `yaml:"max_concurrency"`
	// Cooldown is the idle time between steps when the engine has no
	// /metrics to drain on; it cannot know whether the engine is empty.
	Cooldown model.Duration `yaml:"cooldown"`
	// Drain makes every step start on an empty engine (see sweep.DrainOptions).
	Drain SweepDrainConfig `yaml:"drain"`

	EarlyStop SweepEarlyStopConfig `yaml:"early_stop"`
	Capacity  SweepCapacityConfig  `yaml:"capacity"`
	// CapacityOn are the rules each scenario's closed-loop capacity is
	// also asked on, each on its own (sweep.ParseCapacityRule): "goodput
	// >= 95%" (the default: the share of a step's requests that succeeded
	// and met every threshold of the scenario at once) or a statistic of a
	// metric, "p99 ttft <= 2s", "p90 decode >= 20".
	CapacityOn []string            `yaml:"capacity_on"`
	Schedule   SweepScheduleConfig `yaml:"schedule"`
	Pause      SweepPauseConfig    `yaml:"pause"`

	// StateFile keeps the latest results across restarts (daemon only).
	StateFile string `yaml:"state_file"`
}

// SweepDrainConfig: before each step and burst round, wait until the
// engine's /metrics shows nothing running and nothing waiting.
type SweepDrainConfig struct {
	// Timeout bounds the wait; a step that starts after it ran out is
	// marked busy in the results and left out of capacity.
	Timeout model.Duration `yaml:"timeout"`
	// MaxRunning running requests still count as drained (default 0). On
	// a server with steady background traffic, set it to that level, or
	// expect steps marked busy.
	MaxRunning float64 `yaml:"max_running"`
}

// SweepClosedLoopConfig is the closed-loop ladder: exactly N in flight.
type SweepClosedLoopConfig struct {
	// Concurrency is the ladder; an empty list skips the closed loop.
	Concurrency []int `yaml:"concurrency"`
	// Warmup is excluded from every step's measurement (ramp-up).
	Warmup model.Duration `yaml:"warmup"`
	// Duration is each step's steady measurement window.
	Duration model.Duration `yaml:"duration"`
}

// SweepBurstConfig is the burst ladder: N requests sent at once.
type SweepBurstConfig struct {
	// Concurrency is the ladder; an empty list skips bursts.
	Concurrency []int `yaml:"concurrency"`
	// Repeat is how many bursts of N each step sends, one after another.
	Repeat int `yaml:"repeat"`
}

// SweepEarlyStopConfig stops a scenario's ladder once more load cannot tell
// anything new.
type SweepEarlyStopConfig struct {
	// Factor: stop once a step misses every threshold of the scenario by
	// this factor (TTFT > 3× limit, decode < limit/3, ...). 0 disables.
	Factor float64 `yaml:"factor"`
	// MinSuccessRatio: stop once a step's success ratio falls below it.
	// 0 disables.
	MinSuccessRatio float64 `yaml:"min_success_ratio"`
}

// SweepCapacityConfig sets how capacity is judged.
type SweepCapacityConfig struct {
	// MaxSafeTTFT is the TTFT limit of "max safe queue depth".
	MaxSafeTTFT model.Duration `yaml:"max_safe_ttft"`
	// Statistic of each step's distribution judged against limits: mean
	// (as the reports), p50, p90, p95 or p99. For decode speed, p90 means
	// the speed 90 % of users get (the 10th percentile).
	Statistic string `yaml:"statistic"`
	// MinSuccessRatio a step needs to count as within capacity.
	MinSuccessRatio float64 `yaml:"min_success_ratio"`
	// ConversationHitShare is the share of a conversation step's
	// follow-ups that must hit the prefix cache for the step to count
	// within the capacity in conversations.
	ConversationHitShare float64 `yaml:"conversation_hit_share"`
}

// SweepScheduleConfig says when the daemon sweeps on its own. With neither
// field set, sweeps run only on demand (POST /-/sweep).
type SweepScheduleConfig struct {
	// Interval between the starts of scheduled sweeps; 0 means none.
	Interval model.Duration `yaml:"interval"`
	// Window restricts scheduled sweeps to a daily time range, "HH:MM-HH:MM"
	// in local time (may wrap midnight: "22:00-04:00"). Without Interval, one
	// sweep runs per window. A scheduled sweep still running when the window
	// closes is stopped, keeping the steps it finished.
	Window string `yaml:"window,omitempty"`
}

// SweepPauseConfig keeps sweeps from hurting production traffic: before
// every step the engine's metrics are read, and the sweep waits while the
// engine is busy.
type SweepPauseConfig struct {
	// MaxWaiting: pause while vllm:num_requests_waiting is above this.
	MaxWaiting float64 `yaml:"max_waiting"`
	// MaxKVCacheUsage: pause while KV-cache usage (0..1) is above this.
	MaxKVCacheUsage float64 `yaml:"max_kv_cache_usage"`
	// CheckInterval is how often a paused sweep looks again.
	CheckInterval model.Duration `yaml:"check_interval"`
	// MaxPause gives up the sweep after pausing this long in one go.
	MaxPause model.Duration `yaml:"max_pause"`
	// RequireEngineMetrics pauses when the engine's /metrics cannot be
	// read, since the sweep cannot then tell whether the server is busy.
	RequireEngineMetrics bool `yaml:"require_engine_metrics"`
}

// DefaultSweepConfig returns the defaults: the reports' ladders and
// capacity rules from sweep.DefaultOptions (the one source of sweep
// defaults, for bench and the daemon alike), no schedule, and a job that is
// off until enabled.
func DefaultSweepConfig() SweepConfig {
	d := sweep.DefaultOptions(nil)
	return SweepConfig{
		ClosedLoop: SweepClosedLoopConfig{
			Concurrency: d.ClosedLoop,
			Warmup:      model.Duration(d.Warmup),
			Duration:    model.Duration(d.StepDuration),
		},
		Burst: SweepBurstConfig{
			Concurrency: d.Burst,
			Repeat:      d.BurstRepeat,
		},
		MaxConcurrency: d.MaxConcurrency,
		Cooldown:       model.Duration(d.Cooldown),
		Drain:          SweepDrainConfig{Timeout: model.Duration(d.Drain.Timeout), MaxRunning: d.Drain.MaxRunning},
		EarlyStop:      SweepEarlyStopConfig{Factor: d.EarlyStopFactor, MinSuccessRatio: d.EarlyStopMinSuccess},
		Capacity: SweepCapacityConfig{
			MaxSafeTTFT:          model.Duration(d.Capacity.MaxSafeTTFT),
			Statistic:            string(d.Capacity.Stat),
			MinSuccessRatio:      d.Capacity.MinSuccess,
			ConversationHitShare: d.Capacity.HitShare,
		},
		CapacityOn: []string{sweep.DefaultCapacityOn},
		Pause: SweepPauseConfig{
			MaxWaiting:           0,
			MaxKVCacheUsage:      0.8,
			CheckInterval:        model.Duration(10 * time.Second),
			MaxPause:             model.Duration(30 * time.Minute),
			RequireEngineMetrics: true,
		},
		StateFile: "slaprobe-sweep-state.json",
	}
}

type plainSweep SweepConfig

// UnmarshalYAML sets the defaults of `sweep` and validates it.
func (s *SweepConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*s = DefaultSweepConfig()
	if err := unmarshal((*plainSweep)(s)); err != nil {
		return err
	}
	return s.Validate()
}

// Validate reports the first problem, naming the field.
func (s *SweepConfig) Validate() error {
	for _, l := range []struct {
		field string
		ns    []int
	}{{"sweep.closed_loop.concurrency", s.ClosedLoop.Concurrency}, {"sweep.burst.concurrency", s.Burst.Concurrency}} {
		for _, n := range l.ns {
			if n < 1 || n > MaxConcurrency {
				return fmt.Errorf("%s: %d; expected concurrency values from 1 to %d", l.field, n, MaxConcurrency)
			}
		}
	}
	switch {
	case len(s.ClosedLoop.Concurrency) > 0 && s.ClosedLoop.Duration <= 0:
		return fmt.Errorf("sweep.closed_loop.duration=%s; expected a positive duration", s.ClosedLoop.Duration)
	case s.ClosedLoop.Warmup < 0:
		return fmt.Errorf("sweep.closed_loop.warmup=%s; expected a duration >= 0", s.ClosedLoop.Warmup)
	case s.Burst.Repeat < 1 || s.Burst.Repeat > MaxConcurrency:
		return fmt.Errorf("sweep.burst.repeat=%d; expected from 1 to %d", s.Burst.Repeat, MaxConcurrency)
	case s.MaxConcurrency < 0 || s.MaxConcurrency > MaxConcurrency:
		return fmt.Errorf("sweep.max_concurrency=%d; expected from 0 (no ceiling) to %d", s.MaxConcurrency, MaxConcurrency)
	case s.Cooldown < 0:
		return fmt.Errorf("sweep.cooldown=%s; expected a duration >= 0", s.Cooldown)
	case s.Drain.Timeout <= 0:
		return fmt.Errorf("sweep.drain.timeout=%s; expected a positive duration, e.g. 2m", s.Drain.Timeout)
	case s.Drain.MaxRunning < 0:
		return fmt.Errorf("sweep.drain.max_running=%g; expected >= 0", s.Drain.MaxRunning)
	case s.EarlyStop.Factor != 0 && s.EarlyStop.Factor < 1:
		return fmt.Errorf("sweep.early_stop.factor=%g; expected 0 (off) or a factor >= 1, e.g. 3", s.EarlyStop.Factor)
	case s.EarlyStop.MinSuccessRatio < 0 || s.EarlyStop.MinSuccessRatio > 1:
		return fmt.Errorf("sweep.early_stop.min_success_ratio=%g; expected a ratio in [0, 1]", s.EarlyStop.MinSuccessRatio)
	case s.Capacity.MaxSafeTTFT <= 0:
		return fmt.Errorf("sweep.capacity.max_safe_ttft=%s; expected a positive duration, e.g. 3s", s.Capacity.MaxSafeTTFT)
	case s.Capacity.MinSuccessRatio < 0 || s.Capacity.MinSuccessRatio > 1:
		return fmt.Errorf("sweep.capacity.min_success_ratio=%g; expected a ratio in [0, 1]", s.Capacity.MinSuccessRatio)
	case !(s.Capacity.ConversationHitShare > 0 && s.Capacity.ConversationHitShare <= 1):
		return fmt.Errorf("sweep.capacity.conversation_hit_share=%g; expected a share in (0, 1], e.g. 0.9", s.Capacity.ConversationHitShare)
	case s.Schedule.Interval < 0:
		return fmt.Errorf("sweep.schedule.interval=%s; expected a duration >= 0 (0: none)", s.Schedule.Interval)
	case s.Schedule.Interval > 0 && s.Schedule.Interval < model.Duration(time.Minute):
		return fmt.Errorf("sweep.schedule.interval=%s; expected at least 1m: a sweep loads the server heavily", s.Schedule.Interval)
	case s.Pause.MaxWaiting < 0:
		return fmt.Errorf("sweep.pause.max_waiting=%g; expected >= 0", s.Pause.MaxWaiting)
	case s.Pause.MaxKVCacheUsage <= 0 || s.Pause.MaxKVCacheUsage > 1:
		return fmt.Errorf("sweep.pause.max_kv_cache_usage=%g; expected a ratio in (0, 1], e.g. 0.8", s.Pause.MaxKVCacheUsage)
	case s.Pause.CheckInterval <= 0:
		return fmt.Errorf("sweep.pause.check_interval=%s; expected a positive duration", s.Pause.CheckInterval)
	case s.Pause.MaxPause < 0:
		return fmt.Errorf("sweep.pause.max_pause=%s; expected a duration >= 0 (0: wait forever)", s.Pause.MaxPause)
	case s.Enabled && s.StateFile == "":
		return fmt.Errorf("sweep.state_file is empty; expected a path where the daemon keeps sweep results")
	}
	if _, err := sweep.ParseStat(s.Capacity.Statistic); err != nil {
		return fmt.Errorf("sweep.capacity.statistic: %w", err)
	}
	if _, err := sweep.ParseCapacityRules(s.CapacityOn); err != nil {
		return fmt.Errorf("sweep.capacity_on%w", err)
	}
	if s.Schedule.Window != "" {
		if _, err := ParseWindow(s.Schedule.Window); err != nil {
			return fmt.Errorf("sweep.schedule.window: %w", err)
		}
	}
	return nil
}

// Options converts the config into sweep.Options for scenarios.
// Hooks (scrape, power, progress) are left for the caller to set.
func (s SweepConfig) Options(scenarios []prober.Scenario) sweep.Options {
	st, err := sweep.ParseStat(s.Capacity.Statistic)
	if err != nil {
		st = sweep.StatMean
	}
	on, err := sweep.ParseCapacityRules(s.CapacityOn)
	if err != nil { // Validate rejects these
		on, _ = sweep.ParseCapacityRules(nil)
	}
	return sweep.Options{
		Scenarios:           scenarios,
		ClosedLoop:          append([]int(nil), s.ClosedLoop.Concurrency...),
		Burst:               append([]int(nil), s.Burst.Concurrency...),
		Warmup:              time.Duration(s.ClosedLoop.Warmup),
		StepDuration:        time.Duration(s.ClosedLoop.Duration),
		BurstRepeat:         s.Burst.Repeat,
		Cooldown:            time.Duration(s.Cooldown),
		Drain:               sweep.DrainOptions{Timeout: time.Duration(s.Drain.Timeout), MaxRunning: s.Drain.MaxRunning},
		MaxConcurrency:      s.MaxConcurrency,
		EarlyStopFactor:     s.EarlyStop.Factor,
		EarlyStopMinSuccess: s.EarlyStop.MinSuccessRatio,
		Capacity: sweep.CapacityOptions{
			MaxSafeTTFT: time.Duration(s.Capacity.MaxSafeTTFT),
			Stat:        st,
			MinSuccess:  s.Capacity.MinSuccessRatio,
			On:          on,
			HitShare:    s.Capacity.ConversationHitShare,
		},
	}
}

// ScenarioNames returns the scenarios to sweep: the configured list, or the
// report family's four.
func (s SweepConfig) ScenarioNames() []string {
	if len(s.Scenarios) > 0 {
		return append([]string(nil), s.Scenarios...)
	}
	return append([]string(nil), prober.DefaultScenarios...)
}

// Window is a daily time range in minutes after midnight; End < Start
// wraps midnight.
type Window struct {
	Start, End int
}

// ParseWindow reads "HH:MM-HH:MM".
func ParseWindow(s string) (Window, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return Window{}, fmt.Errorf("%q: expected HH:MM-HH:MM, e.g. 02:00-05:00", s)
	}
	start, err := parseClock(a)
	if err != nil {
		return Window{}, fmt.Errorf("%q: %w", s, err)
	}
	end, err := parseClock(b)
	if err != nil {
		return Window{}, fmt.Errorf("%q: %w", s, err)
	}
	if start == end {
		return Window{}, fmt.Errorf("%q: start equals end; expected a non-empty range", s)
	}
	return Window{Start: start, End: end}, nil
}

func parseClock(s string) (int, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, fmt.Errorf("time %q: expected HH:MM", s)
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || hh > 24 || mm < 0 || mm > 59 || (hh == 24 && mm != 0) {
		return 0, fmt.Errorf("time %q: expected HH:MM between 00:00 and 24:00", s)
	}
	return hh*60 + mm, nil
}

// Contains reports whether t (in t's location) falls inside the window.
func (w Window) Contains(t time.Time) bool {
	m := t.Hour()*60 + t.Minute()
	if w.Start < w.End {
		return m >= w.Start && m < w.End
	}
	return m >= w.Start || m < w.End
}

// OpenedAt returns the start of the window occurrence that contains t (t
// must be inside the window), so that one sweep per occurrence can be
// enforced.
func (w Window) OpenedAt(t time.Time) time.Time {
	open := time.Date(t.Year(), t.Month(), t.Day(), w.Start/60, w.Start%60, 0, 0, t.Location())
	if open.After(t) { // wrapped: opened yesterday
		open = time.Date(t.Year(), t.Month(), t.Day()-1, w.Start/60, w.Start%60, 0, 0, t.Location())
	}
	return open
}

// NextOpen returns the first opening of the window at or after t.
func (w Window) NextOpen(t time.Time) time.Time {
	open := time.Date(t.Year(), t.Month(), t.Day(), w.Start/60, w.Start%60, 0, 0, t.Location())
	if open.Before(t) {
		open = time.Date(t.Year(), t.Month(), t.Day()+1, w.Start/60, w.Start%60, 0, 0, t.Location())
	}
	return open
}

// ClosesAt returns when the window occurrence containing t closes.
func (w Window) ClosesAt(t time.Time) time.Time {
	open := w.OpenedAt(t)
	day := open.Day()
	if w.End <= w.Start {
		day++
	}
	return time.Date(open.Year(), open.Month(), day, w.End/60, w.End%60, 0, 0, t.Location())
}
