// Package daemon runs slaprobe as a service: it owns the registry, the web
// endpoints, config reloads and the probe scheduler's lifecycle. The
// composition root (internal/app) builds the other parts and plugs them in
// through AddHook, AddCollector, Handle, OnReload and OnStop.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/slaprobe/slaprobe/collector"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/webguard"
	"github.com/slaprobe/slaprobe/prober"
)

// Program is the name used for slaprobe_build_info.
const Program = "slaprobe"

// Options configure a Daemon.
type Options struct {
	// ConfigFile is the YAML config; empty means the quick flags alone.
	ConfigFile string
	// Flags are the quick command-line settings (see config.Flags).
	Flags config.Flags
	// Web holds --web.listen-address, --web.config.file and
	// --web.systemd-socket. Nil serves nothing: use Handler (tests).
	Web *web.FlagConfig
	// Logger; nil discards.
	Logger *slog.Logger
	// Prober is kept for the daemon's life so that calibrations survive
	// reloads. Nil makes one.
	Prober *prober.Prober
	// Probe and ListModels replace the real prober (tests).
	Probe      prober.ProbeFunc
	ListModels func(ctx context.Context, t prober.Target) ([]prober.ModelInfo, error)
	// SchedulerSleep replaces the scheduler's timer (tests).
	SchedulerSleep func(ctx context.Context, d time.Duration) bool
}

// Daemon is a running slaprobe.
type Daemon struct {
	opts    Options
	logger  *slog.Logger
	cfg     *config.SafeConfig
	prober  *prober.Prober
	reg     *prometheus.Registry
	metrics *collector.ProbeMetrics
	mux     *http.ServeMux

	reloadOK, reloadTime prometheus.Gauge
	// started is the config the process started with: the start-only
	// settings (config.StartOnly) keep its values. restartRequired is 1
	// while the loaded config changes one of them; restartSettings lists
	// which, for /config.
	started         *config.Config
	restartRequired prometheus.Gauge
	restartSettings atomic.Pointer[[]string]

	hooksMu sync.RWMutex
	hooks   []prober.ProbeHook
	// joiner settles engine timing from traces; nil without a receiver.
	joiner EngineJoiner
	// implausibleLogged holds the targets whose dropped engine timing was
	// logged (engine_timing.go): once per target.
	implausibleLogged sync.Map

	onReloadMu sync.Mutex
	onReload   []func(*config.Config)
	onStop     []func()

	listeners []net.Listener
	// guard is the main listener's TLS, basic auth and headers
	// (--web.config.file) and its metrics (web.go).
	guard *webGuard
	ready atomic.Bool
	// current is the running scheduler, for readers that must not wait
	// for a reload (the status page); nil while none runs.
	current atomic.Pointer[prober.Scheduler]

	// reloadMu serialises reloads and scheduler restarts.
	reloadMu    sync.Mutex
	runCtx      context.Context // set by Run; nil before
	stopSched   context.CancelFunc
	schedDone   chan struct{}
	sched       *prober.Scheduler
	knownModels map[string]string
	// holds pauses a target's scheduled probes while a sweep loads it;
	// it outlives schedulers, which reloads replace.
	holds prober.Holds
}

