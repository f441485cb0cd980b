package main

import (
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/prober"
)

// override is a flag that replaces a config file's value only when it is
// given on the command line; its default is what --help shows. Every
// "the flag wins over the file" in slaprobe goes through it.
type override[T any] struct {
	v   *T
	set bool
}

// overrideFlag makes an override of f, typed by one of kingpin's value
// methods, e.g. overrideFlag(cmd.Flag(...).Default("1"), (*kingpin.FlagClause).Int).
func overrideFlag[T any](f *kingpin.FlagClause, typed func(*kingpin.FlagClause) *T) *override[T] {
	o := &override[T]{}
	o.v = typed(f.IsSetByUser(&o.set))
	return o
}

// given returns the value and whether it was given on the command line.
func (o *override[T]) given() (T, bool) { return *o.v, o.set }

// ptr returns the value when it was given, else nil.
func (o *override[T]) ptr() *T {
	if !o.set {
		return nil
	}
	return o.v
}

// apply writes the value over *dst when it was given.
func (o *override[T]) apply(dst *T) {
	if o.set {
		*dst = *o.v
	}
}

// configFlags make or adjust the config (run, check-config, bench).
type configFlags struct {
	file        *string
	targetURLs  *[]string
	targetModel *string
	targetName  *string
	targetAPI   *string
	scenarios   *override[[]string]
}

func addConfigFlags(cmd *kingpin.CmdClause) *configFlags {
	return &configFlags{
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
		targetAPI: cmd.Flag("target.api",
			"API the --target.url targets are probed on: "+prober.APIHelp()+". Default: chat.").
			PlaceHolder("API").Enum(prober.APINames()...),
		scenarios: overrideFlag(cmd.Flag("scenarios",
			"Comma-separated scenarios to probe (repeatable). Built in: "+strings.Join(prober.BuiltinNames(), ", ")+
				". With --config.file, replaces global.scenarios.").
			Default(strings.Join(prober.DefaultScenarios, ",")), (*kingpin.FlagClause).Strings),
	}
}

// flags returns the quick flags. --scenarios counts only when given: its
// default must not override a config file's global.scenarios.
func (f *configFlags) flags() config.Flags {
	fl := config.Flags{TargetURLs: *f.targetURLs, TargetModel: *f.targetModel, TargetName: *f.targetName, TargetAPI: *f.targetAPI}
	f.scenarios.apply(&fl.Scenarios)
	return fl
}

// load reads the config file (if any) with the quick flags applied.
func (f *configFlags) load() (*config.Config, error) {
	return config.LoadWithFlags(*f.file, f.flags())
}
