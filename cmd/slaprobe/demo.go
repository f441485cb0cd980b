package main

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/slaprobe/slaprobe/internal/app"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/status"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

func addDemo(c *cli) {
	cmd := c.app.Command("demo", "Run the simulated vLLM engine and slaprobe probing it with the four default scenarios, in one process, "+
		"listening on loopback unless --web.listen-address says otherwise. The status page shows every scenario within a minute.")
	webFlags := kingpinflag.AddFlags(cmd, demoListenAddress)
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
			// Served by slaprobe itself, so the link works wherever the
			// page is opened from.
			Links: []status.Link{
				{Address: "/sim/metrics", Text: "Simulated engine metrics", Description: "vLLM's own metrics, as the simulated engine exposes them at " + simURL + "/metrics"},
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

		a.Daemon.Handle("GET /sim/metrics", promhttp.HandlerFor(eng.Gatherer(), promhttp.HandlerOpts{}))

		fmt.Fprintln(c.stdout, "slaprobe demo: a simulated vLLM engine and slaprobe probing it.")
		for _, ad := range addrs {
			base, where := "http://"+browsable(ad), listenScope(ad)
			note := ""
			if *webFlags.WebConfigFile != "" {
				note = " (TLS or auth per --web.config.file)"
			}
			fmt.Fprintf(c.stdout, "  listening on:   %s (%s)\n", ad, where)
			fmt.Fprintf(c.stdout, "  status page:    %s/%s\n", base, note)
			fmt.Fprintf(c.stdout, "  metrics:        %s/metrics\n", base)
		}
		// The engine listens on loopback; slaprobe also serves its metrics
		// at /sim/metrics, reachable wherever slaprobe is.
		fmt.Fprintf(c.stdout, "  engine metrics: %s/metrics (the simulated engine, loopback only; also at /sim/metrics)\n", simURL)
		fmt.Fprintln(c.stdout, "The first probe of each scenario (chatbot, rag, agentic, tool_calling) fires within 10 s. Ctrl-C stops.")

		if err := a.Run(ctx); err != nil {
			logger.Error("demo stopped", "err", err)
			return 1
		}
		logger.Info("demo stopped")
		return 0
	})
}

// demoListenAddress keeps the demo on loopback: it is a simulation, not a
// service for other machines.
const demoListenAddress = "127.0.0.1:9781"

// listenScope says in words who can reach a listener.
func listenScope(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return "see the address"
	}
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		return "every interface: other machines can reach it at this host's name"
	case ip != nil && ip.IsLoopback():
		return "loopback only: this machine"
	default:
		return "this address only"
	}
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
