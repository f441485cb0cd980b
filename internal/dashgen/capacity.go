package dashgen

import (
	"fmt"

	"github.com/slaprobe/slaprobe/internal/report"
)

// The capacity dashboard draws the benchmark report's charts (docs/report.md) from the sweep gauges
// (docs/sweeps.md). Each step is one series with a `concurrency` label; the x axis is that label.
//
// Why bar charts: a timeseries panel can only put time on the x axis, and a sweep's results are one
// value per (scenario, N), not a history. Grafana's XY chart could draw N as a number, but it needs one
// data frame per series and its JSON model changed between Grafana 10 and 11. The bar chart, with
// instant queries turned into a matrix (a row per N, a column per scenario), works the same from
// Grafana 9 to 11; and since the ladders are powers of two (1, 2, 4, … 256), evenly spaced categories are
// exactly the log2 axis the reports draw.

// sweepSel selects a sweep series of the chosen target, models and scenarios.
func sweepSel(metric string, extra ...string) string {
	return sel(metric, append([]string{mTarget, mModel, mScenario}, extra...)...)
}

// perStep is a sweep gauge reduced to one value per scenario and N (one target is shown at a time;
// the max only guards against two slaprobe instances exporting the same target).
func perStep(metric string, extra ...string) string {
	return fmt.Sprintf("max by (scenario, concurrency) (%s)", sweepSel(metric, extra...))
}

// labelled tags an expression's series with label=value, so several can share one bar chart.
func labelled(expr, label, value string) string {
	return fmt.Sprintf(`label_replace(%s, %q, %q, "", "")`, expr, label, value)
}

const (
	closedLoop = `mode="closed_loop"`
	burst      = `mode="burst"`
	statMean   = `stat="mean"`
)

// stepBars is a bar chart of a sweep gauge: N on the x axis, one bar per scenario.
func stepBars(title, description, unit string, th *Thresholds, expr string) *Panel {
	return barchart(title, description, unit, th, "concurrency", "scenario", "concurrency", tableQ(expr))
}

