package main

import (
	"context"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/daemon"
	"github.com/slaprobe/slaprobe/internal/probehandler"
)

// The fleet: /probe for a Prometheus that discovers the targets itself, the
// file_sd watcher for targets listed in files, and the series budget.
func init() { daemonExtensions = append(daemonExtensions, addFleet) }

func addFleet(d *daemon.Daemon) error {
	d.Handle("/probe", probehandler.New(probehandler.Options{
		Runner: d.Prober(),
		Config: d.Config,
		Logger: d.Logger().With("component", "probe_endpoint"),
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go config.WatchTargetFiles(ctx, d.Config, func() { _, _ = d.Reload() }, d.Logger().With("component", "file_sd"))
	d.OnStop(cancel)

	// The bucket layout is fixed when the metrics are made: say so when a reload asks for another.
	buckets := d.Config().Global.ClassicHistogramBuckets
	d.OnReload(func(c *config.Config) {
		if c.Global.ClassicHistogramBuckets != buckets {
			d.Logger().Warn("global.classic_histogram_buckets changed; it takes effect at the next restart",
				"running", buckets, "configured", c.Global.ClassicHistogramBuckets)
		}
	})
	return nil
}
