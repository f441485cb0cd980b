package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/status"
	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
)

// DemoListenAddress keeps the demo on loopback: it is a simulation, not a
// service for other machines.
const DemoListenAddress = "127.0.0.1:9781"

// Demo is `slaprobe demo`: the simulated engine on a loopback port and a
// slaprobe probing it with the four default scenarios, in one process.
type Demo struct {
	App    *App
	Engine *vllmsim.Engine
	// EngineURL is the simulated engine's base URL (loopback).
	EngineURL string

	web     *web.FlagConfig
	addrs   []net.Addr
	stopSim context.CancelFunc
}

// NewDemo starts the simulated engine and builds the app probing it. It
// does not listen yet: call Listen, then Run.
func NewDemo(webFlags *web.FlagConfig, logger *slog.Logger) (*Demo, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// The engine reports its own timing both ways vLLM can: per-request
	// metrics on the response, and an llm_request span sent to slaprobe's
	// OTLP receiver, so the status page splits TTFT out of the box.
	otlpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the engine's traces: %w", err)
	}
	simCfg := vllmsim.DefaultConfig()
	simCfg.EnablePerRequestMetrics = true
	simCfg.OTLPTracesEndpoint = "http://" + otlpLn.Addr().String()
	eng, err := vllmsim.New(simCfg, logger.With("component", "sim"))
	if err != nil {
		otlpLn.Close()
		return nil, fmt.Errorf("simulated engine: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		eng.Close()
		otlpLn.Close()
		return nil, fmt.Errorf("listen for the simulated engine: %w", err)
	}
	d := &Demo{Engine: eng, EngineURL: "http://" + ln.Addr().String(), web: webFlags}
	simCtx, stop := context.WithCancel(context.Background())
	d.stopSim = stop
	go func() { _ = eng.Serve(simCtx, ln) }()

	d.App, err = New(Options{
		Flags: config.Flags{
			TargetURLs: []string{d.EngineURL},
			TargetName: "sim",
			Scenarios:  prober.DefaultScenarios,
		},
		Web:               webFlags,
		Logger:            logger,
		TraceGRPCListener: otlpLn,
		Description:       "Demo: probing the simulated vLLM engine at " + d.EngineURL + ".",
		// The demo's page shows a live mix within seconds, not 90 s.
		LiveMixRefresh: 10 * time.Second,
		// Served by slaprobe itself, so the link works wherever the page
		// is opened from.
		Links: []status.Link{
			{Address: "/sim/metrics", Text: "Simulated engine metrics", Description: "vLLM's own metrics, as the simulated engine exposes them at " + d.EngineURL + "/metrics"},
		},
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	d.App.Daemon.Handle("GET /sim/metrics", promhttp.HandlerFor(eng.Gatherer(), promhttp.HandlerOpts{}))
	return d, nil
}

// Listen opens slaprobe's listeners and returns their addresses.
func (d *Demo) Listen() ([]net.Addr, error) {
	addrs, err := d.App.Listen()
	d.addrs = addrs
	return addrs, err
}

// Banner writes where the demo listens, who can reach it, and what to open.
func (d *Demo) Banner(w io.Writer) {
	fmt.Fprintln(w, "slaprobe demo: a simulated vLLM engine and slaprobe probing it.")
	for _, ad := range d.addrs {
		base := "http://" + Browsable(ad)
		note := ""
		if d.web != nil && d.web.WebConfigFile != nil && *d.web.WebConfigFile != "" {
			note = " (TLS or auth per --web.config.file)"
		}
		fmt.Fprintf(w, "  listening on:   %s (%s)\n", ad, ListenScope(ad))
		fmt.Fprintf(w, "  status page:    %s/%s\n", base, note)
		fmt.Fprintf(w, "  metrics:        %s/metrics\n", base)
	}
	// The engine listens on loopback; slaprobe also serves its metrics at
	// /sim/metrics, reachable wherever slaprobe is.
	fmt.Fprintf(w, "  engine metrics: %s/metrics (the simulated engine, loopback only; also at /sim/metrics)\n", d.EngineURL)
	fmt.Fprintln(w, "The first probe of each scenario (chatbot, rag, agentic, tool_calling) fires within 10 s. Ctrl-C stops.")
}

// Run probes and serves until ctx is done, then stops the engine.
func (d *Demo) Run(ctx context.Context) error {
	defer d.Close()
	return d.App.Run(ctx)
}

// Close stops the simulated engine; safe to call twice.
func (d *Demo) Close() {
	d.stopSim()
	d.Engine.Close()
}

// ListenScope says in words who can reach a listener.
func ListenScope(a net.Addr) string {
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

// Browsable turns a listener address into one a browser can open: the
// wildcard address becomes localhost.
func Browsable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
