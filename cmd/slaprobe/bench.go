package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/model"

	"github.com/slaprobe/slaprobe/internal/bench"
	"github.com/slaprobe/slaprobe/internal/config"
)

// benchFlags are `slaprobe bench`'s own flags; each one given overrides the
// config file's `sweep` section.
type benchFlags struct {
	concurrency, burst  *override[string]
	duration, warmup    *override[time.Duration]
	ttft, cooldown      *override[time.Duration]
	drain               *override[time.Duration]
	stat                *override[string]
	repeat, ceiling     *override[int]
	earlyStop, hitShare *override[float64]
	capacityOn          *override[[]string]
}

func addBench(c *cli) {
	def := config.DefaultSweepConfig()
	cmd := c.app.Command("bench", "Run a one-shot concurrency and burst sweep against one server and write report.json, report.md and "+
		"a self-contained report.html: per-user decode speed, ITL, TTFT, system throughput, scaling efficiency and capacity.\n\n"+
		"It loads the server on purpose, as hard as it can take. The defaults run the four report scenarios (prompts up to "+
		"32K tokens) through closed-loop steps of up to "+strconv.Itoa(slices.Max(def.ClosedLoop.Concurrency))+" requests in flight and bursts of up to "+
		strconv.Itoa(slices.Max(def.Burst.Concurrency))+" requests at once, each burst "+strconv.Itoa(def.Burst.Repeat)+" times: about 30 minutes on the simulated H100, while real users wait behind it. "+
		"Use a server that is not in service, or start small (about 5 minutes):\n\n"+
		"  slaprobe bench --target.url=URL --scenarios=chatbot --concurrency=1,2,4 --burst=1,4,16")
	cf := addConfigFlags(cmd)
	ladder := func(l []int) string {
		s := make([]string, len(l))
		for i, n := range l {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ",")
	}
	dur := func(d model.Duration) string { return time.Duration(d).String() }
	target := cmd.Flag("bench.target", "Target to sweep, by name, when the config file has several.").PlaceHolder("NAME").String()
	bf := benchFlags{
		concurrency: overrideFlag(cmd.Flag("concurrency", "Closed-loop ladder: exactly N requests in flight per step. \"none\" skips the closed loop.").
			Default(ladder(def.ClosedLoop.Concurrency)), (*kingpin.FlagClause).String),
		burst: overrideFlag(cmd.Flag("burst", "Burst ladder: N requests sent at once per step. \"none\" skips bursts.").
			Default(ladder(def.Burst.Concurrency)), (*kingpin.FlagClause).String),
		duration: overrideFlag(cmd.Flag("step.duration", "Steady measurement window of each closed-loop step.").
			Default(dur(def.ClosedLoop.Duration)), (*kingpin.FlagClause).Duration),
		warmup: overrideFlag(cmd.Flag("step.warmup", "Ramp-up before each closed-loop step's window, not measured.").
			Default(dur(def.ClosedLoop.Warmup)), (*kingpin.FlagClause).Duration),
		ttft: overrideFlag(cmd.Flag("ttft.threshold", "TTFT limit of the max safe queue depth.").
			Default(dur(def.Capacity.MaxSafeTTFT)), (*kingpin.FlagClause).Duration),
		stat: overrideFlag(cmd.Flag("capacity.stat", "Statistic of each step judged against limits: mean (as the reports), p50, p90, p95 or p99.").
			Default(def.Capacity.Statistic), (*kingpin.FlagClause).String),
		repeat: overrideFlag(cmd.Flag("burst.repeat", "Bursts of N per burst step, one after another. A comparison (--baseline, slaprobe compare) judges each scenario's burst ladder as one figure per metric, on every step's rounds' medians: 3 rounds over 5 or more steps reach the 95% of a report of any practical size. A verdict per step needs 8 rounds in both runs (reports of up to 321 figures). Each round costs one burst's time.").
			Default(strconv.Itoa(def.Burst.Repeat)), (*kingpin.FlagClause).Int),
		ceiling: overrideFlag(cmd.Flag("max-concurrency", "Ceiling on N for both ladders (0: none).").
			Default(strconv.Itoa(def.MaxConcurrency)), (*kingpin.FlagClause).Int),
		earlyStop: overrideFlag(cmd.Flag("early-stop.factor", "Stop a scenario's ladder once a step misses every threshold by this factor (0: never).").
			Default(strconv.FormatFloat(def.EarlyStop.Factor, 'g', -1, 64)), (*kingpin.FlagClause).Float64),
		capacityOn: overrideFlag(cmd.Flag("capacity.on", `A rule the closed loop's capacity is asked on, repeated for several: "goodput >= 95%" (the default: that share of a step's requests met every threshold of the scenario at once) or "<stat> <metric> <op> <value>", e.g. "p99 ttft <= 2s", "p90 decode >= 20". Replaces sweep.capacity_on.`),
			(*kingpin.FlagClause).Strings),
		hitShare: overrideFlag(cmd.Flag("capacity.conversation-hit-share", "Share of a conversation scenario's follow-ups that must hit the prefix cache for a step to count within its capacity in conversations.").
			Default(strconv.FormatFloat(def.Capacity.ConversationHitShare, 'g', -1, 64)), (*kingpin.FlagClause).Float64),
		cooldown: overrideFlag(cmd.Flag("cooldown", "Idle time between steps when the server has no /metrics to tell when it is empty.").
			Default(dur(def.Cooldown)), (*kingpin.FlagClause).Duration),
		drain: overrideFlag(cmd.Flag("drain.timeout", "Longest wait, before each step, for the server's /metrics to show nothing running or waiting; "+
			"a step that starts busy is marked and left out of capacity.").
			Default(dur(def.Drain.Timeout)), (*kingpin.FlagClause).Duration),
	}
	out := cmd.Flag("out", "Directory the report is written to (created if needed).").Default("slaprobe-report").String()
	title := cmd.Flag("title", "Report title (default: \"<model> benchmark\").").String()
	baseline := cmd.Flag("baseline", "A report.json (or the directory holding one) to compare this run with, as slaprobe compare does: "+
		"the report draws it beside the run and says what got better or worse. Read before the sweep starts. With --fail-on, the comparison is a gate (see slaprobe compare).").PlaceHolder("PATH").String()
	g := addGateFlags(cmd)

	c.command(cmd, func(ctx context.Context) int {
		if g.Enabled() && *baseline == "" {
			fmt.Fprintln(c.stderr, "bench: --fail-on and --verdict-file need --baseline=PATH: a report to compare the run with")
			return bench.ExitUsage
		}
		// --scenarios is the sweep's list here, not global.scenarios.
		fl := cf.flags()
		fl.Scenarios = nil
		cfg, err := config.LoadWithFlags(*cf.file, fl)
		if err != nil {
			fmt.Fprintf(c.stderr, "config error: %v\n", err)
			return bench.ExitFailure
		}
		sc := cfg.Sweep
		if err := bf.overrides().Apply(&sc); err != nil {
			fmt.Fprintf(c.stderr, "bench: %v\n", err)
			return bench.ExitFailure
		}
		var scenarios []string
		if v, ok := cf.scenarios.given(); ok {
			scenarios = bench.SplitList(v)
		}
		return bench.Run(ctx, bench.Options{
			Config: cfg, Sweep: sc, Target: *target, Scenarios: scenarios, Out: *out, Title: *title, Baseline: *baseline, Gate: *g,
			NVML:   func() nvml.Interface { return nvml.New() },
			Logger: c.logger(), Stdout: c.stdout, Stderr: c.stderr,
		})
	})
}

// overrides are the flags given, for bench.Overrides.Apply.
func (bf benchFlags) overrides() bench.Overrides {
	return bench.Overrides{
		ClosedLoop: bf.concurrency.ptr(), Burst: bf.burst.ptr(),
		StepDuration: bf.duration.ptr(), Warmup: bf.warmup.ptr(), MaxSafeTTFT: bf.ttft.ptr(),
		Cooldown: bf.cooldown.ptr(), DrainTimeout: bf.drain.ptr(), Statistic: bf.stat.ptr(),
		BurstRepeat: bf.repeat.ptr(), MaxConcurrency: bf.ceiling.ptr(), EarlyStopFactor: bf.earlyStop.ptr(),
		CapacityOn: bf.capacityOn.ptr(), ConversationHitShare: bf.hitShare.ptr(),
	}
}
