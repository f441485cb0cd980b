package main

import (
	"context"

	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slaprobe/slaprobe/internal/app"
)

func addRun(c *cli) {
	cmd := c.app.Command("run", "Run the exporter: probe the configured targets and serve /metrics (the default command).").Default()
	cf := addConfigFlags(cmd)
	webFlags := kingpinflag.AddFlags(cmd, defaultListenAddress)
	c.command(cmd, func(ctx context.Context) int {
		logger := c.logger()
		logger.Info("starting slaprobe", "version", version.Info(), "build_context", version.BuildContext())
		a, err := app.New(app.Options{ConfigFile: *cf.file, Flags: cf.flags(), Web: webFlags, Logger: logger})
		if err != nil {
			logger.Error("cannot start", "err", err)
			return 1
		}
		if err := a.Run(ctx); err != nil {
			logger.Error("slaprobe stopped", "err", err)
			return 1
		}
		logger.Info("slaprobe stopped")
		return 0
	})
}
