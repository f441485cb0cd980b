package main

import (
	"fmt"
	"os"

	"github.com/slaprobe/slaprobe/internal/config"
)

var (
	checkConfigCmd = app.Command("check-config", "Validate the config, print the effective config (defaults filled in, secrets redacted) and exit non-zero on error.")
	checkConfig    = addConfigFlags(checkConfigCmd)
)

func init() {
	register(checkConfigCmd, func() int {
		c, err := config.LoadWithFlags(*checkConfig.file, checkConfig.flags())
		if err != nil {
			fmt.Fprintf(os.Stderr, "config error: %v\n", err)
			return 1
		}
		fmt.Print(c.Redacted())
		fmt.Fprintf(os.Stderr, "config OK: %d target(s), %d scenario(s) known\n", len(c.TargetConfigs), len(c.AllScenarios()))
		return 0
	})
}
