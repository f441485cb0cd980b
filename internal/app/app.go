// Package app is slaprobe's composition root. New builds every part of
// the daemon as an ordinary value, in one visible order, and hands each to
// whoever needs it: the daemon (registry, web, scheduler, reloads), the
// engine-metrics pool and the live signals fed by every probe, the NVML
// reader shared by the power metrics and the sweeps, and the sweep job.
// `slaprobe run` and `slaprobe demo` call New; nothing registers itself.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/daemon"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/probehandler"
	"github.com/slaprobe/slaprobe/internal/status"
	"github.com/slaprobe/slaprobe/internal/sweeper"
	"github.com/slaprobe/slaprobe/internal/tracing"
	"github.com/slaprobe/slaprobe/prober"
)

// Options configure an App.
type Options struct {
	// ConfigFile, Flags, Web and Logger are passed to the daemon (see
	// daemon.Options).
	ConfigFile string
	Flags      config.Flags
	Web        *web.FlagConfig
	Logger     *slog.Logger
	// Description and Links are shown on the status page (the demo adds
	// the simulated engine's metrics).
	Description string
	Links       []status.Link
	// NVML opens the NVML library; called once, and only when power.nvml
	// is on. Nil means nvml.New (tests pass a mock).
	NVML func() nvml.Interface
	// TraceGRPCListener, when set, serves the OTLP/gRPC trace receiver in
	// place of tracing.otlp_grpc_listen_address (the demo opens it first,
	// to point its engine at it).
	TraceGRPCListener net.Listener
	// LiveMixRefresh is how often each target's live length mix is read
	// for the status page and slaprobe_live_mix_*; 0 means a tenth of
	// workload.DefaultLiveWindow (90 s). Tests set less.
	LiveMixRefresh time.Duration
	// Daemon holds test seams of the daemon (Probe, ListModels,
	// SchedulerSleep); its other fields are ignored.
	Daemon daemon.Options
}

// App is a wired slaprobe daemon and its parts. The parts are exported so
// that tests and other commands can reach them; treat them as read-only.
type App struct {
	Daemon *daemon.Daemon
	// Engines scrapes the targets' own /metrics and Live turns it into
	// TTFT by queue depth and live efficiency; both nil when
	// engine.enabled is false.
	Engines *engine.Pool
	Live    *collector.Live
	// GPUs is the NVML reader (a null one without a driver or with
	// power.nvml off): live power, energy per token, and sweeps' power.
	GPUs    *gpu.Reader
	Sweeper *sweeper.Sweeper
	// Probes keeps the recent probes and their log lines for the status
	// page at "/".
	Probes *status.Recorder
	// Joiner joins the engines' spans to probes; nil without an OTLP
	// receiver. TraceAddrs are the receiver's addresses, gRPC first.
	Joiner     *tracing.Joiner
	TraceAddrs []net.Addr

	mixes   *liveMixes // nil when engine.enabled is false
	cancel  context.CancelFunc
	closers []func()
}

// New loads the config and builds every part. The engine, power and
// tracing sections are read here, once (config.StartOnly: a reload that
// changes them is reported by the daemon); targets, scenarios and the sweep
// and probe sections follow every reload.
func New(o Options) (a *App, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.NVML == nil {
		o.NVML = func() nvml.Interface { return nvml.New() }
	}
	// Log records that name a target are kept with its probes too, so the
	// status page shows why a probe failed.
	probes := status.NewRecorder(status.DefaultKeep, nil)
	dopts := o.Daemon
	dopts.ConfigFile, dopts.Flags, dopts.Web = o.ConfigFile, o.Flags, o.Web
	// Secrets a server echoes into an error are hidden in every log line
	// and in the probes' logs on the status page.
	scrub := newScrubHandler(probes.Handler(o.Logger.Handler()))
	dopts.Logger = slog.New(scrub)
	d, err := daemon.New(dopts)
	if err != nil {
		return nil, err
	}
	scrub.follow(d.Config)
	ctx, cancel := context.WithCancel(context.Background())
	a = &App{Daemon: d, Probes: probes, cancel: cancel}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	// The experience bands: the reference lines the dashboards draw.
	if err := d.AddCollector(collector.NewBandCollector()); err != nil {
		return nil, err
	}
	// Trace-shaped scenarios, per prompt-length class (docs/workloads.md).
	traces := collector.NewTraceMetrics(func() []prober.Scenario { return d.Config().AllScenarios() })
	if err := d.AddCollector(traces); err != nil {
		return nil, err
	}
	d.AddHook(traces)
	cfg := d.Config()
	if cfg.Engine.Enabled {
		if err := a.addEngineSignals(cfg.Engine); err != nil {
			return nil, err
		}
		if err := a.addLiveMixes(ctx, o.LiveMixRefresh); err != nil {
			return nil, err
		}
	}
	if err := a.addPower(ctx, cfg.Power, o.NVML); err != nil {
		return nil, err
	}
	if err := a.addTracing(cfg.Tracing, o.TraceGRPCListener); err != nil {
		return nil, err
	}
	if err := a.addSweeper(ctx); err != nil {
		return nil, err
	}
	if err := a.addFleet(ctx); err != nil {
		return nil, err
	}
	if err := a.addStatus(o.Description, o.Links); err != nil {
		return nil, err
	}
	d.OnStop(a.close)
	return a, nil
}

