// Package bench is `slaprobe bench`: a one-shot sweep of one server that
// writes report.json, report.md and report.html, with a progress bar (or
// plain lines off a terminal) and the client's own CPU use, so a saturated
// prober shows up next to the numbers it would distort.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/slaprobe/slaprobe/internal/compare"
	"github.com/slaprobe/slaprobe/internal/config"
	"github.com/slaprobe/slaprobe/internal/gate"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/sweeper"
	"github.com/slaprobe/slaprobe/prober"
)

// Exit codes of Run, the same for every slaprobe command (cmd/slaprobe's
// exitcodes.go lists what each means).
const (
	ExitOK          = 0
	ExitFailure     = 1   // invalid config, settings or flag values; the server or the output could not be reached
	ExitUsage       = 2   // the command line could not be parsed (kingpin rejects it before Run)
	ExitInterrupted = 130 // stopped early; the partial report was written
	// ExitRegression and ExitNoVerdict are a gate's (--fail-on): a
	// significant regression of a kind it names; figures it covers without
	// a verdict, failed closed.
	ExitRegression = gate.ExitRegression
	ExitNoVerdict  = gate.ExitNoVerdict
)

// Options are one bench run.
type Options struct {
	// Config is the loaded config; Sweep (its sweep section with the
	// command line's overrides) replaces Config.Sweep.
	Config *config.Config
	Sweep  config.SweepConfig
	// Target names the target to sweep; empty is fine when there is one.
	Target string
	// Scenarios to sweep; empty means Sweep.ScenarioNames().
	Scenarios []string
	// Out is the report directory; Title the report's title (optional).
	Out, Title string
	// Baseline is a report.json (or the directory holding one) to compare
	// the run with: the report then draws it beside the run, with a change
	// column in every table and a verdict per step and metric. Empty: none.
	Baseline string
	// Gate, with Baseline, turns the comparison into an exit code
	// (--fail-on, --fail-on-unknown, --verdict-file).
	Gate gate.Options
	// Compare sets how the comparison with Baseline judges (its zero value:
	// compare.DefaultOptions, as the command uses); BaseLabel is Baseline.
	Compare compare.Options
	// NVML opens the NVML library when power.nvml is on (nvml.New in the
	// binary, a mock in tests); nil means no power readings.
	NVML           func() nvml.Interface
	Logger         *slog.Logger
	Stdout, Stderr io.Writer
	// Runner replaces the prober (tests); nil makes one.
	Runner sweep.Runner
}

// Run sweeps and writes the report; it returns an exit code. When ctx is
// cancelled it writes what was measured and returns ExitInterrupted.
func Run(ctx context.Context, o Options) int {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sc := o.Sweep
	sc.Enabled = false // the daemon's job switch; irrelevant here (and state_file may be empty)
	if len(sc.ClosedLoop.Concurrency) == 0 && len(sc.Burst.Concurrency) == 0 {
		fmt.Fprintln(o.Stderr, "bench: both ladders are empty; give --concurrency or --burst")
		return ExitFailure
	}
	if err := sc.Validate(); err != nil {
		fmt.Fprintf(o.Stderr, "bench: %v\n", err)
		return ExitFailure
	}
	targets, err := o.Config.Targets()
	if err != nil {
		fmt.Fprintf(o.Stderr, "config error: %v\n", err)
		return ExitFailure
	}
	t, err := PickTarget(targets, o.Target)
	if err != nil {
		fmt.Fprintf(o.Stderr, "bench: %v\n", err)
		return ExitFailure
	}
	// Read the baseline first: a typo should not cost a whole sweep.
	var baseline *report.Report
	if o.Baseline != "" {
		if baseline, err = compare.LoadReport(o.Baseline); err != nil {
			fmt.Fprintf(o.Stderr, "bench: --baseline: %v\n", err)
			return ExitFailure
		}
	}
	names := o.Scenarios
	if len(names) == 0 {
		names = sc.ScenarioNames()
	}
	if _, err := sweeper.LookupScenarios(o.Config.AllScenarios(), names); err != nil {
		fmt.Fprintf(o.Stderr, "bench: %v\n", err)
		return ExitFailure
	}

	env := sweeper.Env{Logger: logger}
	if pc := o.Config.Power; pc.NVML && o.NVML != nil {
		r, err := gpu.New(o.NVML(), logger, gpu.Options{Selectors: pc.Devices, PollInterval: time.Second})
		if err == nil {
			defer r.Close()
			env.GPUs = r
		}
	}
	plan, err := sweeper.NewPlan(ctx, o.Config, sc, t, names, env)
	if err != nil {
		fmt.Fprintf(o.Stderr, "bench: %s: %v\n", t.BaseURL, err)
		return ExitFailure
	}
	runner := o.Runner
	if runner == nil {
		p := prober.New(logger, prober.SystemClock{})
		p.SetMaxLineBytes(o.Config.Global.MaxLineBytes)
		p.SetMaxAnswerBytes(o.Config.Global.MaxAnswerBytes)
		runner = p
	}
	meta := plan.Meta()
	meta.Title = o.Title

	bar := newProgress(o.Stderr, isTerminal(o.Stderr))
	plan.Options.Progress = bar.event
	plan.Options.CheckStepDuration = true
	cpu0, wall0 := cpuTime(), time.Now()
	fmt.Fprintf(o.Stderr, "sweeping %s (%s): %d scenario(s), closed loop %v, burst %v\n", t.Name, plan.Model.ID, len(plan.Scenarios),
		ladderText(plan.Options.ClosedLoop, plan.Options.MaxConcurrency), ladderText(plan.Options.Burst, plan.Options.MaxConcurrency))
	rep, _, sweepErr := plan.Run(ctx, runner, meta)
	bar.done()
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	logger.Info("bench finished", "wall", wall.Round(time.Millisecond), "client_cpu", cpu.Round(time.Millisecond),
		"client_cpu_share_of_one_core", fmt.Sprintf("%.1f%%", 100*cpu.Seconds()/wall.Seconds()),
		"cores", runtime.NumCPU(), "peak_rss", peakRSS())
	if rep == nil {
		fmt.Fprintf(o.Stderr, "bench: sweep failed: %v\n", sweepErr)
		return ExitFailure
	}
	if sweepErr != nil {
		fmt.Fprintf(o.Stderr, "sweep stopped (%v): writing the steps measured so far\n", sweepErr)
	}
	if baseline != nil {
		co := o.Compare
		co.BaseLabel = o.Baseline
		rep = compare.Compare(baseline, rep, co)
	}
	return publish(rep, publishOptions{cmd: "bench", noun: "report", out: o.Out, gate: o.Gate, interrupted: sweepErr != nil,
		stdout: o.Stdout, stderr: o.Stderr})
}

// ParseLadder reads "1,2,4" (spaces allowed); "none" or "" is an empty ladder.
func ParseLadder(s string) ([]int, error) {
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

// PickTarget returns the named target, or the only one when name is empty.
func PickTarget(targets []prober.Target, name string) (prober.Target, error) {
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
	return prober.Target{}, errors.New("the config has " + strconv.Itoa(len(targets)) + " targets; choose one with --bench.target (" + strings.Join(names, ", ") + ")")
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
