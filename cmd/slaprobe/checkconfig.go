package main

import (
	"context"
	"fmt"

	"github.com/slaprobe/slaprobe/internal/workload"
)

func addCheckConfig(c *cli) {
	cmd := c.app.Command("check-config", "Validate the config, print the effective config (defaults filled in, secrets redacted) and exit non-zero on error.")
	cf := addConfigFlags(cmd)
	tf := addTraceFlags(cmd)
	c.command(cmd, func(context.Context) int {
		if !tf.summarize(c.stdout, c.stderr) {
			return 1
		}
		cfg, err := cf.load()
		if err != nil {
			fmt.Fprintf(c.stderr, "config error: %v\n", err)
			return 1
		}
		for _, d := range cfg.Deprecations() {
			fmt.Fprintf(c.stderr, "config warning: %s\n", d)
		}
		fmt.Fprint(c.stdout, cfg.Redacted())
		workload.DescribeScenarios(c.stdout, cfg.AllScenarios())
		fmt.Fprintf(c.stderr, "config OK: %d target(s), %d scenario(s) known\n", len(cfg.TargetConfigs), len(cfg.AllScenarios()))
		return 0
	})
}