func capacity() *Dashboard {
	b := newBoard("slaprobe-capacity.json", "slaprobe-capacity", "slaprobe / Capacity (sweeps)",
		"The benchmark report's charts from the latest sweep of one target (slaprobe's sweep job, "+
			"docs/sweeps.md): per-user decode speed, ITL and scaling efficiency vs concurrency (closed loop), "+
			"TTFT, ITL and decode vs queue depth (burst), max safe queue depth and use-case capacity. "+
			"Bars: one per scenario at each N; values are the step's mean (sweep.capacity.statistic default).",
		datasourceVar(),
		singleLabelVar("target", "Target", "slaprobe_sweep_paused", "The swept target; one at a time, as in a report."),
		labelVar("model", "Model", `slaprobe_sweep_requests{target=~"$target"}`, "Model of the swept target."),
		labelVar("scenario", "Scenario", `slaprobe_sweep_requests{target=~"$target", model=~"$model"}`, "Swept scenarios."),
	)

	b.row("Sweep job")
	yesNo := func(no, yes string, noColor, yesColor string) map[string]MappingValue {
		return map[string]MappingValue{"0": {Text: no, Color: noColor, Index: 0}, "1": {Text: yes, Color: yesColor, Index: 1}}
	}
	b.add(4, 4, stat("Sweeps", "sweep.enabled: sweeps on or off. Off, none runs, scheduled or on demand (POST /-/sweep answers 403).",
		"", nil, instantQ("max(slaprobe_sweep_enabled)", "enabled")).mapValues(yesNo("off", "on", colorNeutral, colorNeutral)))
	b.add(4, 4, stat("Sweep running", "Whether a sweep runs now, on any target.",
		"", nil, instantQ("max(slaprobe_sweep_running)", "running")).mapValues(yesNo("idle", "running", colorNeutral, colorAcceptable)))
	b.add(4, 4, stat("Paused", "While a sweep waits between steps for production load to drop, the reason: "+
		"requests_waiting, kv_cache_usage or engine_metrics_unavailable.",
		"", steps(colorAcceptable), instantQ(sel("slaprobe_sweep_paused", mTarget)+" == 1", "{{reason}}")).
		mapValues(map[string]MappingValue{"1": {Text: "paused", Color: colorAcceptable, Index: 0}})).
		FieldConfig.Defaults.NoValue = "not paused"
	age := stat("Results age", "Time since the sweep whose results are shown finished. Older than two days: "+
		"run one (POST /-/sweep) or check sweep.schedule.",
		"s", steps(colorExcellent, 86400.0, colorAcceptable, 2*86400.0, colorPoor),
		instantQ("time() - "+sel("slaprobe_sweep_last_timestamp_seconds", mTarget), "{{target}}"))
	age.FieldConfig.Defaults.NoValue = "never swept"
	b.add(4, 4, age)
	b.add(4, 4, stat("Sweep duration", "How long the sweep whose results are shown took.",
		"s", nil, instantQ(sel("slaprobe_sweep_last_duration_seconds", mTarget), "{{target}}")))
	b.add(4, 4, stat("Last attempt", "Whether the most recent sweep ran to the end, or was stopped (paused too "+
		"long, window closed, shutdown) and kept only the steps it finished.",
		"", nil, instantQ(sel("slaprobe_sweep_last_attempt_success", mTarget), "{{target}}")).
		mapValues(yesNo("stopped", "complete", colorAcceptable, colorExcellent)))

	b.row("Headline")
	b.add(5, 4, stat("Peak decode speed", "Highest mean per-user decode speed of any step.",
		unitTokS, bandsDecode, instantQ("max("+sweepSel("slaprobe_sweep_decode_tokens_per_second", statMean)+")", "peak"))).mirrors(report.ChartHeadline)
	b.add(5, 4, stat("Max system throughput", "Highest output tokens/s summed over all streams, either mode.",
		unitTokS, nil, instantQ("max("+sweepSel("slaprobe_sweep_system_throughput_tokens_per_second")+")", "max")))
	b.add(5, 4, stat("Best TTFT", "Lowest mean time to first token of any step.",
		"s", bandsTTFT, instantQ("min("+sweepSel("slaprobe_sweep_ttft_seconds", statMean)+")", "best")))
	b.add(5, 4, stat("Success rate", "Successful requests ÷ requests sent, over every step.",
		"percentunit", steps(colorPoor, 0.95, colorAcceptable, 0.99, colorExcellent),
		instantQ(fmt.Sprintf("sum(%s * %s)\n/\nsum(%s)", sweepSel("slaprobe_sweep_success_ratio"),
			sweepSel("slaprobe_sweep_requests"), sweepSel("slaprobe_sweep_requests")), "success")))
	b.add(4, 4, stat("Concurrent users at 32K", "Use-case capacity of general_chat (32K context), or the max "+
		"safe queue of tool_calling (32K) when general_chat was not swept.",
		"none", nil, instantQ(fmt.Sprintf("max(%s)\nor\nmax(%s)",
			sel("slaprobe_capacity_max_safe_concurrency", mTarget, `scenario="general_chat"`, closedLoop),
			sel("slaprobe_capacity_max_safe_concurrency", mTarget, `scenario="tool_calling"`, burst)), "users")))

	b.row("When am I the fastest? Closed loop: N requests always in flight")
	b.add(12, 9, stepBars("Per-user decode speed vs concurrency",
		"Mean per-user decode speed at each N. Dashed: the decode experience bands (15, 25, 50 tok/s).",
		unitTokS, bandsDecode, perStep("slaprobe_sweep_decode_tokens_per_second", closedLoop, statMean))).mirrors(report.ChartDecodeVsConcurrency)
	b.add(12, 9, stepBars("Inter-token latency vs concurrency",
		"Mean inter-token latency at each N. Lines: 10 ms (excellent), 20 ms (the \"instant\" line), "+
			"70 ms (memory-bandwidth ceiling of large MoE models).",
		"s", refITL, perStep("slaprobe_sweep_itl_seconds", closedLoop, statMean))).mirrors(report.ChartITLVsConcurrency)
	b.add(12, 9, stepBars("Scaling efficiency vs concurrency",
		"System throughput ÷ (N=1 throughput × N). 100 %: adding a user costs the others nothing. "+
			"Bands: 90 % excellent, 70 % good, 50 % acceptable.",
		"percentunit", bandsEfficiency, "max by (scenario, concurrency) ("+sweepSel("slaprobe_scaling_efficiency_ratio")+")")).mirrors(report.ChartScalingEfficiency)
	b.add(12, 9, barchart("System throughput vs concurrency",
		"Output tokens/s summed over all streams (prompt tokens excluded), per scenario and mode: the closed "+
			"loop at N in flight, and bursts of N.",
		unitTokS, nil, "concurrency", "series", "concurrency",
		tableQ(fmt.Sprintf(`label_join(max by (scenario, mode, concurrency) (%s), "series", " ", "scenario", "mode")`,
			sweepSel("slaprobe_sweep_system_throughput_tokens_per_second"))))).mirrors(report.ChartSystemThroughput)
	b.add(12, 8, barchart("Per-user decode speed range",
		"At each N, the best scenario's mean per-user decode speed (usually the shortest context) and the "+
			"worst's. A wide gap: long prompts pay a large decode penalty.",
		unitTokS, bandsDecode, "concurrency", "bound", "concurrency",
		tableQ(labelled("max by (concurrency) ("+sweepSel("slaprobe_sweep_decode_tokens_per_second", closedLoop, statMean)+")", "bound", "best scenario")+
			"\nor\n"+labelled("min by (concurrency) ("+sweepSel("slaprobe_sweep_decode_tokens_per_second", closedLoop, statMean)+")", "bound", "worst scenario")))).mirrors(report.ChartDecodeRange)
	b.add(12, 8, barchart("TTFT range",
		"At each N, the quickest and the slowest scenario's mean TTFT. Nothing queues in a closed loop, so "+
			"this is mostly prefill: the slowest is the longest context.",
		"s", bandsTTFT, "concurrency", "bound", "concurrency",
		tableQ(labelled("min by (concurrency) ("+sweepSel("slaprobe_sweep_ttft_seconds", closedLoop, statMean)+")", "bound", "quickest scenario")+
			"\nor\n"+labelled("max by (concurrency) ("+sweepSel("slaprobe_sweep_ttft_seconds", closedLoop, statMean)+")", "bound", "slowest scenario")))).mirrors(report.ChartTTFTRange)
	tph := table("Tokens per hour",
		"System throughput × 3600 at each closed-loop N (rows), per scenario (columns).",
		append(matrixBy("concurrency", "scenario", "concurrency"), organize(nil, map[string]string{matrixField("concurrency", "scenario"): "N"}, nil)),
		tableQ("3600 * "+perStep("slaprobe_sweep_system_throughput_tokens_per_second", closedLoop)))
	tph.FieldConfig.Defaults.Unit = "short"
	tph.column("N", "N", "none", nil, nil)
	b.add(24, 8, tph).mirrors(report.ChartTokensPerHour)

	b.row("When should I scale up? Burst: N requests at once")
	b.add(24, 4, stat("Max safe queue depth",
		"Per scenario, the largest burst whose mean TTFT stays within sweep.capacity.max_safe_ttft (3.0 s by "+
			"default), interpolated between measured N and rounded down. See the capacity table for ~ and \"at least\".",
		"none", nil, instantQ(perCapacity(burst), "{{scenario}}"))).mirrors(report.ChartMaxSafeQueue)
	b.add(8, 9, stepBars("TTFT vs queue depth",
		"Mean TTFT of a burst of N requests. Lines: the TTFT bands (0.5, 2, 10 s) and the reports' 3.0 s "+
			"max-safe-queue line.",
		"s", refTTFT, perStep("slaprobe_sweep_ttft_seconds", burst, statMean))).mirrors(report.ChartTTFTVsQueueDepth)
	b.add(8, 9, stepBars("ITL vs queue depth",
		"Mean inter-token latency under a burst of N: it usually levels off while TTFT keeps rising. Lines: "+
			"20 ms \"instant\" and the 70 ms MoE ceiling.",
		"s", refITL, perStep("slaprobe_sweep_itl_seconds", burst, statMean))).mirrors(report.ChartITLVsQueueDepth)
	b.add(8, 9, stepBars("Per-user decode speed vs queue depth",
		"Mean per-user decode speed under a burst of N.",
		unitTokS, bandsDecode, perStep("slaprobe_sweep_decode_tokens_per_second", burst, statMean))).mirrors(report.ChartDecodeVsQueueDepth)
	b.add(12, 8, barchart("Success ratio vs N",
		"Share of each step's requests that completed, per scenario and mode. Capacity needs ≥ 95 % "+
			"(sweep.capacity.min_success_ratio).",
		"percentunit", steps(colorPoor, 0.95, colorExcellent), "concurrency", "series", "concurrency",
		tableQ(fmt.Sprintf(`label_join(max by (scenario, mode, concurrency) (%s), "series", " ", "scenario", "mode")`,
			sweepSel("slaprobe_sweep_success_ratio")))))
	b.add(12, 8, stepBars("Queue wait vs queue depth",
		"Mean engine queue time per request in a burst of N, from vllm:request_queue_time_seconds; empty "+
			"when the engine does not expose it.",
		"s", nil, perStep("slaprobe_sweep_queue_wait_seconds", burst)))

	b.row("Capacity per use case")
	b.add(24, 4, stat("Use-case capacity",
		"Per scenario, the concurrent users (closed loop) within every threshold the scenario sets (TTFT, "+
			"E2E, ITL, decode speed) at ≥ 95 % success.",
		"none", nil, instantQ(perCapacity(closedLoop), "{{scenario}}")))
	capTable := table("Capacity details",
		"Both capacities per scenario. approximate: interpolated between measured N (\"~N\" in the report). "+
			"at least: every measured N passed, so the real capacity may be higher.",
		[]Transformation{merge(), organize([]string{"Time"},
			map[string]string{"Value #A": "capacity", "Value #B": "approximate", "Value #C": "max tested", "Value #D": "at least"},
			[]string{"scenario", "mode", "Value #A", "Value #B", "Value #D", "Value #C"})},
		tableQ("max by (scenario, mode) ("+sweepSel("slaprobe_capacity_max_safe_concurrency")+")"),
		tableQ("max by (scenario, mode) ("+sweepSel("slaprobe_capacity_approximate")+")"),
		tableQ("max by (scenario, mode) ("+sweepSel("slaprobe_capacity_max_tested_concurrency")+")"),
		tableQ(fmt.Sprintf("max by (scenario, mode) (%s)\n== bool\nmax by (scenario, mode) (%s)",
			sweepSel("slaprobe_capacity_max_safe_concurrency"), sweepSel("slaprobe_capacity_max_tested_concurrency"))),
	)
	yes := []ValueMapping{{Type: "value", Options: map[string]MappingValue{"0": {Text: "", Index: 0}, "1": {Text: "yes", Index: 1}}}}
	capTable.column("approximate", "approximate (~)", "", nil, yes).column("at least", "at least", "", nil, yes)
	b.add(24, 7, capTable).mirrors(report.ChartUseCaseTable)
	perCase := barchart("Capacity of $scenario: ITL and TTFT vs N",
		"Closed loop: mean ITL (left axis) and mean TTFT (right axis) at each N, for one scenario (the panel "+
			"repeats per scenario). The scenario's thresholds are in the overview's SLA thresholds table; "+
			"the verdict in the use-case capacity above.",
		"s", nil, "concurrency", "metric", "concurrency",
		tableQ(labelled(perStep("slaprobe_sweep_itl_seconds", closedLoop, statMean), "metric", "ITL")+
			"\nor\n"+labelled(perStep("slaprobe_sweep_ttft_seconds", closedLoop, statMean), "metric", "TTFT")))
	perCase.Repeat, perCase.RepeatDirection, perCase.MaxPerRow = "scenario", "h", 3
	perCase.FieldConfig.Overrides = append(perCase.FieldConfig.Overrides,
		Override{Matcher: Matcher{ID: "byName", Options: "TTFT"}, Properties: []Property{
			{ID: "custom.axisPlacement", Value: "right"},
			{ID: "color", Value: FieldColor{Mode: "fixed", FixedColor: "#D55E00"}},
		}},
		Override{Matcher: Matcher{ID: "byName", Options: "ITL"}, Properties: []Property{
			{ID: "color", Value: FieldColor{Mode: "fixed", FixedColor: "#0072B2"}},
		}})
	b.add(8, 9, perCase).mirrors(report.ChartCapacity)

	b.row("Deep dive: queue wait, prefill and power (closed loop)")
	b.add(8, 9, stepBars("Queue wait vs N",
		"Mean engine queue time per request at each closed-loop N, per scenario (each scenario is one "+
			"context length); empty when the engine does not expose queue time.",
		"s", nil, perStep("slaprobe_sweep_queue_wait_seconds", closedLoop))).mirrors(report.ChartQueueWait)
	b.add(8, 9, stepBars("Per-user prefill speed vs N",
		"Mean prompt tokens ÷ TTFT at each closed-loop N, per scenario (context length).",
		unitTokS, nil, perStep("slaprobe_sweep_prefill_tokens_per_second", closedLoop, statMean))).mirrors(report.ChartPrefillVsContext)
	b.add(8, 9, stepBars("GPU power vs N",
		"Mean GPU power during each closed-loop step, summed over the target's GPUs; empty without NVML.",
		"watt", nil, perStep("slaprobe_sweep_power_watts", closedLoop, statMean))).mirrors(report.ChartPower)
	b.add(8, 4, stat("Peak GPU power", "Highest power sampled in any step.",
		"watt", nil, instantQ("max("+sweepSel("slaprobe_sweep_power_watts", `stat="max"`)+")", "peak")))
	b.add(8, 4, stat("Cost per hour at the busiest step",
		"Highest mean step power × slaprobe_energy_price_per_kwh_dollars (power.price_per_kwh).",
		"currencyUSD", nil, instantQ(fmt.Sprintf("max(%s) / 1000\n* max(slaprobe_energy_price_per_kwh_dollars)",
			sweepSel("slaprobe_sweep_power_watts", statMean)), "per hour")))
	b.add(8, 4, stat("Best energy per output token", "Lowest GPU energy per output token of any step.",
		"joule", nil, instantQ("min("+sweepSel("slaprobe_sweep_energy_per_output_token_joules")+")", "best")))
	return b.d
}

// perCapacity is the capacity of each scenario in one mode.
func perCapacity(mode string) string {
	return "max by (scenario) (" + sweepSel("slaprobe_capacity_max_safe_concurrency", mode) + ")"
}
