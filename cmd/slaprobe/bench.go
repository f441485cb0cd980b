package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/version"

	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/prober"
)

// benchFlags are `slaprobe bench`'s own flags; each one given overrides the
// config file's `sweep` section.
type benchFlags struct {
	target      *string
	concurrency *string
	burst       *string
	out         *string
	duration    *time.Duration
	warmup      *time.Duration
	ttft        *time.Duration
	stat        *string
	repeat      *int
	ceiling     *int
	earlyStop   *float64
	cooldown    *time.Duration
	title       *string
	set         map[string]*bool
}

// benchCLI holds the parsed flags of `slaprobe bench`, for tests.
var benchCLI struct {
	cf *configFlags
	bf *benchFlags
}

func init() {
	def := config.DefaultSweepConfig()
	cmd := app.Command("bench", "Run a one-shot concurrency and burst sweep against one server and write report.json, report.md and "+
		"a self-contained report.html: per-user decode speed, ITL, TTFT, system throughput, scaling efficiency and capacity.")
	cf := addConfigFlags(cmd)
	bf := &benchFlags{set: map[string]*bool{}}
	benchCLI.cf, benchCLI.bf = cf, bf
	flag := func(name, help string) *kingpin.FlagClause {
		b := new(bool)
		bf.set[name] = b
		return cmd.Flag(name, help).IsSetByUser(b)
	}
	ladder := func(l []int) string {
		s := make([]string, len(l))
		for i, n := range l {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ",")
	}
	bf.target = cmd.Flag("bench.target", "Target to sweep, by name, when the config file has several.").PlaceHolder("NAME").String()
	bf.concurrency = flag("concurrency", "Closed-loop ladder: exactly N requests in flight per step. \"none\" skips the closed loop.").
		Default(ladder(def.ClosedLoop.Concurrency)).String()
	bf.burst = flag("burst", "Burst ladder: N requests sent at once per step. \"none\" skips bursts.").
		Default(ladder(def.Burst.Concurrency)).String()
	bf.out = cmd.Flag("out", "Directory the report is written to (created if needed).").Default("slaprobe-report").String()
	bf.duration = flag("step.duration", "Steady measurement window of each closed-loop step.").
		Default(time.Duration(def.ClosedLoop.Duration).String()).Duration()
	bf.warmup = flag("step.warmup", "Ramp-up before each closed-loop step's window, not measured.").
		Default(time.Duration(def.ClosedLoop.Warmup).String()).Duration()
	bf.ttft = flag("ttft.threshold", "TTFT limit of the max safe queue depth.").
		Default(time.Duration(def.Capacity.MaxSafeTTFT).String()).Duration()
	bf.stat = flag("capacity.stat", "Statistic of each step judged against limits: mean (as the reports), p50, p90, p95 or p99.").
		Default(def.Capacity.Statistic).String()
	bf.repeat = flag("burst.repeat", "Bursts of N per burst step, one after another.").Default(strconv.Itoa(def.Burst.Repeat)).Int()
	bf.ceiling = flag("max-concurrency", "Ceiling on N for both ladders (0: none).").Default(strconv.Itoa(def.MaxConcurrency)).Int()
	bf.earlyStop = flag("early-stop.factor", "Stop a scenario's ladder once a step misses every threshold by this factor (0: never).").
		Default(strconv.FormatFloat(def.EarlyStop.Factor, 'g', -1, 64)).Float64()
	bf.cooldown = flag("cooldown", "Idle time between steps.").Default(time.Duration(def.Cooldown).String()).Duration()
	bf.title = cmd.Flag("title", "Report title (default: \"<model> benchmark\").").String()

	register(cmd, func() int {
		// Ctrl-C stops the sweep and still writes what was measured; a
		// second Ctrl-C kills at once.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		go func() {
			<-ctx.Done()
			stop()
		}()
		return runBench(ctx, newLogger(), os.Stdout, os.Stderr)
	})
}

