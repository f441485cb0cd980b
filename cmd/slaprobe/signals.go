package main

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/daemon"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/gpu"
)

// Live production signals: the engine's own /metrics, TTFT by queue depth,
// live scaling efficiency, and NVML power and energy per token. The engine
// and power sections are read at start; targets follow every reload.
func init() {
	daemonExtensions = append(daemonExtensions, addLiveSignals)
}

// liveGPUs is the NVML reader addLiveSignals made, shared with the sweeper
// so sweeps can report power; nil before it ran.
var liveGPUs *gpu.Reader

// liveSignals is the live-signal hook addLiveSignals made, shared with the
// sweeper, whose closed-loop N=1 steps give it single-stream baselines; nil
// when engine metrics are off.
var liveSignals *collector.Live

func addLiveSignals(d *daemon.Daemon) error {
	logger := d.Logger()
	cfg := d.Config()
	ec := cfg.Engine.OrDefault()
	pc := cfg.Power.OrDefault()
	ctx, cancel := context.WithCancel(context.Background())

	var pool *engine.Pool
	liveSignals = nil
	if ec.Enabled {
		pool = engine.NewPool(ec.WatcherOptions(), logger)
		live := collector.NewLive(pool, collector.LiveOptions{
			DepthSamples:        ec.Live.QueueDepthSamples,
			DepthMaxAge:         time.Duration(ec.Live.QueueDepthMaxAge),
			EfficiencyWindow:    time.Duration(ec.Live.EfficiencyWindow),
			EfficiencySmoothing: time.Duration(ec.Live.EfficiencySmoothing),
			BaselineMaxAge:      time.Duration(ec.Live.BaselineMaxAge),
			Logger:              logger,
		})
		d.AddHook(live)
		liveSignals = live
		if err := d.AddCollector(live); err != nil {
			cancel()
			return err
		}
		if err := d.AddCollector(collector.NewEngineCollector(pool)); err != nil {
			cancel()
			return err
		}
		known := map[string]bool{}
		d.OnReload(func(c *config.Config) {
			targets, err := c.Targets()
			if err != nil {
				logger.Error("engine metrics: cannot build targets", "err", err)
				return
			}
			now := map[string]bool{}
			for _, t := range targets {
				now[t.Name] = true
			}
			for name := range known {
				if !now[name] {
					live.ForgetTarget(name)
				}
			}
			known = now
			pool.Sync(targets)
		})
	}

	// nvml.New is called once, here; a machine without the driver gets a
	// null reader, one log line and slaprobe_nvml_up 0.
	var lib nvml.Interface
	if pc.NVML {
		lib = nvml.New()
	}
	gpus, err := gpu.New(lib, logger, pc.ReaderOptions())
	if err != nil {
		cancel()
		return err
	}
	go gpus.Run(ctx)
	liveGPUs = gpus
	if err := d.AddCollector(collector.NewNVMLCollector(gpus)); err != nil {
		cancel()
		return err
	}
	if pool != nil {
		if err := d.AddCollector(collector.NewEnergyCollector(gpus, pool, collector.EnergyOptions{
			PricePerKWh:   pc.PricePerKWh,
			Window:        time.Duration(pc.Window),
			TargetDevices: pc.TargetDevices,
		})); err != nil {
			cancel()
			return err
		}
	}
	d.OnStop(func() {
		cancel()
		gpus.Close()
		if pool != nil {
			pool.Close()
		}
	})
	return nil
}