// Listen opens the web listeners (see daemon.Daemon.Listen).
func (a *App) Listen() ([]net.Addr, error) { return a.Daemon.Listen() }

// Run probes and serves until ctx is done, then releases every part.
func (a *App) Run(ctx context.Context) error { return a.Daemon.Run(ctx) }

// close stops the background work of every part; safe to call twice.
func (a *App) close() {
	a.cancel()
	if a.Sweeper != nil {
		a.Sweeper.Close()
	}
	if a.GPUs != nil {
		a.GPUs.Close()
	}
	if a.Engines != nil {
		a.Engines.Close()
	}
	for _, c := range a.closers {
		c()
	}
	a.closers = nil
}

// addEngineSignals scrapes every target's engine /metrics and feeds the
// live signals (TTFT by queue depth, live scaling efficiency).
func (a *App) addEngineSignals(ec config.EngineConfig) error {
	d, logger := a.Daemon, a.Daemon.Logger()
	a.Engines = engine.NewPool(ec.WatcherOptions(), logger)
	a.Live = collector.NewLive(a.Engines, collector.LiveOptions{
		DepthSamples:        ec.Live.QueueDepthSamples,
		DepthMaxAge:         time.Duration(ec.Live.QueueDepthMaxAge),
		EfficiencyWindow:    time.Duration(ec.Live.EfficiencyWindow),
		EfficiencySmoothing: time.Duration(ec.Live.EfficiencySmoothing),
		BaselineMaxAge:      time.Duration(ec.Live.BaselineMaxAge),
		Logger:              logger,
	})
	d.AddHook(a.Live)
	if err := errors.Join(d.AddCollector(a.Live), d.AddCollector(collector.NewEngineCollector(a.Engines))); err != nil {
		return err
	}
	known := map[string]bool{}
	d.OnReload(func(c *config.Config) {
		targets, err := c.Targets()
		if err != nil {
			logger.Error("engine metrics: cannot build targets", "err", err)
			return
		}
		now := map[string]bool{}
		for _, t := range targets {
			now[t.Name] = true
		}
		for name := range known {
			if !now[name] {
				a.Live.ForgetTarget(name)
			}
		}
		known = now
		a.Engines.Sync(targets)
	})
	return nil
}

// addPower opens NVML (once; a machine without the driver gets a null
// reader, one log line and slaprobe_nvml_up 0) and exports power, and
// energy per token where engine metrics give the token counts.
func (a *App) addPower(ctx context.Context, pc config.PowerConfig, open func() nvml.Interface) error {
	var lib nvml.Interface
	if pc.NVML {
		lib = open()
	}
	gpus, err := gpu.New(lib, a.Daemon.Logger(), pc.ReaderOptions())
	if err != nil {
		return err
	}
	a.GPUs = gpus
	go gpus.Run(ctx)
	if err := a.Daemon.AddCollector(collector.NewNVMLCollector(gpus)); err != nil {
		return err
	}
	if a.Engines == nil {
		return nil
	}
	return a.Daemon.AddCollector(collector.NewEnergyCollector(gpus, a.Engines, collector.EnergyOptions{
		PricePerKWh: pc.PricePerKWh,
		Window:      time.Duration(pc.Window),
		DevicesFor:  pc.DevicesFor,
	}))
}