// New loads the config and builds the registry and the web endpoints. An
// invalid config is an error: the daemon does not start without a good one.
func New(opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Prober == nil {
		opts.Prober = prober.New(opts.Logger.With("component", "prober"), prober.SystemClock{})
	}
	d := &Daemon{
		opts:   opts,
		logger: opts.Logger,
		cfg:    config.NewSafeConfig(opts.Flags),
		prober: opts.Prober,
		reg:    prometheus.NewRegistry(),
		mux:    http.NewServeMux(),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "slaprobe", Name: "config_last_reload_successful",
			Help: "Whether the last configuration reload attempt was successful.",
		}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "slaprobe", Name: "config_last_reload_success_timestamp_seconds",
			Help: "Timestamp of the last successful configuration reload.",
		}),
		restartRequired: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "slaprobe", Name: "config_restart_required",
			Help: "Whether the loaded config changes a setting read only at start (tracing, engine, power, global.classic_histogram_buckets), whose running value stays until a restart; /config names the settings.",
		}),
	}
	d.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector(Program),
		d.reloadOK, d.reloadTime, d.restartRequired,
	)
	if _, err := d.cfg.Reload(opts.ConfigFile); err != nil {
		return nil, err
	}
	d.noteDeprecations(d.cfg.Get())
	guard, err := newWebGuard(opts.Web)
	if err != nil {
		return nil, err
	}
	d.guard = guard
	d.reg.MustRegister(guard.collectors()...)
	d.started = d.cfg.Get()
	d.metrics = collector.NewProbeMetricsWith(d.reg, collector.ProbeMetricsOptions{
		ClassicBuckets: collector.ClassicBuckets(d.cfg.Get().Global.ClassicHistogramBuckets)})
	d.reloadOK.Set(1)
	d.reloadTime.SetToCurrentTime()
	d.applyConfig(nil, d.cfg.Get())

	if err := d.routes(); err != nil {
		return nil, err
	}
	return d, nil
}

// Registry is the daemon's registry; /metrics serves it.
func (d *Daemon) Registry() *prometheus.Registry { return d.reg }

// ProbeMetrics are the slaprobe_* probe metrics.
func (d *Daemon) ProbeMetrics() *collector.ProbeMetrics { return d.metrics }

// Prober is the long-lived prober (calibration cache).
func (d *Daemon) Prober() *prober.Prober { return d.prober }

// Config is the current config. Treat it as read-only.
func (d *Daemon) Config() *config.Config { return d.cfg.Get() }

// Holds pauses the scheduled probes of a target (see prober.Holds); the
// sweep job holds the target it sweeps.
func (d *Daemon) Holds() *prober.Holds { return &d.holds }

// Logger is the daemon's logger.
func (d *Daemon) Logger() *slog.Logger { return d.logger }

// AddHook makes h see every probe from now on.
func (d *Daemon) AddHook(h prober.ProbeHook) {
	d.hooksMu.Lock()
	defer d.hooksMu.Unlock()
	d.hooks = append(d.hooks, h)
}

// AddCollector registers c with the daemon's registry.
func (d *Daemon) AddCollector(c prometheus.Collector) error {
	return d.reg.Register(c)
}

// Handle serves h at pattern (http.ServeMux syntax, e.g. "POST /-/sweep").
func (d *Daemon) Handle(pattern string, h http.Handler) { d.mux.Handle(pattern, h) }

// OnReload calls fn with the current config now and with every new config
// a reload makes current.
func (d *Daemon) OnReload(fn func(*config.Config)) {
	d.onReloadMu.Lock()
	d.onReload = append(d.onReload, fn)
	d.onReloadMu.Unlock()
	fn(d.cfg.Get())
}

// OnStop registers fn to run when Run returns, after the probes have
// stopped: subsystems release their background work there.
func (d *Daemon) OnStop(fn func()) {
	d.onReloadMu.Lock()
	d.onStop = append(d.onStop, fn)
	d.onReloadMu.Unlock()
}

// Handler serves every endpoint.
func (d *Daemon) Handler() http.Handler { return d.mux }

// Ready reports whether the scheduler is running: false before Run, while
// a reload restarts it and after a reload failed to start it.
func (d *Daemon) Ready() bool { return d.ready.Load() }

