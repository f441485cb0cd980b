package main

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slaprobe/slaprobe/internal/app"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

func addDemo(c *cli) {
	cmd := c.app.Command("demo", "Run the simulated vLLM engine and slaprobe probing it with the four default scenarios, in one process on loopback. Metrics appear within a minute.")
	webFlags := kingpinflag.AddFlags(cmd, defaultListenAddress)
	c.command(cmd, func(ctx context.Context) int {
		logger := c.logger()
		eng, err := vllmsim.New(vllmsim.DefaultConfig(), logger.With("component", "sim"))
		if err != nil {
			logger.Error("cannot start the simulated engine", "err", err)
			return 1
		}
		defer eng.Close()
		simLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			logger.Error("cannot listen for the simulated engine", "err", err)
			return 1
		}
		simURL := "http://" + simLn.Addr().String()
		simCtx, stopSim := context.WithCancel(context.Background())
		defer stopSim()
		go func() { _ = eng.Serve(simCtx, simLn) }()

		a, err := app.New(app.Options{
			Flags: config.Flags{
				TargetURLs: []string{simURL},
				TargetName: "sim",
				Scenarios:  prober.DefaultScenarios,
			},
			Web:         webFlags,
			Logger:      logger,
			Description: "Demo: probing the simulated vLLM engine at " + simURL + ".",
			Links: []web.LandingLinks{
				{Address: simURL + "/metrics", Text: "Simulated engine metrics", Description: "vLLM's own metrics, as the simulated engine exposes them"},
			},
		})
		if err != nil {
			logger.Error("cannot start the daemon", "err", err)
			return 1
		}
		addrs, err := a.Listen()
		if err != nil {
			logger.Error("cannot listen", "err", err)
			return 1
		}

		fmt.Fprintln(c.stdout, "slaprobe demo: a simulated vLLM engine and slaprobe probing it, on loopback.")
		for _, ad := range addrs {
			base := "http://" + browsable(ad)
			if *webFlags.WebConfigFile != "" {
				base += " (TLS or auth per --web.config.file)"
			}
			fmt.Fprintf(c.stdout, "  metrics:        %s/metrics\n", "http://"+browsable(ad))
			fmt.Fprintf(c.stdout, "  landing page:   %s/\n", base)
		}
		fmt.Fprintf(c.stdout, "  engine metrics: %s/metrics\n", simURL)
		fmt.Fprintln(c.stdout, "The first probe of each scenario (chatbot, rag, agentic, tool_calling) fires within 10 s. Ctrl-C stops.")

		if err := a.Run(ctx); err != nil {
			logger.Error("demo stopped", "err", err)
			return 1
		}
		logger.Info("demo stopped")
		return 0
	})
}

// browsable turns a listener address into one a browser can open: the
// wildcard address becomes localhost.
func browsable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
