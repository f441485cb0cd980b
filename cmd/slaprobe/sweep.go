package main

import (
	"context"
	"fmt"
	"time"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/daemon"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/sweeper"
	"github.com/slaprobe/slaprobe/prober"
)

// The opt-in sweep job (docs/sweeps.md): scheduled or on demand with
// POST /-/sweep, which sits behind --web.config.file's authentication like
// every other endpoint. Its gauges are exported even when sweeps are
// disabled, so dashboards can show "disabled" rather than "no data".
func init() {
	daemonExtensions = append(daemonExtensions, addSweeper)
}

func addSweeper(d *daemon.Daemon) error {
	logger := d.Logger()
	opts := sweeper.Options{
		Config:  d.Config().Sweep,
		Runner:  d.Prober(),
		Targets: func(ctx context.Context) ([]sweeper.Target, error) { return sweepTargets(ctx, d.Config()) },
		Logger:  logger,
		// A regular probe sent during a sweep would measure the sweep's
		// load and page on it; the target's probes wait for its sweep.
		Hold: d.Holds().Hold,
	}
	if liveSignals != nil {
		opts.OnResult = liveSignals.SetBaselinesFromSweep
	}
	if liveGPUs != nil && liveGPUs.Up() {
		opts.Power = gpu.NewPowerSampler(liveGPUs, d.Config().Power.OrDefault().Devices, time.Second)
	}
	sw, err := sweeper.New(opts)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := d.AddCollector(collector.NewSweepCollector(sw)); err != nil {
		return err
	}
	d.Handle("/-/sweep", sw.Handler())
	d.OnReload(func(c *config.Config) {
		if err := sw.SetConfig(c.Sweep); err != nil {
			logger.Error("sweep config not applied; keeping the previous one", "err", err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	go sw.Run(ctx)
	d.OnStop(func() {
		cancel()
		sw.Close()
	})
	return nil
}

// sweepTargets resolves the configured targets when a sweep starts, so a
// reload takes effect at the next sweep. An empty model is looked up in
// /v1/models, as the probe scheduler does.
func sweepTargets(ctx context.Context, c *config.Config) ([]sweeper.Target, error) {
	targets, err := c.Targets()
	if err != nil {
		return nil, err
	}
	out := make([]sweeper.Target, 0, len(targets))
	for _, t := range targets {
		model := t.Model
		if model == "" {
			models, err := prober.ListModels(ctx, t)
			if err != nil {
				return nil, fmt.Errorf("target %s: detect model: %w", t.Name, err)
			}
			if len(models) == 0 {
				return nil, fmt.Errorf("target %s: /v1/models lists no model", t.Name)
			}
			model = models[0].ID
		}
		st := sweeper.Target{Target: t, Model: model, Scenarios: c.AllScenarios()}
		if t.MetricsURL != "" {
			t := t
			st.Scrape = func(ctx context.Context) (engine.Snapshot, error) {
				return engine.Scrape(ctx, t.Client, engine.MetricsURL(t))
			}
		}
		out = append(out, st)
	}
	return out, nil
}