// routes mounts the daemon's own endpoints. The page at "/" is not one of
// them: the composition root mounts the status page there.
func (d *Daemon) routes() error {
	d.mux.Handle("/metrics", promhttp.InstrumentMetricHandler(d.reg, promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(d.logger.Handler(), slog.LevelError),
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})))
	d.mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "Healthy")
	})
	d.mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !d.ready.Load() {
			http.Error(w, "Not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Ready")
	})
	reload := func(w http.ResponseWriter, r *http.Request) {
		// No reload from a web page of another site (webguard.StateChange).
		if ref := webguard.StateChange(r); ref != nil {
			http.Error(w, ref.Message, http.StatusForbidden)
			return
		}
		changed, err := d.Reload()
		if err != nil {
			http.Error(w, fmt.Sprintf("failed to reload config: %s", err), http.StatusInternalServerError)
			return
		}
		if changed {
			fmt.Fprintln(w, "config reloaded")
		} else {
			fmt.Fprintln(w, "config unchanged")
		}
	}
	d.mux.HandleFunc("POST /-/reload", reload)
	d.mux.HandleFunc("PUT /-/reload", reload)
	// Other methods get a 405 that says which ones work.
	d.mux.HandleFunc("/-/reload", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", "POST, PUT")
		http.Error(w, "This endpoint requires a POST or PUT request.", http.StatusMethodNotAllowed)
	})
	d.mux.HandleFunc("GET /config", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if p := d.restartSettings.Load(); p != nil && len(*p) > 0 {
			fmt.Fprintf(w, "# RESTART REQUIRED: the settings below are read only at start; the running values are\n"+
				"# those the process started with, not the ones shown here: %s\n", strings.Join(*p, ", "))
		}
		fmt.Fprint(w, d.cfg.Get().Redacted())
	})
	return nil
}

// Reload re-reads the config file. A bad file keeps the running config and
// sets slaprobe_config_last_reload_successful to 0; a changed good one
// restarts the scheduler.
func (d *Daemon) Reload() (changed bool, err error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	old := d.cfg.Get()
	changed, err = d.cfg.Reload(d.opts.ConfigFile)
	if err != nil {
		d.reloadOK.Set(0)
		d.logger.Error("config reload failed; keeping the running config", "file", d.opts.ConfigFile, "err", err)
		return false, err
	}
	d.reloadOK.Set(1)
	d.reloadTime.SetToCurrentTime()
	if !changed {
		if d.runCtx != nil && d.sched == nil {
			// The last reload could not start the probes: try again.
			if err := d.startSchedulerLocked(); err != nil {
				d.reloadOK.Set(0)
				d.logger.Error("config reload: cannot start probes; /-/ready reports not ready", "err", err)
				return false, err
			}
		}
		d.logger.Info("config unchanged", "file", d.opts.ConfigFile)
		return false, nil
	}
	cur := d.cfg.Get()
	running := d.runCtx != nil
	if running {
		// Stop first, so the old loops cannot record into series that
		// applyConfig is about to drop.
		d.stopSchedulerLocked()
	}
	d.applyConfig(old, cur)
	d.noteStartOnly(cur)
	d.noteDeprecations(cur)
	if running {
		if err := d.startSchedulerLocked(); err != nil {
			d.reloadOK.Set(0)
			d.logger.Error("config reload: cannot start probes; /-/ready reports not ready", "err", err)
			return true, err
		}
	}
	d.logger.Info("config reloaded", "file", d.opts.ConfigFile, "targets", len(cur.TargetConfigs))
	return true, nil
}

// noteDeprecations logs one warning per deprecated key the config uses
// (config.Config.Deprecations), naming it and the key that replaces it.
func (d *Daemon) noteDeprecations(cfg *config.Config) {
	for _, msg := range cfg.Deprecations() {
		d.logger.Warn("config uses a deprecated key", "file", d.opts.ConfigFile, "detail", msg)
	}
}

// noteStartOnly reports the start-only settings cur changes: one warning
// per setting, slaprobe_config_restart_required and a line on /config.
func (d *Daemon) noteStartOnly(cur *config.Config) {
	changed := config.StartOnlyChanges(d.started, cur)
	d.restartSettings.Store(&changed)
	if len(changed) == 0 {
		d.restartRequired.Set(0)
		return
	}
	d.restartRequired.Set(1)
	for _, s := range changed {
		d.logger.Warn("config reload: this setting is read only at start; the running value stays until slaprobe restarts",
			"setting", s)
	}
}

// buildTargets builds the scheduler's targets; tests replace it to make
// the start of the probes fail.
var buildTargets = (*config.Config).Targets

