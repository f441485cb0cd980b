package main

import (
	"context"

	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slaprobe/slaprobe/internal/app"
)

func addDemo(c *cli) {
	cmd := c.app.Command("demo", "Run the simulated vLLM engine and slaprobe probing it with the four default scenarios, in one process, "+
		"listening on loopback unless --web.listen-address says otherwise. The status page shows every scenario within a minute.")
	webFlags := kingpinflag.AddFlags(cmd, app.DemoListenAddress)
	c.command(cmd, func(ctx context.Context) int {
		logger := c.logger()
		d, err := app.NewDemo(webFlags, logger)
		if err != nil {
			logger.Error("cannot start the demo", "err", err)
			return exitFailure
		}
		if _, err := d.Listen(); err != nil {
			d.Close()
			logger.Error("cannot listen", "err", err)
			return exitFailure
		}
		d.Banner(c.stdout)
		if err := d.Run(ctx); err != nil {
			logger.Error("demo stopped", "err", err)
			return exitFailure
		}
		logger.Info("demo stopped")
		return exitOK
	})
}