// addSweeper adds the opt-in sweep job: scheduled, or on demand with
// POST /-/sweep behind the web config's authentication like every other
// endpoint. Its gauges are exported even while sweeps are disabled, so
// dashboards show "disabled" rather than "no data".
func (a *App) addSweeper(ctx context.Context) error {
	d, logger := a.Daemon, a.Daemon.Logger()
	env := sweeper.Env{GPUs: a.GPUs, PowerSampleInterval: time.Second, Logger: logger}
	opts := sweeper.Options{
		Config: d.Config().Sweep,
		Runner: d.Prober(),
		// Plans are set up from the config current when a sweep starts.
		Plans: func(ctx context.Context, sc config.SweepConfig, names []string) ([]*sweeper.Plan, error) {
			return sweeper.PlansFor(ctx, d.Config(), sc, names, env)
		},
		Logger: logger,
		// A scheduled probe sent during a sweep would measure the sweep's
		// load and page on it; the target's probes wait for its sweep.
		Hold: d.Holds().Hold,
	}
	if a.Live != nil {
		// Closed-loop N=1 steps ran alone: single-stream baselines.
		opts.OnResult = a.Live.SetBaselinesFromSweep
	}
	sw, err := sweeper.New(opts)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	a.Sweeper = sw
	if err := d.AddCollector(collector.NewSweepCollector(sw.Snapshot)); err != nil {
		return err
	}
	if a.Engines != nil {
		// The sweep's capacity over the engine's live request rate, over 5 min
		// or the engine's history if shorter.
		if err := d.AddCollector(collector.NewLiveHeadroom(sw.Snapshot, a.Engines,
			min(collector.DefaultLiveTrafficWindow, a.Engines.Options().History))); err != nil {
			return err
		}
	}
	d.Handle("/-/sweep", sw.Handler())
	d.OnReload(func(c *config.Config) {
		if err := sw.SetConfig(c.Sweep); err != nil {
			logger.Error("sweep config not applied; keeping the previous one", "err", err)
		}
	})
	go sw.Run(ctx)
	return nil
}

// addFleet serves /probe, for a Prometheus that discovers the targets
// itself (blackbox-exporter style), and watches the file_sd target files.
func (a *App) addFleet(ctx context.Context) error {
	d, logger := a.Daemon, a.Daemon.Logger()
	// /probe takes the scheduler's in-flight slots and obeys the sweeps'
	// holds, as scheduled probes do.
	ph := probehandler.New(probehandler.Options{
		Runner: d.Prober(),
		Config: d.Config,
		Logger: logger.With("component", "probe_endpoint"),
		Slot:   d.TargetSlot,
		Holds:  d.Holds(),
	})
	if err := d.AddCollector(ph.Collector()); err != nil {
		return err
	}
	d.Handle("/probe", ph)
	go config.WatchTargetFiles(ctx, d.Config, func() { _, _ = d.Reload() }, logger.With("component", "file_sd"))
	return nil
}

// addStatus mounts the status page at "/", the recent probes of a target
// at /probes and the latest sweep of each target at /sweep/{target}/.
func (a *App) addStatus(description string, links []status.Link) error {
	d := a.Daemon
	if description == "" {
		description = "Synthetic streaming probes of LLM inference servers: TTFT, ITL, decode speed and E2E latency against each scenario's SLA."
	}
	d.AddHook(a.Probes)
	// Only the configured targets' log lines are kept: not those of an
	// address /probe was asked for.
	forget := func(c *config.Config) {
		keep := map[string]bool{}
		for _, t := range c.TargetConfigs {
			keep[t.Name] = true
		}
		a.Probes.Forget(keep)
	}
	forget(d.Config())
	d.OnReload(forget)
	opts := status.Options{
		Config:      d.Config,
		Recorder:    a.Probes,
		NextProbe:   d.NextProbe,
		Disabled:    d.ScenarioDisabled,
		GPUs:        a.GPUs,
		Sweeps:      a.Sweeper.Snapshot,
		Ready:       d.Ready,
		Description: description,
		Links:       links,
		Logger:      d.Logger(),
	}
	if a.Engines != nil {
		opts.Engine = func(target string) (engine.Status, bool) {
			w := a.Engines.Watcher(target)
			if w == nil {
				return engine.Status{}, false
			}
			return w.Status(), true
		}
	}
	if a.mixes != nil {
		opts.LiveMix = a.mixes.mix
	}
	srv, err := status.New(opts)
	if err != nil {
		return err
	}
	srv.Mount(d.Handle)
	return nil
}
