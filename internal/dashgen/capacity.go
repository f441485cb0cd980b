package dashgen

import (
	"fmt"
	"strings"

	"github.com/slaprobe/slaprobe/internal/slo"
)

// The capacity dashboard draws the benchmark report's charts (docs/report.md) from the sweep gauges
// (docs/sweeps.md). Each step is one series with a `concurrency` label, and each scenario's prompt
// length is the input_tokens label of slaprobe_sweep_scenario_info.
//
// Why trend panels: a sweep's results are one value per (scenario, N), not a history, and a timeseries
// panel can only put time on the x axis. Grafana's trend panel (Grafana 10 and later) draws a graph
// whose x axis is a number field; curve turns the instant query into a table with one row per N (or per
// prompt length) and one column per line, the x column a number in ascending order. So N is a number
// on the axis: 1, 2, 4 and 16 lie where they are, not at evenly spaced categories. Grafana's XY chart
// could do the same but its JSON model changed between Grafana 10 and 11; the trend panel's did not.

// sweepSel selects a sweep series of the chosen target, models and scenarios.
func sweepSel(metric string, extra ...string) string {
	return sel(metric, append([]string{mTarget, mModel, mScenario}, extra...)...)
}

// perStep is a sweep gauge reduced to one value per scenario and N (one target is shown at a time;
// the max only guards against two slaprobe instances exporting the same target).
func perStep(metric string, extra ...string) string {
	return fmt.Sprintf("max by (scenario, concurrency) (%s)", sweepSel(metric, extra...))
}

const (
	closedLoop = `mode="closed_loop"`
	burst      = `mode="burst"`
	statMean   = `stat="mean"`
)

// xN is the x axis of the step charts.
const xN = "N (concurrent requests)"

// stepCurve draws a sweep gauge against N, one line per scenario.
func stepCurve(title, description, unit, expr string) *Panel {
	return curve(title, description, unit, "concurrency", xN, "scenario", "", tableQ(expr))
}

// itlRefs are the reports' two ITL lines at every N of data (one series per N, by concurrency).
func itlRefs(data string) string {
	return lineAt(data, "concurrency", lineITLInstant, "scenario", "line: instant") + "\nor\n" +
		lineAt(data, "concurrency", lineITLCeiling, "scenario", "line: MoE ceiling")
}

const itlLinesText = "Dashed: 20 ms, where streaming stops feeling instant (green), and 70 ms, the memory-bandwidth " +
	"ceiling of large MoE models (red): the ITL bands' edges, from slaprobe_experience_band_itl_seconds."

// itlLines colours the two ITL lines.
func itlLines(p *Panel) *Panel {
	return p.refLine("^line: instant$", colorITLInstant).refLine("^line: MoE ceiling$", colorITLCeiling)
}

