package dashgen

import "fmt"

// probeVars are the variables of the dashboards about probes: targets, models and scenarios that
// slaprobe probes (slaprobe_scenario_enabled has a series for each, enabled or not).
func probeVars() []*Variable {
	return []*Variable{
		datasourceVar(),
		labelVar("target", "Target", "slaprobe_scenario_enabled", "Targets slaprobe probes (the target name of its config)."),
		labelVar("model", "Model", `slaprobe_scenario_enabled{target=~"$target"}`, "Models served by the chosen targets."),
		labelVar("scenario", "Scenario", `slaprobe_scenario_enabled{target=~"$target", model=~"$model"}`, "Probe scenarios."),
	}
}

// legendTS names a probe series: its target, scenario and API.
const legendTS = "{{target}} {{scenario}} {{api}}"

// perProbe reduces an expression to one series per target, model and scenario: the rows of a table
// that merges several queries.
func perProbe(expr string) string { return "max by (target, model, scenario, api) (" + expr + ")" }

// overview is the live SLA view: what a user of each target feels, per scenario, against the
// thresholds slaprobe exports.
func overview() *Dashboard {
	b := newBoard("slaprobe-overview.json", "slaprobe-overview", "slaprobe / SLA overview",
		"What a user of each LLM server feels, from slaprobe's synthetic probes: TTFT, inter-token latency, "+
			"decode speed and end-to-end latency per scenario against the SLA thresholds slaprobe exports "+
			"(slaprobe_sla_threshold), probe outcomes and measurement quality. Quantiles over 15 min, as in the alerts. "+
			"\"Compare with\" adds the main lines a day or a week earlier, dashed.",
		append(probeVars(), compareVar())...)
	// Gaps in the probe panels during a sweep are on purpose: say so where they show.
	b.annotate("Sweeps", "rgba(255, 152, 48, 1)", "max by (target) ("+sel("slaprobe_sweep_probes_held", mTarget)+") == 1",
		"sweep", "{{target}}: scheduled probes held while a sweep loads the target (no probe data meanwhile)")

	b.row("SLA budget now")
	budget := func(title, rule, metric, desc string) *Panel {
		// The quantile the alert judges over its threshold, joined as in the alerts.
		expr := fmt.Sprintf("%s\n/ on (job, instance, scenario) group_left ()\nslaprobe_sla_threshold{metric=%q}", probeSel(rule), metric)
		return bargauge(title, desc, "percentunit", steps(colorExcellent, 0.8, colorAcceptable, 1.0, colorPoor), instantQ(expr, legendTS))
	}
	b.add(6, 6, goodput())
	b.add(6, 6, budget("TTFT p95 ÷ SLA", "target_scenario:slaprobe_ttft_seconds:p95_15m", "ttft_seconds",
		"p95 time to first token over 15 min divided by the scenario's threshold (slaprobe_sla_threshold). "+
			"Over 100 %, more than 5 % of probes are slower than the threshold; SlaprobeTTFTAboveMaxSafe pages when the share of slow probes burns the 1 % error budget too fast. Needs the recording rules of alerts/slaprobe.rules.yml."))
	b.add(6, 6, budget("ITL p95 ÷ SLA", "target_scenario:slaprobe_itl_seconds:p95_15m", "itl_seconds",
		"p95 of the per-probe mean inter-token latency over 15 min divided by the scenario's threshold. "+
			"Over 100 %, more than 5 % of probes are slower than the threshold; SlaprobeITLAboveThreshold pages on the share of slow probes. Needs the recording rules."))
	dec := budget("Decode p10 ÷ SLA minimum", "target_scenario:slaprobe_decode_tokens_per_second:p10_15m", "decode_tokens_per_second",
		"Decode speed of the slowest 10 % of probes over 15 min divided by the scenario's minimum. "+
			"Under 100 %, more than 10 % of probes decode slower than the minimum; SlaprobeDecodeSpeedBelowThreshold pages on the share of slow probes. Needs the recording rules.")
	dec.FieldConfig.Defaults.Thresholds = steps(colorPoor, 1.0, colorAcceptable, 1.25, colorExcellent)
	b.add(6, 6, dec)

	b.row("Latency and speed per scenario")
	b.add(12, 9, timeseries("Time to first token: p50, p95 and SLA",
		"p50 and p95 TTFT of successful probes with a cold prompt, over 15 min windows (the alerts' window: "+
			"the default scenarios are probed every 30 s to 5 min). Dashed: the scenario's configured threshold "+
			"(slaprobe_sla_threshold). p95 reads the recording rule when loaded.",
		"s", bandsTTFT,
		rangeQ(histQuantile("0.5", "slaprobe_ttft_seconds", ruleBy, probeWindow), "p50 "+legendTS),
		rangeQ(orRule("target_scenario:slaprobe_ttft_seconds:p95_15m", histQuantile("0.95", "slaprobe_ttft_seconds", ruleBy, probeWindow)), "p95 "+legendTS),
		rangeQ(threshold("ttft_seconds"), "SLA {{scenario}}"),
		rangeQ(earlier(orRule("target_scenario:slaprobe_ttft_seconds:p95_15m", histQuantile("0.95", "slaprobe_ttft_seconds", ruleBy, probeWindow))), earlierLegend+"p95 "+legendTS),
	).thresholdLines().dashedEarlier())
	b.add(12, 9, itlLines(timeseries("Inter-token latency: p50, p95, 20 ms and 70 ms",
		"p50 and p95 of each probe's mean inter-token latency over 15 min. Dashed red: the configured threshold. "+
			itlLinesText,
		"s", bandsITL,
		rangeQ(histQuantile("0.5", "slaprobe_itl_seconds", ruleBy, probeWindow), "p50 "+legendTS),
		rangeQ(orRule("target_scenario:slaprobe_itl_seconds:p95_15m", histQuantile("0.95", "slaprobe_itl_seconds", ruleBy, probeWindow)), "p95 "+legendTS),
		rangeQ(threshold("itl_seconds"), "SLA {{scenario}}"),
		rangeQ(lineITLInstant, "line: instant"),
		rangeQ(lineITLCeiling, "line: MoE ceiling"),
		rangeQ(earlier(orRule("target_scenario:slaprobe_itl_seconds:p95_15m", histQuantile("0.95", "slaprobe_itl_seconds", ruleBy, probeWindow))), earlierLegend+"p95 "+legendTS),
	).thresholdLines().dashedEarlier()))
	b.add(12, 9, timeseries("Per-user decode speed: p10, p50 and SLA minimum",
		"Decode speed of a probe: (output tokens − first chunk's tokens) ÷ (last token − first token). "+
			"p10 is the slow tail (higher is better). Dashed: the scenario's minimum, where one is configured.",
		unitTokS, bandsDecode,
		rangeQ(orRule("target_scenario:slaprobe_decode_tokens_per_second:p10_15m", histQuantile("0.10", "slaprobe_decode_tokens_per_second", ruleBy, probeWindow)), "p10 "+legendTS),
		rangeQ(histQuantile("0.5", "slaprobe_decode_tokens_per_second", ruleBy, probeWindow), "p50 "+legendTS),
		rangeQ(threshold("decode_tokens_per_second"), "SLA {{scenario}}"),
		rangeQ(earlier(orRule("target_scenario:slaprobe_decode_tokens_per_second:p10_15m", histQuantile("0.10", "slaprobe_decode_tokens_per_second", ruleBy, probeWindow))), earlierLegend+"p10 "+legendTS),
	).thresholdLines().dashedEarlier())
	b.add(12, 9, timeseries("End-to-end latency: p50, p95 and SLA",
		"Request written to last token, successful probes with a cold prompt, over 15 min. Dashed: the "+
			"configured E2E threshold, where a scenario has one (code_completion by default).",
		"s", nil,
		rangeQ(histQuantile("0.5", "slaprobe_e2e_latency_seconds", ruleBy, probeWindow), "p50 "+legendTS),
		rangeQ(orRule("target_scenario:slaprobe_e2e_latency_seconds:p95_15m", histQuantile("0.95", "slaprobe_e2e_latency_seconds", ruleBy, probeWindow)), "p95 "+legendTS),
		rangeQ(threshold("e2e_latency_seconds"), "SLA {{scenario}}"),
		rangeQ(earlier(orRule("target_scenario:slaprobe_e2e_latency_seconds:p95_15m", histQuantile("0.95", "slaprobe_e2e_latency_seconds", ruleBy, probeWindow))), earlierLegend+"p95 "+legendTS),
	).thresholdLines().dashedEarlier())
	b.add(12, 8, timeseries("Prefill speed: p10 and p50",
		"Prompt tokens ÷ TTFT (queueing included) of probes with a cold prompt, over 15 min.",
		unitTokS, nil,
		rangeQ(histQuantile("0.10", "slaprobe_prefill_tokens_per_second", ruleBy, probeWindow), "p10 "+legendTS),
		rangeQ(histQuantile("0.5", "slaprobe_prefill_tokens_per_second", ruleBy, probeWindow), "p50 "+legendTS),
	))
	b.add(12, 8, timeseries("Tokens per output chunk (mean)",
		"Mean output tokens each streamed chunk carried, over 15 min: 1 for plain decoding; more with "+
			"multi-token prediction, speculative decoding or a stream interval. Needs continuous usage stats.",
		"short", nil,
		rangeQ(histMean("slaprobe_tokens_per_chunk", ruleBy, probeWindow), legendTS),
	))

	b.row("Where TTFT goes")
	b.add(8, 8, whereTTFTGoes())
	b.add(16, 8, timeseries("ITL: the client's and the engine's own (mean)",
		"Mean inter-token latency as slaprobe saw it and as the engine reported it for the same probes "+
			"(vLLM's per-request metrics or its llm_request span), over 15 min. A client ITL well above the "+
			"engine's means something between them holds the stream back: a proxy or gateway that buffers.",
		"s", nil,
		rangeQ(histMean("slaprobe_itl_seconds", "target, scenario, api", probeWindow), "client "+legendTS),
		rangeQ(histMean("slaprobe_engine_itl_seconds", "target, scenario, api", probeWindow), "engine "+legendTS),
	).dotted("^engine "))

	b.row("Probe outcomes")
	b.add(8, 8, timeseries("Probe success ratio (1 h)",
		"Answered probes (success, or a short answer the server ended early) ÷ all probes over the last hour. Under 90 % for 15 min fires SlaprobeProbeSuccessRateLow.",
		"percentunit", nil,
		rangeQ(orRule("target_scenario:slaprobe_probe_success:ratio_1h",
			fmt.Sprintf("sum by (%s) (rate(%s[1h]))\n/\nsum by (%s) (rate(%s[1h]))",
				ruleBy, probeSel("slaprobe_probes_total", `result!="error"`), ruleBy, probeSel("slaprobe_probes_total"))), legendTS),
	))
	b.add(8, 8, timeseries("Failed probes by reason",
		"Failed probes per interval, by reason (connection_refused, timeout, stall, http_5xx, …). "+
			"short_output probes are counted in slaprobe_probes_total{result=\"short_output\"}.",
		"short", nil,
		rangeQ(fmt.Sprintf("sum by (target, scenario, api, reason) (increase(%s[$__interval]))", probeSel("slaprobe_probe_errors_total")), "{{reason}} "+legendTS),
		rangeQ(fmt.Sprintf("sum by (target, scenario, api) (increase(%s[$__interval]))", probeSel("slaprobe_probes_total", `result="short_output"`)), "short_output "+legendTS),
	).bars("1m"))
	b.add(8, 8, timeseries("Tokens spent per hour",
		"Prompt and output tokens the prober spent over the last hour, and what its schedule plans "+
			"(slaprobe_prober_planned_tokens_per_hour, prompt plus output).",
		"short", nil,
		rangeQ(fmt.Sprintf("sum by (target, type) (increase(%s[1h]))", probeSel("slaprobe_probe_tokens_total")), "{{type}} {{target}}"),
		rangeQ(sel("slaprobe_prober_planned_tokens_per_hour", mTarget), "planned {{target}}"),
	))

	b.row("Measurement quality")
	b.add(8, 8, timeseries("Prefix-cache hits",
		"Probes the prefix cache served in part, per interval. Their TTFT, E2E and prefill speed are not "+
			"recorded. Over 10 % of successful probes for 15 min fires SlaprobePrefixCacheHits.",
		"short", nil,
		rangeQ(fmt.Sprintf("sum by (target, scenario, api) (increase(%s[$__interval]))", probeSel("slaprobe_probe_cache_hits_total")), legendTS),
	).bars("1m"))
	b.add(8, 8, timeseries("Prompt-length mismatches",
		"Probes whose prompt, as the server counted it, missed the scenario's input length (then recalibrated), "+
			"per interval. Over 10 % for 15 min fires SlaprobePromptLengthMismatch.",
		"short", nil,
		rangeQ(fmt.Sprintf("sum by (target, scenario, api) (increase(%s[$__interval]))", probeSel("slaprobe_probe_prompt_length_mismatches_total")), legendTS),
	).bars("1m"))
	b.add(8, 8, timeseries("Last probe's prompt and output tokens",
		"Token counts of each scenario's last probe, from the server's usage.",
		"short", nil,
		rangeQ(probeSel("slaprobe_probe_prompt_tokens"), "prompt "+legendTS),
		rangeQ(probeSel("slaprobe_probe_output_tokens"), "output "+legendTS),
	))

	b.row("Scenarios")
	enabled := table("Scenarios: enabled, last probe, age",
		"One row per target and scenario. Enabled 0: the scenario does not fit the model's max_model_len. "+
			"Age: seconds since the last probe started; interval: the measured mean time between probes over a "+
			"day (recording rule). Over three intervals fires SlaprobeProbesStale.",
		[]Transformation{merge(), organize([]string{"Time"},
			map[string]string{"Value #A": "enabled", "Value #B": "last probe ok", "Value #C": "age", "Value #D": "interval"},
			[]string{"target", "model", "scenario", "Value #A", "Value #B", "Value #C", "Value #D"})},
		// Aggregated to the same labels (no __name__, job or instance), so that merge joins the rows.
		tableQ(perProbe(probeSel("slaprobe_scenario_enabled"))),
		tableQ(perProbe(probeSel("slaprobe_probe_success"))),
		tableQ(perProbe("time() - "+probeSel("slaprobe_probe_last_timestamp_seconds"))),
		tableQ(perProbe(probeSel("target_scenario:slaprobe_probe_interval_seconds:mean_1d"))),
	)
	yesNo := []ValueMapping{{Type: "value", Options: map[string]MappingValue{
		"0": {Text: "no", Color: colorPoor, Index: 0}, "1": {Text: "yes", Color: colorExcellent, Index: 1},
	}}}
	enabled.column("enabled", "enabled", "", nil, yesNo).
		column("last probe ok", "last probe ok", "", nil, yesNo).
		column("age", "last probe age", "s", nil, nil).
		column("interval", "probe interval (1 d)", "s", nil, nil)
	b.add(16, 9, enabled)
	b.add(8, 9, stat("Last probe age",
		"Seconds since each scenario's last probe started (the gauge is set when the probe ends).",
		"s", nil, instantQ("time() - "+probeSel("slaprobe_probe_last_timestamp_seconds"), legendTS)))
	b.add(24, 7, table("SLA thresholds",
		"The thresholds slaprobe exports from its config (slaprobe_sla_threshold): what the dashed lines and "+
			"the alerts compare with. Seconds, or tokens/s for the minimum decode speed.",
		[]Transformation{
			{ID: "groupingToMatrix", Options: map[string]string{"columnField": "metric", "rowField": "scenario", "valueField": "Value", "emptyValue": "null"}},
		},
		tableQ(fmt.Sprintf(`max by (scenario, metric) (slaprobe_sla_threshold{%s})`, mScenario)),
	))
	classRow(b)
	return b.d
}

