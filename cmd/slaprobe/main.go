// Command slaprobe probes vLLM-compatible LLM servers with low-rate
// synthetic streaming requests and exports TTFT, ITL, decode speed and
// end-to-end latency as Prometheus histograms.
//
// This package is wiring only: one file per subcommand, each registering
// itself in init.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"

	"github.com/slaprobe/slaprobe/internal/daemon"
)

// defaultListenAddress is slaprobe's web port, shared by run and demo.
const defaultListenAddress = ":9781"

var (
	logConfig = &promslog.Config{}
	app       = newApp()
	// commands maps a subcommand's full name to its body; each command's
	// file fills it in init, so a new command needs no change here.
	commands = map[string]func() int{}
	// daemonExtensions set up optional subsystems (engine metrics, sweeps)
	// on the daemon of run and demo. Their files append to it in init and
	// may add flags to runCmd and demoCmd, so a new subsystem needs no
	// change to run.go or demo.go.
	daemonExtensions []func(d *daemon.Daemon) error
)

func newApp() *kingpin.Application {
	a := kingpin.New("slaprobe", "Probes vLLM-compatible LLM servers with low-rate synthetic streaming requests and exports "+
		"time to first token, inter-token latency, decode speed and end-to-end latency as Prometheus histograms.")
	promslogflag.AddFlags(a, logConfig)
	a.Version(version.Print("slaprobe"))
	a.HelpFlag.Short('h')
	return a
}

// register makes fn the body of cmd.
func register(cmd *kingpin.CmdClause, fn func() int) {
	commands[cmd.FullCommand()] = fn
}

func newLogger() *slog.Logger { return promslog.New(logConfig) }

func extendDaemon(d *daemon.Daemon) error {
	for _, ext := range daemonExtensions {
		if err := ext(d); err != nil {
			return err
		}
	}
	return nil
}

func run() int {
	cmd, err := app.Parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "slaprobe: %v (try --help)\n", err)
		return 2
	}
	fn, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(os.Stderr, "slaprobe: no command %q\n", cmd)
		return 2
	}
	return fn()
}

func main() { os.Exit(run()) }