// useCaseCurve is the report's capacity chart of one use case (the panel repeats per scenario): mean ITL
// on the left axis and mean TTFT (and E2E, where the scenario limits it) on the right, against N, with
// the scenario's thresholds as dashed lines in the colour of what they limit. A minimum decode speed is
// drawn as the ITL it allows (per request, ITL is the reciprocal of decode speed).
func useCaseCurve() *Panel {
	itl := perStep("slaprobe_sweep_itl_seconds", closedLoop, statMean)
	sla := func(metric string) string {
		return fmt.Sprintf("max(slaprobe_sla_threshold{metric=%q, %s})", metric, mScenario)
	}
	e2e := fmt.Sprintf("%s\nand on (scenario)\nslaprobe_sla_threshold{metric=\"e2e_latency_seconds\"}",
		perStep("slaprobe_sweep_e2e_latency_seconds", closedLoop, statMean))
	q := strings.Join([]string{
		labelled(itl, "metric", "ITL"),
		labelled(perStep("slaprobe_sweep_ttft_seconds", closedLoop, statMean), "metric", "TTFT"),
		labelled(e2e, "metric", "E2E"),
		lineAt(itl, "concurrency", sla("ttft_seconds"), "metric", "SLA TTFT"),
		lineAt(itl, "concurrency", sla("e2e_latency_seconds"), "metric", "SLA E2E"),
		lineAt(itl, "concurrency", sla("itl_seconds"), "metric", "SLA ITL"),
		lineAt(itl, "concurrency", "1 / "+sla("decode_tokens_per_second"), "metric", "SLA ITL from min decode speed"),
	}, "\nor\n")
	p := curve("Capacity of $scenario: ITL and TTFT vs N",
		"Closed loop: mean ITL (left axis) and mean TTFT (right axis; E2E too where the scenario limits it) "+
			"at each N, for one scenario (the panel repeats per scenario). Dashed: the scenario's thresholds "+
			"(slaprobe_sla_threshold), each in the colour of the metric it limits; a minimum decode speed is "+
			"drawn as the ITL it allows. The verdict is in the use-case capacity above.",
		"s", "concurrency", xN, "metric", "", tableQ(q))
	p.Repeat, p.RepeatDirection, p.MaxPerRow = "scenario", "h", 3
	right := []Property{{ID: "custom.axisPlacement", Value: "right"}}
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides,
		Override{Matcher: Matcher{ID: "byRegexp", Options: "^(SLA )?(TTFT|E2E)$"}, Properties: right})
	// By regexp: a scenario without an E2E threshold has no E2E series, and an override by name would
	// name a field that is not there.
	color := func(re, c string) {
		p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{Matcher: Matcher{ID: "byRegexp", Options: re},
			Properties: []Property{{ID: "color", Value: FieldColor{Mode: "fixed", FixedColor: c}}}})
	}
	color("^ITL$", colorCapITL)
	color("^TTFT$", colorCapTTFT)
	color("^E2E$", colorCapE2E)
	return p.refLine("^SLA ITL", colorCapITL).refLine("^SLA TTFT$", colorCapTTFT).refLine("^SLA E2E$", colorCapE2E)
}

// The use-case chart's colours: ITL blue, TTFT vermilion, E2E purple (colour-blind safe).
const (
	colorCapITL  = "#0072B2"
	colorCapTTFT = "#D55E00"
	colorCapE2E  = "#CC79A7"
)

// contextCurve draws a closed-loop sweep gauge against the scenario's prompt length
// (slaprobe_sweep_scenario_info's input_tokens), one line per N.
func contextCurve(title, description, unit, metric string, extra ...string) *Panel {
	// One prompt length per (target, model, scenario), even when two slaprobes disagree (a config
	// rollout): group_left would fail on two.
	info := fmt.Sprintf("topk by (target, model, scenario) (1, max by (target, model, scenario, input_tokens) (%s))", sweepSel("slaprobe_sweep_scenario_info"))
	q := fmt.Sprintf("label_replace(\nmax by (input_tokens, concurrency) (\n%s\n* on (target, model, scenario) group_left (input_tokens)\n%s\n),\n\"N\", \"N=$1\", \"concurrency\", \"(.*)\")",
		sweepSel(metric, append([]string{closedLoop}, extra...)...), info)
	return curve(title, description, unit, "input_tokens", "context (prompt tokens)", "N", "concurrency", tableQ(q))
}

