package main

import (
	"context"
	"fmt"

	"github.com/slaprobe/slaprobe/internal/bench"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/internal/workload"
	"github.com/slaprobe/slaprobe/prober"
)

func addHeadroom(c *cli) {
	cmd := c.app.Command("headroom", "Replay a request trace open-loop against one target at speed-ups (×0.5, ×1, ×2, ×4, then refined) and report the largest multiple of the trace's traffic that still meets the goodput rule (docs/workloads.md). It loads the target to saturation: not for a production server under traffic.")
	target := cmd.Flag("target.url", "Base URL of the server to replay against, e.g. http://vllm:8000.").Required().PlaceHolder("URL").String()
	model := cmd.Flag("target.model", "Model to send. Default: the first of /v1/models.").PlaceHolder("MODEL").String()
	api := cmd.Flag("target.api", "API: chat or completions.").Default(string(prober.APIChat)).Enum(string(prober.APIChat), string(prober.APICompletions))
	tf := addTraceFlags(cmd)
	requests := cmd.Flag("trace.requests", "Replay the trace's first N requests (those a probe can send: prompt of at least 64 tokens, an answer); 0 for all.").Default("1000").Int()
	name := cmd.Flag("workload", "The workload label of slaprobe_capacity_traffic_multiple. Default: the trace file's name.").String()
	speedups := cmd.Flag("speedups", "Speed-ups replayed first, ascending.").Default("0.5,1,2,4").String()
	refine := cmd.Flag("refine", "Bisection steps between the last speed-up that held and the first that did not.").Default("2").Int()
	rule := cmd.Flag("capacity-on", "The rule each step must meet (a goodput rule of sweep.capacity_on).").Default(sweep.DefaultCapacityOn).String()
	ttft := cmd.Flag("ttft", "A request is good when its TTFT is within this. Default: the threshold of its length class (1k-16k 3s, 32k 8s, 96k 12s).").Duration()
	e2e := cmd.Flag("e2e", "…and its end-to-end latency within this (0: no limit).").Duration()
	timeout := cmd.Flag("timeout", "Per request.").Default("2m").Duration()
	out := cmd.Flag("out", "Write the report here, as bench does: report.json (every step), report.md and report.html (the good share of each speed-up drawn).").PlaceHolder("DIR").String()
	metrics := cmd.Flag("metrics.file", "Write slaprobe_capacity_traffic_multiple{target, workload} here in the Prometheus text format (for node_exporter's textfile collector).").PlaceHolder("FILE").String()
	baseline := cmd.Flag("baseline", "The --out of an earlier run (its report.json or the directory): say how the headroom moved, judged as slaprobe compare judges it; with --out the report is drawn against it.").PlaceHolder("PATH").String()
	maxDrop := cmd.Flag("max-drop", "With --baseline: exit 3 when the headroom fell significantly (past a tested speed-up) and by more than this share (as compare --fail-on=headroom:10).").Default("0.1").Float64()

	c.command(cmd, func(ctx context.Context) int {
		if *tf.path == "" {
			fmt.Fprintln(c.stderr, "headroom: --trace is required")
			return exitUsage
		}
		o := bench.HeadroomOptions{Out: *out, BaseLabel: *baseline, MaxDrop: *maxDrop, Stdout: c.stdout, Stderr: c.stderr}
		if *baseline != "" {
			b, err := bench.LoadHeadroomBaseline(*baseline)
			if err != nil {
				fmt.Fprintf(c.stderr, "headroom: --baseline: %v\n", err)
				return exitFailure
			}
			o.Base = b
		}
		run := workload.HeadroomCommand{
			TargetURL: *target, Model: *model, API: prober.API(*api),
			Spec:     workload.Spec{Path: *tf.path, Format: workload.Format(*tf.format), Models: *tf.models, LogTypes: *tf.logTypes},
			Requests: *requests, Workload: *name, Speedups: *speedups, Refine: *refine, Rule: *rule,
			TTFT: *ttft, E2E: *e2e, Timeout: *timeout, Metrics: *metrics,
			Prober: prober.New(c.logger(), prober.SystemClock{}),
		}
		rep, outcome, err := run.Run(ctx, c.stdout, c.stderr)
		if err != nil {
			fmt.Fprintf(c.stderr, "headroom: %v\n", err)
		}
		switch outcome {
		case workload.HeadroomInterrupted:
			return exitInterrupted
		case workload.HeadroomFailed:
			return exitFailure
		}
		return bench.PublishHeadroom(rep, o)
	})
}
