package main

import (
	"context"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/daemon"
	"github.com/slaprobe/slaprobe/internal/probehandler"
)

// The fleet: /probe for a Prometheus that discovers the targets itself, and
// the file_sd watcher for targets listed in files.
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
	return nil
}