// runBench is the body of `slaprobe bench`, reading the parsed flags; it
// returns the exit code (see exitcodes.go): 1 for a bad config, flag value
// or target, 130 when ctx was cancelled, after writing the partial report.
func runBench(ctx context.Context, logger *slog.Logger, stdout, stderr io.Writer) int {
	cf, bf := benchCLI.cf, benchCLI.bf
	fl := cf.flags()
	fl.Scenarios = nil // bench reads --scenarios itself: it is the sweep's list, not global.scenarios
	var scenarioFlags []string
	if cf.scenariosSet {
		scenarioFlags = *cf.scenarios
	}
	cfg, err := config.LoadWithFlags(*cf.file, fl)
	if err != nil {
		fmt.Fprintf(stderr, "config error: %v\n", err)
		return 1
	}
	sc, err := bf.apply(cfg.Sweep.OrDefault())
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	targets, err := cfg.Targets()
	if err != nil {
		fmt.Fprintf(stderr, "config error: %v\n", err)
		return 1
	}
	t, err := pickTarget(targets, *bf.target)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	names := sc.ScenarioNames()
	if len(scenarioFlags) > 0 {
		names = splitList(scenarioFlags)
	}
	scenarios, err := resolveScenarios(cfg.AllScenarios(), names)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}

	p := prober.New(logger, prober.SystemClock{})
	p.SetMaxLineBytes(cfg.Global.MaxLineBytes)
	meta := report.Meta{
		Title: *bf.title, ToolVersion: version.Version, TargetURL: t.BaseURL,
		Host: report.Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()},
	}
	meta.Host.Hostname, _ = os.Hostname()
	model := t.Model
	if models, err := prober.ListModels(ctx, t); err != nil {
		if model == "" {
			fmt.Fprintf(stderr, "bench: %s: %v\n", t.BaseURL, err)
			return 1
		}
		logger.Warn("cannot list models", "err", err)
	} else {
		for _, m := range models {
			if model == "" || m.ID == model {
				model, meta.MaxModelLen = m.ID, m.MaxModelLen
				break
			}
		}
		if model == "" {
			fmt.Fprintf(stderr, "bench: %s/v1/models lists no model\n", t.BaseURL)
			return 1
		}
	}
	meta.Model = model

	opts := sc.Options(scenarios)
	opts.Logger = logger
	metricsURL := engine.MetricsURL(t)
	if snap, err := engine.Scrape(ctx, t.Client, metricsURL); err != nil {
		logger.Info("engine metrics unavailable: no queue wait in the report", "url", metricsURL, "err", err)
	} else {
		meta.Engine = snap.Flavor
		opts.Scrape = func(ctx context.Context) (prober.EngineCounters, error) {
			s, err := engine.Scrape(ctx, t.Client, metricsURL)
			return prober.EngineCounters{QueueTimeSum: s.QueueTimeSum, QueueTimeCount: s.QueueTimeCount, HasQueueTime: s.HasQueueTime}, err
		}
	}
	pc := cfg.Power.OrDefault()
	if pc.NVML {
		if r, err := gpu.New(nvml.New(), logger, gpu.Options{Selectors: pc.Devices, PollInterval: time.Second}); err == nil && r.Up() {
			sel := pc.TargetDevices[t.Name]
			if len(sel) == 0 {
				sel = pc.Devices
			}
			opts.Power = gpu.NewPowerSampler(r, sel, 0)
			if devs := r.Devices(); len(devs) > 0 {
				meta.GPU = &report.GPU{Name: devs[0].Name, Count: len(devs)}
			}
			defer r.Close()
		}
	}

	bar := newProgress(stderr, isTerminal(stderr))
	opts.Progress = bar.event
	cpu0, wall0 := cpuTime(), time.Now()
	fmt.Fprintf(stderr, "sweeping %s (%s): %d scenario(s), closed loop %v, burst %v\n", t.Name, model, len(scenarios),
		ladderText(opts.ClosedLoop, opts.MaxConcurrency), ladderText(opts.Burst, opts.MaxConcurrency))
	res, sweepErr := prober.Sweep(ctx, p, t, model, opts)
	bar.done()
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	logger.Info("bench finished", "wall", wall.Round(time.Millisecond), "client_cpu", cpu.Round(time.Millisecond),
		"client_cpu_share_of_one_core", fmt.Sprintf("%.1f%%", 100*cpu.Seconds()/wall.Seconds()),
		"cores", runtime.NumCPU(), "peak_rss", peakRSS())
	if sweepErr != nil {
		fmt.Fprintf(stderr, "sweep stopped (%v): writing the steps measured so far\n", sweepErr)
	}

	rep := buildReport(res, meta, pc.PricePerKWh, opts.Power != nil)
	paths, err := report.Write(*bf.out, rep)
	if err != nil {
		fmt.Fprintf(stderr, "bench: write report: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "report written to %s\n", *bf.out)
	for _, p := range paths {
		fmt.Fprintf(stdout, "  %s\n", p)
	}
	if sweepErr != nil {
		return 130
	}
	return 0
}

// apply overrides sc with the flags the user gave.
func (bf *benchFlags) apply(sc config.SweepConfig) (config.SweepConfig, error) {
	given := func(name string) bool { b := bf.set[name]; return b != nil && *b }
	if given("concurrency") {
		l, err := parseLadder(*bf.concurrency)
		if err != nil {
			return sc, fmt.Errorf("--concurrency: %w", err)
		}
		sc.ClosedLoop.Concurrency = l
	}
	if given("burst") {
		l, err := parseLadder(*bf.burst)
		if err != nil {
			return sc, fmt.Errorf("--burst: %w", err)
		}
		sc.Burst.Concurrency = l
	}
	if given("step.duration") {
		sc.ClosedLoop.Duration = model.Duration(*bf.duration)
	}
	if given("step.warmup") {
		sc.ClosedLoop.Warmup = model.Duration(*bf.warmup)
	}
	if given("ttft.threshold") {
		sc.Capacity.MaxSafeTTFT = model.Duration(*bf.ttft)
	}
	if given("capacity.stat") {
		sc.Capacity.Statistic = *bf.stat
	}
	if given("burst.repeat") {
		sc.Burst.Repeat = *bf.repeat
	}
	if given("max-concurrency") {
		sc.MaxConcurrency = *bf.ceiling
	}
	if given("early-stop.factor") {
		sc.EarlyStop.Factor = *bf.earlyStop
	}
	if given("cooldown") {
		sc.Cooldown = model.Duration(*bf.cooldown)
	}
	sc.Enabled = false // the daemon's job switch; irrelevant here (and state_file may be empty)
	if len(sc.ClosedLoop.Concurrency) == 0 && len(sc.Burst.Concurrency) == 0 {
		return sc, errors.New("both ladders are empty; give --concurrency or --burst")
	}
	return sc, sc.Validate()
}

// parseLadder reads "1,2,4" (spaces allowed); "none" or "" is an empty ladder.
func parseLadder(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return []int{}, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer; expected a list such as 1,2,4,8", strings.TrimSpace(f))
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}

func pickTarget(targets []prober.Target, name string) (prober.Target, error) {
	if name != "" {
		for _, t := range targets {
			if t.Name == name {
				return t, nil
			}
		}
	} else if len(targets) == 1 {
		return targets[0], nil
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	if name != "" {
		return prober.Target{}, fmt.Errorf("--bench.target=%q: no such target; expected one of: %s", name, strings.Join(names, ", "))
	}
	return prober.Target{}, fmt.Errorf("the config has %d targets; choose one with --bench.target (%s)", len(targets), strings.Join(names, ", "))
}

func resolveScenarios(all []prober.Scenario, names []string) ([]prober.Scenario, error) {
	out := make([]prober.Scenario, 0, len(names))
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n {
				out, found = append(out, s), true
				break
			}
		}
		if !found {
			known := make([]string, len(all))
			for i, s := range all {
				known[i] = s.Name
			}
			sort.Strings(known)
			return nil, fmt.Errorf("unknown scenario %q; expected one of: %s", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

func ladderText(l []int, ceiling int) string {
	var kept []string
	for _, n := range l {
		if ceiling <= 0 || n <= ceiling {
			kept = append(kept, strconv.Itoa(n))
		}
	}
	if len(kept) == 0 {
		return "none"
	}
	return strings.Join(kept, ",")
}

// buildReport maps a sweep onto the report schema.
func buildReport(res *prober.SweepResult, meta report.Meta, pricePerKWh float64, power bool) *report.Report {
	meta.StartedAt, meta.FinishedAt, meta.Interrupted = res.Started, res.Finished, res.Interrupted
	th := report.DefaultThresholds()
	th.MaxSafeQueueTTFTSeconds = res.Settings.MaxSafeTTFTSeconds
	th.MaxSafeQueueStat = string(res.Settings.CapacityStat)
	rep := &report.Report{
		Meta: meta,
		Config: report.Config{
			ClosedLoopLadder:    res.Settings.ClosedLoop,
			BurstLadder:         res.Settings.Burst,
			StepDurationSeconds: res.Settings.StepSeconds,
			WarmupSeconds:       res.Settings.WarmupSeconds,
			EarlyStop:           res.Settings.EarlyStopFactor > 0,
			Thresholds:          th,
		},
	}
	if power {
		rep.Config.PricePerKWh = pricePerKWh
	}
	if res.Interrupted {
		done := 0
		for _, s := range res.Scenarios {
			done += len(s.ClosedLoop) + len(s.Burst)
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("Interrupted before the end: the report holds the %d steps that finished.", done))
	}
	stat := string(res.Settings.CapacityStat)
	for _, s := range res.Scenarios {
		rep.Config.Scenarios = append(rep.Config.Scenarios, s.Name)
		if s.Error != "" {
			rep.Notes = append(rep.Notes, fmt.Sprintf("Scenario %s was skipped: %s.", s.Name, s.Error))
			continue
		}
		rs := report.Scenario{
			Name: s.Name, Family: string(s.Family), Description: s.Description,
			InputTokens: s.InputTokens, OutputTokens: s.OutputTokens,
			Thresholds: report.Thresholds{
				TTFTSeconds: s.Thresholds.TTFTSeconds, E2ESeconds: s.Thresholds.E2ESeconds,
				ITLSeconds: s.Thresholds.ITLSeconds, MinDecodeTokensPerSecond: s.Thresholds.MinDecodeTokensPS,
			},
		}
		for _, st := range s.ClosedLoop {
			rs.ClosedLoop = append(rs.ClosedLoop, reportStep(st, pricePerKWh))
		}
		for _, st := range s.Burst {
			rs.Burst = append(rs.Burst, reportStep(st, pricePerKWh))
		}
		for _, es := range []struct {
			mode report.Mode
			stop *prober.EarlyStop
		}{{report.ModeClosedLoop, s.ClosedLoopStop}, {report.ModeBurst, s.BurstStop}} {
			if es.stop != nil {
				rs.StoppedEarly = append(rs.StoppedEarly, report.EarlyStop{Mode: es.mode, AfterN: es.stop.Concurrency,
					SkippedLadderN: es.stop.Skipped, Reason: es.stop.Reason})
			}
		}
		rep.Scenarios = append(rep.Scenarios, rs)

		if c := s.MaxSafeQueue; c != nil && c.Bound != prober.BoundUnknown {
			rep.Capacity.MaxSafeQueue = append(rep.Capacity.MaxSafeQueue, report.QueueCapacity{
				Scenario: s.Name, Bound: reportBound(*c), ThresholdSeconds: res.Settings.MaxSafeTTFTSeconds,
				Stat: stat, MaxTested: c.MaxTested,
			})
		}
		if c := s.Capacity; c != nil && c.Bound != prober.BoundUnknown && hasThresholds(s.Thresholds) {
			uc := report.UseCaseCapacity{Scenario: s.Name, Mode: report.ModeClosedLoop, Bound: reportBound(*c),
				LimitedBy: c.LimitedBy, MaxTested: c.MaxTested}
			for _, l := range c.Limits {
				if l.Kind == "success" { // not a threshold of the scenario; LimitedBy still names it when it binds
					continue
				}
				uc.Limits = append(uc.Limits, report.Limit{Kind: l.Kind, Threshold: l.Threshold, Stat: string(l.Stat), Bound: reportBound(l.Capacity)})
			}
			rep.Capacity.UseCases = append(rep.Capacity.UseCases, uc)
		}
	}
	return rep
}

func hasThresholds(t prober.SLA) bool {
	return t.TTFTSeconds > 0 || t.E2ESeconds > 0 || t.ITLSeconds > 0 || t.MinDecodeTokensPS > 0
}

func reportBound(c prober.Capacity) report.Bound {
	switch c.Bound {
	case prober.BoundAtLeast:
		return report.Bound{Value: c.N, AtLeast: true}
	case prober.BoundBelow:
		return report.Bound{}
	}
	return report.Bound{Value: c.N, Approximate: c.Approximate}
}

func reportStep(st prober.StepResult, pricePerKWh float64) report.Step {
	dist := func(s prober.Summary) report.Dist {
		return report.Dist{Mean: s.Mean, P50: s.P50, P90: s.P90, P95: s.P95, P99: s.P99}
	}
	out := report.Step{
		Concurrency: st.Concurrency, DurationSeconds: st.WindowSeconds,
		RequestsSent: st.Requests, RequestsOK: st.Succeeded, SuccessRate: st.SuccessRatio,
		Decode: dist(st.Decode), ITL: dist(st.ITL), TTFT: dist(st.TTFT), E2E: dist(st.E2E),
		PrefillTokensPerSecond: st.Prefill.Mean,
		SystemTokensPerSecond:  st.SystemThroughput, TokensPerHour: st.TokensPerHour,
		QueueWaitSeconds: st.QueueWaitSeconds,
	}
	if st.PrefillExclQueue > 0 {
		out.PrefillTokensPerSecond = st.PrefillExclQueue
	}
	if len(st.Errors) > 0 {
		out.Errors = make(map[string]int, len(st.Errors))
		for r, n := range st.Errors {
			out.Errors[string(r)] = n
		}
	}
	if st.Mode == prober.ModeClosedLoop && st.ScalingEfficiency > 0 {
		out.ScalingEfficiency = report.Float(st.ScalingEfficiency)
	}
	if p := st.Power; p != nil {
		out.Power = &report.Power{AvgWatts: p.AvgWatts, PeakWatts: p.PeakWatts, JoulesPerToken: p.JoulesPerOutputToken,
			CostPerHourUSD: gpu.CostPerHour(p.AvgWatts, pricePerKWh)}
	}
	return out
}

// progress draws a one-line bar with ETA on a terminal, or prints one plain
// line per step otherwise.
type progress struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	last prober.ProgressEvent
	at   time.Time
	stop chan struct{}
	wg   sync.WaitGroup
	// The client's CPU time when the current step started: each finished
	// step reports the share of one core the prober itself used, so a
	// saturated client shows up next to the numbers it would distort.
	stepCPU  time.Duration
	stepWall time.Time
}

func newProgress(w io.Writer, tty bool) *progress {
	p := &progress{w: w, tty: tty, stop: make(chan struct{})}
	if tty {
		p.wg.Add(1)
		go func() { // keep the elapsed time and ETA moving between events
			defer p.wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-p.stop:
					return
				case <-tick.C:
					p.mu.Lock()
					if p.last.Steps > 0 {
						p.draw()
					}
					p.mu.Unlock()
				}
			}
		}()
	}
	return p
}

func (p *progress) event(ev prober.ProgressEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.at = ev, time.Now()
	cpuShare := ""
	switch ev.Kind {
	case prober.ProgressStepStarted:
		p.stepCPU, p.stepWall = cpuTime(), time.Now()
	case prober.ProgressStepFinished:
		if wall := time.Since(p.stepWall); wall > 0 && !p.stepWall.IsZero() {
			cpuShare = fmt.Sprintf(", client CPU %.0f%% of a core", 100*(cpuTime()-p.stepCPU).Seconds()/wall.Seconds())
		}
	}
	if p.tty {
		if ev.Kind == prober.ProgressStepSkipped || ev.Kind == prober.ProgressScenarioFailed {
			fmt.Fprintf(p.w, "\r\033[K%s: %s\n", ev.Scenario, ev.Message)
		}
		p.draw()
		return
	}
	switch ev.Kind {
	case prober.ProgressStepStarted:
		fmt.Fprintf(p.w, "[%d/%d] %s %s N=%d started (elapsed %s, about %s left)\n", ev.Step, ev.Steps, ev.Scenario,
			modeName(ev.Mode), ev.Concurrency, fmtDur(ev.Elapsed), fmtDur(ev.Remaining))
	case prober.ProgressStepFinished:
		r := ev.Result
		fmt.Fprintf(p.w, "[%d/%d] %s %s N=%d done: %d/%d ok, TTFT mean %.3fs, decode %.1f tok/s, system %.0f tok/s%s\n",
			ev.Step, ev.Steps, ev.Scenario, modeName(ev.Mode), ev.Concurrency, r.Succeeded, r.Requests,
			r.TTFT.Mean, r.Decode.Mean, r.SystemThroughput, cpuShare)
	default:
		fmt.Fprintf(p.w, "%s: %s\n", ev.Scenario, ev.Message)
	}
}

// draw renders the bar; p.mu is held.
func (p *progress) draw() {
	ev := p.last
	since := time.Since(p.at)
	elapsed := ev.Elapsed + since
	remaining := ev.Remaining - since
	if remaining < 0 {
		remaining = 0
	}
	done := ev.Step
	if ev.Kind == prober.ProgressStepStarted {
		done--
	}
	const width = 24
	filled := 0
	if ev.Steps > 0 {
		filled = width * done / ev.Steps
	}
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	fmt.Fprintf(p.w, "\r\033[K%s %d/%d  %s %s N=%d  elapsed %s  ETA %s", bar, done, ev.Steps, ev.Scenario,
		modeName(ev.Mode), ev.Concurrency, fmtDur(elapsed), fmtDur(remaining))
}

func (p *progress) done() {
	close(p.stop)
	p.wg.Wait()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func modeName(m prober.Mode) string {
	if m == prober.ModeBurst {
		return "burst"
	}
	return "closed-loop"
}

func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// isTerminal reports whether w is a character device (a terminal); the
// module has no golang.org/x/term.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// peakRSS is this process's peak resident set size from /proc/self/status
// ("" where unavailable).
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}

// cpuTime is this process's user + system CPU time from /proc/self/stat
// (Linux; 0 elsewhere), in USER_HZ ticks of 10 ms.
func cpuTime() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of proc(5)
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
