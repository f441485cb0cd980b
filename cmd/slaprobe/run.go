package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/daemon"
	"github.com/slaprobe/slaprobe/prober"
)

// configFlags are the flags that make or adjust the config (run, check-config).
type configFlags struct {
	file         *string
	targetURLs   *[]string
	targetModel  *string
	targetName   *string
	scenarios    *[]string
	scenariosSet bool
}

func addConfigFlags(cmd *kingpin.CmdClause) *configFlags {
	f := &configFlags{}
	*f = configFlags{
		file: cmd.Flag("config.file",
			"Path to the YAML config file. Without one, the config is built from --target.url and --scenarios.").
			PlaceHolder("PATH").String(),
		targetURLs: cmd.Flag("target.url",
			"Base URL of a server to probe, e.g. http://vllm:8000 (repeatable). With --config.file, adds a target to the file's.").
			PlaceHolder("URL").Strings(),
		targetModel: cmd.Flag("target.model",
			"Model to probe on the --target.url targets. Default: auto-detect from /v1/models.").
			PlaceHolder("MODEL").String(),
		targetName: cmd.Flag("target.name",
			"Value of the target label for the single --target.url target. Default: its host:port.").
			PlaceHolder("NAME").String(),
		scenarios: cmd.Flag("scenarios",
			"Comma-separated scenarios to probe (repeatable). Built in: "+strings.Join(prober.BuiltinNames(), ", ")+
				". With --config.file, replaces global.scenarios.").
			Default(strings.Join(prober.DefaultScenarios, ",")).IsSetByUser(&f.scenariosSet).Strings(),
	}
	return f
}

// flags returns the quick flags. --scenarios counts only when given: its
// default must not override a config file's global.scenarios.
func (f *configFlags) flags() config.Flags { return f.defaulted(f.scenariosSet) }

// defaulted is flags with "--scenarios was given" decided by the caller.
func (f *configFlags) defaulted(scenariosSet bool) config.Flags {
	fl := config.Flags{
		TargetURLs:  *f.targetURLs,
		TargetModel: *f.targetModel,
		TargetName:  *f.targetName,
	}
	if scenariosSet {
		fl.Scenarios = *f.scenarios
	}
	return fl
}

// The run command and its flags are package variables, so that the files of
// optional subsystems can add flags to it in their init.
var (
	runCmd    = app.Command("run", "Run the exporter: probe the configured targets and serve /metrics (the default command).").Default()
	runConfig = addConfigFlags(runCmd)
	runWeb    = kingpinflag.AddFlags(runCmd, defaultListenAddress)
)

func init() { register(runCmd, runDaemon) }

func runDaemon() int {
	logger := newLogger()
	logger.Info("starting slaprobe", "version", version.Info(), "build_context", version.BuildContext())
	d, err := daemon.New(daemon.Options{
		ConfigFile: *runConfig.file,
		Flags:      runConfig.flags(),
		Web:        runWeb,
		Logger:     logger,
	})
	if err != nil {
		logger.Error("cannot load the config", "err", err)
		return 1
	}
	if err := extendDaemon(d); err != nil {
		logger.Error("cannot set up the daemon", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := d.Run(ctx); err != nil {
		logger.Error("slaprobe stopped", "err", err)
		return 1
	}
	logger.Info("slaprobe stopped")
	return 0
}