// goodput is the joint SLO now: the share of the last hour's probes that met every threshold of their
// scenario at once, from the goodput recording rules (scenarios with a threshold), or from the counters.
func goodput() *Panel {
	expr := "(1 - " + probeSel("target_scenario:slaprobe_goodput_bad_probes:increase1h") + " / " +
		probeSel("target_scenario:slaprobe_goodput_probes:increase1h") + ")\nor\n" +
		fmt.Sprintf("sum by (%s) (increase(%s[1h]))\n/\nsum by (%s) (increase(%s[1h]))",
			ruleBy, probeSel("slaprobe_probes_good_total"), ruleBy, probeSel("slaprobe_probes_total"))
	p := bargauge("Goodput (1 h)",
		"Share of the last hour's probes that got an answer and met every threshold of their scenario at once "+
			"(TTFT, mean ITL, E2E, decode speed: slaprobe_probes_good_total ÷ slaprobe_probes_total; failed probes are not good). "+
			"Each metric can be within its SLA while few probes are within all of them. Under 99 % (the goodput objective) "+
			"the budget burns; SlaprobeGoodputBelowObjective pages when it burns too fast. Reads the recording rules when loaded.",
		"percentunit", steps(colorPoor, 0.95, colorAcceptable, 0.99, colorExcellent), instantQ(expr, legendTS))
	lo, hi := 0.0, 1.0
	p.FieldConfig.Defaults.Min, p.FieldConfig.Defaults.Max = &lo, &hi
	return p
}

