// Command slaprobe probes vLLM-compatible LLM servers with low-rate
// synthetic streaming requests and exports TTFT, ITL, decode speed and
// end-to-end latency as Prometheus histograms.
//
// This package holds flags and calls only: each command's file declares
// its flags and calls the package that does the work (internal/app for
// the daemon, internal/bench, internal/vllmsim, internal/config). main
// adds every command explicitly, so nothing depends on file order.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
)

// defaultListenAddress is slaprobe's web port, shared by run and demo.
const defaultListenAddress = ":9781"

// cli is the parsed command line: the kingpin application, the log flags
// every command shares, and each command's body by full name.
type cli struct {
	app            *kingpin.Application
	logConfig      *promslog.Config
	stdout, stderr io.Writer
	bodies         map[string]func(ctx context.Context) int
}

func newCLI(stdout, stderr io.Writer) *cli {
	c := &cli{
		app: kingpin.New("slaprobe", "Probes vLLM-compatible LLM servers with low-rate synthetic streaming requests and exports "+
			"time to first token, inter-token latency, decode speed and end-to-end latency as Prometheus histograms."),
		logConfig: &promslog.Config{},
		stdout:    stdout, stderr: stderr,
		bodies: map[string]func(context.Context) int{},
	}
	promslogflag.AddFlags(c.app, c.logConfig)
	c.app.Version(version.Print("slaprobe"))
	c.app.HelpFlag.Short('h')
	c.app.UsageWriter(stdout)
	c.app.ErrorWriter(stderr)
	addRun(c)
	addDemo(c)
	addBench(c)
	addCompare(c)
	addSim(c)
	addCheckConfig(c)
	addHeadroom(c)
	addHealthcheck(c)
	return c
}

// command makes body the body of cmd.
func (c *cli) command(cmd *kingpin.CmdClause, body func(ctx context.Context) int) {
	c.bodies[cmd.FullCommand()] = body
}

func (c *cli) logger() *slog.Logger {
	cfg := *c.logConfig
	cfg.Writer = c.stderr
	return promslog.New(&cfg)
}

// run parses args and runs the command. SIGINT and SIGTERM cancel the
// command's context; a second one kills at once.
func (c *cli) run(args []string) int {
	cmd, err := c.app.Parse(args)
	if err != nil {
		fmt.Fprintf(c.stderr, "slaprobe: %v (try --help)\n", err)
		return 2
	}
	body, ok := c.bodies[cmd]
	if !ok {
		fmt.Fprintf(c.stderr, "slaprobe: no command %q\n", cmd)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	return body(ctx)
}

func main() { os.Exit(newCLI(os.Stdout, os.Stderr).run(os.Args[1:])) }
