package config

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/engine"
)

// EngineConfig configures the scraping of each target's own /metrics (vLLM,
// SGLang) and the live signals built on it (docs/live-signals.md).
type EngineConfig struct {
	// Enabled turns engine scraping on (default true). A target whose
	// endpoint is missing is logged once and shown by slaprobe_engine_up 0.
	Enabled bool `yaml:"enabled"`
	// ScrapeInterval is the background scrape period (default 15s). Each
	// probe also scrapes just before it is sent.
	ScrapeInterval model.Duration `yaml:"scrape_interval"`
	// ScrapeTimeout bounds a background scrape (default 5s).
	ScrapeTimeout model.Duration `yaml:"scrape_timeout"`
	// ProbeScrapeTimeout bounds the scrape made before a probe (default 1s):
	// the probe waits for it.
	ProbeScrapeTimeout model.Duration `yaml:"probe_scrape_timeout"`
	// History is how long snapshots are kept for rates (default 15m); it must
	// cover power.window and live.efficiency_window.
	History model.Duration `yaml:"history"`
	// Live tunes the live signals.
	Live EngineLiveConfig `yaml:"live"`
}

// EngineLiveConfig tunes the live signals: TTFT by queue depth, live max
// safe queue depth and live scaling efficiency.
type EngineLiveConfig struct {
	// QueueDepthSamples is the number of probes per target, model and
	// scenario the max-safe-queue-depth fit uses (default 200).
	QueueDepthSamples int `yaml:"queue_depth_samples"`
	// QueueDepthMaxAge drops older probes from that fit (default 6h).
	QueueDepthMaxAge model.Duration `yaml:"queue_depth_max_age"`
	// EfficiencyWindow is the span the engine's token rate and mean running
	// requests are computed over (default 1m).
	EfficiencyWindow model.Duration `yaml:"efficiency_window"`
	// EfficiencySmoothing is the EWMA time constant of live scaling
	// efficiency (default 5m).
	EfficiencySmoothing model.Duration `yaml:"efficiency_smoothing"`
	// BaselineMaxAge forgets a single-stream decode speed measured longer
	// ago than this (default 24h).
	BaselineMaxAge model.Duration `yaml:"baseline_max_age"`
}

// DefaultEngineConfig returns the defaults.
func DefaultEngineConfig() EngineConfig {
	return EngineConfig{
		Enabled:            true,
		ScrapeInterval:     model.Duration(engine.DefaultInterval),
		ScrapeTimeout:      model.Duration(engine.DefaultTimeout),
		ProbeScrapeTimeout: model.Duration(engine.DefaultProbeTimeout),
		History:            model.Duration(engine.DefaultHistory),
		Live:               DefaultEngineLiveConfig(),
	}
}

// DefaultEngineLiveConfig returns the defaults of engine.live.
func DefaultEngineLiveConfig() EngineLiveConfig {
	return EngineLiveConfig{
		QueueDepthSamples:   200,
		QueueDepthMaxAge:    model.Duration(6 * time.Hour),
		EfficiencyWindow:    model.Duration(time.Minute),
		EfficiencySmoothing: model.Duration(5 * time.Minute),
		BaselineMaxAge:      model.Duration(24 * time.Hour),
	}
}

type (
	plainEngine     EngineConfig
	plainEngineLive EngineLiveConfig
)

// UnmarshalYAML sets the defaults of `engine` and validates it.
func (e *EngineConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*e = DefaultEngineConfig()
	if err := unmarshal((*plainEngine)(e)); err != nil {
		return err
	}
	return e.Validate()
}

// UnmarshalYAML sets the defaults of `engine.live`.
func (l *EngineLiveConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*l = DefaultEngineLiveConfig()
	return unmarshal((*plainEngineLive)(l))
}

// Validate reports the first problem, naming the field, its value and what
// was expected.
func (e EngineConfig) Validate() error {
	l := e.Live
	switch {
	case time.Duration(e.ScrapeInterval) < time.Second:
		return fmt.Errorf("engine.scrape_interval=%s; expected at least 1s", e.ScrapeInterval)
	case e.ScrapeTimeout <= 0 || e.ScrapeTimeout > e.ScrapeInterval:
		return fmt.Errorf("engine.scrape_timeout=%s; expected a positive duration no longer than engine.scrape_interval (%s)", e.ScrapeTimeout, e.ScrapeInterval)
	case e.ProbeScrapeTimeout <= 0 || time.Duration(e.ProbeScrapeTimeout) > 10*time.Second:
		return fmt.Errorf("engine.probe_scrape_timeout=%s; expected a positive duration up to 10s: every probe waits for this scrape", e.ProbeScrapeTimeout)
	case e.History < e.ScrapeInterval*2:
		return fmt.Errorf("engine.history=%s; expected at least twice engine.scrape_interval (%s), so rates have two snapshots", e.History, e.ScrapeInterval)
	case l.QueueDepthSamples < 2 || l.QueueDepthSamples > MaxQueueDepthSamples:
		return fmt.Errorf("engine.live.queue_depth_samples=%d; expected from 2 to %d", l.QueueDepthSamples, MaxQueueDepthSamples)
	case l.QueueDepthMaxAge <= 0:
		return fmt.Errorf("engine.live.queue_depth_max_age=%s; expected a positive duration, e.g. 6h", l.QueueDepthMaxAge)
	case l.EfficiencyWindow < e.ScrapeInterval:
		return fmt.Errorf("engine.live.efficiency_window=%s; expected at least engine.scrape_interval (%s)", l.EfficiencyWindow, e.ScrapeInterval)
	case l.EfficiencyWindow > e.History:
		return fmt.Errorf("engine.live.efficiency_window=%s; expected at most engine.history (%s)", l.EfficiencyWindow, e.History)
	case l.EfficiencySmoothing <= 0:
		return fmt.Errorf("engine.live.efficiency_smoothing=%s; expected a positive duration, e.g. 5m", l.EfficiencySmoothing)
	case l.BaselineMaxAge <= 0:
		return fmt.Errorf("engine.live.baseline_max_age=%s; expected a positive duration, e.g. 24h", l.BaselineMaxAge)
	}
	return nil
}

// CheckLiveSignals checks what spans the two sections: rates over the power
// window need engine snapshots that old.
func CheckLiveSignals(e EngineConfig, p PowerConfig) error {
	if p.NVML && e.Enabled && p.Window > e.History {
		return fmt.Errorf("power.window=%s; expected at most engine.history (%s): energy per token needs the engine's token counter over the whole window", p.Window, e.History)
	}
	return nil
}

// WatcherOptions converts the config for engine.NewPool.
func (e EngineConfig) WatcherOptions() engine.Options {
	return engine.Options{
		Interval:     time.Duration(e.ScrapeInterval),
		Timeout:      time.Duration(e.ScrapeTimeout),
		ProbeTimeout: time.Duration(e.ProbeScrapeTimeout),
		History:      time.Duration(e.History),
	}
}
