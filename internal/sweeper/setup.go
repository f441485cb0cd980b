package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/version"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// Env is what a sweep takes from its surroundings rather than from the
// config: the NVML reader (shared with the live power metrics in the
// daemon) and the logger.
type Env struct {
	// GPUs reads power; nil, or a reader that is not up, means no power
	// readings.
	GPUs *gpu.Reader
	// PowerSampleInterval is how often power is sampled during a step
	// (gpu.DefaultSampleInterval when 0).
	PowerSampleInterval time.Duration
	Logger              *slog.Logger
}

// Plan is one target's sweep, set up by NewPlan the same way for
// `slaprobe bench` and the daemon's sweep job: the model, the scenarios,
// the engine's own counters and the target's GPUs.
type Plan struct {
	Target prober.Target
	// Model is the model ChooseModel picked (or the configured one).
	Model     prober.ModelInfo
	Scenarios []prober.Scenario
	// Options are ready for sweep.Run except BeforeStep and Progress,
	// which belong to the caller.
	Options sweep.Options
	// Engine reads the target's own /metrics; it gates the daemon's steps
	// and gives the queue wait. EngineFlavor is "" when the first read
	// failed.
	Engine       func(ctx context.Context) (engine.Snapshot, error)
	EngineFlavor string
	// PricePerKWh is the configured electricity price (power.price_per_kwh).
	PricePerKWh float64
	gpu         *report.GPU
}

// NewPlan sets up the sweep of target t with sweep settings sc (the file's
// `sweep` section, possibly adjusted by bench's flags) over the named
// scenarios, looked up in cfg's catalog. An unknown scenario name, or a
// target with no model configured and none listed, is an error.
func NewPlan(ctx context.Context, cfg *config.Config, sc config.SweepConfig, t prober.Target, names []string, env Env) (*Plan, error) {
	logger := env.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	scenarios, err := LookupScenarios(cfg.AllScenarios(), names)
	if err != nil {
		return nil, err
	}
	m, listed, err := prober.DetectModel(ctx, t)
	switch {
	case err != nil && t.Model == "":
		return nil, fmt.Errorf("target %s: detect model: %w", t.Name, err)
	case err != nil:
		logger.Warn("cannot list models; sweeping the configured model", "target", t.Name, "model", t.Model, "err", err)
	case !listed:
		logger.Warn("the configured model is not listed by /v1/models; sweeping it anyway", "target", t.Name, "model", t.Model)
	}

	p := &Plan{Target: t, Model: m, Scenarios: scenarios, Options: sc.Options(scenarios), PricePerKWh: cfg.Power.PricePerKWh}
	url := engine.MetricsURL(t)
	p.Engine = func(ctx context.Context) (engine.Snapshot, error) { return engine.Scrape(ctx, t.Client, url) }
	if snap, err := p.Engine(ctx); err != nil {
		logger.Info("engine metrics unavailable: no queue wait in the results", "target", t.Name, "url", url, "err", err)
	} else {
		p.EngineFlavor = snap.Flavor
	}
	p.Options.Scrape = func(ctx context.Context) (sweep.EngineCounters, error) {
		s, err := p.Engine(ctx)
		return sweep.EngineCounters{QueueTimeSum: s.QueueTimeSum, QueueTimeCount: s.QueueTimeCount, HasQueueTime: s.HasQueueTime,
			Running: s.Running, Waiting: s.Waiting, HasQueue: s.HasQueue}, err
	}
	if r := env.GPUs; r != nil && r.Up() {
		devices := cfg.Power.DevicesFor(t.Name)
		p.Options.Power = gpuPower{gpu.NewPowerSampler(r, devices, env.PowerSampleInterval)}
		if devs := r.Select(devices); len(devs) > 0 {
			p.gpu = &report.GPU{Name: devs[0].Name, Count: len(devs)}
		}
	}
	p.Options.Logger = logger.With("target", t.Name)
	return p, nil
}

// Meta describes the plan for the report: model, engine, GPUs and the
// host slaprobe runs on.
func (p *Plan) Meta() report.Meta {
	m := report.Meta{
		ToolVersion: version.Version, TargetURL: report.RedactURL(p.Target.BaseURL), API: string(p.Target.API),
		Model: p.Model.ID, MaxModelLen: p.Model.MaxModelLen, Engine: p.EngineFlavor, GPU: p.gpu,
		Host: report.Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()},
	}
	m.Host.Hostname, _ = os.Hostname()
	return m
}

// Run sweeps the plan and maps the result onto the report schema. The
// result is returned too (complete or not), for callers that feed it on.
func (p *Plan) Run(ctx context.Context, r sweep.Runner, meta report.Meta) (*report.Report, *sweep.Result, error) {
	res, err := sweep.Run(ctx, r, p.Target, p.Model.ID, p.Options)
	if res == nil {
		return nil, nil, err
	}
	return report.FromSweep(res, meta, p.PricePerKWh, p.Options.Power != nil), res, err
}

// LookupScenarios returns the named scenarios of catalog, in the order
// named; an unknown name is an error listing the known ones.
func LookupScenarios(catalog []prober.Scenario, names []string) ([]prober.Scenario, error) {
	if len(names) == 0 {
		return nil, errors.New("no scenario to sweep")
	}
	out := make([]prober.Scenario, 0, len(names))
	for _, n := range names {
		i := -1
		for j, s := range catalog {
			if s.Name == n {
				i = j
				break
			}
		}
		if i < 0 {
			known := make([]string, len(catalog))
			for j, s := range catalog {
				known[j] = s.Name
			}
			sort.Strings(known)
			return nil, fmt.Errorf("unknown scenario %q; expected one of: %s", n, strings.Join(known, ", "))
		}
		out = append(out, catalog[i])
	}
	return out, nil
}

// PlansFor sets up the sweep of the named targets of cfg (every target when
// names is empty) with settings sc over sc's scenarios. Any of them that
// cannot be set up fails the whole sweep, so that an on-demand request gets
// the error; a target not named is not set up, so that one down does not
// stop the sweep of another.
func PlansFor(ctx context.Context, cfg *config.Config, sc config.SweepConfig, names []string, env Env) ([]*Plan, error) {
	targets, err := cfg.Targets()
	if err != nil {
		return nil, err
	}
	out := make([]*Plan, 0, len(targets))
	for _, t := range targets {
		if len(names) > 0 && !slices.Contains(names, t.Name) {
			continue
		}
		p, err := NewPlan(ctx, cfg, sc, t, sc.ScenarioNames(), env)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