// applyConfig publishes what does not need the scheduler and drops the
// series of targets that left or changed, so nothing stale lingers.
func (d *Daemon) applyConfig(old, cur *config.Config) {
	d.prober.SetMaxLineBytes(cur.Global.MaxLineBytes)
	d.prober.SetMaxAnswerBytes(cur.Global.MaxAnswerBytes)
	d.metrics.SetThresholds(cur.AllScenarios())
	if old != nil {
		for _, ot := range old.TargetConfigs {
			if !sameTarget(old, cur, ot.Name) {
				d.metrics.ForgetTarget(ot.Name)
				delete(d.knownModels, ot.Name)
			}
		}
	}
	d.onReloadMu.Lock()
	fns := append([]func(*config.Config){}, d.onReload...)
	d.onReloadMu.Unlock()
	for _, fn := range fns {
		fn(cur)
	}
}

// sameTarget reports whether the target keeps its URL, model, API and
// scenarios, so that its series remain valid.
func sameTarget(old, cur *config.Config, name string) bool {
	find := func(c *config.Config) *config.TargetConfig {
		for i := range c.TargetConfigs {
			if c.TargetConfigs[i].Name == name {
				return &c.TargetConfigs[i]
			}
		}
		return nil
	}
	o, n := find(old), find(cur)
	if o == nil || n == nil {
		return false
	}
	return o.URL == n.URL && o.Model == n.Model && o.API == n.API &&
		reflect.DeepEqual(old.Scenarios(name), cur.Scenarios(name))
}

