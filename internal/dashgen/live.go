package dashgen

import "fmt"

// live shows what the engine and the GPUs do under production traffic, joined with the probes
// (docs/live-signals.md, docs/nvml.md).
func live() *Dashboard {
	b := newBoard("slaprobe-live.json", "slaprobe-live", "slaprobe / Live signals",
		"The engine and the GPUs under production traffic, joined with slaprobe's probes: TTFT by the real "+
			"queue depth, live max safe queue depth, live scaling efficiency, engine load and KV cache, GPU "+
			"power, energy per token and cost (docs/live-signals.md).",
		probeVars()...)

	b.row("TTFT and the real queue")
	// The queue_depth labels are buckets ("0", "1", "2-3", … "256+"); their lower bound, as a number,
	// orders the x axis.
	depthMin := func(expr string) string {
		return fmt.Sprintf(`label_replace(%s, "depth_min", "$1", "queue_depth", "([0-9]+).*")`, expr)
	}
	// >= 0 drops the NaN of depth buckets without a probe in the range: no point, not an x with none.
	p95 := depthMin(fmt.Sprintf("histogram_quantile(0.95, sum by (scenario, queue_depth, le) (rate(%s[$__range]))) >= 0",
		probeSel("slaprobe_ttft_by_queue_depth_seconds_bucket")))
	// Each scenario's TTFT threshold, at every depth the scenario was probed at.
	sla := fmt.Sprintf(`label_replace(
max by (scenario, depth_min) (%s) * 0
+ on (scenario) group_left ()
max by (scenario) (slaprobe_sla_threshold{metric="ttft_seconds", %s}),
"scenario", "SLA $1", "scenario", "(.*)")`, p95, mScenario)
	b.add(12, 9, curve("Probe TTFT p95 by queue depth",
		"p95 TTFT of probes over the dashboard's time range, against the engine's running + waiting requests "+
			"when each probe was sent (the lower edge of the depth bucket: 0, 1, 2-3, … 256+): the reports' "+
			"TTFT-vs-queue-depth chart, from real traffic. Dashed: each scenario's TTFT threshold "+
			"(slaprobe_sla_threshold), the limit of the live max safe queue depth below.",
		"s", "depth_min", "queue depth (running + waiting)", "scenario", "", tableQ(p95+"\nor\n"+sla)))
	b.add(12, 9, barchart("Probes by queue depth",
		"How many probes met each queue depth in the time range: the p95 beside it is a guess where there are few.",
		"short", "queue_depth", "scenario", "depth_min",
		tableQ(depthMin(fmt.Sprintf("sum by (scenario, queue_depth) (increase(%s[$__range]))",
			probeSel("slaprobe_ttft_by_queue_depth_seconds_count"))))))

	maxSafe := table("Live max safe queue depth",
		"Per scenario, the queue depth at which a monotone fit of probe TTFT against queue depth crosses the "+
			"scenario's TTFT threshold, from the last probes (up to 200, 6 h). samples: probes behind it (few: "+
			"a guess). lower bound: TTFT never crossed, so the real limit is deeper.",
		[]Transformation{merge(), organize([]string{"Time"},
			map[string]string{"Value #A": "max safe queue depth", "Value #B": "samples", "Value #C": "lower bound"},
			[]string{"target", "model", "scenario", "Value #A", "Value #B", "Value #C"})},
		tableQ(perProbe(probeSel("slaprobe_live_max_safe_queue_depth"))),
		tableQ(perProbe(probeSel("slaprobe_live_max_safe_queue_depth_samples"))),
		tableQ(perProbe(probeSel("slaprobe_live_max_safe_queue_depth_lower_bound"))),
	)
	maxSafe.column("max safe queue depth", "max safe queue depth", "none", nil, nil).
		column("samples", "samples", "none", steps(colorAcceptable, 20.0, colorExcellent), nil).
		column("lower bound", "lower bound", "", nil, []ValueMapping{{Type: "value", Options: map[string]MappingValue{
			"0": {Text: "no", Index: 0}, "1": {Text: "yes (at least)", Color: colorAcceptable, Index: 1}}}})
	b.add(12, 8, maxSafe)
	b.add(12, 8, timeseries("Live max safe queue depth over time",
		"Solid: where the estimate is a measurement (TTFT crossed the threshold, at least 20 probes; recording "+
			"rule). Dotted: every estimate, lower bounds and guesses included.",
		"none", nil,
		rangeQ(probeSel("target_scenario:slaprobe_live_max_safe_queue_depth:measured"), "measured "+legendTS),
		rangeQ(probeSel("slaprobe_live_max_safe_queue_depth"), "estimate "+legendTS),
	).dotted("^estimate .*"))

	b.row("Live scaling efficiency")
	b.add(12, 8, timeseries("Live scaling efficiency",
		"Engine output tokens/s ÷ (single-stream decode speed × running requests), smoothed; only while "+
			"requests run. 1: each user decodes as fast as one alone. Dashed: the lower edges of the good and "+
			"acceptable efficiency bands (slaprobe_experience_band_scaling_efficiency_ratio).",
		"percentunit", bandsEfficiency,
		rangeQ(sel("slaprobe_live_scaling_efficiency_ratio", mTarget, mModel), "{{target}} {{model}}"),
		rangeQ(bandEdge("scaling_efficiency_ratio", "good"), "line: good"),
		rangeQ(bandEdge("scaling_efficiency_ratio", "acceptable"), "line: acceptable"),
	).refLine("^line: good$", colorGood).refLine("^line: acceptable$", colorAcceptable))
	b.add(12, 8, timeseries("Single-stream decode speed (baseline)",
		"Per-user decode speed of the latest probe that ran alone on the engine (or a closed-loop sweep at N=1): "+
			"the denominator of live efficiency.",
		unitTokS, bandsDecode,
		rangeQ(probeSel("slaprobe_live_single_stream_decode_tokens_per_second"), legendTS),
	))

	b.row("Engine")
	b.add(8, 8, timeseries("Running and waiting requests",
		"From the engine's own /metrics (vllm:num_requests_running / _waiting, or SGLang's). Queue depth above "+
			"is their sum.",
		"short", nil,
		rangeQ(sel("slaprobe_engine_requests_running", mTarget), "running {{target}}"),
		rangeQ(sel("slaprobe_engine_requests_waiting", mTarget), "waiting {{target}}"),
	))
	kv := timeseries("KV-cache usage",
		"Share of the engine's KV cache in use. Above sweep.pause.max_kv_cache_usage (80 % by default) sweeps "+
			"wait between steps.",
		"percentunit", nil,
		rangeQ(sel("slaprobe_engine_kv_cache_usage_ratio", mTarget), "{{target}}"))
	kv.FieldConfig.Defaults.Max = num(1)
	b.add(8, 8, kv)
	b.add(8, 8, timeseries("Engine token throughput",
		"Output and prompt tokens/s of the whole engine, from its token counters.",
		unitTokS, nil,
		rangeQ(fmt.Sprintf("sum by (target) (rate(%s[$__rate_interval]))", sel("slaprobe_engine_generation_tokens_total", mTarget)), "output {{target}}"),
		rangeQ(fmt.Sprintf("sum by (target) (rate(%s[$__rate_interval]))", sel("slaprobe_engine_prompt_tokens_total", mTarget)), "prompt {{target}}"),
	))
	b.add(12, 4, stat("Engine metrics readable",
		"slaprobe_engine_up: the target's /metrics could be read at the last scrape. Without it the live "+
			"signals of that target stop updating; probing goes on.",
		"", nil, instantQ(sel("slaprobe_engine_up", mTarget), "{{target}}")).
		mapValues(map[string]MappingValue{"0": {Text: "down", Color: colorPoor, Index: 0}, "1": {Text: "up", Color: colorExcellent, Index: 1}}))
	b.add(12, 4, stat("Engine scrape errors (range)",
		"Failed scrapes of the target's /metrics in the time range.",
		"short", steps(colorExcellent, 1.0, colorAcceptable),
		instantQ(fmt.Sprintf("sum by (target) (increase(%s[$__range]))", sel("slaprobe_engine_scrape_errors_total", mTarget)), "{{target}}")))

	liveMixRow(b)

	tailRow(b)

	b.row("GPU power, energy and cost")
	b.add(8, 8, timeseries("Power per target",
		"Average (from the GPUs' energy counters) and peak draw of each target's GPUs over power.window (5 min).",
		"watt", nil,
		rangeQ(sel("slaprobe_power_average_watts", mTarget), "average {{target}}"),
		rangeQ(sel("slaprobe_power_peak_watts", mTarget), "peak {{target}}"),
	))
	b.add(8, 8, timeseries("Energy per output token",
		"GPU joules per generated token: Δ energy ÷ Δ output tokens over the window. Idle draw included, so "+
			"it is high at low load.",
		"joule", nil,
		rangeQ(sel("slaprobe_energy_per_output_token_joules", mTarget), "{{target}}"),
	))
	b.add(8, 8, timeseries("Cost per hour and per million output tokens",
		"GPU energy only, at slaprobe_energy_price_per_kwh_dollars (power.price_per_kwh).",
		"currencyUSD", nil,
		rangeQ(sel("slaprobe_cost_per_hour_dollars", mTarget), "per hour {{target}}"),
		rangeQ(sel("slaprobe_cost_per_million_output_tokens_dollars", mTarget), "per M tokens {{target}}"),
	))
	// GPU readings carry gpu, uuid and name, not a target: every GPU slaprobe reads is shown.
	gpuLegend := "{{instance}} GPU {{gpu}} {{name}}"
	b.add(8, 8, timeseries("GPU power and limit",
		"Draw of every GPU slaprobe reads (NVML), with its power limit dashed.",
		"watt", nil,
		rangeQ("slaprobe_gpu_power_watts", "draw "+gpuLegend),
		rangeQ("slaprobe_gpu_power_limit_watts", "limit "+gpuLegend),
	).dotted("^limit .*"))
	b.add(8, 8, timeseries("GPU temperature",
		"Core temperature of every GPU slaprobe reads.",
		"celsius", nil,
		rangeQ("slaprobe_gpu_temperature_celsius", gpuLegend),
	))
	util := timeseries("GPU utilisation and memory",
		"Share of time a kernel ran (NVML utilisation) and share of GPU memory used.",
		"percentunit", nil,
		rangeQ("slaprobe_gpu_utilization_ratio", "busy "+gpuLegend),
		rangeQ("slaprobe_gpu_memory_used_bytes / slaprobe_gpu_memory_total_bytes", "memory "+gpuLegend))
	util.FieldConfig.Defaults.Max = num(1)
	b.add(8, 8, util)
	b.add(24, 3, stat("NVML",
		"1 when slaprobe loaded NVML; 0: no driver or power.nvml off, and the GPU panels stay empty.",
		"", nil, instantQ("slaprobe_nvml_up", "{{instance}}")).
		mapValues(map[string]MappingValue{"0": {Text: "not loaded", Color: colorAcceptable, Index: 0}, "1": {Text: "loaded", Color: colorExcellent, Index: 1}}))

	conversationRow(b)
	return b.d
}