// whereTTFTGoes stacks the mean TTFT of one scenario (the panel repeats per scenario) into the time
// outside the engine, in its queue and in prefill, over the selected targets.
func whereTTFTGoes() *Panel {
	p := timeseries("Where TTFT goes: $scenario",
		"Mean TTFT of the probes whose engine reported its own timing (vLLM's per-request metrics or its "+
			"llm_request span, the child of the probe's own span), stacked: outside the engine (client TTFT minus queue and "+
			"prefill: network, gateway, proxy, API server, tokenizer), waiting in the engine's queue, and "+
			"prefill, over 15 min and the selected targets. Pick one target for one server's split. Empty "+
			"when the engine reports no timing: slaprobe_probe_engine_timing_total{source=\"none\"} counts those probes.",
		"s", nil,
		rangeQ(histMean("slaprobe_ttft_outside_engine_seconds", "scenario", probeWindow), "outside the engine"),
		rangeQ(histMean("slaprobe_engine_queue_seconds", "scenario", probeWindow), "queue"),
		rangeQ(histMean("slaprobe_engine_prefill_seconds", "scenario", probeWindow), "prefill"),
	)
	c := p.FieldConfig.Defaults.Custom
	c.FillOpacity, c.Stacking = 60, &Stacking{Group: "A", Mode: "normal"}
	p.Repeat, p.RepeatDirection, p.MaxPerRow = "scenario", "h", 3
	// Colour-blind safe, in the status page's order: outside vermilion, queue purple, prefill blue.
	for _, f := range [][2]string{{"outside the engine", "#D55E00"}, {"queue", "#CC79A7"}, {"prefill", "#0072B2"}} {
		p.override(f[0], Property{ID: "color", Value: FieldColor{Mode: "fixed", FixedColor: f[1]}})
	}
	return p
}