// startSchedulerLocked starts a scheduler for the current config.
// d.reloadMu is held and no scheduler runs.
func (d *Daemon) startSchedulerLocked() error {
	cfg := d.cfg.Get()
	targets, err := buildTargets(cfg)
	if err != nil {
		return err
	}

	st := make([]prober.ScheduledTarget, len(targets))
	for i, t := range targets {
		st[i] = prober.ScheduledTarget{Target: t, Scenarios: cfg.Scenarios(t.Name)}
	}
	probe := d.opts.Probe
	if probe == nil {
		probe = d.prober.ProbePaced
	}
	s := prober.NewScheduler(st, prober.SchedulerOptions{
		Probe:                probe,
		ListModels:           d.opts.ListModels,
		Invalidate:           d.prober.Invalidate,
		Observer:             probeObserver{d.metrics, d},
		Hooks:                []prober.ProbeHook{hookSet{d}},
		Holds:                &d.holds,
		Logger:               d.logger.With("component", "scheduler"),
		Jitter:               cfg.Global.Jitter,
		MaxInFlightPerTarget: cfg.Global.MaxInFlightPerTarget,
		ModelRefreshInterval: time.Duration(cfg.Global.ModelRefreshInterval),
		KnownModels:          d.knownModels,
		Sleep:                d.opts.SchedulerSleep,
	})
	ctx, cancel := context.WithCancel(d.runCtx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	d.sched, d.stopSched, d.schedDone = s, cancel, done
	d.current.Store(s)
	d.ready.Store(true)
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	d.logger.Info("probing", "targets", strings.Join(names, ","))
	return nil
}

// stopSchedulerLocked cancels the scheduler and waits for its probes to
// stop, keeping the models it detected for the next one.
func (d *Daemon) stopSchedulerLocked() {
	d.ready.Store(false) // until a scheduler runs again
	if d.sched == nil {
		return
	}
	d.stopSched()
	<-d.schedDone
	known := d.sched.Models()
	cfg := d.cfg.Get()
	for name := range known {
		if cfg.Scenarios(name) == nil {
			delete(known, name)
		}
	}
	d.knownModels = known
	d.sched, d.stopSched, d.schedDone = nil, nil, nil
	d.current.Store(nil)
}

// ScenarioDisabled reports whether the running scheduler disabled scenario
// on target because it does not fit the model's max_model_len, and that
// length (see prober.Scheduler.ScenarioDisabled).
func (d *Daemon) ScenarioDisabled(target, scenario string) (bool, int) {
	s := d.current.Load()
	if s == nil {
		return false, 0
	}
	return s.ScenarioDisabled(target, scenario)
}

// TargetSlot takes one of the running scheduler's in-flight slots of the
// configured target named target (see prober.Scheduler.TrySlot); known is
// false while no scheduler runs or it has no such target.
func (d *Daemon) TargetSlot(ctx context.Context, target string) (release func(), ok, known bool) {
	s := d.current.Load()
	if s == nil {
		return nil, false, false
	}
	return s.TrySlot(ctx, target)
}

// NextProbe reports when the running scheduler sends the next probe of
// scenario on target (see prober.Scheduler.NextProbe); false while no
// scheduler runs or its loop has not started.
func (d *Daemon) NextProbe(target, scenario string) (time.Time, bool) {
	s := d.current.Load()
	if s == nil {
		return time.Time{}, false
	}
	return s.NextProbe(target, scenario)
}

// hookSet fans a probe out to the hooks added so far.
type hookSet struct{ d *Daemon }

func (h hookSet) list() []prober.ProbeHook {
	h.d.hooksMu.RLock()
	defer h.d.hooksMu.RUnlock()
	return h.d.hooks
}

func (h hookSet) BeforeProbe(ctx context.Context, t prober.Target, s prober.Scenario) {
	for _, x := range h.list() {
		x.BeforeProbe(ctx, t, s)
	}
}

func (h hookSet) AfterProbe(res *prober.Result) {
	for _, x := range h.list() {
		x.AfterProbe(res)
	}
}

// Listen opens the listeners of --web.listen-address, so that callers
// learn the addresses (port 0) before Run. Systemd sockets and vsock
// addresses are opened by Run instead and are not returned.
func (d *Daemon) Listen() ([]net.Addr, error) {
	if d.opts.Web == nil || d.listeners != nil || d.systemdOrVsock() {
		return d.addrs(), nil
	}
	if d.opts.Web.WebListenAddresses == nil || len(*d.opts.Web.WebListenAddresses) == 0 {
		return nil, errors.New("no --web.listen-address")
	}
	var ls []net.Listener
	for _, a := range *d.opts.Web.WebListenAddresses {
		l, err := net.Listen("tcp", a)
		if err != nil {
			for _, x := range ls {
				x.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", a, err)
		}
		ls = append(ls, l)
	}
	d.listeners = ls
	return d.addrs(), nil
}

func (d *Daemon) addrs() []net.Addr {
	out := make([]net.Addr, len(d.listeners))
	for i, l := range d.listeners {
		out[i] = l.Addr()
	}
	return out
}

func (d *Daemon) systemdOrVsock() bool {
	w := d.opts.Web
	if w.WebSystemdSocket != nil && *w.WebSystemdSocket {
		return true
	}
	if w.WebListenAddresses != nil {
		for _, a := range *w.WebListenAddresses {
			if strings.HasPrefix(a, "vsock://") {
				return true
			}
		}
	}
	return false
}

// Run starts probing and serving, reloads on SIGHUP, and returns when ctx
// is done (after stopping the probes and the server) or the server fails.
func (d *Daemon) Run(ctx context.Context) error {
	d.reloadMu.Lock()
	d.runCtx = ctx
	err := d.startSchedulerLocked()
	if err != nil {
		d.runCtx = nil
	}
	d.reloadMu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		d.ready.Store(false)
		d.reloadMu.Lock()
		d.stopSchedulerLocked()
		d.runCtx = nil
		d.reloadMu.Unlock()
		d.onReloadMu.Lock()
		stops := append([]func(){}, d.onStop...)
		d.onReloadMu.Unlock()
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	d.ready.Store(true)

	var serveErr <-chan error
	var srv *http.Server
	if d.opts.Web != nil {
		if _, err := d.Listen(); err != nil {
			return err
		}
		ls := d.listeners
		if ls == nil {
			if ls, err = d.openSpecialListeners(); err != nil {
				return err
			}
		}
		srv = d.webServer()
		serveErr = d.serveWeb(srv, ls)
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	for {
		select {
		case <-ctx.Done():
			if srv != nil {
				shutdownWeb(srv)
			}
			return nil
		case <-hup:
			d.logger.Info("SIGHUP: reloading config")
			_, _ = d.Reload() // logged; a bad file keeps the running config
		case err := <-serveErr:
			shutdownWeb(srv) // the other listeners too
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("web server: %w", err)
		}
	}
}