func capacity() *Dashboard {
	b := newBoard("slaprobe-capacity.json", "slaprobe-capacity", "slaprobe / Capacity (sweeps)",
		"The benchmark report's charts from the latest sweep of one target (slaprobe's sweep job, "+
			"docs/sweeps.md): per-user decode speed, ITL and scaling efficiency vs concurrency (closed loop), "+
			"TTFT, ITL and decode vs queue depth (burst), max safe queue depth and use-case capacity. "+
			"Lines: one per scenario against N (a number axis); values are the step's mean (sweep.capacity.statistic default). "+
			"Dashed lines are thresholds read from slaprobe's own gauges.",
		datasourceVar(),
		singleLabelVar("target", "Target", "slaprobe_sweep_paused", "The swept target; one at a time, as in a report."),
		labelVar("model", "Model", `slaprobe_sweep_requests{target=~"$target"}`, "Model of the swept target."),
		labelVar("scenario", "Scenario", `slaprobe_sweep_requests{target=~"$target", model=~"$model"}`, "Swept scenarios."),
		compareVar(),
	)

	b.row("Sweep job")
	yesNo := func(no, yes string, noColor, yesColor string) map[string]MappingValue {
		return map[string]MappingValue{"0": {Text: no, Color: noColor, Index: 0}, "1": {Text: yes, Color: yesColor, Index: 1}}
	}
	b.add(3, 4, stat("Sweeps", "sweep.enabled: sweeps on or off. Off, none runs, scheduled or on demand (POST /-/sweep answers 403).",
		"", nil, instantQ("max(slaprobe_sweep_enabled)", "enabled")).mapValues(yesNo("off", "on", colorNeutral, colorNeutral)))
	next := stat("Next scheduled sweep", "When sweep.schedule starts the next sweep on the slaprobe that "+
		"sweeps this target (slaprobe_sweep_next_scheduled_timestamp_seconds); in the past while a due sweep "+
		"has not started. SlaprobeSweepOverdue warns once it is an hour late, for 15 minutes.",
		"dateTimeFromNow", nil, instantQ("min(\nslaprobe_sweep_next_scheduled_timestamp_seconds\nand on (job, instance)\n"+
			sel("slaprobe_sweep_paused", mTarget)+"\n) * 1000", "next"))
	next.FieldConfig.Defaults.NoValue = "none (sweeps off, or on demand only)"
	b.add(4, 4, next)
	b.add(3, 4, stat("Sweep running", "Whether a sweep runs now, on any target.",
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
	b.add(3, 4, stat("Sweep duration", "How long the sweep whose results are shown took.",
		"s", nil, instantQ(sel("slaprobe_sweep_last_duration_seconds", mTarget), "{{target}}")))
	b.add(3, 4, stat("Last attempt", "Whether the most recent sweep ran to the end, or was stopped (paused too "+
		"long, window closed, shutdown) and kept only the steps it finished.",
		"", nil, instantQ(sel("slaprobe_sweep_last_attempt_success", mTarget), "{{target}}")).
		mapValues(yesNo("stopped", "complete", colorAcceptable, colorExcellent)))

	b.row("Headline")
	// Each headline tile adds the same figure compare_offset earlier (none while it is off).
	headline := func(title, desc, unit string, th *Thresholds, expr, legend string) *Panel {
		return stat(title, desc+` With "Compare with" set, the same figure that long ago (the sweep shown then) beside it.`,
			unit, th, instantQ(expr, legend), instantQ(earlier(expr), earlierLegend+legend))
	}
	b.add(5, 4, headline("Peak decode speed", "Highest mean per-user decode speed of any step.",
		unitTokS, bandsDecode, "max("+sweepSel("slaprobe_sweep_decode_tokens_per_second", statMean)+")", "peak")).mirrors(slo.ChartHeadline)
	b.add(5, 4, headline("Max system throughput", "Highest output tokens/s summed over all streams, either mode.",
		unitTokS, nil, "max("+sweepSel("slaprobe_sweep_system_throughput_tokens_per_second")+")", "max"))
	b.add(5, 4, headline("Best TTFT", "Lowest mean time to first token of any step.",
		"s", bandsTTFT, "min("+sweepSel("slaprobe_sweep_ttft_seconds", statMean)+")", "best"))
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
	decodeCL := perStep("slaprobe_sweep_decode_tokens_per_second", closedLoop, statMean)
	b.add(12, 9, stepCurve("Per-user decode speed vs concurrency",
		"Mean per-user decode speed at each closed-loop N, one line per scenario. Dashed: reading pace, the "+
			"lower edge of the decode speed bands' acceptable level (slaprobe_experience_band_decode_tokens_per_second).",
		unitTokS, decodeCL+"\nor\n"+lineAt(decodeCL, "concurrency", lineReadPace, "scenario", "line: reading pace"))).mirrors(slo.ChartDecodeVsConcurrency)
	itlCL := perStep("slaprobe_sweep_itl_seconds", closedLoop, statMean)
	b.add(12, 9, itlLines(stepCurve("Inter-token latency vs concurrency",
		"Mean inter-token latency at each closed-loop N, one line per scenario. "+itlLinesText,
		"s", itlCL+"\nor\n"+itlRefs(itlCL)))).mirrors(slo.ChartITLVsConcurrency)
	b.add(12, 9, stepCurve("Scaling efficiency vs concurrency",
		"System throughput ÷ (N=1 throughput × N), one line per scenario. 100 %: adding a user costs the others nothing.",
		"percentunit", "max by (scenario, concurrency) ("+sweepSel("slaprobe_scaling_efficiency_ratio")+")")).mirrors(slo.ChartScalingEfficiency)
	b.add(12, 9, curve("System throughput vs concurrency",
		"Output tokens/s summed over all streams (prompt tokens excluded), per scenario and mode: the closed "+
			"loop at N in flight, and bursts of N.",
		unitTokS, "concurrency", xN, "series", "",
		tableQ(fmt.Sprintf(`label_join(max by (scenario, mode, concurrency) (%s), "series", " ", "scenario", "mode")`,
			sweepSel("slaprobe_sweep_system_throughput_tokens_per_second"))))).mirrors(slo.ChartSystemThroughput)
	b.add(12, 8, curve("Per-user decode speed range",
		"Shaded: at each N, from the worst scenario's mean per-user decode speed (usually the longest "+
			"context) up to the best's (usually the shortest). A wide band: long prompts pay a large decode penalty.",
		unitTokS, "concurrency", xN, "bound", "",
		tableQ(labelled("max by (concurrency) ("+decodeCL+")", "bound", "best scenario")+
			"\nor\n"+labelled("min by (concurrency) ("+decodeCL+")", "bound", "worst scenario"))).
		shade("best scenario", "worst scenario", colorGood)).mirrors(slo.ChartDecodeRange)
	ttftCL := perStep("slaprobe_sweep_ttft_seconds", closedLoop, statMean)
	b.add(12, 8, curve("TTFT range",
		"Shaded: at each N, from the quickest scenario's mean TTFT to the slowest's. Nothing queues in a "+
			"closed loop, so this is mostly prefill: the slowest is the longest context.",
		"s", "concurrency", xN, "bound", "",
		tableQ(labelled("max by (concurrency) ("+ttftCL+")", "bound", "slowest scenario")+
			"\nor\n"+labelled("min by (concurrency) ("+ttftCL+")", "bound", "quickest scenario"))).
		shade("slowest scenario", "quickest scenario", colorAcceptable)).mirrors(slo.ChartTTFTRange)
	tph := table("Tokens per hour",
		"System throughput × 3600 at each closed-loop N (rows), per scenario (columns).",
		append(matrixBy("concurrency", "scenario", "concurrency"), organize(nil, map[string]string{matrixField("concurrency", "scenario"): "N"}, nil)),
		tableQ("3600 * "+perStep("slaprobe_sweep_system_throughput_tokens_per_second", closedLoop)))
	tph.FieldConfig.Defaults.Unit = "short"
	tph.column("N", "N", "none", nil, nil)
	b.add(24, 8, tph).mirrors(slo.ChartTokensPerHour)

	b.row("When should I scale up? Burst: N requests at once")
	b.add(24, 4, stat("Max safe queue depth",
		"Per scenario, the largest burst whose mean TTFT stays within sweep.capacity.max_safe_ttft (3.0 s by "+
			"default), interpolated between measured N and rounded down. See the capacity table for ~ and \"at least\".",
		"none", nil, instantQ(perCapacity(burst), "{{scenario}}"))).mirrors(slo.ChartMaxSafeQueue)
	// The TTFT statistic the max safe queue depth was judged on (sweep.capacity.statistic), and its limit.
	// The mean where a sweep judged no max safe queue depth (no limit exported).
	limit := sel("slaprobe_capacity_max_safe_ttft_seconds", mTarget, mModel)
	ttftJudged := fmt.Sprintf("max by (scenario, concurrency) (\n%s\nand on (target, model, stat)\n%s\nor\n%s\nunless on (target, model)\n%s\n)",
		sweepSel("slaprobe_sweep_ttft_seconds", burst), limit, sweepSel("slaprobe_sweep_ttft_seconds", burst, statMean), limit)
	maxSafe := "max(" + sel("slaprobe_capacity_max_safe_ttft_seconds", mTarget, mModel) + ")"
	b.add(8, 9, stepCurve("TTFT vs queue depth",
		"TTFT of a burst of N requests, one line per scenario, in the statistic the max safe queue depth is "+
			"judged on (sweep.capacity.statistic, the mean by default). Dashed: that limit "+
			"(sweep.capacity.max_safe_ttft, 3.0 s by default, as slaprobe_capacity_max_safe_ttft_seconds).",
		"s", ttftJudged+"\nor\n"+lineAt(ttftJudged, "concurrency", maxSafe, "scenario", "line: max safe TTFT"))).mirrors(slo.ChartTTFTVsQueueDepth)
	itlB := perStep("slaprobe_sweep_itl_seconds", burst, statMean)
	b.add(8, 9, itlLines(stepCurve("ITL vs queue depth",
		"Mean inter-token latency under a burst of N: it usually levels off while TTFT keeps rising. "+itlLinesText,
		"s", itlB+"\nor\n"+itlRefs(itlB)))).mirrors(slo.ChartITLVsQueueDepth)
	decodeB := perStep("slaprobe_sweep_decode_tokens_per_second", burst, statMean)
	b.add(8, 9, stepCurve("Per-user decode speed vs queue depth",
		"Mean per-user decode speed under a burst of N. Dashed: reading pace (the decode bands' acceptable edge).",
		unitTokS, decodeB+"\nor\n"+lineAt(decodeB, "concurrency", lineReadPace, "scenario", "line: reading pace"))).mirrors(slo.ChartDecodeVsQueueDepth)
	b.add(12, 8, curve("Success ratio vs N",
		"Share of each step's requests that completed, per scenario and mode. Capacity counts only steps at "+
			"or above sweep.capacity.min_success_ratio (95 % by default).",
		"percentunit", "concurrency", xN, "series", "",
		tableQ(fmt.Sprintf(`label_join(max by (scenario, mode, concurrency) (%s), "series", " ", "scenario", "mode")`,
			sweepSel("slaprobe_sweep_success_ratio")))))
	b.add(12, 8, stepCurve("Queue wait vs queue depth",
		"Mean engine queue time per request in a burst of N, from vllm:request_queue_time_seconds; empty "+
			"when the engine does not expose it.",
		"s", perStep("slaprobe_sweep_queue_wait_seconds", burst)))

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
	b.add(24, 7, capTable).mirrors(slo.ChartUseCaseTable)
	b.add(8, 9, useCaseCurve()).mirrors(slo.ChartCapacity)

	b.row("Deep dive: queue wait, prefill and power vs context (closed loop)")
	b.add(8, 9, contextCurve("Queue wait vs context",
		"Mean engine queue time per request against the scenario's prompt length, one line per closed-loop N; "+
			"empty when the engine does not expose queue time. Two scenarios of the same length show the larger.",
		"s", "slaprobe_sweep_queue_wait_seconds")).mirrors(slo.ChartQueueWait)
	b.add(8, 9, contextCurve("Per-user prefill speed vs context",
		"Mean prompt tokens ÷ TTFT (queue wait taken out when known) against the prompt length, one line per "+
			"closed-loop N: it usually peaks at a middle length, then falls.",
		unitTokS, "slaprobe_sweep_prefill_tokens_per_second", statMean)).mirrors(slo.ChartPrefillVsContext)
	b.add(8, 9, contextCurve("GPU power vs context",
		"Mean GPU power during each closed-loop step, summed over the target's GPUs, against the prompt "+
			"length, one line per N; empty without NVML.",
		"watt", "slaprobe_sweep_power_watts", statMean)).mirrors(slo.ChartPower)
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
